//! Running one CGI script for one request: the request body goes to the
//! script's stdin, its output comes back framed for the client.
//!
//! This is plain blocking code around poll(2), shared by both transports:
//! inetd mode calls it directly, the event loop on tokio's blocking pool.
//! It decides nothing about HTTP itself: `cgi` parses the script's header
//! block and `respond` turns it into a response head.

use std::cell::RefCell;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use rustix::event::{PollFd, PollFlags};

use super::writer::{send_blocking, send_bytes_blocking, Out, ResponseWriter};
use super::{Got, Wire};
use crate::cgi::{self, CgiParams, HeaderBlock, Limiter, Location, Script};
use crate::config::Config;
use crate::http::parse::{BodyFraming, Method, Request};
use crate::http::response::Status;
use crate::log;
use crate::pace::Pace;
use crate::respond::{self, Answer, CgiFraming, CgiJob, Response};
use crate::site::Site;
use crate::sys;

/// How much script output or request body is moved per call.
const CHUNK: usize = 16 * 1024;
/// Local redirects (`Location: /path`) followed for one request.
const MAX_LOCAL_REDIRECTS: usize = 5;

/// The process-wide bound on running scripts (`--cgi-max`).
static LIMITER: OnceLock<Limiter> = OnceLock::new();

/// The client side of the connection.
#[derive(Clone, Copy)]
pub struct ClientIo<'a> {
    pub input: BorrowedFd<'a>,
    pub output: BorrowedFd<'a>,
    /// `output` is a socket (send(2) with MSG_MORE works).
    pub socket: bool,
    /// Cleartext or TLS; borrowed for each read or write.
    pub wire: &'a RefCell<Wire>,
}

impl ClientIo<'_> {
    /// Writes `bytes` as they come (script output), waiting as needed.
    fn send_bytes(&self, bytes: Vec<u8>, cfg: &Config) -> (u64, std::io::Result<()>) {
        let mut wire = self.wire.borrow_mut();
        send_bytes_blocking(
            &mut wire.out(self.output, self.socket),
            bytes,
            cfg.send_timeout,
        )
    }

    /// Writes a decided response, waiting as needed; returns the bytes of it
    /// written and whether all were.
    fn send_response(&self, response: &Response, cfg: &Config) -> (u64, bool) {
        let mut wire = self.wire.borrow_mut();
        let mut out: Out = wire.out(self.output, self.socket);
        let mut writer = ResponseWriter::new(response).copying(cfg.no_sendfile);
        let mut pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
        let ok = send_blocking(&mut out, &mut writer, &mut pace).is_ok();
        (writer.written(), ok)
    }
}

/// Runs `job` and writes its access-log line; returns whether the
/// connection can carry another request. `input` holds what the client sent
/// after the request head; the body is taken from it (and read from the
/// client as needed), and whatever follows the body stays in it for the
/// next request. The line is written here, not by the transport, so that
/// it is written even if the transport's task is gone by then (the stop's
/// grace ran out while the script ran).
pub fn run(
    job: Box<CgiJob>,
    io: ClientIo,
    input: &mut Vec<u8>,
    cfg: &Config,
    site: &Site,
    client: &str,
) -> bool {
    let mut job = job;
    for _ in 0..MAX_LOCAL_REDIRECTS {
        match exchange(&job, io, input, cfg, site, client) {
            Ended::Finished {
                status,
                body_sent,
                keep_alive,
            } => {
                crate::metrics::request(Some(&job.request), status, job.https);
                crate::metrics::body_bytes(body_sent);
                let user = job.user.as_deref();
                return done(
                    cfg,
                    client,
                    &job.request,
                    user,
                    status,
                    body_sent,
                    keep_alive,
                );
            }
            Ended::LocalRedirect(target) => {
                let request = redirected(&job.request, target);
                match respond::respond(site, &request, job.force_close) {
                    Answer::Send(response) => {
                        return send_decided(cfg, client, io, &request, response, job.https)
                    }
                    Answer::Cgi(mut next) => {
                        next.raw_head = std::mem::take(&mut job.raw_head);
                        next.https = job.https;
                        next.sockets = job.sockets;
                        job = next;
                    }
                }
            }
        }
    }
    let response = respond::cgi_failure(&job, site, Status::InternalServerError);
    send_decided(cfg, client, io, &job.request, response, job.https)
}

