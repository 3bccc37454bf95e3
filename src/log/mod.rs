//! Access-log lines. Formatting is pure; `emit` is the one write to stderr
//! (or `--log-file`): directly in inetd mode, through [`queue`]'s writer
//! thread in standalone mode.
//!
//! A line is formatted when its response is decided, while the request it
//! describes is still at hand, but its size field is filled in only when it
//! is written: the size is the body bytes that actually went out, as with
//! nginx's `$body_bytes_sent` and Apache's `%b`, so a download cut short
//! logs what the client was sent, not what it asked for.

mod json;
pub mod queue;

use std::cell::Cell;
use std::fmt::{self, Write as _};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::num::NonZeroU16;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use queue::{Dest, Queue};

use crate::calendar::Utc;
use crate::config::LogFormat;
use crate::http::parse::Request;
use crate::pool::{self, FreeList};

/// What one response contributes to the log.
pub struct Entry<'a> {
    /// Client IP address, or `-` when unknown.
    pub client: &'a str,
    /// The request, when its head parsed.
    pub request: Option<&'a Request<'a>>,
    pub status: u16,
    /// The `--auth` user whose credentials passed, if any.
    pub user: Option<&'a str>,
    /// Where the body lies among the bytes written for the response (its
    /// head comes first): the size logged is how much of this range went out.
    pub body: Range<u64>,
    /// What TLS agreed on, when it came over TLS (the JSON format says so).
    pub tls: Option<Tls>,
}

/// What the JSON log says of a TLS connection, in Caddy's terms: the
/// version and cipher suite by their IANA numbers (772 is TLS 1.3, 4865
/// TLS_AES_128_GCM_SHA256), whether the session was resumed, and the ALPN
/// protocol. Over QUIC only the version (always 1.3) and `h3` are known:
/// QUIC's TLS session is not asked for the suite or the resumption.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tls {
    pub version: u16,
    /// Never 0 (TLS_NULL_WITH_NULL_NULL): Option costs no byte.
    pub cipher_suite: Option<NonZeroU16>,
    pub resumed: Option<bool>,
    pub proto: Alpn,
}

impl Tls {
    /// TLS 1.3's number: QUIC's only version.
    pub const VERSION_1_3: u16 = 0x0304;
}

/// The protocols staticd offers by ALPN (a byte, not a string: a session
/// holds its connection's [`Tls`] while the connection lives).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Alpn {
    /// The client offered none.
    #[default]
    None,
    Http1,
    H2,
    H3,
}

impl Alpn {
    pub fn as_str(self) -> &'static str {
        match self {
            Alpn::None => "",
            Alpn::Http1 => "http/1.1",
            Alpn::H2 => "h2",
            Alpn::H3 => "h3",
        }
    }
}

/// Formatted access-log lines waiting for their sizes: one response's, or
/// a pipelined batch's, which are written together. Empty when logging is
/// off. Its buffers go back to the thread's free lists when dropped.
#[derive(Default)]
pub struct Line {
    /// The lines, each without its size.
    text: String,
    /// Where each size goes, in order.
    sizes: Vec<SizeField>,
    /// How a size of 0 is written: `-` in the common formats, `0` in fnord's.
    zero: &'static str,
}

/// The size field of one line.
struct SizeField {
    /// Where it goes in `Line::text`.
    at: usize,
    /// The body's place among the bytes written, as in [`Entry::body`](crate::log::Entry::body).
    body: Range<u64>,
    /// JSON lines only: when the response was decided; the duration, from
    /// then to the write, follows the size.
    decided: Option<Instant>,
}

thread_local! {
    /// Lists of size fields, reused as the line buffers are.
    static SIZES: FreeList<Vec<SizeField>> = const { FreeList::new() };
}

impl Line {
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Appends `more`, the line of the next pipelined answer, whose bytes
    /// are written after the first `offset` bytes of this one's.
    pub fn push(&mut self, mut more: Line, offset: u64) {
        let base = self.text.len();
        self.text.push_str(&more.text);
        for f in more.sizes.drain(..) {
            self.sizes.push(SizeField {
                at: base + f.at,
                body: f.body.start + offset..f.body.end + offset,
                decided: f.decided,
            });
        }
        self.zero = more.zero;
    }

