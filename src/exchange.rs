//! One CGI exchange as a state machine: what a script's request turns into,
//! decided without socket I/O, so that every protocol drives the same
//! decisions through the one driver, [`serve::cgi`](crate::serve::cgi).
//!
//! The driver starts it, moves bytes (the request body to the script's
//! stdin, the script's stdout to `output`), says when the client went or the
//! deadline passed, and does each [`Step`] that `step` hands out. Statuses
//! (502, 503, 504, 500, 403), local redirects, the body's length and
//! keep-alive are decided here; every response, the script's or one of
//! ours, is made by [`pipeline::sent`] like any other, so the metrics, the
//! log line and the connection's fields (Strict-Transport-Security over
//! HTTPS) come out the same. How the body is framed is the protocol's
//! (HTTP/1.1's chunks are its client's). Starting the script (fork and
//! exec) happens here too: it is the same for every driver, and no socket
//! is involved.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::process::{ChildStdin, ChildStdout};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use crate::cgi::{self, CgiParams, HeaderBlock, Limiter, Location, Script};
use crate::config::Config;
use crate::http::head::Framing;
use crate::http::parse::{BodyFraming, Method, Request};
use crate::http::status::Status;
use crate::log;
use crate::origin::Origin;
use crate::pipeline::{self, Sent};
use crate::respond::{self, Answer, CgiJob, Response};
use crate::site::Site;

/// Local redirects (`Location: /path`) followed for one request.
const MAX_LOCAL_REDIRECTS: usize = 5;

/// How the access log names a Unix-socket client ([`serve::listen`](crate::serve::listen)'s word).
const UNIX_CLIENT: &str = "unix:";

/// The process-wide bound on running scripts (`--cgi-max`).
static LIMITER: OnceLock<Limiter> = OnceLock::new();

/// Script output held for an HTTP/2 or HTTP/3 stream whose client is slow
/// to take it (the driver reads no more from the script until some of it
/// is sent), and over HTTP/3 the request body read and not yet taken by
/// the script.
pub const CGI_QUEUE: usize = 64 << 10;

/// What the driver of an HTTP/2 or HTTP/3 connection acts on for its
/// scripts' streams: the sessions run no script themselves, and both
/// drivers run them the same way (`serve::cgi::streams`).
pub enum StreamEvent<Id> {
    /// A CGI script is to run for `stream`.
    Cgi { stream: Id, job: Box<CgiJob> },
    /// `stream`'s request body has more for its script (`take_body`).
    Body(Id),
    /// `bytes` of `stream`'s script output went out: room for more.
    Sent { stream: Id, bytes: usize },
    /// `stream` is over (done, or reset): its script, if any, is
    /// abandoned.
    Gone(Id),
}

impl<Id> StreamEvent<Id> {
    /// The same event with its stream named by `name` (a driver of many
    /// connections names their streams with the connection).
    pub fn map_stream<To>(self, name: impl FnOnce(Id) -> To) -> StreamEvent<To> {
        match self {
            StreamEvent::Cgi { stream, job } => StreamEvent::Cgi {
                stream: name(stream),
                job,
            },
            StreamEvent::Body(stream) => StreamEvent::Body(name(stream)),
            StreamEvent::Sent { stream, bytes } => StreamEvent::Sent {
                stream: name(stream),
                bytes,
            },
            StreamEvent::Gone(stream) => StreamEvent::Gone(name(stream)),
        }
    }
}

/// What an exchange is served with.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub cfg: &'a Config,
    pub site: &'a Site,
    /// Who the request came from, and how (HTTPS=on, REMOTE_PORT,
    /// SERVER_PORT, the encoding `Sent` is made for); the driver has filled
    /// in its `sockets` if the connection had not.
    pub origin: &'a Origin,
}

/// What the driver does next.
pub enum Step {
    /// Nothing until more output, the client, or the deadline.
    Wait,
    /// A script runs: its stdin (None when the request has no body) takes
    /// the request body, its stdout goes to `output`. After a local redirect
    /// to another script these are the new script's.
    Run {
        stdin: Option<ChildStdin>,
        stdout: ChildStdout,
    },
    /// Send this response, whole (one of ours, or a local redirect's);
    /// `Done` follows.
    Send(Box<Sent>),
    /// Send the script's response head; `body`: its body follows as
    /// `Body` steps (not for HEAD, 204 or 304). The driver keeps it while
    /// they go out and adds the script's body bytes written to `written`:
    /// its drop writes the log line.
    Head { sent: Box<Sent>, body: bool },
    /// Bytes of the script's body to send, as the script wrote them: the
    /// protocol frames them (HTTP/1.1 in chunks when the head has no
    /// length).
    Body(Vec<u8>),
    /// The exchange is over. `complete`: the body went out whole (else the
    /// client must see it cut: no last chunk, a reset stream);
    /// `keep_alive`: the connection may carry another request.
    Done { complete: bool, keep_alive: bool },
}

