//! One connection as a state machine: bytes in, responses out, no I/O.
//!
//! Both transports drive a `Session` the same way: append what they read to
//! `input()`, call `step`, and do what it says. That is why the event loop
//! and inetd mode behave byte-for-byte the same.

use std::ops::Range;
use std::time::{Instant, SystemTime};

use crate::client_name::ClientName;
use crate::config::Config;
use crate::http::body::{self, BodySkipper, Skip};
use crate::http::parse::{self, Method, ParseError, Parsed};
use crate::http::response::{self as h1, Chunk, Http1};
use crate::log;
use crate::pace::Pace;
use crate::pool;
use crate::respond::{self, Answer, CgiJob, Response};
use crate::site::Site;

/// What the transport should do next. A `Sent` is larger than the other
/// variants, but a step lives on the stack for one call: boxing it would
/// cost an allocation per response.
#[allow(clippy::large_enum_variant)]
pub enum Step {
    /// Read more, giving up at the deadline. `idle` is true between
    /// requests, when closing loses nothing.
    Read { deadline: Instant, idle: bool },
    /// Send this response; then call `step` again.
    Send(Sent),
    /// Run this CGI script (see `serve::cgi_exchange`), then call
    /// `cgi_finished` and `step` again.
    Cgi(Box<CgiJob>),
    /// Close the connection.
    Close,
}

/// A response and its access-log line. Dropping it writes the line, with
/// the body bytes among the `written` ones: every response that started
/// gets exactly one line however its sending ends (done, client gone,
/// timed out, or the connection dropped at shutdown).
pub struct Sent {
    pub response: Response,
    /// Over HTTP/1.1: the head as bytes, and a small body held in memory
    /// (taken out of `response.body`), to go in the same write; then
    /// `response.body`. Empty over HTTP/2, which encodes the head itself.
    pub wire: Vec<u8>,
    /// Bytes written so far (`wire`, then the body); the transport keeps
    /// it current, as it can be dropped at any await.
    pub written: u64,
    /// Written when this is dropped.
    pub log_line: log::Line,
    /// Where the body lies among the bytes written (as `Response::body_range`
    /// was before a transport took the head): the metrics' byte count.
    body: Range<u64>,
}

impl Sent {
    /// Puts the next pipelined answer behind this one, which has no body
    /// beyond its head.
    fn append(&mut self, mut next: Sent) {
        let r = &mut self.response;
        let offset = self.wire.len() as u64;
        self.wire.extend_from_slice(&next.wire);
        std::mem::swap(&mut r.body, &mut next.response.body);
        r.body_len += next.response.body_len;
        r.close = next.response.close;
        self.log_line
            .push(std::mem::take(&mut next.log_line), offset);
        // One range for the batch: exact once all of it went out.
        let end = offset + next.body.end;
        let len = (self.body.end - self.body.start) + (next.body.end - next.body.start);
        self.body = end.saturating_sub(len)..end;
    }
}

impl Sent {
    /// For a body that follows `wire` without being in `response` (a CGI
    /// script's output): every byte written after `wire` counts as body,
    /// so the transport adds to `written` only the script's own bytes,
    /// not the framing around them.
    pub fn open_body(&mut self) {
        self.body = self.wire.len() as u64..u64::MAX;
        self.log_line.set_body(self.body.clone());
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        self.log_line.emit(self.written);
        crate::metrics::body_bytes(log::body_sent(&self.body, self.written));
        pool::give(&pool::HEADS, std::mem::take(&mut self.wire));
    }
}

/// Which encoding of the head a `Sent` is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.x: `Sent::wire` holds the head's bytes.
    Http1,
    /// HTTP/2 or HTTP/3: the stream encodes the head as fields
    /// (`http::fields`).
    Fields,
}

/// What a connection is for, from its listener and what it speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Http,
    /// HTTP over TLS: Strict-Transport-Security with `--hsts`, and CGI's
    /// HTTPS=on.
    Https,
    /// Cleartext HTTP sent to a TLS port: answered with a 400 that says so
    /// (nginx's 497), then closed.
    ClearOnHttpsPort,
    /// A `--redirect-http` port: every request is sent to https on `port`.
    RedirectToHttps {
        port: u16,
    },
}

