//! One HTTP/1.1 connection's "what next", the same for every transport
//! (inetd, the event loop, io_uring): first the prelude's word (the PROXY
//! header, HTTP/2's preface; see [`prelude`](crate::serve::prelude)), then
//! the session's step ([`Session`]), and how the connection ends. No I/O: a
//! transport does what it is told in its own way (blocking, on epoll, on
//! io_uring) and says what its reads brought.

use std::time::Instant;

use super::prelude::{Next, Prelude};
use super::wire::{Got, Wire};
use crate::client_name::ClientName;
use crate::config::Config;
use crate::origin::Kind;
use crate::pipeline::Sent;
use crate::respond::CgiJob;
use crate::session::{Session, Step};
use crate::site::Site;

/// An HTTP/1.1 connection between its waits: where its prelude is, and its
/// session.
pub(crate) struct Http1 {
    prelude: Prelude,
    session: Session,
}

/// What the transport does next.
// As `session::Step`: an action lives on the stack for one turn, and
// boxing the response would cost an allocation per response.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Action {
    /// Take the PROXY header off the connection (`--proxy-protocol`), then
    /// call `proxied` and ask again.
    ProxyHeader,
    /// Read more within `--read-timeout`: what came is a prefix of HTTP/2's
    /// preface. Then `brought`, and ask again.
    Sniff,
    /// Serve HTTP/2 from here, starting with the bytes read so far.
    Http2,
    /// Read more, giving up at the deadline (then `timed_out`): the
    /// session's [`Step::Read`]. Then `brought`, and ask again.
    Read { deadline: Instant, idle: bool },
    /// Send this response, then ask again.
    Send(Sent),
    /// Run this CGI script (see [`serve::cgi`](crate::serve::cgi)), then
    /// `cgi_finished`, and ask again.
    Cgi(Box<CgiJob>),
    /// Close the connection, TLS's close_notify first. `linger`: bytes the
    /// client sent may be unread or in flight, which the kernel would answer
    /// with a reset that can destroy the last response; so the write side
    /// is shut first and the rest read away for a while.
    Close { linger: bool },
}

impl Http1 {
    /// A new connection from `client`, speaking `kind`.
    pub(crate) fn new(cfg: &Config, kind: Kind, client: ClientName) -> Http1 {
        Http1 {
            prelude: Prelude::new(cfg, kind),
            session: Session::with_kind(client, kind),
        }
    }

    /// A connection back from being parked between requests (see
    /// [`park`](crate::serve::park)): `sniffing` as it was then.
    pub(crate) fn resumed(session: Session, sniffing: bool) -> Http1 {
        Http1 {
            prelude: Prelude::resumed(sniffing),
            session,
        }
    }

    /// What to do next, given the wire (what TLS agreed on) and whether
    /// the server is stopping (the next response is then the last).
    pub(crate) fn next(
        &mut self,
        cfg: &Config,
        site: &Site,
        stopping: bool,
        wire: &Wire,
    ) -> Action {
        match self.prelude.next(self.session.input(), wire.alpn_h2()) {
            Next::ProxyHeader => return Action::ProxyHeader,
            Next::Read => return Action::Sniff,
            Next::Http2 => return Action::Http2,
            Next::Http1 | Next::HttpsRequired => {}
        }
        self.session.note_tls(|| wire.tls_summary());
        match self.session.step(cfg, site, stopping) {
            Step::Read { deadline, idle } => Action::Read { deadline, idle },
            Step::Send(sent) => Action::Send(sent),
            Step::Cgi(job) => Action::Cgi(job),
            Step::Close => Action::Close {
                linger: self.session.unread_input(),
            },
        }
    }

    /// What a read brought: false if the client closed (the connection
    /// closes without more). Cleartext on a TLS port gets the session's
    /// answer that HTTPS is required.
    pub(crate) fn brought(&mut self, got: Got) -> bool {
        match got {
            Got::Bytes => true,
            Got::Cleartext => {
                if self.prelude.cleartext() == Next::HttpsRequired {
                    self.session.https_required();
                }
                true
            }
            Got::Closed => false,
        }
    }

    /// The PROXY header is taken (or failed, and the connection closes).
    pub(crate) fn proxied(&mut self) {
        self.prelude.proxied();
    }

    /// The transport gave up waiting at a [`Action::Read`] deadline.
    pub(crate) fn timed_out(&self, cfg: &Config) {
        self.session.read_timed_out(cfg);
    }