    /// Says where the body lies among the bytes written, for a line of one
    /// response whose body was not known when it was made (a CGI script's,
    /// which streams after the head).
    pub fn set_body(&mut self, body: Range<u64>) {
        for f in &mut self.sizes {
            f.body = body.clone();
        }
    }

    /// Writes the line, if there is one, its sizes taken from `written`,
    /// the bytes of its response (or batch) that went out. The line is
    /// empty afterwards, so it is never written twice.
    pub fn emit(&mut self, written: u64) {
        if self.text.is_empty() {
            return;
        }
        self.fill(written);
        emit(&self.text);
        self.text.clear();
    }

    /// Puts every size in its place: the part of its body among the first
    /// `written` bytes.
    fn fill(&mut self, written: u64) {
        // The clock is read only for a JSON line's duration.
        let mut now = None;
        let mut out = pool::take(&pool::LINES);
        let mut from = 0;
        for f in &self.sizes {
            out.push_str(&self.text[from..f.at]);
            let sent = body_sent(&f.body, written);
            if sent == 0 {
                out.push_str(self.zero);
            } else {
                // Writing to a String cannot fail.
                let _ = write!(out, "{sent}");
            }
            if let Some(decided) = f.decided {
                let now = *now.get_or_insert_with(Instant::now);
                json::tail(&mut out, now.duration_since(decided));
            }
            from = f.at;
        }
        out.push_str(&self.text[from..]);
        pool::give(&pool::LINES, std::mem::replace(&mut self.text, out));
        self.sizes.clear();
    }
}

/// How much of `body`, a range of a response's bytes, is among the first
/// `written` of them.
pub fn body_sent(body: &Range<u64>, written: u64) -> u64 {
    written.min(body.end).saturating_sub(body.start)
}

impl Drop for Line {
    fn drop(&mut self) {
        pool::give(&pool::LINES, std::mem::take(&mut self.text));
        pool::give(&SIZES, std::mem::take(&mut self.sizes));
    }
}

/// The line for `e` in `format`. `now` reads the clock, only when a line is
/// written (it was a vDSO call per request with logging off).
pub fn format(format: LogFormat, e: &Entry, now: impl FnOnce() -> SystemTime) -> Line {
    if format == LogFormat::Off {
        return Line::default();
    }
    let now = now();
    let mut text = pool::take(&pool::LINES);
    // Writing to a String cannot fail.
    let at = match format {
        LogFormat::Off => Ok(0),
        LogFormat::Fnord => fnord(&mut text, e),
        LogFormat::Common | LogFormat::Combined => common(&mut text, format, e, now),
        LogFormat::Json => json::line(&mut text, e, now),
    }
    .unwrap_or_default();
    text.push('\n');
    let mut sizes = pool::take(&SIZES);
    sizes.push(SizeField {
        at,
        body: e.body.clone(),
        decided: (format == LogFormat::Json).then(Instant::now),
    });
    let zero = match format {
        LogFormat::Fnord | LogFormat::Json => "0",
        _ => "-",
    };
    Line { text, sizes, zero }
}

/// The Common Log Format, and with Combined the referer and user agent.
/// Returns where the size goes.
fn common(
    out: &mut String,
    format: LogFormat,
    e: &Entry,
    now: SystemTime,
) -> Result<usize, fmt::Error> {
    let req = e.request;
    write!(out, "{} - ", e.client)?;
    // A space would split the field: as in fnord's user agent, `_`.
    match e.user {
        Some(user) => escape_underscored(out, user),
        None => out.push('-'),
    }
    out.push_str(" [");
    clf_time(out, now)?;
    out.push_str("] \"");
    match req {
        Some(r) => {
            escape(out, r.method.as_str());
            out.push(' ');
            escape(out, &r.target);
            out.push(' ');
            out.push_str(r.protocol_name());
        }
        None => out.push('-'),
    }
    write!(out, "\" {} ", e.status)?;
    let size_at = out.len();
    if format == LogFormat::Combined {
        let referer = req.and_then(|r| r.referer.as_deref()).unwrap_or("-");
        let agent = req.and_then(|r| r.user_agent.as_deref()).unwrap_or("-");
        out.push_str(" \"");
        escape(out, referer);
        out.push_str("\" \"");
        escape(out, agent);
        out.push('"');
    }
    Ok(size_at)
}