pub struct Session {
    input: Vec<u8>,
    kind: Kind,
    skipper: Option<BodySkipper>,
    /// How long the body being skipped may still take (`--min-rate`).
    body_pace: Option<Pace>,
    /// The last response said the connection closes.
    closing: bool,
    /// Requests answered so far.
    served: u64,
    /// When the head being received must be complete: a client trickling
    /// a byte at a time gets no more than the read timeout for all of it.
    head_deadline: Option<Instant>,
    /// A script found while batching pipelined answers, to run next.
    pending_cgi: Option<Box<CgiJob>>,
    client: ClientName,
    /// What TLS agreed on, once the transport has told it (for the log).
    tls: Option<log::Tls>,
}

/// Pipelined answers are batched into one write up to about this size.
const MAX_BATCH: usize = 64 * 1024;

impl Session {
    /// `client` names the peer for the log: its IP address as text, `unix:`
    /// for a Unix-socket client (as nginx logs it), or `-` when unknown.
    pub fn new(client: ClientName) -> Session {
        Session::with_kind(client, Kind::Http)
    }

    pub fn with_kind(client: ClientName, kind: Kind) -> Session {
        Session {
            input: Vec::new(),
            kind,
            skipper: None,
            body_pace: None,
            closing: false,
            served: 0,
            head_deadline: None,
            pending_cgi: None,
            client,
            tls: None,
        }
    }

    /// Learns what TLS agreed on, for the log: `agreed` is asked (before
    /// each step) until the handshake is over.
    pub fn note_tls(&mut self, agreed: impl FnOnce() -> Option<log::Tls>) {
        if self.kind == Kind::Https && self.tls.is_none() {
            self.tls = agreed();
        }
    }

    /// The client spoke cleartext HTTP to a TLS port: what it sent gets a
    /// 400 in cleartext, and the connection closes.
    pub fn https_required(&mut self) {
        self.kind = Kind::ClearOnHttpsPort;
    }

    /// Where the transport appends the bytes it read.
    pub fn input(&mut self) -> &mut Vec<u8> {
        &mut self.input
    }

    /// Decides the next step. `stopping` is set once the server is shutting
    /// down: the next response is the last (`Connection: close`). An idle
    /// connection still reads, as a request may be on its way: how long it
    /// waits for one is the transport's to decide, as only it knows when the
    /// stop began.
    ///
    /// When more requests are already buffered (pipelining), their answers
    /// are appended to the first one's, so they leave in a single write.
    pub fn step(&mut self, cfg: &Config, site: &Site, stopping: bool) -> Step {
        self.step_at(cfg, site, stopping, Instant::now)
    }

    /// `step` with the clock given: `now` is read only when a deadline is
    /// set (a warm request that needs none reads no clock), and a test can
    /// give a clock of its own.
    pub fn step_at(
        &mut self,
        cfg: &Config,
        site: &Site,
        stopping: bool,
        now: impl Fn() -> Instant,
    ) -> Step {
        if let Some(job) = self.pending_cgi.take() {
            return Step::Cgi(job);
        }
        let mut sent = match self.advance(cfg, site, stopping, &now) {
            Step::Send(sent) => sent,
            other => return other,
        };
        while sent.response.body.is_empty()
            && !self.closing
            && !self.input.is_empty()
            && sent.wire.len() < MAX_BATCH
        {
            match self.advance(cfg, site, stopping, &now) {
                Step::Send(next) => sent.append(next),
                Step::Cgi(job) => {
                    self.pending_cgi = Some(job);
                    break;
                }
                Step::Read { .. } | Step::Close => break,
            }
        }
        Step::Send(sent)
    }