enum Ended {
    Finished {
        status: u16,
        /// Body bytes that reached the client.
        body_sent: u64,
        keep_alive: bool,
    },
    /// The script asked for another local path to be served instead.
    LocalRedirect(String),
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

fn exchange(
    job: &CgiJob,
    io: ClientIo,
    input: &mut Vec<u8>,
    cfg: &Config,
    site: &Site,
    client: &str,
) -> Ended {
    let limiter = LIMITER.get_or_init(|| Limiter::new(cfg.cgi_max));
    let Some(permit) = limiter.try_acquire() else {
        return fail(
            job,
            io,
            cfg,
            site,
            Status::ServiceUnavailable,
            "too many scripts running (--cgi-max)",
        );
    };
    let req = &job.request;
    let mut header_storage = [httparse::EMPTY_HEADER; crate::http::limits::MAX_HEADERS];
    let headers = request_headers(&job.raw_head, &mut header_storage);
    let (peer, local) = job
        .sockets
        .unwrap_or_else(|| (sys::peer_addr(io.input), sys::local_addr(io.input)));
    let (server_name, server_port) = server_identity(req, local);
    // A trusted proxy's forwarding headers name the client instead.
    let origin = crate::proxy::forwarded::request_origin(&cfg.trusted_proxies, client, req);
    let content_length = match req.framing {
        BodyFraming::Length(n) => Some(n),
        _ => None,
    };
    let (query, _) = split_query(&req.target);
    let protocol = match (req.http2, req.minor_version) {
        (true, _) => "HTTP/2.0",
        (false, 0) => "HTTP/1.0",
        (false, _) => "HTTP/1.1",
    };
    let params = CgiParams {
        script_path: &job.script.path,
        script_name: &job.script.script_name,
        path_info: &job.script.path_info,
        query,
        method: req.method.as_str(),
        protocol,
        headers: &headers,
        content_length,
        server_name: &server_name,
        server_port,
        remote_addr: origin.map_or(remote_addr(client), |o| o.address),
        remote_port: origin.map_or(peer.map(|a| a.port()), |o| o.port),
        https: job.https,
    };
    let script = match cgi::spawn(&params, cfg.cgi_timeout, permit) {
        Ok(s) => {
            crate::metrics::count(crate::metrics::Event::CgiRun);
            s
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return fail(job, io, cfg, site, Status::Forbidden, "permission denied");
        }
        Err(e) => {
            let why = format!("cannot start: {}", crate::sys::describe(&e));
            return fail(job, io, cfg, site, Status::InternalServerError, &why);
        }
    };
    let body_len = content_length.unwrap_or(0);
    Pump::new(job, io, cfg, site, script, body_len, input).run()
}

/// Moves bytes between the client, the script's stdin and its stdout.
struct Pump<'a> {
    job: &'a CgiJob,
    io: ClientIo<'a>,
    cfg: &'a Config,
    /// For the site's own error pages.
    site: &'a Site,
    script: Script,
    stdin: Option<std::process::ChildStdin>,
    stdout: Option<std::process::ChildStdout>,
    /// Request body bytes still to come from the client.
    body_left: u64,
    /// Request body bytes read but not yet taken by the script.
    pending: Vec<u8>,
    /// The session's input: what follows the body (the next request).
    input: &'a mut Vec<u8>,
    /// Script output before the end of its header block.
    head_buf: Vec<u8>,
    /// Set once the response head went out.
    sending: Option<Sending>,
}

struct Sending {
    status: u16,
    framing: CgiFraming,
    close: bool,
    /// Body bytes of the script's that reached the client (the chunked
    /// framing around them is not counted).
    sent: u64,
}