/// fnord's line: `IP STATUS SIZE HOST USER_AGENT REFERER PATH`, spaces in
/// the agent and referer turned into `_`, `none` for a missing referer.
/// Returns where the size goes.
fn fnord(out: &mut String, e: &Entry) -> Result<usize, fmt::Error> {
    let req = e.request;
    let host = req.and_then(|r| r.host.as_deref()).unwrap_or("-");
    let agent = req.and_then(|r| r.user_agent.as_deref()).unwrap_or("-");
    let referer = req.and_then(|r| r.referer.as_deref()).unwrap_or("none");
    let path = req.map_or("-", |r| &r.target);
    write!(out, "{} {} ", e.client, e.status)?;
    let size_at = out.len();
    out.push(' ');
    escape(out, host);
    out.push(' ');
    escape_underscored(out, agent);
    out.push(' ');
    escape_underscored(out, referer);
    out.push(' ');
    escape(out, path);
    Ok(size_at)
}

/// Appends a client-supplied value kept on one line and free of quotes.
fn escape(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// `escape`, with spaces as `_` (fnord's fields are space-separated).
fn escape_underscored(out: &mut String, s: &str) {
    for part in s.split(' ').enumerate() {
        if part.0 > 0 {
            out.push('_');
        }
        escape(out, part.1);
    }
}

/// `10/Oct/2000:13:55:36 +0000`, in UTC.
fn clf_time(out: &mut String, t: SystemTime) -> fmt::Result {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let u = Utc::of(t);
    write!(
        out,
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        u.day,
        MONTHS[(u.month - 1) as usize],
        u.year,
        u.hour,
        u.minute,
        u.second
    )
}

/// Where access-log lines go: stderr unless `--log-file` names a file.
/// The file is shared with the writer thread, which takes the one open at
/// the moment it writes: a reopen (SIGHUP) never waits for a write.
static ACCESS_LOG: Mutex<Option<AccessFile>> = Mutex::new(None);

/// Whether access lines go to [`ACCESS_LOG`]'s file: read per line without
/// taking the lock (set once, before any line is logged).
static TO_FILE: AtomicBool = AtomicBool::new(false);

struct AccessFile {
    path: PathBuf,
    file: Arc<File>,
    /// Whether it is a FIFO (see [`queue::write_reporting`]).
    fifo: bool,
}

fn access_log() -> MutexGuard<'static, Option<AccessFile>> {
    ACCESS_LOG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sends access-log lines to `path` (appending) instead of stderr.
pub fn open_file(path: &Path) -> io::Result<()> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    *access_log() = Some(AccessFile {
        path: path.to_path_buf(),
        fifo: crate::sys::is_fifo(file.as_fd()),
        file: Arc::new(file),
    });
    TO_FILE.store(true, Ordering::Release);
    Ok(())
}

/// Opens the log file again under its name (after SIGHUP), so rotation by
/// renaming works. On failure the old file stays in use.
pub fn reopen() -> io::Result<()> {
    let mut slot = access_log();
    if let Some(current) = slot.as_mut() {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&current.path)?;
        current.fifo = crate::sys::is_fifo(file.as_fd());
        current.file = Arc::new(file);
    }
    Ok(())
}

/// The log file open now, if there is one, and whether it is a FIFO.
fn current_file() -> Option<(Arc<File>, bool)> {
    access_log().as_ref().map(|f| (Arc::clone(&f.file), f.fifo))
}

