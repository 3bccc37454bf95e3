//! CGI/1.1 (RFC 3875): the script's environment, its response-header block,
//! and the life of its process.
//!
//! The protocol halves are pure and tested with byte strings; the process
//! half spawns and cleans up but never reads the script's stdout, so both
//! transports can drive the pipes in their own way:
//!
//! ```text
//! is_cgi_name(b"a.cgi") && is_runnable(&metadata)    decide that a file is a script
//! Limiter::new(max) / limiter.try_acquire()           None: answer 503
//! spawn(&CgiParams, timeout, permit) -> Script        Err: answer 500 (403 for PermissionDenied)
//! script.take_stdin()                                 Some only when the request has a body:
//!                                                     write it, then drop the handle (EOF)
//! script.take_stdout()                                read into a buffer until
//! parse_header_block(&buf, eof) -> HeaderBlock        Complete(head, body_start) | Malformed (502)
//! script.deadline() / script.kill_group()             past the deadline: kill, answer 504 or cut
//! drop(script)                                        kills what is left of the group and reaps
//! ```
//!
//! Write the body and read stdout at the same time (poll both): a script may
//! answer before it has read all of its input, and with both pipes full each
//! side would wait for the other until the deadline. For the tokio
//! transport, `tokio::net::unix::pipe::{Sender, Receiver}::from_owned_fd`
//! accept the taken handles (converted with `OwnedFd::from`) and make them
//! non-blocking.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

/// The only PATH a script gets: the server's own environment stays private.
const SCRIPT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A script's header block, blank line included, must fit in this many bytes.
pub const MAX_HEAD: usize = 32 * 1024;

/// Longer stderr lines are forwarded in pieces of this size, so a script
/// that never writes a newline cannot make the server buffer without bound.
const MAX_STDERR_LINE: usize = 4096;

/// Whether a file name marks a CGI script. `.cgi` on its own is a hidden
/// file, not a script.
pub fn is_cgi_name(name: &[u8]) -> bool {
    name.len() > 4 && name.ends_with(b".cgi")
}

/// Whether a file can be run as a script: a regular file with an execute
/// bit. Whether *this* user may run it is left to exec, which reports
/// PermissionDenied.
pub fn is_runnable(meta: &std::fs::Metadata) -> bool {
    meta.is_file() && meta.permissions().mode() & 0o111 != 0
}

/// One request, as the script will see it.
pub struct CgiParams<'a> {
    /// The file to run, as found on disk.
    pub script_path: &'a Path,
    /// The URL path of the script, e.g. `/cgi-bin/a.cgi`.
    pub script_name: &'a str,
    /// What follows the script in the URL path, already percent-decoded
    /// (RFC 3875 §4.1.5); empty when nothing follows.
    pub path_info: &'a str,
    /// The query string as it came, still percent-encoded, without the `?`.
    pub query: &'a str,
    pub method: &'a str,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub protocol: &'a str,
    /// Every request header field, in the order received.
    pub headers: &'a [(&'a str, &'a str)],
    /// The length of the request body; `None` when there is no body.
    pub content_length: Option<u64>,
    pub server_name: &'a str,
    pub server_port: u16,
    pub remote_addr: &'a str,
    pub remote_port: Option<u16>,
}

/// The script's whole environment (RFC 3875 §4.1): nothing is inherited
/// from the server.
pub fn environment(p: &CgiParams) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::with_capacity(16 + p.headers.len());
    let mut set = |name: &str, value: &str| env.push((name.to_string(), value.to_string()));
    set("PATH", SCRIPT_PATH);
    set("GATEWAY_INTERFACE", "CGI/1.1");
    set(
        "SERVER_SOFTWARE",
        concat!("staticd/", env!("CARGO_PKG_VERSION")),
    );
    set("SERVER_NAME", p.server_name);
    set("SERVER_PORT", &p.server_port.to_string());
    set("SERVER_PROTOCOL", p.protocol);
    set("REQUEST_METHOD", p.method);
    set("SCRIPT_NAME", p.script_name);
    // §4.1.5: no path info means no PATH_INFO, not an empty one.
    if !p.path_info.is_empty() {
        set("PATH_INFO", p.path_info);
    }
    set("QUERY_STRING", p.query);
    set("REMOTE_ADDR", p.remote_addr);
    if let Some(port) = p.remote_port {
        set("REMOTE_PORT", &port.to_string());
    }
    if let Some(len) = p.content_length {
        set("CONTENT_LENGTH", &len.to_string());
        if let Some(ty) = joined_field(p.headers, "content-type") {
            set("CONTENT_TYPE", &ty);
        }
    }
    for (name, value) in p.headers {
        let Some(var) = header_variable(name) else {
            continue;
        };
        // An environment entry cannot hold a NUL; the parser should never
        // let one through, but a script must not fail to start over it.
        if value.contains('\0') {
            continue;
        }
        match env.iter_mut().find(|(n, _)| *n == var) {
            Some((_, joined)) => {
                joined.push_str(field_separator(name));
                joined.push_str(value);
            }
            None => env.push((var, value.to_string())),
        }
    }
    env
}