    /// One request's worth of progress.
    fn advance(
        &mut self,
        cfg: &Config,
        site: &Site,
        stopping: bool,
        now: &impl Fn() -> Instant,
    ) -> Step {
        if self.closing {
            return Step::Close;
        }
        if let Some(skipper) = &mut self.skipper {
            match skipper.feed(&self.input) {
                Skip::Done { consumed } => {
                    self.input.drain(..consumed);
                    self.skipper = None;
                    self.body_pace = None;
                }
                Skip::NeedMore => {
                    // The body must keep coming at --min-rate, and never
                    // pause for a whole --read-timeout.
                    let now = now();
                    let pace = self
                        .body_pace
                        .get_or_insert_with(|| Pace::new(now, cfg.read_timeout, cfg.min_rate));
                    pace.progress(now, self.input.len() as u64);
                    let deadline = pace.deadline();
                    self.input.clear();
                    return Step::Read {
                        deadline,
                        idle: false,
                    };
                }
                Skip::Invalid => return Step::Close,
            }
        }
        if self.input.is_empty() {
            // A new connection gets the read timeout for its first request;
            // later, an idle keep-alive connection gets the keep-alive timeout.
            let timeout = if self.served == 0 {
                cfg.read_timeout
            } else {
                cfg.keepalive_timeout
            };
            return Step::Read {
                deadline: now() + timeout,
                idle: true,
            };
        }
        match parse::parse(&self.input) {
            Parsed::Incomplete => {
                let deadline = *self
                    .head_deadline
                    .get_or_insert_with(|| now() + cfg.read_timeout);
                Step::Read {
                    deadline,
                    idle: false,
                }
            }
            Parsed::Error(e) => {
                self.closing = true;
                let response = refusal(self.kind, e);
                Step::Send(sent(
                    cfg,
                    self.kind,
                    self.tls,
                    &self.client,
                    None,
                    response,
                    Protocol::Http1,
                ))
            }
            Parsed::Complete { request, head_len } => {
                self.head_deadline = None;
                self.served += 1;
                let arrived = self.input.get(head_len..).unwrap_or_default();
                if body::chunked_prefix_is_invalid(request.framing, arrived) {
                    self.closing = true;
                    let response = refusal(self.kind, ParseError::Malformed);
                    let sent = sent(
                        cfg,
                        self.kind,
                        self.tls,
                        &self.client,
                        Some(&request),
                        response,
                        Protocol::Http1,
                    );
                    return Step::Send(sent);
                }
                match answer(self.kind, site, &request, stopping) {
                    Answer::Send(response) => {
                        self.skipper = BodySkipper::new(request.framing);
                        self.closing = response.close;
                        let step = Step::Send(sent(
                            cfg,
                            self.kind,
                            self.tls,
                            &self.client,
                            Some(&request),
                            response,
                            Protocol::Http1,
                        ));
                        self.input.drain(..head_len);
                        step
                    }
                    Answer::Cgi(mut job) => {
                        // The script gets the body; the exchange reads it.
                        job.raw_head = self.input.drain(..head_len).collect();
                        job.https = self.kind == Kind::Https;
                        job.tls = self.tls;
                        self.closing = true;
                        Step::Cgi(job)
                    }
                }
            }
        }
    }

    /// The transport gave up waiting at a `Step::Read` deadline: a body
    /// that came slower than `--min-rate` is named in the log.
    pub fn read_timed_out(&self, cfg: &Config) {
        if self.skipper.is_some() && self.body_pace.is_some_and(|p| p.too_slow()) {
            let what = crate::complaint::Complaint::SlowBody { rate: cfg.min_rate };
            crate::complaint::complain(&self.client, what);
        }
    }

    /// After a CGI exchange: whether the connection can carry another request.
    pub fn cgi_finished(&mut self, keep_alive: bool) {
        self.closing = !keep_alive;
    }

    /// Names the connection's client as a PROXY protocol header did.
    pub fn set_client(&mut self, client: ClientName) {
        self.client = client;
    }

    /// The client's address, for the log.
    pub fn client(&self) -> &str {
        &self.client
    }

    /// Whether the client may still have bytes in flight that nobody will
    /// read; the transport then lingers before closing, so the kernel does
    /// not answer them with a reset that destroys the last response.
    pub fn unread_input(&self) -> bool {
        !self.input.is_empty() || self.skipper.is_some()
    }
}