/// Writes one access-log line: through the queue once the writer runs
/// (standalone mode), else in a single write, so lines from several
/// threads never interleave.
pub fn emit(line: &str) {
    if let Some(queue) = QUEUE.get() {
        let dest = match TO_FILE.load(Ordering::Acquire) {
            true => Dest::File,
            false => Dest::Stderr,
        };
        queue.push(dest, line.as_bytes(), may_wait());
        return;
    }
    match current_file() {
        Some((file, _)) => {
            let _ = (&*file).write_all(line.as_bytes());
        }
        None => diagnostic(line),
    }
}

/// Writes a line about the server itself (not a request) to stderr:
/// through the queue once the writer runs, else directly.
pub fn diagnostic(line: &str) {
    if let Some(queue) = QUEUE.get() {
        queue.push(Dest::Stderr, line.as_bytes(), may_wait());
        return;
    }
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The writer's queue, once `start_writer` ran.
static QUEUE: OnceLock<&'static Queue> = OnceLock::new();

/// How many bytes of lines the queue holds (the writer holds as many
/// again in the batch it is writing): some thousands of access lines,
/// seconds of a busy server's log.
const QUEUE_BYTES: usize = 1 << 20;

/// How long `finish` waits for the queue to be written out at least.
const LAST_FLUSH: Duration = Duration::from_millis(200);

/// How long `finish` waits for stderr to take its last line.
const LAST_LINE_WAIT: Duration = Duration::from_millis(100);

thread_local! {
    /// Set on the thread that started the writer: it handles the signals,
    /// so its own lines (SIGHUP's) never wait for room: a full queue
    /// counts them unwritten, and a stop is always heard.
    static NEVER_WAITS: Cell<bool> = const { Cell::new(false) };
}

fn may_wait() -> bool {
    !NEVER_WAITS.with(Cell::get)
}

/// Standalone mode: from now on, log lines go through a bounded queue to a
/// thread of their own, so a log output that blocks (a pipe nobody reads,
/// a stuck journald) never blocks a worker: a worker waits only when the
/// queue is full. Lines written before (start-up errors) went directly.
pub fn start_writer() -> io::Result<()> {
    if QUEUE.get().is_some() {
        return Ok(());
    }
    // Lives as long as the process: the writer may be stuck in a write
    // when the process exits.
    let queue: &'static Queue = Box::leak(Box::new(Queue::new(QUEUE_BYTES)));
    let mut outputs = Outputs {
        stderr_fifo: crate::sys::is_fifo(std::io::stderr().as_fd()),
    };
    crate::sys::spawn_helper("staticd-log", move || queue.run_writer(&mut outputs))?;
    let _ = QUEUE.set(queue);
    NEVER_WAITS.with(|n| n.set(true));
    Ok(())
}

/// A stop began: lines that find the queue full wait at most `grace` more
/// (then they are counted as unwritten), so a blocked log output cannot
/// hold the process past its shutdown grace.
pub fn abandon_after(grace: Duration) {
    if let Some(queue) = QUEUE.get() {
        queue.give_up_after(grace);
    }
}

/// The last thing before the process exits: waits for the queue to be
/// written out (up to the end of the stop's grace), then, if lines were
/// not written, says how many on stderr, but only if stderr takes the
/// line at once. Never waits on a writer that is stuck.
pub fn finish() {
    let Some(queue) = QUEUE.get() else {
        return;
    };
    let closed = queue.close(Instant::now() + LAST_FLUSH);
    // While the writer is in a write to stderr, a line from here could
    // land inside the one it writes.
    if closed.unwritten > 0 && closed.writing != Some(Dest::Stderr) {
        let s = if closed.unwritten == 1 { "" } else { "s" };
        let last = format!(
            "staticd: {} log line{s} not written (log output blocked)\n",
            closed.unwritten
        );
        write_if_ready(std::io::stderr().as_fd(), last.as_bytes(), LAST_LINE_WAIT);
    }
}

/// Writes `line` to `fd` only if it takes it without blocking: poll(2)
/// for room first, for `wait` at most; on a socket (journald's stream) a
/// send that cannot block. Never waits longer, whatever the output does.
fn write_if_ready(fd: BorrowedFd<'_>, line: &[u8], wait: Duration) {
    use rustix::io::Errno;
    if !crate::sys::wait(fd, true, wait).unwrap_or(false) {
        return;
    }
    let flags = rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL;
    if let Err(Errno::NOTSOCK) = rustix::net::send(fd, line, flags) {
        // A pipe or file that polled writable takes a line this short
        // (under PIPE_BUF) whole.
        let _ = rustix::io::write(fd, line);
    }
}

/// The writer's outputs: stderr (under its lock, so that other writes to
/// it never land inside a line) and the log file open at the time.
struct Outputs {
    /// Whether stderr is a pipe (see
    /// [`queue::write_reporting`]).
    stderr_fifo: bool,
}

impl queue::Sink for Outputs {
    fn write_run(
        &mut self,
        dest: Dest,
        bytes: &[u8],
        progress: &mut dyn FnMut(&[u8]),
    ) -> io::Result<()> {
        let file = match dest {
            Dest::File => current_file(),
            Dest::Stderr => None,
        };
        match file {
            Some((file, fifo)) => queue::write_reporting(&mut &*file, bytes, fifo, progress),
            None => {
                let mut stderr = std::io::stderr().lock();
                queue::write_reporting(&mut stderr, bytes, self.stderr_fifo, progress)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn t() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(971_186_136) // 2000-10-10 13:55:36 UTC
    }

    fn req() -> Request<'static> {
        Request {
            target: "/a b?x".into(),
            minor_version: 1,
            host: Some("example.test".into()),
            user_agent: Some("Mozilla/5.0 (X11)".into()),
            ..Request::default()
        }
    }

    fn entry<'a>(r: Option<&'a Request<'a>>, status: u16, body: Range<u64>) -> Entry<'a> {
        Entry {
            client: "10.0.0.1",
            request: r,
            status,
            user: None,
            body,
            tls: None,
        }
    }

    /// The text `emit` would write after `written` bytes went out.
    fn filled(mut line: Line, written: u64) -> String {
        line.fill(written);
        line.text.clone()
    }

    #[test]
    fn common_and_combined() {
        let r = req();
        // A 100-byte head, then the body.
        let e = entry(Some(&r), 200, 100..2426);
        assert_eq!(
            filled(format(LogFormat::Common, &e, t), 2426),
            "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a b?x HTTP/1.1\" 200 2326\n"
        );
        assert_eq!(
            filled(format(LogFormat::Combined, &e, t), 2426),
            "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a b?x HTTP/1.1\" 200 2326 \"-\" \"Mozilla/5.0 (X11)\"\n"
        );
    }

    #[test]
    fn the_auth_user_is_the_third_field() {
        let r = req();
        let mut e = entry(Some(&r), 200, 100..2426);
        e.user = Some("ann marie");
        assert_eq!(
            filled(format(LogFormat::Common, &e, t), 2426),
            "10.0.0.1 - ann_marie [10/Oct/2000:13:55:36 +0000] \"GET /a b?x HTTP/1.1\" 200 2326\n"
        );
    }

    #[test]
    fn fnord_line() {
        let r = req();
        let e = entry(Some(&r), 404, 100..100);
        assert_eq!(
            filled(format(LogFormat::Fnord, &e, t), 100),
            "10.0.0.1 404 0 example.test Mozilla/5.0_(X11) none /a b?x\n"
        );
    }

    #[test]
    fn the_size_is_the_body_bytes_written() {
        let r = req();
        let e = entry(Some(&r), 200, 100..1100);
        let size = |format, written| {
            let line = filled(super::format(format, &e, t), written);
            let fields: Vec<&str> = line.trim_end().split(' ').collect();
            let at = if format == LogFormat::Fnord { 2 } else { 10 };
            fields[at].to_string()
        };
        // Cut off in the head, in the body, after all of it.
        assert_eq!(size(LogFormat::Common, 40), "-");
        assert_eq!(size(LogFormat::Fnord, 40), "0");
        assert_eq!(size(LogFormat::Common, 100), "-");
        assert_eq!(size(LogFormat::Common, 101), "1");
        assert_eq!(size(LogFormat::Fnord, 612), "512");
        assert_eq!(size(LogFormat::Combined, 1100), "1000");
        assert_eq!(size(LogFormat::Fnord, u64::MAX), "1000");
    }

    #[test]
    fn a_pipelined_batch_gives_each_line_its_own_size() {
        let r = req();
        // Three answers written as one: two of 150 and 300 bytes held in
        // memory (100 of head each, then the body), then a head and a
        // 5000-byte file.
        let batch = || {
            let line = |status, body| format(LogFormat::Fnord, &entry(Some(&r), status, body), t);
            let mut batch = line(200, 100..150);
            batch.push(line(404, 100..300), 150);
            batch.push(line(206, 100..5100), 450);
            batch
        };
        let sizes = |written| {
            filled(batch(), written)
                .lines()
                .map(|l| l.split(' ').nth(2).unwrap_or("?").to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(sizes(0), "0,0,0");
        assert_eq!(sizes(120), "20,0,0");
        assert_eq!(sizes(260), "50,10,0");
        assert_eq!(sizes(551), "50,200,1");
        assert_eq!(sizes(5550), "50,200,5000");
    }

    #[test]
    fn unparsed_requests_and_hostile_values() {
        let e = entry(None, 400, 0..12);
        assert!(filled(format(LogFormat::Common, &e, t), 12).contains("\"-\" 400 12"));
        let mut escaped = String::new();
        escape(&mut escaped, "a\"b\x1b");
        assert_eq!(escaped, "a\\\"b\\x1b");
        assert!(format(LogFormat::Off, &e, t).is_empty());
    }

    #[test]
    fn json_line() {
        let mut r = req();
        r.user_agent = Some("evil\"\n\u{1b}]0;x\x07".into());
        r.target = "/\u{fffd}\\\"".into();
        let mut e = entry(Some(&r), 200, 100..2426);
        e.user = Some("ann");
        e.tls = Some(Tls {
            version: Tls::VERSION_1_3,
            cipher_suite: NonZeroU16::new(0x1301),
            resumed: Some(false),
            proto: Alpn::H2,
        });
        let line = filled(format(LogFormat::Json, &e, t), 2426);
        let (head, tail) = line.split_once(",\"duration\":").unwrap();
        assert_eq!(
            head,
            "{\"ts\":971186136.000000,\"request\":{\"remote_ip\":\"10.0.0.1\",\"proto\":\"HTTP/1.1\",\
             \"method\":\"GET\",\"host\":\"example.test\",\"uri\":\"/\u{fffd}\\\\\\\"\",\
             \"headers\":{\"User-Agent\":[\"evil\\\"\\n\\u001b]0;x\\u0007\"]},\
             \"tls\":{\"resumed\":false,\"version\":772,\"cipher_suite\":4865,\"proto\":\"h2\"}},\
             \"user_id\":\"ann\",\"status\":200,\"size\":2326"
        );
        assert!(
            tail.ends_with("}\n") && tail[..tail.len() - 2].parse::<f64>().is_ok(),
            "{tail}"
        );
        // QUIC: what its TLS session is not asked for is left out.
        e.tls = Some(Tls {
            version: Tls::VERSION_1_3,
            proto: Alpn::H3,
            ..Tls::default()
        });
        let line = filled(format(LogFormat::Json, &e, t), 2426);
        assert!(
            line.contains("\"tls\":{\"version\":772,\"proto\":\"h3\"}},"),
            "{line}"
        );
        // An unparsed request, nothing sent.
        let line = filled(format(LogFormat::Json, &entry(None, 400, 0..0), t), 0);
        assert!(
            line.contains(
                "\"remote_ip\":\"10.0.0.1\"},\"user_id\":\"\",\"status\":400,\"size\":0,"
            ),
            "{line}"
        );
    }

    #[test]
    fn dates() {
        let mut s = String::new();
        clf_time(&mut s, UNIX_EPOCH).unwrap();
        assert_eq!(s, "01/Jan/1970:00:00:00 +0000");
    }
}
