//! One connection as a state machine: bytes in, responses out, no I/O.
//!
//! Both transports drive a [`Session`] the same way: append what they read
//! to `input()`, call `step`, and do what it says. That is why the event loop and inetd mode behave
//! byte-for-byte the same.

use std::time::Instant;

use crate::client_name::ClientName;
use crate::config::Config;
use crate::http::body::{self, BodySkipper, Skip};
use crate::http::parse::{self, ParseError, Parsed};
use crate::log;
use crate::origin::{Kind, Origin, Protocol, Sockets};
use crate::pace::Pace;
use crate::pipeline::{answer, sent, Sent};
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
    /// Run this CGI script (see [`serve::cgi`](crate::serve::cgi)), then call
    /// `cgi_finished` and `step` again.
    Cgi(Box<CgiJob>),
    /// Close the connection.
    Close,
}

pub struct Session {
    input: Vec<u8>,
    /// Who the requests come from, and how.
    origin: Origin,
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
            origin: Origin::new(kind, client, Protocol::Http1),
            skipper: None,
            body_pace: None,
            closing: false,
            served: 0,
            head_deadline: None,
            pending_cgi: None,
        }
    }

    /// Learns what TLS agreed on, for the log: `agreed` is asked (before
    /// each step) until the handshake is over.
    pub fn note_tls(&mut self, agreed: impl FnOnce() -> Option<log::Tls>) {
        if self.origin.kind == Kind::Https && self.origin.tls.is_none() {
            self.origin.tls = agreed();
        }
    }

    /// The client spoke cleartext HTTP to a TLS port: what it sent gets a
    /// 400 in cleartext, and the connection closes.
    pub fn https_required(&mut self) {
        self.origin.kind = Kind::ClearOnHttpsPort;
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
                let response = refusal(self.origin.kind, e);
                Step::Send(sent(cfg, &self.origin, None, response))
            }
            Parsed::Complete { request, head_len } => {
                self.head_deadline = None;
                self.served += 1;
                let arrived = self.input.get(head_len..).unwrap_or_default();
                if body::chunked_prefix_is_invalid(request.framing, arrived) {
                    self.closing = true;
                    let response = refusal(self.origin.kind, ParseError::Malformed);
                    let sent = sent(cfg, &self.origin, Some(&request), response);
                    return Step::Send(sent);
                }
                match answer(self.origin.kind, site, &request, stopping) {
                    Answer::Send(response) => {
                        self.skipper = BodySkipper::new(request.framing);
                        self.closing = response.close;
                        let step = Step::Send(sent(cfg, &self.origin, Some(&request), response));
                        self.input.drain(..head_len);
                        step
                    }
                    Answer::Cgi(job) => {
                        // The script gets the body; the exchange reads it.
                        self.input.drain(..head_len);
                        self.closing = true;
                        Step::Cgi(job)
                    }
                }
            }
        }
    }

    /// The transport gave up waiting at a [`Step::Read`] deadline: a
    /// body that came slower than `--min-rate` is named in the log.
    pub fn read_timed_out(&self, cfg: &Config) {
        if self.skipper.is_some() && self.body_pace.is_some_and(|p| p.too_slow()) {
            let what = crate::complaint::Complaint::SlowBody { rate: cfg.min_rate };
            crate::complaint::complain(&self.origin.client, what);
        }
    }

    /// After a CGI exchange: whether the connection can carry another request.
    pub fn cgi_finished(&mut self, keep_alive: bool) {
        self.closing = !keep_alive;
    }

    /// Names the connection's client as a PROXY protocol header did, and
    /// the socket addresses that go with it.
    pub fn set_client(&mut self, client: ClientName, sockets: Sockets) {
        self.origin.client = client;
        self.origin.sockets = Some(sockets);
    }

    /// The client's address, for the log.
    pub fn client(&self) -> &str {
        &self.origin.client
    }

    /// Who the connection's requests come from, and how.
    pub fn origin(&self) -> &Origin {
        &self.origin
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
        assert_eq!(log::body_sent(&sent.body_range(), head), 0);
        sent.written = sent.wire.len() as u64;
        assert_eq!(log::body_sent(&sent.body_range(), sent.written), 6);
    }
}
