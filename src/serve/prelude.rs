//! What every transport (inetd, the event loop, io_uring) runs before HTTP, in this order: the
//! PROXY header (`--proxy-protocol`), then TLS (the wire, see
//! [`Extras::wire`](crate::serve::Extras::wire)), then the first plaintext bytes decide what runs:
//! HTTP/2 when they are its preface (after ALPN h2, or h2c with prior knowledge), an HTTP/1.1
//! session otherwise, and on a TLS port that received cleartext, the session's answer that HTTPS is
//! required.
//!
//! Sans-IO: a transport reads in its own way, shows the prelude what came,
//! and is told what to do next; the decisions are tested here with bytes.

use crate::config::Config;
use crate::origin::Kind;

pub use crate::http::H2_PREFACE as PREFACE;

/// Where a connection is in its prelude.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Prelude {
    /// The PROXY header is still to be taken.
    proxy: bool,
    /// The next bytes may still open HTTP/2.
    sniffing: bool,
}

/// What the transport does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Take the PROXY header off the connection, then ask again.
    ProxyHeader,
    /// Read more before asking again: what came is a prefix of the preface.
    Read,
    /// Serve HTTP/2, starting with the bytes read so far.
    Http2,
    /// Step the HTTP/1.1 session. With nothing read yet, its first read
    /// brings the bytes that decide, so the transport asks again after it.
    Http1,
    /// Cleartext came on a TLS port (the wire is now cleartext): the
    /// session answers that HTTPS is required (`Session::https_required`).
    HttpsRequired,
}

impl Prelude {
    /// A new connection's prelude, speaking `kind` (HTTP/2 only in a build
    /// with it, and only where HTTP is served, not on `--redirect-http`'s
    /// listeners).
    pub(crate) fn new(cfg: &Config, kind: Kind) -> Prelude {
        let http = matches!(kind, Kind::Http | Kind::Https);
        Prelude {
            proxy: cfg.proxy_protocol,
            sniffing: cfg!(feature = "http2") && cfg.http2.is_some() && http,
        }
    }

    /// A connection that was parked between requests: its PROXY header is
    /// long taken; `sniffing` as it was when it was parked.
    pub(crate) fn resumed(sniffing: bool) -> Prelude {
        Prelude {
            proxy: false,
            sniffing,
        }
    }

    /// Whether the next bytes may still open HTTP/2.
    pub(crate) fn sniffing(&self) -> bool {
        self.sniffing
    }

    /// What to do, given the plaintext read so far; [`h2`](crate::serve::h2): TLS agreed on
    /// HTTP/2 by ALPN, so whatever comes is HTTP/2's to judge (a bad
    /// preface gets its GOAWAY, RFC 9113 §3.4).
    pub(crate) fn next(&mut self, input: &[u8], h2: bool) -> Next {
        if self.proxy {
            return Next::ProxyHeader;
        }
        if !self.sniffing || input.is_empty() {
            return Next::Http1;
        }
        if h2 || input.starts_with(PREFACE) {
            Next::Http2
        } else if PREFACE.starts_with(input) {
            Next::Read
        } else {
            self.sniffing = false;
            Next::Http1
        }
    }

    /// The PROXY header is taken (or failed, and the connection closes).
    pub(crate) fn proxied(&mut self) {
        self.proxy = false;
    }

    /// The wire found cleartext on a TLS port: no HTTP/2 follows.
    pub(crate) fn cleartext(&mut self) -> Next {
        self.sniffing = false;
        Next::HttpsRequired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Prelude {
        fn next_clear(&mut self, input: &[u8]) -> Next {
            self.next(input, false)
        }
    }

    #[test]
    fn after_alpn_h2_anything_is_http2s_to_judge() {
        let cfg = Config {
            http2: Some(Default::default()),
            ..Config::default()
        };
        let mut p = Prelude::new(&cfg, Kind::Https);
        if cfg!(feature = "http2") {
            assert_eq!(
                p.next(b"INVALID CONNECTION PREFACE\r\n\r\n", true),
                Next::Http2
            );
        }
        assert_eq!(p.next(b"", true), Next::Http1);
    }

    fn config(proxy: bool, http2: bool) -> Config {
        Config {
            proxy_protocol: proxy,
            http2: http2.then(Default::default),
            ..Config::default()
        }
    }

    fn prelude(proxy: bool, http2: bool) -> Prelude {
        Prelude::new(&config(proxy, http2), Kind::Http)
    }

    #[test]
    #[cfg_attr(not(feature = "http2"), ignore = "HTTP/2 is not built in")]
    fn the_proxy_header_comes_first() {
        let mut p = prelude(true, true);
        assert_eq!(p.next_clear(b""), Next::ProxyHeader);
        assert_eq!(p.next_clear(PREFACE), Next::ProxyHeader);
        p.proxied();
        assert_eq!(p.next_clear(PREFACE), Next::Http2);
    }

    #[test]
    #[cfg_attr(not(feature = "http2"), ignore = "HTTP/2 is not built in")]
    fn the_preface_opens_http2_and_anything_else_http1() {
        let mut p = prelude(false, true);
        assert_eq!(p.next_clear(b""), Next::Http1, "the session reads first");
        assert_eq!(p.next_clear(b"PRI * HT"), Next::Read);
        assert_eq!(
            p.next_clear(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0"),
            Next::Http2
        );
        assert_eq!(p.next_clear(b"PRI / HTTP/1.1\r\n"), Next::Http1);
        // Decided once: a later request that looks like the preface is HTTP/1.1's.
        assert_eq!(p.next_clear(PREFACE), Next::Http1);
        assert!(!p.sniffing());
    }

    #[test]
    fn without_http2_or_on_a_redirect_port_there_is_nothing_to_sniff() {
        assert_eq!(prelude(false, false).next_clear(PREFACE), Next::Http1);
        let redirect = Kind::RedirectToHttps { port: 443 };
        let mut on_redirect = Prelude::new(&config(false, true), redirect);
        assert_eq!(on_redirect.next_clear(PREFACE), Next::Http1);
        assert_eq!(Prelude::resumed(false).next_clear(PREFACE), Next::Http1);
        assert_eq!(Prelude::resumed(true).next_clear(PREFACE), Next::Http2);
    }

    #[test]
    fn cleartext_on_a_tls_port_is_told_to_use_https() {
        let mut p = prelude(false, true);
        assert_eq!(p.cleartext(), Next::HttpsRequired);
        assert_eq!(p.next_clear(PREFACE), Next::Http1);
    }
}