enum Phase {
    /// Reading the script's header block.
    Head,
    /// Relaying the script's body.
    Body(Relay),
    /// Steps queued are the last.
    Over,
}

/// The script's body on its way.
struct Relay {
    /// The body follows the head (not for HEAD, 204 or 304).
    wanted: bool,
    /// The script's Content-Length: no more than this is sent.
    limit: Option<u64>,
    close: bool,
    /// Body bytes of the script's handed out so far.
    relayed: u64,
}

pub struct Exchange {
    job: Box<CgiJob>,
    script: Option<Script>,
    phase: Phase,
    steps: VecDeque<Step>,
    /// Script output before the end of its header block.
    head_buf: Vec<u8>,
    /// Request body bytes still to come from the client.
    body_left: u64,
    redirects: usize,
}

impl Exchange {
    /// Starts the script for `job` (or decides the answer when it cannot
    /// run: 503 over `--cgi-max`, 403, 500).
    pub fn start(job: Box<CgiJob>, ctx: &Context) -> Exchange {
        let body_left = match job.request.framing {
            BodyFraming::Length(n) => n,
            _ => 0,
        };
        let mut exchange = Exchange {
            job,
            script: None,
            phase: Phase::Head,
            steps: VecDeque::new(),
            head_buf: Vec::new(),
            body_left,
            redirects: 0,
        };
        exchange.spawn(ctx);
        exchange
    }

    /// The next thing to do.
    pub fn step(&mut self) -> Step {
        self.steps.pop_front().unwrap_or(Step::Wait)
    }

    /// When the script must be done by; None once none runs.
    pub fn deadline(&self) -> Option<Instant> {
        self.script.as_ref().map(Script::deadline)
    }

    /// Request body bytes still to come from the client.
    pub fn body_left(&self) -> u64 {
        self.body_left
    }

    /// How many of `arrived` (bytes from the client after the request
    /// head) belong to the body, which the script takes; the rest is the
    /// next request.
    pub fn take_body(&mut self, arrived: usize) -> usize {
        let n = (self.body_left as usize).min(arrived);
        self.body_left -= n as u64;
        n
    }

    /// Output from the script's stdout; `eof` once it closed it.
    pub fn output(&mut self, bytes: &[u8], eof: bool, ctx: &Context) {
        match &mut self.phase {
            Phase::Over => {}
            Phase::Body(relay) => {
                let step = relay.body(bytes);
                self.steps.extend(step);
                if eof {
                    self.finish();
                }
            }
            Phase::Head => {
                self.head_buf.extend_from_slice(bytes);
                match cgi::parse_header_block(&self.head_buf, eof) {
                    HeaderBlock::Incomplete => {}
                    HeaderBlock::Malformed(why) => self.fail(ctx, Status::BadGateway, why),
                    HeaderBlock::Complete(head, start) => {
                        if let Some(Location::Local(target)) = &head.location {
                            self.local_redirect(target.clone(), ctx);
                            return;
                        }
                        self.head(&head, ctx);
                        let rest = self.head_buf.split_off(start);
                        self.head_buf.clear();
                        self.output(&rest, eof, ctx);
                    }
                }
                if eof && matches!(self.phase, Phase::Head) {
                    self.fail(ctx, Status::BadGateway, "no output");
                }
            }
        }
    }

    /// The deadline passed: the script is killed; the client gets 504, or
    /// a cut response when its head went out already.
    pub fn timed_out(&mut self, ctx: &Context) {
        let Some(script) = &self.script else {
            return;
        };
        script.kill_group();
        crate::metrics::count(crate::metrics::Event::CgiTimeout);
        self.fail(
            ctx,
            Status::GatewayTimeout,
            "ran past --cgi-timeout; killed",
        );
    }

    /// The client went away or stopped taking the response (or the server
    /// is stopping): the exchange ends. A request nothing was sent for is
    /// logged as 499.
    pub fn client_gone(&mut self, ctx: &Context) {
        if matches!(self.phase, Phase::Head) {
            let request = &self.job.request;
            crate::metrics::request(Some(request), 499, ctx.origin.https());
            unanswered(ctx, &self.job, 499);
        }
        self.end(false, false);
    }