/// `HTTP_*` for a request header, or None for one the script must not see
/// that way.
fn header_variable(name: &str) -> Option<String> {
    // The body's length and type have their own variables (§4.1.18).
    if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("content-type") {
        return None;
    }
    // `X_Forwarded_For` and `X-Forwarded-For` would both become
    // HTTP_X_FORWARDED_FOR, letting a client forge a header a proxy in front
    // of us set; like Apache, names that are not letters, digits and `-` are
    // not passed on at all.
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return None;
    }
    let var: String = "HTTP_"
        .chars()
        .chain(name.chars().map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_uppercase()
            }
        }))
        .collect();
    // httpoxy: a client's `Proxy:` header would become the HTTP_PROXY that
    // many HTTP libraries take as the proxy for the script's own requests.
    if var == "HTTP_PROXY" {
        return None;
    }
    Some(var)
}

/// Repeated fields are one list joined with commas (RFC 9110 §5.3), except
/// Cookie, whose pairs are separated by semicolons (RFC 6265 §5.4).
fn field_separator(name: &str) -> &'static str {
    if name.eq_ignore_ascii_case("cookie") {
        "; "
    } else {
        ", "
    }
}

fn joined_field(headers: &[(&str, &str)], name: &str) -> Option<String> {
    let mut values = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v);
    let first = values.next()?.to_string();
    Some(values.fold(first, |mut all, v| {
        all.push_str(", ");
        all.push_str(v);
        all
    }))
}

/// What the script's output so far says about its response head.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderBlock {
    /// No blank line yet: read more.
    Incomplete,
    /// The head, and where the body starts in the buffer.
    Complete(CgiHead, usize),
    /// Answer 502; the text says why, for the server's log.
    Malformed(&'static str),
}

/// The response a script asked for (RFC 3875 §6).
#[derive(Debug, PartialEq, Eq)]
pub struct CgiHead {
    pub status: u16,
    /// The script's reason phrase; empty when it gave none, and the server
    /// should use the usual one for `status`.
    pub reason: String,
    pub location: Option<Location>,
    pub content_type: Option<String>,
    /// When the script gave one, the body is exactly this long; otherwise
    /// it ends when the script closes stdout.
    pub content_length: Option<u64>,
    /// Every other field, in order, to be sent as it is. Fields the server
    /// owns (framing, Date, Server) and fields with bytes that cannot go
    /// into a response head are already gone.
    pub other: Vec<(String, String)>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Location {
    /// A local redirect (§6.2.2): serve this path and query as if the client
    /// had asked for it with GET, ignoring the rest of the script's output.
    Local(String),
    /// Send this Location to the client with `status` (302 unless the script
    /// chose another).
    Client(String),
}

/// Parses the script's header block from the start of its output. Call it
/// again with the whole buffer after each read; `eof` says that the script
/// has closed stdout, so an unfinished block is malformed.
pub fn parse_header_block(buf: &[u8], eof: bool) -> HeaderBlock {
    let window = &buf[..buf.len().min(MAX_HEAD)];
    let mut fields = Fields::default();
    let mut pos = 0;
    while let Some(newline) = window[pos..].iter().position(|&b| b == b'\n') {
        let end = pos + newline;
        let line = window[pos..end]
            .strip_suffix(b"\r")
            .unwrap_or(&window[pos..end]);
        pos = end + 1;
        if line.is_empty() {
            return match fields.finish() {
                Ok(head) => HeaderBlock::Complete(head, pos),
                Err(why) => HeaderBlock::Malformed(why),
            };
        }
        if let Err(why) = fields.add(line) {
            return HeaderBlock::Malformed(why);
        }
    }
    if buf.len() >= MAX_HEAD {
        HeaderBlock::Malformed("no blank line within the first 32 KiB of output")
    } else if eof {
        HeaderBlock::Malformed("output ended before the blank line after the headers")
    } else {
        HeaderBlock::Incomplete
    }
}

/// The header fields seen so far.
#[derive(Default)]
struct Fields {
    status: Option<(u16, String)>,
    location: Option<String>,
    content_type: Option<String>,
    content_length: Option<u64>,
    other: Vec<(String, String)>,
}

impl Fields {
    fn add(&mut self, line: &[u8]) -> Result<(), &'static str> {
        // A continuation line (obsolete folding) could hide one field inside
        // another; RFC 3875 has no folding, so refuse it.
        if line[0] == b' ' || line[0] == b'\t' {
            return Err("folded header line");
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or("header line without a colon")?;
        let name = &line[..colon];
        let value = trim_ows(&line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"status") {
            let status = parse_status(value)?;
            return set_once(&mut self.status, status, "repeated Status");
        }
        if name.eq_ignore_ascii_case(b"location") {
            let location = field_text(value).ok_or("invalid Location")?;
            if location.is_empty() {
                return Err("empty Location");
            }
            return set_once(&mut self.location, location, "repeated Location");
        }
        if name.eq_ignore_ascii_case(b"content-type") {
            let ty = field_text(value).ok_or("invalid Content-Type")?;
            return set_once(&mut self.content_type, ty, "repeated Content-Type");
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let len = parse_length(value).ok_or("invalid Content-Length")?;
            return set_once(&mut self.content_length, len, "repeated Content-Length");
        }
        // Anything else is passed on if it can be, and dropped if not: one
        // odd field is no reason to fail the whole response.
        if !is_token(name) || is_server_owned(name) {
            return Ok(());
        }
        if let (Ok(name), Some(value)) = (std::str::from_utf8(name), field_text(value)) {
            self.other.push((name.to_string(), value));
        }
        Ok(())
    }