    /// After a CGI exchange: whether the connection can carry another
    /// request.
    pub(crate) fn cgi_finished(&mut self, keep_alive: bool) {
        self.session.cgi_finished(keep_alive);
    }

    /// Whether the next bytes may still open HTTP/2 (kept when parked).
    pub(crate) fn sniffing(&self) -> bool {
        self.prelude.sniffing()
    }

    /// The session: where reads go (`input`), who the client is.
    pub(crate) fn session(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The session alone, for parking.
    pub(crate) fn into_session(self) -> Session {
        self.session
    }
}

/// The "what next" driven by bytes, as a transport would drive it.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Features, LogFormat};

    fn site() -> (tempfile::TempDir, Site) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
        let site = Site::open(dir.path(), &["index.html"], Features::default()).unwrap();
        (dir, site)
    }

    fn cfg(proxy_protocol: bool) -> Config {
        Config {
            log_format: LogFormat::Off,
            proxy_protocol,
            http2: Some(Default::default()),
            ..Config::default()
        }
    }

    fn what(action: &Action) -> &'static str {
        match action {
            Action::ProxyHeader => "ProxyHeader",
            Action::Sniff => "Sniff",
            Action::Http2 => "Http2",
            Action::Read { .. } => "Read",
            Action::Send(_) => "Send",
            Action::Cgi(_) => "Cgi",
            Action::Close { .. } => "Close",
        }
    }

    /// The client's bytes, as a read would bring them.
    fn read(conn: &mut Http1, bytes: &[u8]) {
        conn.session().input().extend_from_slice(bytes);
        assert!(conn.brought(Got::Bytes));
    }

    #[test]
    fn the_proxy_header_comes_first_then_the_preface_decides() {
        let (_dir, site) = site();
        let cfg = cfg(true);
        let mut conn = Http1::new(&cfg, Kind::Http, ClientName::new("127.0.0.1"));
        let next = |conn: &mut Http1| what(&conn.next(&cfg, &site, false, &Wire::Clear));
        assert_eq!(next(&mut conn), "ProxyHeader");
        conn.proxied();
        // Nothing read yet: the session's first read brings what decides.
        assert_eq!(next(&mut conn), "Read");
        if cfg!(feature = "http2") {
            read(&mut conn, b"PRI * HTTP/2.0\r\n");
            assert_eq!(next(&mut conn), "Sniff");
            read(&mut conn, b"\r\nSM\r\n\r\n");
            assert_eq!(next(&mut conn), "Http2");
        }
    }

    #[test]
    fn a_request_is_answered_and_a_closing_one_lingers_over_unread_bytes() {
        let (_dir, site) = site();
        let cfg = cfg(false);
        let mut conn = Http1::new(&cfg, Kind::Http, ClientName::new("127.0.0.1"));
        read(&mut conn, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        let Action::Send(sent) = conn.next(&cfg, &site, false, &Wire::Clear) else {
            panic!("a response")
        };
        assert_eq!(sent.response.code(), 200);
        drop(sent);
        let Action::Read { idle, .. } = conn.next(&cfg, &site, false, &Wire::Clear) else {
            panic!("a read for the next request")
        };
        assert!(idle, "between requests");
        // The last response, with the client's next bytes still unread.
        read(
            &mut conn,
            b"GET /a.txt HTTP/1.0\r\n\r\nGET /a.txt HTTP/1.1\r\n",
        );
        assert_eq!(what(&conn.next(&cfg, &site, false, &Wire::Clear)), "Send");
        match conn.next(&cfg, &site, false, &Wire::Clear) {
            Action::Close { linger } => assert!(linger, "unread bytes"),
            other => panic!("{} for Close", what(&other)),
        }
        // A client that closed ends the connection.
        assert!(!conn.brought(Got::Closed));
    }

    #[test]
    fn cleartext_on_a_tls_port_is_told_that_https_is_required() {
        let (_dir, site) = site();
        let cfg = cfg(false);
        let mut conn = Http1::new(&cfg, Kind::Https, ClientName::new("127.0.0.1"));
        conn.session()
            .input()
            .extend_from_slice(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        // The wire found no TLS record and is cleartext from here on.
        assert!(conn.brought(Got::Cleartext));
        assert!(!conn.sniffing(), "no HTTP/2 follows");
        let Action::Send(sent) = conn.next(&cfg, &site, false, &Wire::Clear) else {
            panic!("an answer")
        };
        assert_eq!(sent.response.code(), 400);
        assert!(sent.response.close);
        drop(sent);
        assert_eq!(what(&conn.next(&cfg, &site, false, &Wire::Clear)), "Close");
    }
}