    fn spawn(&mut self, ctx: &Context) {
        self.script = None;
        let limiter = LIMITER.get_or_init(|| Limiter::new(ctx.cfg.cgi_max));
        let Some(permit) = limiter.try_acquire() else {
            let why = "too many scripts running (--cgi-max)";
            return self.fail(ctx, Status::ServiceUnavailable, why);
        };
        let started = {
            let fields = self.job.request.fields.pairs();
            let headers: Vec<(&str, &str)> = fields.iter().map(|(n, v)| (&**n, &**v)).collect();
            let origin = ScriptOrigin::of(&self.job, ctx);
            let params = params(&self.job, ctx, &origin, &headers);
            cgi::spawn(&params, ctx.cfg.cgi_timeout, permit)
        };
        match started {
            Ok(mut script) => {
                crate::metrics::count(crate::metrics::Event::CgiRun);
                let (stdin, stdout) = (script.take_stdin(), script.take_stdout());
                self.script = Some(script);
                match stdout {
                    Some(stdout) => self.steps.push_back(Step::Run { stdin, stdout }),
                    None => self.fail(ctx, Status::InternalServerError, "no stdout"),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                self.fail(ctx, Status::Forbidden, "permission denied");
            }
            Err(e) => {
                let why = format!("cannot start: {}", crate::sys::describe(&e));
                // Out of descriptors (its pipes): 503, try again later, as
                // for a file the process cannot open for the same reason.
                let status = match e.raw_os_error() {
                    Some(libc::EMFILE | libc::ENFILE) => Status::ServiceUnavailable,
                    _ => Status::InternalServerError,
                };
                self.fail(ctx, status, &why);
            }
        }
    }

    /// The script's header block: its response head goes out.
    fn head(&mut self, head: &cgi::CgiHead, ctx: &Context) {
        let (response, wanted) = respond::cgi_head(&self.job, head);
        let relay = Relay {
            wanted,
            limit: match response.head.framing {
                Framing::Length(n) => Some(n),
                Framing::Empty => Some(0),
                Framing::Open => None,
            },
            close: response.close,
            relayed: 0,
        };
        let mut sent = self.sent(ctx, None, response);
        sent.open_body();
        self.steps.push_back(Step::Head {
            sent: Box::new(sent),
            body: wanted,
        });
        self.phase = Phase::Body(relay);
    }

    /// `Location: /path`: that path is served instead, as a GET with the
    /// original headers (RFC 3875 §6.2.2); a script there runs in turn.
    fn local_redirect(&mut self, target: String, ctx: &Context) {
        self.redirects += 1;
        if self.redirects > MAX_LOCAL_REDIRECTS {
            return self.fail(ctx, Status::InternalServerError, "too many local redirects");
        }
        let request = redirected(&self.job.request, target);
        match respond::respond(ctx.site, &request, self.job.force_close) {
            Answer::Send(response) => {
                let close = response.close;
                let sent = self.sent(ctx, Some(&request), response);
                self.steps.push_back(Step::Send(Box::new(sent)));
                self.end(true, !close);
            }
            Answer::Cgi(next) => {
                self.job = next;
                self.head_buf.clear();
                self.spawn(ctx);
            }
        }
    }

    /// The script closed its output.
    fn finish(&mut self) {
        let Phase::Body(relay) = &self.phase else {
            return;
        };
        // Short of the promised length: the client must see the cut.
        let complete = !relay
            .limit
            .is_some_and(|n| relay.wanted && relay.relayed < n);
        // A body the script did not read is still on the wire.
        let keep_alive = !relay.close && complete && self.body_left == 0;
        self.steps.push_back(Step::Done {
            complete,
            keep_alive,
        });
        self.phase = Phase::Over;
        self.script = None;
    }

    /// The script failed. Before its head went out, the client gets
    /// `status` (the site's error page for it, if any); after, the
    /// response is cut.
    fn fail(&mut self, ctx: &Context, status: Status, why: &str) {
        let name = &self.job.script.script_name;
        log::diagnostic(&format!("staticd: cgi {name}: {why}\n"));
        if matches!(self.phase, Phase::Head) {
            let response = respond::cgi_failure(&self.job, ctx.site, status);
            let sent = self.sent(ctx, None, response);
            self.steps.push_back(Step::Send(Box::new(sent)));
            return self.end(true, false);
        }
        self.end(false, false);
    }

    /// Ends the exchange; `complete`: what was sent is whole.
    fn end(&mut self, complete: bool, keep_alive: bool) {
        if !matches!(self.phase, Phase::Over) {
            // A body nobody read is still on the wire.
            let keep_alive = keep_alive && self.body_left == 0;
            self.steps.push_back(Step::Done {
                complete,
                keep_alive,
            });
        }
        self.phase = Phase::Over;
        self.script = None;
    }

    /// A response of the exchange's, through the path every response
    /// takes. `request`: the one it answers, when not the job's own.
    fn sent(&self, ctx: &Context, request: Option<&Request>, response: Response) -> Sent {
        let request = request.unwrap_or(&self.job.request);
        pipeline::sent(ctx.cfg, ctx.origin, Some(request), response)
    }
}

impl Relay {
    /// The next piece of the script's body to send, cut to its promised
    /// length.
    fn body(&mut self, bytes: &[u8]) -> Option<Step> {
        if !self.wanted {
            return None;
        }
        let room = match self.limit {
            Some(n) => (n - self.relayed).min(bytes.len() as u64) as usize,
            None => bytes.len(),
        };
        if room < bytes.len() {
            // More than the script promised: the extra is not sent, and
            // the connection cannot be trusted for another request.
            self.close = true;
        }
        let bytes = &bytes[..room];
        if bytes.is_empty() {
            return None;
        }
        self.relayed += room as u64;
        Some(Step::Body(bytes.to_vec()))
    }
}

/// The request a local redirect stands for: a GET of the new path, with the
/// original headers (RFC 3875 §6.2.2). Its body was for the script.
fn redirected<'a>(original: &Request<'a>, target: String) -> Request<'a> {
    Request {
        method: Method::Get,
        target: target.into(),
        framing: BodyFraming::None,
        ..original.clone()
    }
}