    fn finish(self) -> Result<CgiHead, &'static str> {
        let explicit_status = self.status.as_ref().map(|(code, _)| *code);
        let location = self.location.map(|target| {
            // Apache's rule: a path with no status (or 200) is served here;
            // with a 3xx the script wants the client itself to go there.
            let local = target.starts_with('/') && !target.starts_with("//");
            if local && matches!(explicit_status, None | Some(200)) {
                Location::Local(target)
            } else {
                Location::Client(target)
            }
        });
        let (status, reason) = match (self.status, &location) {
            (Some(status), _) => status,
            (None, Some(Location::Client(_))) => (302, String::new()),
            (None, _) => (200, String::new()),
        };
        // §6.3.1 requires a type for a document; 204 and 304 have no body,
        // so a script answering a conditional request need not invent one.
        if self.content_type.is_none() && location.is_none() && !matches!(status, 204 | 304) {
            return Err("neither Content-Type nor Location");
        }
        Ok(CgiHead {
            status,
            reason,
            location,
            content_type: self.content_type,
            content_length: self.content_length,
            other: self.other,
        })
    }
}

fn set_once<T>(slot: &mut Option<T>, value: T, repeated: &'static str) -> Result<(), &'static str> {
    if slot.is_some() {
        return Err(repeated);
    }
    *slot = Some(value);
    Ok(())
}

/// `Status: 404 Not Found`: three digits, then an optional reason. 1xx is
/// refused: it cannot be the final answer to a request, and a client would
/// wait for another response after it.
fn parse_status(value: &[u8]) -> Result<(u16, String), &'static str> {
    const BAD: &str = "Status is not a code from 200 to 999";
    let (digits, rest) = value.split_at(value.len().min(3));
    if digits.len() != 3 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(BAD);
    }
    let code = digits
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    if code < 200 {
        return Err(BAD);
    }
    if !rest.is_empty() && rest[0] != b' ' && rest[0] != b'\t' {
        return Err(BAD);
    }
    let reason = field_text(trim_ows(rest)).ok_or("invalid Status reason")?;
    Ok((code, reason))
}

fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Fields the server writes itself: framing is the transport's business
/// (RFC 9110 §7.6.1 hop-by-hop fields) and a second Date or Server would
/// contradict the first.
fn is_server_owned(name: &[u8]) -> bool {
    const OWNED: [&[u8]; 9] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"te",
        b"trailer",
        b"upgrade",
        b"date",
        b"server",
    ];
    OWNED.iter().any(|owned| name.eq_ignore_ascii_case(owned))
}

/// A field value as text, if every byte may appear in a response head
/// (RFC 9110 §5.5: visible characters, space, tab, and UTF-8 text).
fn field_text(value: &[u8]) -> Option<String> {
    let allowed = |b: &u8| *b == b'\t' || (b' '..=b'~').contains(b) || *b >= 0x80;
    if !value.iter().all(allowed) {
        return None;
    }
    String::from_utf8(value.to_vec()).ok()
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// RFC 9110 §5.6.2 token characters.
fn is_token(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b))
}

/// Bounds how many scripts run at once. Cloning shares the bound.
#[derive(Clone)]
pub struct Limiter {
    running: Arc<AtomicUsize>,
    max: usize,
}

/// One running script's place under the bound, given back on drop.
pub struct Permit {
    running: Arc<AtomicUsize>,
}

