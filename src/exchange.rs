//! One CGI exchange as a state machine: what a script's request turns into,
//! decided without socket I/O, so that every transport (inetd mode and the
//! event loop through `serve::cgi_poll`, HTTP/2 streams through
//! `serve::h2::cgi`) drives the same decisions.
//!
//! The driver starts it, moves bytes (the request body to the script's
//! stdin, the script's stdout to `output`), says when the client went or the
//! deadline passed, and does each `Step` that `step` hands out. Statuses
//! (502, 503, 504, 500, 403), local redirects, framing and keep-alive are
//! decided here; every response, the script's or one of ours, is made by
//! `session::sent` like any other, so the metrics, the log line and the
//! connection's fields (Strict-Transport-Security over HTTPS) come out the
//! same. Starting the script (fork and exec) happens here too: it is the
//! same for every driver, and no socket is involved.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::Range;
use std::process::{ChildStdin, ChildStdout};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use crate::cgi::{self, CgiParams, HeaderBlock, Limiter, Location, Script};
use crate::config::Config;
use crate::http::head::Framing;
use crate::http::parse::{BodyFraming, Method, Request};
use crate::http::response::{self as h1, Http1};
use crate::http::status::Status;
use crate::log;
use crate::respond::{self, Answer, CgiJob, Response};
use crate::session::{self, Kind, Protocol, Sent};
use crate::site::Site;

/// Local redirects (`Location: /path`) followed for one request.
const MAX_LOCAL_REDIRECTS: usize = 5;

/// How the access log names a Unix-socket client (`serve::listen`'s word).
const UNIX_CLIENT: &str = "unix:";

/// The process-wide bound on running scripts (`--cgi-max`).
static LIMITER: OnceLock<Limiter> = OnceLock::new();

/// What an exchange is served with.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub cfg: &'a Config,
    pub site: &'a Site,
    /// The client's name for the log (an address, `unix:`, or `-`).
    pub client: &'a str,
    /// The client's and our socket addresses (REMOTE_PORT, SERVER_PORT).
    pub sockets: (Option<SocketAddr>, Option<SocketAddr>),
    /// Http or Https (HTTPS=on, and HSTS with `--hsts`).
    pub kind: Kind,
    /// How the driver sends a response: the encoding `Sent` is made for.
    pub protocol: Protocol,
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
    /// Send the script's response head; its body follows as `Body` steps.
    /// The driver keeps it while they go out and adds the script's body
    /// bytes written to `written`: its drop writes the log line.
    Head(Box<Sent>),
    /// Bytes of the script's body to send, framed for the protocol
    /// (chunks in HTTP/1.1 without a length); `payload` is where the
    /// script's own bytes are among them, for the log.
    Body { bytes: Vec<u8>, payload: Range<u64> },
    /// The exchange is over. `trailer`: bytes that end the body (the last
    /// chunk), to send first; `complete`: the body went out whole (else the
    /// client must see it cut: no last chunk, a reset stream);
    /// `keep_alive`: the connection may carry another request.
    Done {
        trailer: &'static [u8],
        complete: bool,
        keep_alive: bool,
    },
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
    chunked: bool,
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
            crate::metrics::request(Some(request), 499, ctx.kind == Kind::Https);
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
            let mut storage = [httparse::EMPTY_HEADER; crate::http::limits::MAX_HEADERS];
            let headers = request_headers(&self.job.raw_head, &mut storage);
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
        let conn = Http1 {
            minor_version: response.minor_version,
            close: response.close,
            hsts: None,
            alt_svc: None,
        };
        let relay = Relay {
            wanted,
            limit: match response.head.framing {
                Framing::Length(n) => Some(n),
                Framing::Empty => Some(0),
                Framing::Open => None,
            },
            chunked: ctx.protocol == Protocol::Http1 && conn.chunked(&response.head),
            close: response.close,
            relayed: 0,
        };
        let mut sent = self.sent(ctx, None, response);
        sent.open_body();
        self.steps.push_back(Step::Head(Box::new(sent)));
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
            Answer::Cgi(mut next) => {
                next.raw_head = std::mem::take(&mut self.job.raw_head);
                next.https = self.job.https;
                next.tls = self.job.tls;
                next.sockets = self.job.sockets;
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
        let mut trailer: &'static [u8] = b"";
        let mut complete = true;
        match relay.limit {
            None if relay.chunked && relay.wanted => trailer = h1::LAST_CHUNK,
            // Short of the promised length: the client must see the cut.
            Some(n) if relay.wanted && relay.relayed < n => complete = false,
            _ => {}
        }
        // A body the script did not read is still on the wire.
        let keep_alive = !relay.close && complete && self.body_left == 0;
        self.steps.push_back(Step::Done {
            trailer,
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
                trailer: b"",
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
        session::sent(
            ctx.cfg,
            ctx.kind,
            self.job.tls,
            ctx.client,
            Some(request),
            response,
            ctx.protocol,
        )
    }
}

impl Relay {
    /// The next piece of the script's body to send, cut to its promised
    /// length and framed.
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
        if !self.chunked {
            let payload = 0..bytes.len() as u64;
            return Some(Step::Body {
                bytes: bytes.to_vec(),
                payload,
            });
        }
        let mut framed = Vec::with_capacity(bytes.len() + 12);
        h1::push_chunk(&mut framed, bytes);
        // The chunk's size line comes first, its CRLF last.
        let start = (framed.len() - bytes.len() - 2) as u64;
        Some(Step::Body {
            bytes: framed,
            payload: start..start + bytes.len() as u64,
        })
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
        client: crate::proxy::forwarded::client_name(trusted, ctx.client, Some(request)),
        request: Some(request),
        status,
        user: job.user.as_deref(),
        body: 0..0,
        tls: job.tls,
    };
    log::format(ctx.cfg.log_format, &entry, SystemTime::now()).emit(0);
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
        let (peer, local) = ctx.sockets;
        let (server_name, server_port) = server_identity(&job.request, local);
        // A trusted proxy's forwarding headers name the client instead.
        let trusted = &ctx.cfg.trusted_proxies;
        let origin = crate::proxy::forwarded::request_origin(trusted, ctx.client, &job.request);
        ScriptOrigin {
            remote_addr: origin.map_or(remote_addr(ctx.client), |o| o.address),
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
        https: ctx.kind == Kind::Https,
    }
}

/// Every header field of the request, for the HTTP_* variables.
fn request_headers<'h>(
    raw: &'h [u8],
    storage: &'h mut [httparse::Header<'h>],
) -> Vec<(&'h str, &'h str)> {
    let mut req = httparse::Request::new(storage);
    if req.parse(raw).is_err() {
        return Vec::new();
    }
    req.headers
        .iter()
        .filter_map(|h| Some((h.name, std::str::from_utf8(h.value).ok()?)))
        .collect()
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