/// Writes the access-log line of a request that got no response.
fn unanswered(ctx: &Context, job: &CgiJob, status: u16) {
    let request = &job.request;
    let trusted = &ctx.cfg.trusted_proxies;
    let entry = log::Entry {
        client: crate::proxy::forwarded::client_name(trusted, &ctx.origin.client, Some(request)),
        request: Some(request),
        status,
        user: job.user.as_deref(),
        body: 0..0,
        tls: ctx.origin.tls,
    };
    log::format(ctx.cfg.log_format, &entry, SystemTime::now).emit(0);
}

/// Who the script is told the client is, and where it connected to.
struct ScriptOrigin<'a> {
    remote_addr: &'a str,
    remote_port: Option<u16>,
    server_name: String,
    server_port: u16,
}

impl<'a> ScriptOrigin<'a> {
    fn of(job: &'a CgiJob, ctx: &Context<'a>) -> ScriptOrigin<'a> {
        let (peer, local) = ctx.origin.sockets.unwrap_or_default();
        let (server_name, server_port) = server_identity(&job.request, local);
        // A trusted proxy's forwarding headers name the client instead.
        let trusted = &ctx.cfg.trusted_proxies;
        let client = &ctx.origin.client;
        let origin = crate::proxy::forwarded::request_origin(trusted, client, &job.request);
        ScriptOrigin {
            remote_addr: origin.map_or(remote_addr(client), |o| o.address),
            remote_port: origin.map_or(peer.map(|a| a.port()), |o| o.port),
            server_name,
            server_port,
        }
    }
}

/// The script's meta-variables for `job`.
fn params<'a>(
    job: &'a CgiJob,
    ctx: &Context,
    origin: &'a ScriptOrigin<'a>,
    headers: &'a [(&'a str, &'a str)],
) -> CgiParams<'a> {
    let req = &job.request;
    let content_length = match req.framing {
        BodyFraming::Length(n) => Some(n),
        _ => None,
    };
    let protocol = req.protocol_name();
    CgiParams {
        script_path: &job.script.path,
        script_name: &job.script.script_name,
        path_info: &job.script.path_info,
        query: req.target.split_once('?').map_or("", |(_, q)| q),
        method: req.method.as_str(),
        protocol,
        headers,
        content_length,
        server_name: &origin.server_name,
        server_port: origin.server_port,
        remote_addr: origin.remote_addr,
        remote_port: origin.remote_port,
        https: ctx.origin.https(),
    }
}

/// SERVER_NAME and SERVER_PORT: from the Host header, else the socket.
fn server_identity(req: &Request, local: Option<SocketAddr>) -> (String, u16) {
    let local_port = local.map_or(80, |a| a.port());
    let Some(host) = req.host.as_deref().filter(|h| !h.is_empty()) else {
        // The address the client connected to (RFC 3875 §4.1.14).
        let name = local.map_or_else(|| "localhost".to_string(), |a| a.ip().to_string());
        return (name, local_port);
    };
    let (name, port) = crate::site::vhost::split_port(host);
    let port = port.and_then(|p| p.parse().ok()).unwrap_or(local_port);
    (name.to_string(), port)
}

/// REMOTE_ADDR: the client's address, or for a Unix-socket connection
/// (a proxy on this host) the loopback address. RFC 3875 §4.1.8 makes it an
/// IPv4 or IPv6 address and scripts parse it as one (allow lists, rate
/// limits, logs), so `unix:`, the access log's word, would break them; and
/// 127.0.0.1 is what they see when the same proxy connects over TCP.
/// Told by the client's name rather than a descriptor, which an HTTP/2
/// stream does not have.
fn remote_addr(client: &str) -> &str {
    if client == UNIX_CLIENT {
        "127.0.0.1"
    } else {
        client
    }
}