/// The answer to a request that cannot be served as sent; the connection
/// closes after it.
fn refusal(kind: Kind, e: ParseError) -> Response {
    match kind {
        // On a TLS port, what matters to the person is the port.
        Kind::ClearOnHttpsPort => respond::https_required(false),
        _ => respond::refuse(e),
    }
}

/// The answer to a request on a connection of this kind: the one place a
/// parsed request is decided, whichever protocol carried it.
pub fn answer(kind: Kind, site: &Site, request: &parse::Request, stopping: bool) -> Answer {
    match kind {
        Kind::Http | Kind::Https => respond::respond(site, request, stopping),
        Kind::ClearOnHttpsPort => {
            Answer::Send(respond::https_required(request.method == Method::Head))
        }
        Kind::RedirectToHttps { port } => Answer::Send(
            respond::health(site, request, stopping)
                .unwrap_or_else(|| respond::redirect_to_https(request, site, port, stopping)),
        ),
    }
}

/// A decided response ready to go: counted in the metrics, its log line
/// made (written when the `Sent` drops), and over HTTP/1.1 its head encoded
/// with what the connection adds (Strict-Transport-Security over HTTPS).
/// Every response goes through here, whoever decided it.
pub fn sent(
    cfg: &Config,
    kind: Kind,
    tls: Option<log::Tls>,
    client: &str,
    request: Option<&parse::Request>,
    mut response: Response,
    protocol: Protocol,
) -> Sent {
    let status = response.code();
    crate::metrics::request(request, status, kind == Kind::Https);
    let mut wire = Vec::new();
    if protocol == Protocol::Http1 {
        wire = pool::take(&pool::HEADS);
        encode_http1(
            &mut response,
            hsts(cfg, kind),
            alt_svc(cfg, kind),
            &mut wire,
        );
    }
    // The body ends the bytes written: after `wire`, in which a small
    // body may ride.
    let chunks: u64 = response.body.iter().map(Chunk::size).sum();
    let end = wire.len() as u64 + chunks;
    let body = end.saturating_sub(response.body_len)..end;
    let trusted = &cfg.trusted_proxies;
    let entry = log::Entry {
        client: crate::proxy::forwarded::client_name(trusted, client, request),
        request,
        status,
        user: response.user.as_deref(),
        body,
        tls,
    };
    let format = match response.unlogged {
        true => crate::config::LogFormat::Off,
        false => cfg.log_format,
    };
    let log_line = log::format(format, &entry, SystemTime::now());
    Sent {
        body: entry.body,
        response,
        wire,
        written: 0,
        log_line,
    }
}

/// The status logged for a request that got no response because its stream
/// was reset before one was decided: nginx's 499, for a request whose
/// client (here, by the error the reset answered) ended it before any
/// response.
pub const NOT_ANSWERED: u16 = 499;

/// Logs `request`, which was never answered (see `NOT_ANSWERED`): no
/// response was made, no byte of one went out.
pub fn unanswered(cfg: &Config, tls: Option<log::Tls>, client: &str, request: &parse::Request) {
    let entry = log::Entry {
        client: crate::proxy::forwarded::client_name(&cfg.trusted_proxies, client, Some(request)),
        request: Some(request),
        status: NOT_ANSWERED,
        user: None,
        body: 0..0,
        tls,
    };
    log::format(cfg.log_format, &entry, SystemTime::now()).emit(0);
}

/// The head as HTTP/1.1 bytes into `wire`, and a small body held in memory
/// after it, so that both leave in one write.
fn encode_http1(
    response: &mut Response,
    hsts: Option<u64>,
    alt_svc: Option<u16>,
    wire: &mut Vec<u8>,
) {
    let conn = Http1 {
        minor_version: response.minor_version,
        close: response.close,
        hsts,
        alt_svc,
    };
    h1::encode(&response.head, &conn, wire);
    let small = response.body_len <= crate::site::file::SMALL_FILE;
    if small && response.body.iter().all(|c| c.memory().is_some()) {
        for chunk in response.body.drain(..) {
            wire.extend_from_slice(chunk.memory().unwrap_or_default());
        }
    }
}