impl Limiter {
    pub fn new(max: usize) -> Limiter {
        Limiter {
            running: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A place for one more script, or None at once when all are taken:
    /// the request is refused (503) rather than queued behind slow scripts.
    #[must_use]
    pub fn try_acquire(&self) -> Option<Permit> {
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()?;
        Some(Permit {
            running: Arc::clone(&self.running),
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running script. Its pipes are taken by the transport; dropping the
/// `Script` kills whatever is left of its process group and reaps it.
///
/// The child is reaped only in `Drop`, after the group has been killed. A
/// pid cannot be reused while it is an unreaped zombie or still some live
/// process's group id, so `kill_group` can never hit an unrelated process.
/// Killing the group even after a clean exit is deliberate: whatever a
/// script left running in the background would otherwise outlive the
/// timeout and escape the concurrency bound.
pub struct Script {
    child: Child,
    deadline: Instant,
    /// Held until the process is reaped; None once handed to a reaper thread.
    permit: Option<Permit>,
}

/// Starts a script for one request. `timeout` sets `Script::deadline`; the
/// caller enforces it. Fails with NotFound or PermissionDenied from exec, and
/// with InvalidInput if a meta-variable (a decoded PATH_INFO, say) holds a NUL.
pub fn spawn(p: &CgiParams, timeout: Duration, permit: Permit) -> io::Result<Script> {
    // With a new working directory, a relative program path would be
    // ambiguous (std leaves it platform-specific), so make it absolute first.
    let program = std::path::absolute(p.script_path)?;
    let dir = program
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "script has no directory"))?;
    let has_body = p.content_length.is_some_and(|len| len > 0);
    let mut child = Command::new(&program)
        .env_clear()
        .envs(environment(p))
        .current_dir(dir)
        .process_group(0)
        .stdin(if has_body {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let now = Instant::now();
    let deadline = now
        .checked_add(timeout)
        .unwrap_or(now + Duration::from_secs(u64::from(u32::MAX)));
    let stderr = child.stderr.take();
    // From here on, an early return drops the Script, which kills and reaps.
    let script = Script {
        child,
        deadline,
        permit: Some(permit),
    };
    if let Some(stderr) = stderr {
        let name = p.script_name.to_string();
        let forwarding = Forwarding::start();
        std::thread::Builder::new()
            .name("cgi-stderr".to_string())
            .spawn(move || {
                forward_stderr(&name, stderr, io::stderr());
                drop(forwarding);
            })?;
    }
    Ok(script)
}

/// How many stderr forwarders are still copying, so that a process about to
/// exit (inetd mode) can let them finish instead of losing the last lines.
static FORWARDERS: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// One running stderr forwarder; dropping it says it is done.
struct Forwarding;

impl Forwarding {
    fn start() -> Forwarding {
        *FORWARDERS.0.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Forwarding
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        let mut n = FORWARDERS.0.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        FORWARDERS.1.notify_all();
    }
}

/// Waits (at most `limit`) until every script's stderr has been copied to
/// the server's. Scripts are dead by then, so their pipes reach EOF at once
/// unless a process escaped the group; the limit covers that case.
pub fn finish_stderr(limit: Duration) {
    let (lock, done) = &FORWARDERS;
    let n = lock.lock().unwrap_or_else(|p| p.into_inner());
    let _ = done.wait_timeout_while(n, limit, |n| *n > 0);
}

impl Script {
    /// The script's stdin, when the request has a body. Dropping it is the
    /// script's end of input.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// When the script has run too long: kill it then.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// SIGKILL to the script and everything it started in its group. Its
    /// stdout then reaches EOF once no process holds it any more.
    pub fn kill_group(&self) {
        let pgid = Pid::from_child(&self.child);
        // ESRCH (everything already gone) is the outcome we want anyway.
        let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        self.kill_group();
        // SIGKILL takes effect as soon as the process is scheduled; wait a
        // little for that, with backoff, rather than block a transport.
        let mut pause = Duration::from_micros(50);
        for _ in 0..10 {
            match self.child.try_wait() {
                // ECHILD: nothing left to reap.
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(pause),
            }
            pause *= 2;
        }
        // Still there (stuck in an uninterruptible sleep, say): a thread
        // waits for it, holding the permit so it still counts as running.
        let pid = Pid::from_child(&self.child);
        let permit = self.permit.take();
        let reaper = move || {
            while let Err(rustix::io::Errno::INTR) =
                rustix::process::waitpid(Some(pid), WaitOptions::empty())
            {}
            drop(permit);
        };
        let handed_off = std::thread::Builder::new()
            .name("cgi-reaper".to_string())
            .spawn(reaper)
            .is_ok();
        if !handed_off {
            // No thread to be had: blocking here beats leaving a zombie.
            let _ = self.child.wait();
        }
    }
}

/// Copies a script's stderr to `to`, one line at a time with the script's
/// name in front, until the last process holding the pipe closes it.
fn forward_stderr(name: &str, from: impl Read, mut to: impl Write) {
    let mut reader = BufReader::new(from);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_STDERR_LINE as u64)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            // The server's stderr failing is no reason to stop draining the
            // pipe: a script blocked on a full stderr would hang.
            Ok(_) => {
                let _ = to.write_all(stderr_line(name, &line).as_bytes());
            }
        }
    }
}

/// `staticd: cgi NAME: TEXT\n`, with control characters escaped so a script
/// cannot forge or garble the server's other log lines.
fn stderr_line(name: &str, raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let mut out = String::with_capacity(raw.len() + name.len() + 16);
    out.push_str("staticd: cgi ");
    push_escaped(&mut out, name);
    out.push_str(": ");
    push_escaped(&mut out, &String::from_utf8_lossy(raw));
    out.push('\n');
    out
}

fn push_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        if c.is_control() && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::path::PathBuf;

    fn params<'a>(headers: &'a [(&'a str, &'a str)]) -> CgiParams<'a> {
        CgiParams {
            script_path: Path::new("/srv/www/a.cgi"),
            script_name: "/a.cgi",
            path_info: "",
            query: "",
            method: "GET",
            protocol: "HTTP/1.1",
            headers,
            content_length: None,
            server_name: "example.org",
            server_port: 8080,
            remote_addr: "192.0.2.7",
            remote_port: Some(40000),
        }
    }