/// A site with scripts, for the unit tests of what drives an exchange
/// (these, and [`serve::cgi`](crate::serve::cgi)'s).
#[cfg(test)]
pub(crate) mod testing {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::time::Duration;

    use super::Context;
    use crate::client_name::ClientName;
    use crate::config::{Config, Features, LogFormat};
    use crate::http::parse::{self, Parsed};
    use crate::origin::{Kind, Origin, Protocol};
    use crate::respond::{self, Answer, CgiJob};
    use crate::site::Site;

    /// Not the default: a deadline taken from elsewhere shows.
    pub(crate) const CGI_TIMEOUT: Duration = Duration::from_secs(7);

    /// Prints nothing: its output, where a test needs one, is the test's.
    pub(crate) const QUIET: &str = "/cgi-bin/quiet.cgi";

    /// A site of `a.txt` and its scripts, and how its requests came:
    /// quiet.cgi (no output), hello.cgi (a head and `hello`), echo.cgi (a
    /// head, then its input), flood.cgi (a head, then output without end).
    pub(crate) struct Fixture {
        _dir: tempfile::TempDir,
        pub(crate) site: Site,
        pub(crate) cfg: Config,
        pub(crate) origin: Origin,
    }

    impl Fixture {
        pub(crate) fn new(kind: Kind, protocol: Protocol) -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("a.txt"), "0123456789").unwrap();
            let bin = dir.path().join("cgi-bin");
            std::fs::create_dir(&bin).unwrap();
            script(&bin.join("quiet.cgi"), "exit 0");
            script(
                &bin.join("hello.cgi"),
                r"printf 'Content-Type: text/plain\r\n\r\nhello'",
            );
            script(
                &bin.join("echo.cgi"),
                r"printf 'Content-Type: text/plain\r\n\r\n'; cat",
            );
            // Floods only when run as a script (not by `script`'s trial run).
            script(
                &bin.join("flood.cgi"),
                r#"printf 'Content-Type: text/plain\r\n\r\n'; [ -n "$GATEWAY_INTERFACE" ] && exec yes"#,
            );
            let features = Features {
                cgi: true,
                ..Features::default()
            };
            let site = Site::open(dir.path(), &["index.html"], features).unwrap();
            let cfg = Config {
                log_format: LogFormat::Off,
                cgi_timeout: CGI_TIMEOUT,
                ..Config::default()
            };
            let origin = Origin::new(kind, ClientName::new("127.0.0.1"), protocol);
            Fixture {
                _dir: dir,
                site,
                cfg,
                origin,
            }
        }

        pub(crate) fn ctx(&self) -> Context<'_> {
            Context {
                cfg: &self.cfg,
                site: &self.site,
                origin: &self.origin,
            }
        }

        /// What `respond` makes of `raw`: a script to run.
        pub(crate) fn job(&self, raw: &str) -> Box<CgiJob> {
            let Parsed::Complete { request, .. } = parse::parse(raw.as_bytes()) else {
                panic!("{raw:?} parses");
            };
            match respond::respond(&self.site, &request, false) {
                Answer::Cgi(job) => job,
                Answer::Send(r) => panic!("{raw:?}: {} for a script", r.code()),
            }
        }
    }

    /// An executable shell script at `path`, ready to run: another test
    /// thread that forked while it was open for writing holds it busy
    /// (ETXTBSY) until that child execs, so it is run once first.
    fn script(path: &Path, body: &str) {
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let busy = rustix::io::Errno::TXTBSY.raw_os_error();
        for _ in 0..50 {
            match std::process::Command::new(path).output() {
                Err(e) if e.raw_os_error() == Some(busy) => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("{}: {e}", path.display()),
                Ok(_) => return,
            }
        }
        panic!("{} stays busy", path.display());
    }
}