/// Strict-Transport-Security's max-age for a response on a connection of
/// this kind: with `--hsts`, over HTTPS.
pub fn hsts(cfg: &Config, kind: Kind) -> Option<u64> {
    match kind {
        Kind::Https => cfg.https.as_ref().and_then(|h| h.hsts),
        _ => None,
    }
}

/// The UDP port HTTP/3 answers on, for the Alt-Svc field of a response on
/// a connection of this kind: over HTTPS (TCP), once HTTP/3 is bound.
pub fn alt_svc(cfg: &Config, kind: Kind) -> Option<u16> {
    match kind {
        Kind::Https => cfg.alt_svc_port,
        _ => None,
    }
}

/// The session driven with byte strings, as a transport would, without a
/// socket: what goes in is requests, what comes out is `Sent`s to read.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Features, LogFormat};

    struct Fixture {
        _dir: tempfile::TempDir,
        cfg: Config,
        site: Site,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
        let site = Site::open(dir.path(), &["index.html"], Features::default()).unwrap();
        let cfg = Config {
            log_format: LogFormat::Off,
            https: Some(crate::config::Https {
                hsts: Some(600),
                ..Default::default()
            }),
            ..Config::default()
        };
        Fixture {
            _dir: dir,
            cfg,
            site,
        }
    }

    /// Feeds `input` and returns what the session says to send, as text
    /// (the head and any small body), and whether it asked to read or
    /// close next.
    fn exchange(f: &Fixture, session: &mut Session, input: &[u8]) -> (String, &'static str) {
        session.input().extend_from_slice(input);
        let sent = match session.step(&f.cfg, &f.site, false) {
            Step::Send(sent) => sent,
            Step::Read { .. } => return (String::new(), "read"),
            Step::Close => return (String::new(), "close"),
            Step::Cgi(_) => panic!("no scripts here"),
        };
        let mut text = String::from_utf8(sent.wire.clone()).unwrap();
        for chunk in &sent.response.body {
            let bytes = chunk.memory().expect("small files are held in memory");
            text.push_str(std::str::from_utf8(bytes).unwrap());
        }
        let next = match session.step(&f.cfg, &f.site, false) {
            Step::Read { idle: true, .. } => "idle",
            Step::Read { .. } => "read",
            Step::Close => "close",
            _ => "more",
        };
        (text, next)
    }

    #[test]
    fn pipelined_requests_leave_in_one_write() {
        let f = fixture();
        let mut s = Session::new("192.0.2.1".into());
        let two = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nHEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\n";
        let (text, next) = exchange(&f, &mut s, two);
        assert_eq!(text.matches("HTTP/1.1 200 OK\r\n").count(), 2, "{text}");
        assert_eq!(text.matches("\r\n\r\nalpha\n").count(), 1, "{text}");
        assert!(
            text.ends_with("Accept-Ranges: bytes\r\nContent-Length: 6\r\n\r\n"),
            "{text}"
        );
        assert_eq!(next, "idle");
    }

    #[test]
    fn a_head_in_pieces_waits_then_answers() {
        let f = fixture();
        let mut s = Session::new("-".into());
        assert_eq!(
            exchange(&f, &mut s, b"GET /a.txt HT"),
            (String::new(), "read")
        );
        let (text, _) = exchange(&f, &mut s, b"TP/1.0\r\nConnection: keep-alive\r\n\r\n");
        // HTTP/1.0 keep-alive is confirmed, as the client asked.
        assert!(
            text.contains("\r\nConnection: keep-alive\r\n\r\nalpha\n"),
            "{text}"
        );
    }

    #[test]
    fn a_malformed_head_is_refused_and_the_connection_closes() {
        let f = fixture();
        let mut s = Session::new("-".into());
        let (text, next) = exchange(&f, &mut s, b"GET /a.txt HTTP/1.1\r\nBad Header\r\n\r\n");
        assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
        assert!(
            text.ends_with("Connection: close\r\n\r\n400 Bad Request\n"),
            "{text}"
        );
        assert_eq!(next, "close");
    }

    #[test]
    fn https_responses_carry_hsts_and_cleartext_on_a_tls_port_is_told_so() {
        let f = fixture();
        let mut s = Session::with_kind("-".into(), Kind::Https);
        let (text, _) = exchange(&f, &mut s, b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        assert_eq!(
            text.matches("\r\nStrict-Transport-Security: max-age=600\r\n")
                .count(),
            1
        );
        let mut plain = Session::new("-".into());
        let (text, _) = exchange(&f, &mut plain, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(!text.contains("Strict-Transport-Security"), "{text}");
        let mut clear = Session::new("-".into());
        clear.https_required();
        let (text, next) = exchange(&f, &mut clear, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(
            text.ends_with("this port speaks HTTPS; use an https:// URL\n"),
            "{text}"
        );
        assert_eq!(next, "close");
    }

    #[test]
    fn deadlines_follow_the_clock_given() {
        use std::cell::Cell;
        use std::time::Duration;
        let f = fixture();
        let start = Instant::now();
        let clock = Cell::new(start);
        let now = || clock.get();
        let later = |secs| clock.set(start + Duration::from_secs(secs));
        let mut s = Session::new("-".into());
        let read_deadline = |s: &mut Session| match s.step_at(&f.cfg, &f.site, false, now) {
            Step::Read { deadline, idle } => (deadline - start, idle),
            _ => panic!("a read"),
        };
        // A new connection has the read timeout for its first request.
        assert_eq!(read_deadline(&mut s), (f.cfg.read_timeout, true));
        // A head that trickles in keeps the deadline its first byte set.
        s.input().extend_from_slice(b"GET /a.txt HTTP/1.1\r\n");
        later(3);
        assert_eq!(
            read_deadline(&mut s),
            (Duration::from_secs(3) + f.cfg.read_timeout, false)
        );
        later(9);
        s.input().extend_from_slice(b"Host: x\r\n");
        assert_eq!(
            read_deadline(&mut s),
            (Duration::from_secs(3) + f.cfg.read_timeout, false)
        );
        s.input().extend_from_slice(b"\r\n");
        assert!(matches!(
            s.step_at(&f.cfg, &f.site, false, now),
            Step::Send(_)
        ));
        // Then it idles for the keep-alive timeout, from when it is asked.
        later(10);
        let keepalive = Duration::from_secs(10) + f.cfg.keepalive_timeout;
        assert_eq!(read_deadline(&mut s), (keepalive, true));
    }

    #[test]
    fn a_body_to_skip_must_keep_coming() {
        use std::cell::Cell;
        use std::time::Duration;
        let f = fixture();
        let start = Instant::now();
        let clock = Cell::new(start);
        let now = || clock.get();
        let mut s = Session::new("-".into());
        s.input()
            .extend_from_slice(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
        assert!(matches!(
            s.step_at(&f.cfg, &f.site, false, now),
            Step::Send(_)
        ));
        let Step::Read { deadline, idle } = s.step_at(&f.cfg, &f.site, false, now) else {
            panic!("the rest of the body is read");
        };
        // One timeout of credit to start, nothing earned yet.
        assert_eq!((deadline - start, idle), (f.cfg.read_timeout, false));
        // 5 KB at --min-rate 500 B/s buys 10 s more, but never more than a
        // timeout ahead of now.
        clock.set(start + Duration::from_secs(2));
        s.input().extend_from_slice(&[b'x'; 5000]);
        let Step::Read { deadline, .. } = s.step_at(&f.cfg, &f.site, false, now) else {
            panic!("still reading the body");
        };
        assert_eq!(
            deadline - start,
            Duration::from_secs(2) + f.cfg.read_timeout
        );
    }

    #[test]
    fn the_log_counts_body_bytes_only() {
        let f = fixture();
        let mut s = Session::new("-".into());
        s.input()
            .extend_from_slice(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        let Step::Send(mut sent) = s.step(&f.cfg, &f.site, false) else {
            panic!("a response");
        };
        let head = sent.wire.len() as u64 - 6;
        assert_eq!(log::body_sent(&sent.body, head), 0);
        sent.written = sent.wire.len() as u64;
        assert_eq!(log::body_sent(&sent.body, sent.written), 6);
    }
}