    fn var<'e>(env: &'e [(String, String)], name: &str) -> Option<&'e str> {
        env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn environment_has_the_meta_variables_and_nothing_else() {
        let env = environment(&params(&[]));
        let expected = [
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("SERVER_NAME", "example.org"),
            ("SERVER_PORT", "8080"),
            ("SERVER_PROTOCOL", "HTTP/1.1"),
            ("REQUEST_METHOD", "GET"),
            ("SCRIPT_NAME", "/a.cgi"),
            ("QUERY_STRING", ""),
            ("REMOTE_ADDR", "192.0.2.7"),
            ("REMOTE_PORT", "40000"),
        ];
        for (name, value) in expected {
            assert_eq!(var(&env, name), Some(value), "{name}");
        }
        let software = var(&env, "SERVER_SOFTWARE").unwrap();
        assert_eq!(software, format!("staticd/{}", env!("CARGO_PKG_VERSION")));
        assert_eq!(env.len(), expected.len() + 1, "{env:?}");
    }

    #[test]
    fn path_info_is_what_follows_the_script() {
        for (info, expected) in [("", None), ("/", Some("/")), ("/x/y", Some("/x/y"))] {
            let p = CgiParams {
                path_info: info,
                ..params(&[])
            };
            assert_eq!(var(&environment(&p), "PATH_INFO"), expected, "{info:?}");
        }
    }

    #[test]
    fn query_string_is_passed_as_it_came() {
        let p = CgiParams {
            query: "a=1&b=%20",
            ..params(&[])
        };
        assert_eq!(var(&environment(&p), "QUERY_STRING"), Some("a=1&b=%20"));
    }

    #[test]
    fn headers_become_http_variables() {
        let headers = [
            ("User-Agent", "curl/8"),
            ("X-Forwarded-For", "192.0.2.1"),
            ("accept", "text/html"),
            ("x-forwarded-for", "192.0.2.2"),
            ("Cookie", "a=1"),
            ("cookie", "b=2"),
        ];
        let env = environment(&params(&headers));
        assert_eq!(var(&env, "HTTP_USER_AGENT"), Some("curl/8"));
        assert_eq!(var(&env, "HTTP_ACCEPT"), Some("text/html"));
        assert_eq!(
            var(&env, "HTTP_X_FORWARDED_FOR"),
            Some("192.0.2.1, 192.0.2.2")
        );
        assert_eq!(var(&env, "HTTP_COOKIE"), Some("a=1; b=2"));
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }

    #[test]
    fn proxy_and_underscored_headers_are_not_passed() {
        let headers = [
            ("Proxy", "http://evil.example:3128"),
            ("X_Forwarded_For", "spoofed"),
            ("X.Dotted", "odd"),
        ];
        let env = environment(&params(&headers));
        assert_eq!(var(&env, "HTTP_PROXY"), None);
        assert_eq!(var(&env, "HTTP_X_FORWARDED_FOR"), None);
        assert!(env.iter().all(|(n, _)| !n.starts_with("HTTP_")), "{env:?}");
    }

    #[test]
    fn body_length_and_type_have_their_own_variables() {
        let headers = [("Content-Type", "text/plain"), ("Content-Length", "3")];
        let with_body = CgiParams {
            method: "POST",
            content_length: Some(3),
            ..params(&headers)
        };
        let env = environment(&with_body);
        assert_eq!(var(&env, "CONTENT_LENGTH"), Some("3"));
        assert_eq!(var(&env, "CONTENT_TYPE"), Some("text/plain"));
        assert_eq!(var(&env, "HTTP_CONTENT_TYPE"), None);
        assert_eq!(var(&env, "HTTP_CONTENT_LENGTH"), None);

        let env = environment(&params(&headers));
        assert_eq!(var(&env, "CONTENT_LENGTH"), None);
        assert_eq!(var(&env, "CONTENT_TYPE"), None);
    }

    fn complete(out: &[u8]) -> (CgiHead, usize) {
        match parse_header_block(out, false) {
            HeaderBlock::Complete(head, start) => (head, start),
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(out)),
        }
    }

    fn malformed(out: &[u8]) -> &'static str {
        match parse_header_block(out, true) {
            HeaderBlock::Malformed(why) => why,
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(out)),
        }
    }

    #[test]
    fn head_with_lf_lines() {
        let out = b"Content-Type: text/html\n\n<p>hi";
        let (head, start) = complete(out);
        assert_eq!(
            head,
            CgiHead {
                status: 200,
                reason: String::new(),
                location: None,
                content_type: Some("text/html".to_string()),
                content_length: None,
                other: Vec::new(),
            }
        );
        assert_eq!(&out[start..], b"<p>hi");
    }

    #[test]
    fn head_with_crlf_lines_and_other_fields() {
        let out = b"Status: 404 Not Here\r\nContent-Type:text/plain; charset=utf-8 \r\n\
            Content-Length: 5\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nConnection: close\r\n\
            Transfer-Encoding: chunked\r\nDate: yesterday\r\nX-Bad: a\x01b\r\nBad Name: x\r\n\
            Cache-Control: no-store\r\n\r\nnope!";
        let (head, start) = complete(out);
        assert_eq!(head.status, 404);
        assert_eq!(head.reason, "Not Here");
        assert_eq!(
            head.content_type.as_deref(),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(head.content_length, Some(5));
        let other: Vec<(&str, &str)> = head
            .other
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            other,
            [
                ("Set-Cookie", "a=1"),
                ("set-cookie", "b=2"),
                ("Cache-Control", "no-store")
            ]
        );
        assert_eq!(&out[start..], b"nope!");
    }

    #[test]
    fn head_arriving_in_pieces_is_incomplete_until_the_blank_line() {
        let out = b"Status: 201\r\nContent-Type: text/plain\r\nX-A: b\r\n\r\nbody";
        let blank_end = out.len() - 4;
        for cut in 0..blank_end {
            assert_eq!(
                parse_header_block(&out[..cut], false),
                HeaderBlock::Incomplete,
                "cut at {cut}"
            );
        }
        for cut in blank_end..=out.len() {
            let (head, start) = complete(&out[..cut]);
            assert_eq!((head.status, start), (201, blank_end));
        }
    }

    #[test]
    fn status_with_and_without_reason() {
        let (head, _) = complete(b"Status: 404\nContent-Type: text/plain\n\n");
        assert_eq!((head.status, head.reason.as_str()), (404, ""));
        let (head, _) = complete(b"status:  503   Busy, come back \nContent-Type: a/b\n\n");
        assert_eq!(
            (head.status, head.reason.as_str()),
            (503, "Busy, come back")
        );
    }

    #[test]
    fn local_location_is_served_here() {
        let (head, _) = complete(b"Location: /other.html?x=1\n\n");
        assert_eq!(
            head.location,
            Some(Location::Local("/other.html?x=1".to_string()))
        );
        assert_eq!(head.status, 200);
    }

    #[test]
    fn url_location_redirects_the_client() {
        let (head, _) = complete(b"Location: https://example.org/x\r\n\r\n");
        assert_eq!(
            head.location,
            Some(Location::Client("https://example.org/x".to_string()))
        );
        assert_eq!(head.status, 302);

        let (head, _) = complete(b"Status: 303 See Other\nLocation: http://a.example/\n\n");
        assert_eq!((head.status, head.reason.as_str()), (303, "See Other"));

        // A network-path reference is another host, not a local path.
        let (head, _) = complete(b"Location: //evil.example/\n\n");
        assert_eq!(
            head.location,
            Some(Location::Client("//evil.example/".to_string()))
        );
        assert_eq!(head.status, 302);

        // With a redirect status, a local path is for the client to follow.
        let (head, _) = complete(b"Status: 301\nLocation: /new/\n\n");
        assert_eq!(head.location, Some(Location::Client("/new/".to_string())));
        assert_eq!(head.status, 301);
    }

    #[test]
    fn bodiless_statuses_need_no_content_type() {
        assert_eq!(complete(b"Status: 304\n\n").0.status, 304);
        assert_eq!(complete(b"Status: 204 No Content\r\n\r\n").0.status, 204);
    }

    #[test]
    fn malformed_heads() {
        let cases: [&[u8]; 16] = [
            b"",
            b"Content-Type: text/plain\n",
            b"Content-Type: text/plain\r\n\r",
            b"hello world\n\n",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
            b"\n",
            b"X-Only: other\n\n",
            b"Status: 20\nContent-Type: a/b\n\n",
            b"Status: 2000\nContent-Type: a/b\n\n",
            b"Status: 100 Continue\nContent-Type: a/b\n\n",
            b"Status: abc\nContent-Type: a/b\n\n",
            b"Status: 200\nStatus: 404\nContent-Type: a/b\n\n",
            b"Content-Type: a/b\nContent-Length: -1\n\n",
            b"Content-Type: a/b\n folded\n\n",
            b"Content-Type: a\x00b\n\n",
            b"Location:\nContent-Type: a/b\n\n",
        ];
        for out in cases {
            malformed(out);
        }
    }

    #[test]
    fn a_bad_line_is_reported_before_the_block_ends() {
        assert_eq!(
            parse_header_block(b"oops\nContent-Ty", false),
            HeaderBlock::Malformed("header line without a colon")
        );
    }

    #[test]
    fn head_must_fit_in_32_kib() {
        let fitting = |extra: usize| {
            let mut out = b"Content-Type: text/plain\nX-Pad: ".to_vec();
            let pad = MAX_HEAD - out.len() - 2 + extra;
            out.resize(out.len() + pad, b'a');
            out.extend_from_slice(b"\n\nbody");
            out
        };
        let exact = fitting(0);
        assert_eq!(complete(&exact).1, MAX_HEAD);
        let over = fitting(1);
        assert!(matches!(
            parse_header_block(&over, false),
            HeaderBlock::Malformed(_)
        ));
        // Output without a blank line fails once 32 KiB have arrived.
        let endless = vec![b'a'; MAX_HEAD - 1];
        assert_eq!(parse_header_block(&endless, false), HeaderBlock::Incomplete);
        let endless = vec![b'a'; MAX_HEAD];
        assert!(matches!(
            parse_header_block(&endless, false),
            HeaderBlock::Malformed(_)
        ));
    }

    #[test]
    fn cgi_names() {
        assert!(is_cgi_name(b"a.cgi"));
        assert!(is_cgi_name(b"x.y.cgi"));
        assert!(!is_cgi_name(b".cgi"));
        assert!(!is_cgi_name(b"a.CGI"));
        assert!(!is_cgi_name(b"a.cgi.txt"));
    }

    #[test]
    fn limiter_bounds_running_scripts() {
        let limiter = Limiter::new(2);
        let a = limiter.try_acquire();
        let b = limiter.clone().try_acquire();
        assert!(a.is_some() && b.is_some());
        assert!(limiter.try_acquire().is_none());
        drop(a);
        assert!(limiter.try_acquire().is_some());
        assert!(Limiter::new(0).try_acquire().is_none());
    }

    #[test]
    fn scripts_and_limiters_can_cross_threads() {
        fn shareable<T: Send + Sync>() {}
        fn movable<T: Send>() {}
        shareable::<Limiter>();
        movable::<Permit>();
        movable::<Script>();
    }

    #[test]
    fn stderr_is_forwarded_line_by_line() {
        let mut out = Vec::new();
        let long = "x".repeat(MAX_STDERR_LINE + 10);
        let input = format!("one\r\ntwo\n\x1b[31mred\n{long}\nlast");
        forward_stderr("/t.cgi", input.as_bytes(), &mut out);
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "staticd: cgi /t.cgi: one");
        assert_eq!(lines[1], "staticd: cgi /t.cgi: two");
        assert_eq!(lines[2], "staticd: cgi /t.cgi: \\u{1b}[31mred");
        assert_eq!(
            lines[3].len(),
            "staticd: cgi /t.cgi: ".len() + MAX_STDERR_LINE
        );
        assert_eq!(lines[4], "staticd: cgi /t.cgi: xxxxxxxxxx");
        assert_eq!(lines[5], "staticd: cgi /t.cgi: last");
        assert_eq!(lines.len(), 6);
    }

    // The process tests below run real scripts; every wait is bounded.

    const PATIENCE: Duration = Duration::from_secs(10);

    fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Spawns, retrying on ETXTBSY: another test thread forking while this
    /// one still had the script open for writing holds the file busy until
    /// that child execs.
    fn start(p: &CgiParams, timeout: Duration, limiter: &Limiter) -> Script {
        let mut tries = 0;
        loop {
            let permit = limiter.try_acquire().expect("a free permit");
            match spawn(p, timeout, permit) {
                Ok(script) => return script,
                Err(e)
                    if e.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error())
                        && tries < 50 =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("spawn: {e}"),
            }
        }
    }

    /// Reads until EOF, `limit` bytes, or the patience runs out.
    fn read_bounded(out: &mut ChildStdout, limit: usize) -> Vec<u8> {
        let give_up = Instant::now() + PATIENCE;
        let mut got = Vec::new();
        let mut chunk = [0u8; 8192];
        while got.len() < limit {
            let left = give_up.saturating_duration_since(Instant::now());
            assert!(
                crate::sys::wait(out.as_fd(), false, left).unwrap(),
                "script output timed out"
            );
            match out.read(&mut chunk).unwrap() {
                0 => break,
                n => got.extend_from_slice(&chunk[..n]),
            }
        }
        got
    }

    /// A process's state letter from /proc, or None once it is gone, and its parent.
    fn proc_state(pid: u32) -> Option<(char, u32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after_name = &stat[stat.rfind(')')? + 2..];
        let mut fields = after_name.split(' ');
        let state = fields.next()?.chars().next()?;
        let ppid = fields.next()?.parse().ok()?;
        Some((state, ppid))
    }

    fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let give_up = Instant::now() + PATIENCE;
        while !done() {
            assert!(Instant::now() < give_up, "{what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Dead: gone, or a zombie waiting for whoever adopted it.
    fn assert_dies(pid: u32) {
        eventually(&format!("process {pid} still running"), || {
            proc_state(pid).is_none_or(|(state, _)| state == 'Z')
        });
    }

    /// Reaped: no longer a child of this process in any state.
    fn assert_reaped(pid: u32) {
        let me = std::process::id();
        eventually(&format!("process {pid} not reaped"), || {
            proc_state(pid).is_none_or(|(_, ppid)| ppid != me)
        });
    }

    #[test]
    fn script_sees_its_environment_and_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "env.cgi",
            "printf 'Content-Type: text/plain\\r\\n\\r\\n'\nenv\necho \"cwd=$(pwd -P)\"\n",
        );
        let headers = [("X-Test", "yes"), ("Proxy", "http://evil.example")];
        let p = CgiParams {
            script_path: &path,
            path_info: "/x/y",
            query: "q=1",
            ..params(&headers)
        };
        let mut script = start(&p, PATIENCE, &Limiter::new(1));
        assert!(script.take_stdin().is_none());
        let out = read_bounded(&mut script.take_stdout().unwrap(), usize::MAX);
        let (head, start) = complete(&out);
        assert_eq!(head.content_type.as_deref(), Some("text/plain"));
        let body = String::from_utf8_lossy(&out[start..]);
        for line in [
            "GATEWAY_INTERFACE=CGI/1.1",
            "PATH_INFO=/x/y",
            "QUERY_STRING=q=1",
            "HTTP_X_TEST=yes",
            "SCRIPT_NAME=/a.cgi",
            "PATH=/usr/local/bin:/usr/bin:/bin",
        ] {
            assert!(body.lines().any(|l| l == line), "{line} missing:\n{body}");
        }
        let cwd = dir.path().canonicalize().unwrap();
        assert!(
            body.lines().any(|l| l == format!("cwd={}", cwd.display())),
            "{body}"
        );
        for absent in ["HTTP_PROXY=", "HOME=", "CARGO"] {
            assert!(
                !body.lines().any(|l| l.starts_with(absent)),
                "{absent}:\n{body}"
            );
        }
    }

    #[test]
    fn request_body_goes_to_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "echo.cgi",
            "printf 'Content-Type: text/plain\\n\\n'\necho \"$CONTENT_LENGTH\"\ncat\n",
        );
        let p = CgiParams {
            script_path: &path,
            method: "POST",
            content_length: Some(11),
            ..params(&[])
        };
        let mut script = start(&p, PATIENCE, &Limiter::new(1));
        let mut stdin = script.take_stdin().unwrap();
        stdin.write_all(b"hello world").unwrap();
        drop(stdin);
        let out = read_bounded(&mut script.take_stdout().unwrap(), usize::MAX);
        let (_, start) = complete(&out);
        assert_eq!(&out[start..], b"11\nhello world");
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "slow.cgi",
            "sleep 100 &\necho $!\nexec sleep 100\n",
        );
        let p = CgiParams {
            script_path: &path,
            ..params(&[])
        };
        let timeout = Duration::from_millis(200);
        let mut script = start(&p, timeout, &Limiter::new(1));
        let leader = script.child.id();
        let mut stdout = script.take_stdout().unwrap();
        let mut first = Vec::new();
        while !first.ends_with(b"\n") {
            first.extend(read_bounded(&mut stdout, 1));
        }
        let background: u32 = std::str::from_utf8(&first).unwrap().trim().parse().unwrap();
        assert!(script.deadline() <= Instant::now() + timeout);
        std::thread::sleep(script.deadline().saturating_duration_since(Instant::now()));
        assert!(proc_state(background).is_some_and(|(state, _)| state != 'Z'));

        script.kill_group();
        // Every holder of stdout died, so it ends.
        assert_eq!(read_bounded(&mut stdout, usize::MAX), b"");
        drop(script);
        assert_dies(background);
        assert_reaped(leader);
    }

    #[test]
    fn dropping_a_running_script_kills_and_reaps_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "yes.cgi",
            "printf 'Content-Type: text/plain\\n\\n'\nexec yes\n",
        );
        let p = CgiParams {
            script_path: &path,
            ..params(&[])
        };
        let limiter = Limiter::new(1);
        let mut script = start(&p, PATIENCE, &limiter);
        let leader = script.child.id();
        let mut stdout = script.take_stdout().unwrap();
        // The client goes away mid-response: the transport drops everything.
        assert!(read_bounded(&mut stdout, 100_000).len() >= 100_000);
        assert!(
            limiter.try_acquire().is_none(),
            "a running script holds its permit"
        );
        drop(script);
        drop(stdout);
        assert_reaped(leader);
        eventually("permit not released", || limiter.try_acquire().is_some());
    }

    #[test]
    fn a_finished_script_is_reaped_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "quick.cgi",
            "printf 'Content-Type: text/plain\\n\\nok'\necho 'a line for the server log' >&2\n",
        );
        let p = CgiParams {
            script_path: &path,
            ..params(&[])
        };
        let limiter = Limiter::new(1);
        let mut script = start(&p, PATIENCE, &limiter);
        let leader = script.child.id();
        let out = read_bounded(&mut script.take_stdout().unwrap(), usize::MAX);
        assert!(out.ends_with(b"\n\nok"));
        drop(script);
        assert_reaped(leader);
        eventually("permit not released", || limiter.try_acquire().is_some());
    }

    #[test]
    fn a_script_that_cannot_run_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.cgi");
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(!is_runnable(&meta));
        let p = CgiParams {
            script_path: &path,
            ..params(&[])
        };
        let limiter = Limiter::new(1);
        let permit = limiter.try_acquire().unwrap();
        let err = spawn(&p, PATIENCE, permit).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(limiter.try_acquire().is_some(), "the permit went back");
    }
}