impl<'a> Pump<'a> {
    fn new(
        job: &'a CgiJob,
        io: ClientIo<'a>,
        cfg: &'a Config,
        site: &'a Site,
        mut script: Script,
        body_left: u64,
        input: &'a mut Vec<u8>,
    ) -> Pump<'a> {
        let stdin = script.take_stdin();
        let stdout = script.take_stdout();
        for fd in [
            stdin.as_ref().map(|s| s.as_fd()),
            stdout.as_ref().map(|s| s.as_fd()),
        ]
        .into_iter()
        .flatten()
        {
            // A full pipe must not block the whole exchange.
            let _ = rustix::io::ioctl_fionbio(fd, true);
        }
        Pump {
            job,
            io,
            cfg,
            site,
            script,
            stdin,
            stdout,
            body_left,
            pending: Vec::new(),
            input,
            head_buf: Vec::new(),
            sending: None,
        }
    }

    fn run(mut self) -> Ended {
        let take = (self.body_left as usize).min(self.input.len());
        self.pending.extend(self.input.drain(..take));
        self.body_left -= take as u64;
        if self.body_left == 0 && self.pending.is_empty() {
            self.stdin = None;
        }
        while self.stdout.is_some() {
            let now = Instant::now();
            if now >= self.script.deadline() {
                self.script.kill_group();
                crate::metrics::count(crate::metrics::Event::CgiTimeout);
                return self.abort(Status::GatewayTimeout, "ran past --cgi-timeout; killed");
            }
            match self.poll_once(self.script.deadline() - now) {
                Ok(Some(ended)) => return ended,
                Ok(None) => {}
                Err(Abort::Client) => return self.cut_short(),
                Err(Abort::Script(why)) => return self.abort(Status::BadGateway, why),
            }
        }
        self.finish()
    }

    /// One poll(2) over whichever of the three descriptors has work.
    fn poll_once(&mut self, timeout: std::time::Duration) -> Result<Option<Ended>, Abort> {
        let want_stdin = self.stdin.is_some() && !self.pending.is_empty();
        let want_client = self.stdin.is_some() && self.pending.is_empty() && self.body_left > 0;
        let mut fds = Vec::with_capacity(3);
        if let Some(out) = &self.stdout {
            fds.push(PollFd::new(out, PollFlags::IN));
        }
        if let (true, Some(stdin)) = (want_stdin, &self.stdin) {
            fds.push(PollFd::new(stdin, PollFlags::OUT));
        }
        if want_client {
            fds.push(PollFd::from_borrowed_fd(self.io.input, PollFlags::IN));
        }
        if let Some(stop) = sys::stop_fd() {
            fds.push(PollFd::from_borrowed_fd(stop, PollFlags::IN));
        }
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Err(Abort::Client),
        }
        if sys::stop_requested() {
            return Err(Abort::Client);
        }
        let ready: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
        drop(fds);
        let mut i = 0;
        let stdout_ready = ready.first().copied().unwrap_or(false);
        i += 1;
        if want_stdin {
            if ready.get(i).copied().unwrap_or(false) {
                self.feed_script();
            }
            i += 1;
        }
        if want_client && ready.get(i).copied().unwrap_or(false) {
            self.read_body()?;
        }
        if stdout_ready {
            return self.read_output();
        }
        Ok(None)
    }

    /// Hands pending body bytes to the script.
    fn feed_script(&mut self) {
        let Some(stdin) = &self.stdin else { return };
        match rustix::io::write(stdin, &self.pending) {
            Ok(n) => {
                self.pending.drain(..n);
            }
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
            // The script closed its input early: it wants no more.
            Err(_) => {
                self.stdin = None;
                self.pending.clear();
            }
        }
        if self.pending.is_empty() && self.body_left == 0 {
            self.stdin = None;
        }
    }

    /// Reads more of the request body, never past its end: what follows is
    /// the next request.
    fn read_body(&mut self) -> Result<(), Abort> {
        let mut buf = Vec::with_capacity(CHUNK);
        let read = self.io.wire.borrow_mut().read(self.io.input, &mut buf);
        match read {
            Ok(Got::Closed) => Err(Abort::Client),
            Ok(_) => {
                // Over TLS a read cannot stop at the body's end: what
                // follows is the next request, kept for the session.
                let n = (self.body_left as usize).min(buf.len());
                self.pending.extend(buf.drain(..n));
                self.input.extend_from_slice(&buf);
                self.body_left -= n as u64;
                Ok(())
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::Interrupted =>
            {
                Ok(())
            }
            Err(_) => Err(Abort::Client),
        }
    }

    fn read_output(&mut self) -> Result<Option<Ended>, Abort> {
        let Some(stdout) = &self.stdout else {
            return Ok(None);
        };
        let mut buf = vec![0u8; CHUNK];
        let n = match rustix::io::read(stdout, &mut buf) {
            Ok(n) => n,
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return Ok(None),
            Err(_) => 0,
        };
        buf.truncate(n);
        if n == 0 {
            self.stdout = None;
        }
        if self.sending.is_some() {
            if n > 0 {
                self.forward(&buf)?;
            }
            return Ok(None);
        }
        self.head_buf.extend_from_slice(&buf);
        match cgi::parse_header_block(&self.head_buf, n == 0) {
            HeaderBlock::Incomplete => Ok(None),
            HeaderBlock::Malformed(why) => Err(Abort::Script(why)),
            HeaderBlock::Complete(head, start) => {
                if let Some(Location::Local(target)) = &head.location {
                    return Ok(Some(Ended::LocalRedirect(target.clone())));
                }
                let (mut head_bytes, framing, close) = respond::cgi_head(self.job, &head);
                if self.job.https {
                    crate::session::add_hsts(self.cfg, &mut head_bytes);
                }
                self.send(head_bytes)?;
                self.sending = Some(Sending {
                    status: head.status,
                    framing,
                    close,
                    sent: 0,
                });
                let rest = self.head_buf.split_off(start);
                if !rest.is_empty() {
                    self.forward(&rest)?;
                }
                Ok(None)
            }
        }
    }

    /// Sends script output to the client in the response's framing.
    fn forward(&mut self, bytes: &[u8]) -> Result<(), Abort> {
        let Some(s) = &mut self.sending else {
            return Ok(());
        };
        // What goes out, and where the script's bytes are in it.
        let (out, body) = match s.framing {
            CgiFraming::Empty => return Ok(()),
            CgiFraming::Length(n) => {
                let room = (n - s.sent).min(bytes.len() as u64) as usize;
                if room < bytes.len() {
                    // More than the script promised: the extra is not sent.
                    s.close = true;
                }
                (bytes[..room].to_vec(), 0..room as u64)
            }
            CgiFraming::Chunked => {
                let mut framed = format!("{:x}\r\n", bytes.len()).into_bytes();
                let start = framed.len() as u64;
                framed.extend_from_slice(bytes);
                framed.extend_from_slice(b"\r\n");
                (framed, start..start + bytes.len() as u64)
            }
            CgiFraming::UntilClose => (bytes.to_vec(), 0..bytes.len() as u64),
        };
        if out.is_empty() {
            return Ok(());
        }
        let (written, result) = self.io.send_bytes(out, self.cfg);
        s.sent += log::body_sent(&body, written);
        result.map_err(|_| Abort::Client)
    }

    fn send(&self, bytes: Vec<u8>) -> Result<(), Abort> {
        self.io
            .send_bytes(bytes, self.cfg)
            .1
            .map_err(|_| Abort::Client)
    }

    /// The script closed its output.
    fn finish(mut self) -> Ended {
        let Some(s) = self.sending.take() else {
            return self.abort(Status::BadGateway, "no output");
        };
        let mut keep_alive = !s.close;
        match s.framing {
            CgiFraming::Chunked => keep_alive &= self.send(b"0\r\n\r\n".to_vec()).is_ok(),
            // Short of the promised length: the client must see the cut.
            CgiFraming::Length(n) if s.sent < n => keep_alive = false,
            _ => {}
        }
        // A body the script did not read is still on the wire.
        keep_alive &= self.body_left == 0;
        Ended::Finished {
            status: s.status,
            body_sent: s.sent,
            keep_alive,
        }
    }

    /// The script failed. Before the head went out, the client gets
    /// `status`; after, the connection is cut.
    fn abort(self, status: Status, why: &str) -> Ended {
        if let Some(s) = &self.sending {
            log::diagnostic(&format!(
                "staticd: cgi {}: {why}\n",
                self.job.script.script_name
            ));
            return Ended::Finished {
                status: s.status,
                body_sent: s.sent,
                keep_alive: false,
            };
        }
        let (job, io, cfg, site) = (self.job, self.io, self.cfg, self.site);
        drop(self);
        fail(job, io, cfg, site, status, why)
    }

    /// The exchange ends before the script's output did.
    fn cut_short(self) -> Ended {
        let status = self.sending.as_ref().map_or(499, |s| s.status);
        let sent = self.sending.as_ref().map_or(0, |s| s.sent);
        Ended::Finished {
            status,
            body_sent: sent,
            keep_alive: false,
        }
    }
}