/// The exchange driven as `serve::cgi` drives it, with no socket
/// and no waiting: a request answered by `respond` on a site with scripts,
/// the script's output handed to `output` by the test (read from a real
/// script's stdout once, written by hand elsewhere: the script started only
/// has to exist), and the deadline passed when the test says so.
#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::testing::{Fixture, CGI_TIMEOUT, QUIET};
    use super::*;
    use crate::metrics::{self, RequestKind};
    use crate::origin::{Kind, Protocol};

    const GET_QUIET: &str = "GET /cgi-bin/quiet.cgi HTTP/1.1\r\nHost: x\r\n\r\n";

    /// The exchange driven by hand over the shared fixture.
    trait Drive {
        fn http1() -> Self;
        /// The exchange for `raw`, its script started: the pipes of its
        /// first step.
        fn start(&self, raw: &str) -> (Exchange, Option<ChildStdin>, ChildStdout);
        fn output(&self, exchange: &mut Exchange, bytes: &str, eof: bool) -> Vec<Step>;
    }

    impl Drive for Fixture {
        fn http1() -> Fixture {
            Fixture::new(Kind::Http, Protocol::Http1)
        }

        fn start(&self, raw: &str) -> (Exchange, Option<ChildStdin>, ChildStdout) {
            let mut exchange = Exchange::start(self.job(raw), &self.ctx());
            match exchange.step() {
                Step::Run { stdin, stdout } => (exchange, stdin, stdout),
                other => panic!("{} for Run", what(&other)),
            }
        }

        fn output(&self, exchange: &mut Exchange, bytes: &str, eof: bool) -> Vec<Step> {
            exchange.output(bytes.as_bytes(), eof, &self.ctx());
            steps(exchange)
        }
    }

    /// The steps handed out until the exchange waits.
    fn steps(exchange: &mut Exchange) -> Vec<Step> {
        std::iter::from_fn(|| match exchange.step() {
            Step::Wait => None,
            step => Some(step),
        })
        .collect()
    }

    fn what(step: &Step) -> &'static str {
        match step {
            Step::Wait => "Wait",
            Step::Run { .. } => "Run",
            Step::Send(_) => "Send",
            Step::Head { .. } => "Head",
            Step::Body(_) => "Body",
            Step::Done { .. } => "Done",
        }
    }

    fn kinds(steps: &[Step]) -> Vec<&'static str> {
        steps.iter().map(what).collect()
    }

    /// A Send's or Head's response.
    fn sent(step: &Step) -> &Sent {
        match step {
            Step::Send(sent) | Step::Head { sent, .. } => sent,
            other => panic!("{} for a response", what(other)),
        }
    }

    fn head_text(step: &Step) -> String {
        String::from_utf8_lossy(&sent(step).wire).into_owned()
    }

    /// Whether a Head says a body follows.
    fn body_follows(step: &Step) -> bool {
        match step {
            Step::Head { body, .. } => *body,
            other => panic!("{} for Head", what(other)),
        }
    }

    fn body(step: &Step) -> &[u8] {
        match step {
            Step::Body(bytes) => bytes,
            other => panic!("{} for Body", what(other)),
        }
    }

    /// A Done's completeness and keep-alive.
    fn done(step: &Step) -> (bool, bool) {
        match step {
            Step::Done {
                complete,
                keep_alive,
            } => (*complete, *keep_alive),
            other => panic!("{} for Done", what(other)),
        }
    }

    #[test]
    fn a_script_head_then_its_body_as_written_over_http1() {
        let f = Fixture::http1();
        let raw = "GET /cgi-bin/hello.cgi HTTP/1.1\r\nHost: x\r\n\r\n";
        let (mut exchange, stdin, mut stdout) = f.start(raw);
        assert!(stdin.is_none(), "a request without a body");
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out, "Content-Type: text/plain\r\n\r\nhello");
        // Half a header block decides nothing.
        assert!(f.output(&mut exchange, &out[..10], false).is_empty());
        let s = f.output(&mut exchange, &out[10..], false);
        assert_eq!(kinds(&s), ["Head", "Body"]);
        assert_eq!(sent(&s[0]).response.code(), 200);
        let head = head_text(&s[0]);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
        assert!(head.contains("Content-Type: text/plain\r\n"), "{head}");
        assert!(body_follows(&s[0]));
        // The chunks are the HTTP/1.1 client's to frame (`serve::cgi::http1`).
        assert_eq!(body(&s[1]), b"hello");
        let s = f.output(&mut exchange, " world", false);
        assert_eq!(body(&s[0]), b" world");
        let s = f.output(&mut exchange, "", true);
        assert_eq!(kinds(&s), ["Done"]);
        assert_eq!(done(&s[0]), (true, true));
        assert!(exchange.deadline().is_none(), "no script runs any more");
    }

    #[test]
    fn a_body_without_length_goes_plain_over_fields() {
        let f = Fixture::new(Kind::Http, Protocol::Fields);
        let (mut exchange, ..) = f.start(GET_QUIET);
        let s = f.output(&mut exchange, "Status: 201\r\n\r\nhello", false);
        assert_eq!(kinds(&s), ["Head", "Body"]);
        assert_eq!(sent(&s[0]).response.code(), 201);
        assert!(sent(&s[0]).wire.is_empty(), "the stream encodes the head");
        assert_eq!(body(&s[1]), b"hello");
        let s = f.output(&mut exchange, "", true);
        assert_eq!(done(&s[0]), (true, true));
    }

    #[test]
    fn a_body_past_its_content_length_is_cut_and_the_connection_ends() {
        let f = Fixture::http1();
        let (mut exchange, ..) = f.start(GET_QUIET);
        let s = f.output(&mut exchange, "Content-Length: 5\r\n\r\nhello world", false);
        assert_eq!(kinds(&s), ["Head", "Body"]);
        let head = head_text(&s[0]);
        assert!(head.contains("Content-Length: 5\r\n"), "{head}");
        assert!(!head.contains("chunked"), "{head}");
        assert_eq!(body(&s[1]), b"hello");
        assert!(f.output(&mut exchange, "more", false).is_empty());
        let s = f.output(&mut exchange, "", true);
        assert_eq!(done(&s[0]), (true, false));
    }

    #[test]
    fn a_body_short_of_its_content_length_is_incomplete() {
        let f = Fixture::http1();
        let (mut exchange, ..) = f.start(GET_QUIET);
        let s = f.output(&mut exchange, "Content-Length: 10\r\n\r\nhello", true);
        assert_eq!(kinds(&s), ["Head", "Body", "Done"]);
        assert_eq!(body(&s[1]), b"hello");
        assert_eq!(done(&s[2]), (false, false));
    }

    #[test]
    fn a_head_request_gets_the_head_only() {
        let f = Fixture::http1();
        let raw = "HEAD /cgi-bin/quiet.cgi HTTP/1.1\r\nHost: x\r\n\r\n";
        let (mut exchange, ..) = f.start(raw);
        let s = f.output(&mut exchange, "Content-Type: text/plain\r\n\r\nhello", true);
        // No body, so no last chunk either.
        assert_eq!(kinds(&s), ["Head", "Done"]);
        assert!(!body_follows(&s[0]), "no body follows a HEAD's head");
        assert_eq!(done(&s[1]), (true, true));
    }

    #[test]
    fn a_malformed_header_block_is_a_502() {
        let f = Fixture::http1();
        let (mut exchange, ..) = f.start(GET_QUIET);
        let s = f.output(&mut exchange, "no colon here\r\n\r\nbody", false);
        assert_eq!(kinds(&s), ["Send", "Done"]);
        assert_eq!(sent(&s[0]).response.code(), 502);
        assert!(sent(&s[0]).response.close);
        assert_eq!(done(&s[1]), (true, false));
        assert!(exchange.deadline().is_none());
        // Whatever comes after is not sent.
        assert!(f
            .output(&mut exchange, "Status: 200\r\n\r\n", true)
            .is_empty());
    }

    #[test]
    fn no_output_is_a_502() {
        let f = Fixture::http1();
        let (mut exchange, ..) = f.start(GET_QUIET);
        let s = f.output(&mut exchange, "", true);
        assert_eq!(kinds(&s), ["Send", "Done"]);
        assert_eq!(sent(&s[0]).response.code(), 502);
        assert_eq!(done(&s[1]), (true, false));
    }

    #[test]
    fn the_deadline_is_the_cgi_timeout_and_before_the_head_it_is_a_504() {
        let f = Fixture::http1();
        let before = Instant::now();
        let (mut exchange, ..) = f.start(GET_QUIET);
        let after = Instant::now();
        let deadline = exchange.deadline().expect("a script runs");
        assert!(deadline >= before + CGI_TIMEOUT && deadline <= after + CGI_TIMEOUT);
        // Part of a head changes nothing: the head did not go out.
        assert!(f.output(&mut exchange, "Status: 200\r\n", false).is_empty());
        exchange.timed_out(&f.ctx());
        let s = steps(&mut exchange);
        assert_eq!(kinds(&s), ["Send", "Done"]);
        assert_eq!(sent(&s[0]).response.code(), 504);
        assert_eq!(done(&s[1]), (true, false));
        assert!(exchange.deadline().is_none());
        assert!(f.output(&mut exchange, "\r\nlate", true).is_empty());
    }

    #[test]
    fn after_the_head_the_deadline_cuts_the_response() {
        let f = Fixture::http1();
        let (mut exchange, ..) = f.start(GET_QUIET);
        let s = f.output(&mut exchange, "\r\nhello", false);
        assert_eq!(kinds(&s), ["Head", "Body"]);
        exchange.timed_out(&f.ctx());
        let s = steps(&mut exchange);
        // No 504 inside a body, and no last chunk: the client sees the cut.
        assert_eq!(kinds(&s), ["Done"]);
        assert_eq!(done(&s[0]), (false, false));
        assert!(exchange.deadline().is_none());
    }

    #[test]
    fn a_client_gone_before_the_head_is_counted_as_499() {
        // HEAD over HTTPS and HTTP/1.0: a cell no other test counts in.
        let f = Fixture::new(Kind::Https, Protocol::Http1);
        let raw = "HEAD /cgi-bin/quiet.cgi HTTP/1.0\r\n\r\n";
        let job = f.job(raw);
        let kind = RequestKind::of(Some(&job.request), 499, true);
        let counted = || metrics::totals().requests(kind);
        let before = counted();
        let mut exchange = Exchange::start(job, &f.ctx());
        assert_eq!(kinds(&steps(&mut exchange)), ["Run"]);
        exchange.client_gone(&f.ctx());
        let s = steps(&mut exchange);
        assert_eq!(kinds(&s), ["Done"]);
        assert_eq!(done(&s[0]), (false, false));
        assert!(counted() > before, "the 499 is counted");
        assert!(exchange.deadline().is_none());
    }

    #[test]
    fn a_client_gone_after_the_head_ends_the_exchange_cut() {
        let f = Fixture::http1();
        let (mut exchange, ..) = f.start(GET_QUIET);
        f.output(&mut exchange, "\r\nhello", false);
        exchange.client_gone(&f.ctx());
        let s = steps(&mut exchange);
        assert_eq!(kinds(&s), ["Done"]);
        assert_eq!(done(&s[0]), (false, false));
    }

    #[test]
    fn a_local_redirect_serves_the_file_there() {
        let f = Fixture::http1();
        let (mut exchange, ..) = f.start(GET_QUIET);
        let s = f.output(&mut exchange, "Location: /a.txt\r\n\r\nignored", false);
        assert_eq!(kinds(&s), ["Send", "Done"]);
        let response = &sent(&s[0]).response;
        assert_eq!((response.code(), response.body_len), (200, 10));
        assert_eq!(done(&s[1]), (true, true));
        assert!(exchange.deadline().is_none(), "the script is done with");
    }

    #[test]
    fn a_local_redirect_to_a_script_runs_it_and_six_are_a_500() {
        let f = Fixture::http1();
        let (mut exchange, ..) = f.start(GET_QUIET);
        let again = format!("Location: {QUIET}\r\n\r\n");
        for _ in 0..MAX_LOCAL_REDIRECTS {
            // Each script runs in turn; the exchange is not over.
            assert_eq!(kinds(&f.output(&mut exchange, &again, false)), ["Run"]);
            assert!(exchange.deadline().is_some());
        }
        let s = f.output(&mut exchange, &again, false);
        assert_eq!(kinds(&s), ["Send", "Done"]);
        assert_eq!(sent(&s[0]).response.code(), 500);
        assert_eq!(done(&s[1]), (true, false));
    }

    #[test]
    fn a_redirected_script_answers_like_the_first() {
        let f = Fixture::http1();
        let (mut exchange, ..) = f.start(GET_QUIET);
        let s = f.output(&mut exchange, &format!("Location: {QUIET}\r\n\r\n"), true);
        assert_eq!(kinds(&s), ["Run"]);
        let s = f.output(&mut exchange, "Content-Length: 2\r\n\r\nok", true);
        assert_eq!(kinds(&s), ["Head", "Body", "Done"]);
        assert_eq!(sent(&s[0]).response.code(), 200);
        assert_eq!(done(&s[2]), (true, true));
    }

    #[test]
    fn the_request_body_is_taken_up_to_its_length() {
        let f = Fixture::http1();
        let raw = "POST /cgi-bin/quiet.cgi HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";
        let (mut exchange, stdin, _stdout) = f.start(raw);
        assert!(stdin.is_some(), "the script takes the body");
        assert_eq!(exchange.body_left(), 10);
        assert_eq!(exchange.take_body(4), 4);
        assert_eq!(exchange.body_left(), 6);
        // What follows the body is the next request's.
        assert_eq!(exchange.take_body(100), 6);
        assert_eq!((exchange.body_left(), exchange.take_body(5)), (0, 0));
        let s = f.output(&mut exchange, "Content-Length: 2\r\n\r\nok", true);
        assert_eq!(done(&s[2]), (true, true));
    }

    #[test]
    fn a_body_the_script_left_unread_ends_the_connection() {
        let f = Fixture::http1();
        let raw = "POST /cgi-bin/quiet.cgi HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";
        let (mut exchange, ..) = f.start(raw);
        assert_eq!(exchange.take_body(3), 3);
        let s = f.output(&mut exchange, "Content-Length: 2\r\n\r\nok", true);
        assert_eq!(kinds(&s), ["Head", "Body", "Done"]);
        // Whole, but 7 bytes of the body are still on the wire.
        assert_eq!(done(&s[2]), (true, false));
        // A local redirect's answer, too.
        let (mut exchange, ..) = f.start(raw);
        let s = f.output(&mut exchange, "Location: /a.txt\r\n\r\n", true);
        assert_eq!(done(&s[1]), (true, false));
    }
}