enum Abort {
    /// The client went away or stopped reading, or inetd mode was asked to
    /// stop (`sys::stop_on_signals`).
    Client,
    /// The script's output is not a valid CGI response.
    Script(&'static str),
}

/// Answers with an error of our own and logs why.
fn fail(job: &CgiJob, io: ClientIo, cfg: &Config, site: &Site, status: Status, why: &str) -> Ended {
    log::diagnostic(&format!("staticd: cgi {}: {why}\n", job.script.script_name));
    let response = respond::cgi_failure(job, site, status);
    let (body_sent, _) = send_response(io, cfg, &response);
    Ended::Finished {
        status: status.code(),
        body_sent,
        keep_alive: false,
    }
}

fn send_decided(
    cfg: &Config,
    client: &str,
    io: ClientIo,
    request: &Request,
    response: Response,
    https: bool,
) -> bool {
    let (body_sent, ok) = send_response(io, cfg, &response);
    let keep_alive = ok && !response.close;
    let status = response.status.code();
    crate::metrics::request(Some(request), status, https);
    crate::metrics::body_bytes(body_sent);
    let user = response.user.as_deref();
    done(cfg, client, request, user, status, body_sent, keep_alive)
}

/// Sends a response of our own. Returns the body bytes that reached the
/// client, and whether all of it did.
fn send_response(io: ClientIo, cfg: &Config, response: &Response) -> (u64, bool) {
    let (written, ok) = io.send_response(response, cfg);
    (log::body_sent(&response.body_range(), written), ok)
}

/// Writes the access-log line; returns `keep_alive`.
fn done(
    cfg: &Config,
    client: &str,
    request: &Request,
    user: Option<&str>,
    status: u16,
    body_sent: u64,
    keep_alive: bool,
) -> bool {
    let trusted = &cfg.trusted_proxies;
    let entry = log::Entry {
        client: crate::proxy::forwarded::client_name(trusted, client, Some(request)),
        request: Some(request),
        status,
        user,
        body: 0..body_sent,
    };
    log::format(cfg.log_format, &entry, SystemTime::now()).emit(body_sent);
    keep_alive
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
fn server_identity(req: &Request, local: Option<std::net::SocketAddr>) -> (String, u16) {
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
/// Told by the client's name rather than the descriptor, which for an
/// HTTP/2 stream is the socket pair to the stream's task.
fn remote_addr(client: &str) -> &str {
    if client == crate::serve::listen::UNIX_CLIENT {
        "127.0.0.1"
    } else {
        client
    }
}

/// The query string of a target (without `?`), and the rest.
fn split_query(target: &str) -> (&str, &str) {
    match target.split_once('?') {
        Some((path, query)) => (query, path),
        None => ("", target),
    }
}
