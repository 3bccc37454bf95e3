//! The protocol matrix: mode x wire x HTTP version x transport, one [`Variant`] per cell.
//!
//! A black-box test that should hold however the server is reached takes a `Variant`
//! and starts its servers with it (`Server::start(v, &root)`, `Server::builder(v, ..)`);
//! [`matrix!`](crate::matrix) turns it into one `#[test]` per cell at compile time, so a
//! plain `cargo test` runs every cell and each can be picked by name:
//!
//! | cell     | wire      | HTTP of the harness's hyper clients and `exchange` | transport          |
//! |----------|-----------|-----------------------------------------------------|--------------------|
//! | `h1`     | cleartext | HTTP/1.1                                            | epoll              |
//! | `tls`    | TLS       | HTTP/1.1                                            | epoll              |
//! | `h2c`    | cleartext | HTTP/2 with prior knowledge                         | epoll              |
//! | `h2_tls` | TLS       | HTTP/2 by ALPN `h2`                                 | epoll              |
//! | `h3`     | TLS       | HTTP/3 over QUIC (UDP, the same port), ALPN `h3`    | epoll (+ QUIC)     |
//! | `uring`  | cleartext | HTTP/1.1                                            | `--io-uring`       |
//!
//! Over TLS every server the harness starts gets the harness's localhost certificate
//! and its clients speak TLS to it, except where a test opts out (`Builder::plain`) or
//! chose its own TLS flags (`Builder::tls_files`, `Builder::tls_client`). Raw [`Conn`]s
//! speak HTTP/1.1 in every cell (they test its framing). The uring cell adds
//! `--io-uring` to every standalone server; inetd servers have no transport to choose,
//! so a test gets that cell only in standalone mode. The h3 cell is standalone only too:
//! inetd mode has one TCP connection on stdin and no UDP socket. Its raw `Conn`s speak
//! HTTP/1.1 over TLS over TCP, as in `h2_tls`.
//!
//! Cells are generated only where the build has what they need: `tls`, `h2c`, `h2_tls`
//! need the cargo features `tls` and `http2` (on by default), `h3` needs `http3` (on by
//! default), `uring` needs `--features uring`. The variables STATICD_TEST_TLS=0,
//! STATICD_TEST_H2=0, STATICD_TEST_H3=0 and STATICD_TEST_IO_URING=0 filter cells out at
//! run time (each such cell prints one `skipped:` line and passes); unset, or any other
//! value, runs them.

use super::*;

/// Cleartext TCP or TLS over TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    Plain,
    Tls,
}

/// How a standalone server does its I/O: its event loop (epoll), or `--io-uring`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Epoll,
    IoUring,
}

/// One cell of the protocol matrix: what the harness starts and how its clients talk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub mode: Mode,
    pub wire: Wire,
    /// What the harness's clients (and [`Server::exchange`]) speak, when the server
    /// speaks it (not `--io-uring`, not `--no-http2`; HTTP/3: standalone, TLS, not
    /// `--no-http3`).
    pub http: Proto,
    /// Standalone servers only.
    pub transport: Transport,
}

/// A mode alone is its `h1` cell: cleartext HTTP/1.1 on the event loop.
impl From<Mode> for Variant {
    fn from(mode: Mode) -> Variant {
        Variant::h1(mode)
    }
}

impl Variant {
    pub const fn h1(mode: Mode) -> Variant {
        Variant {
            mode,
            wire: Wire::Plain,
            http: Proto::Http1,
            transport: Transport::Epoll,
        }
    }

    pub const fn tls(mode: Mode) -> Variant {
        Variant {
            wire: Wire::Tls,
            ..Variant::h1(mode)
        }
    }

    pub const fn h2c(mode: Mode) -> Variant {
        Variant {
            http: Proto::Http2,
            ..Variant::h1(mode)
        }
    }

    pub const fn h2_tls(mode: Mode) -> Variant {
        Variant {
            wire: Wire::Tls,
            http: Proto::Http2,
            ..Variant::h1(mode)
        }
    }

    /// HTTP/3 over QUIC; the server is the `tls` cell's (HTTPS, which turns HTTP/3 on).
    pub const fn h3(mode: Mode) -> Variant {
        Variant {
            wire: Wire::Tls,
            http: Proto::Http3,
            ..Variant::h1(mode)
        }
    }

    pub const fn uring(mode: Mode) -> Variant {
        Variant {
            transport: Transport::IoUring,
            ..Variant::h1(mode)
        }
    }

    /// The same cell in another mode (for a test that starts servers of both kinds).
    pub const fn with_mode(self, mode: Mode) -> Variant {
        Variant { mode, ..self }
    }

    pub fn is_tls(&self) -> bool {
        self.wire == Wire::Tls
    }

    pub fn is_h2(&self) -> bool {
        self.http == Proto::Http2
    }

    pub fn is_h3(&self) -> bool {
        self.http == Proto::Http3
    }

    /// HTTP/2 or HTTP/3: the cells whose clients send heads as fields.
    pub fn is_multiplexed(&self) -> bool {
        self.is_h2() || self.is_h3()
    }

    /// Whether a standalone server of this cell runs `--io-uring` (inetd ones never do).
    pub fn is_io_uring(&self) -> bool {
        self.mode == Mode::Standalone && self.transport == Transport::IoUring
    }

    /// Why STATICD_TEST_TLS/H2/H3/IO_URING=0 leaves this cell out, if one does.
    pub fn filtered_out(&self) -> Option<&'static str> {
        let off = |var: &str| std::env::var_os(var).is_some_and(|v| v == "0");
        if self.is_tls() && off("STATICD_TEST_TLS") {
            return Some("STATICD_TEST_TLS=0 leaves out the TLS cells");
        }
        if self.is_h2() && off("STATICD_TEST_H2") {
            return Some("STATICD_TEST_H2=0 leaves out the HTTP/2 cells");
        }
        if self.is_h3() && off("STATICD_TEST_H3") {
            return Some("STATICD_TEST_H3=0 leaves out the HTTP/3 cells");
        }
        if self.transport == Transport::IoUring && off("STATICD_TEST_IO_URING") {
            return Some("STATICD_TEST_IO_URING=0 leaves out the io_uring cells");
        }
        None
    }

    /// Runs `test` in this cell, unless an environment filter leaves the cell out: then
    /// one `skipped:` line on stderr (not a tool skip, so STATICD_TEST_REQUIRE_TOOLS
    /// does not turn it into a failure).
    pub fn run(self, test: fn(Variant)) {
        if let Some(why) = self.filtered_out() {
            let name = thread::current().name().unwrap_or("a test").to_string();
            let line = format!("skipped: {name}: {why}\n");
            let _ = io::stderr().lock().write_all(line.as_bytes());
            return;
        }
        test(self)
    }
}

/// Generates the cells of the protocol matrix for test functions taking a [`Variant`]:
///
/// ```ignore
/// matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes: get_is_served, head_has_no_body);
/// matrix!([h1, tls, uring] standalone: sigterm_drains);
/// matrix!([h1, tls] inetd: exits_after_the_connection);
/// matrix!([h1, tls] both_modes: #[ignore = "server bug: ..."] a_known_failure);
/// ```
///
/// `both_modes:` makes `NAME::standalone::CELL` and `NAME::inetd::CELL` (no
/// `inetd::uring`: inetd has no transport to choose; no `inetd::h3`: inetd has no UDP
/// socket); `standalone:` and `inetd:` make
/// `NAME::CELL` in that mode. The cell list is the suite's: the cells it is meant to hold
/// in (see `.ci/run` for why a suite has the cells it has). A cell whose cargo features
/// are off is not generated. Attributes before a name (`#[ignore = ".."]`) go on each of
/// its cells.
#[macro_export]
macro_rules! matrix {
    ($cells:tt both_modes: $($(#[$attr:meta])* $name:ident),+ $(,)?) => {
        $(
            mod $name {
                mod standalone {
                    $crate::matrix!(@cells super::super::$name, Standalone, $cells, [$(#[$attr])*]);
                }
                mod inetd {
                    $crate::matrix!(@cells super::super::$name, Inetd, $cells, [$(#[$attr])*]);
                }
            }
        )+
    };
    ($cells:tt standalone: $($(#[$attr:meta])* $name:ident),+ $(,)?) => {
        $(
            mod $name {
                $crate::matrix!(@cells super::$name, Standalone, $cells, [$(#[$attr])*]);
            }
        )+
    };
    ($cells:tt inetd: $($(#[$attr:meta])* $name:ident),+ $(,)?) => {
        $(
            mod $name {
                $crate::matrix!(@cells super::$name, Inetd, $cells, [$(#[$attr])*]);
            }
        )+
    };
    (@cells $test:path, $mode:ident, [$($cell:ident),+ $(,)?], $attrs:tt) => {
        $( $crate::matrix!(@cell $test, $mode, $cell, $attrs); )+
    };
    (@cell $test:path, $mode:ident, h1, [$(#[$attr:meta])*]) => {
        #[test]
        $(#[$attr])*
        fn h1() {
            $crate::common::Variant::h1($crate::common::Mode::$mode).run($test)
        }
    };
    (@cell $test:path, $mode:ident, tls, [$(#[$attr:meta])*]) => {
        #[cfg(feature = "tls")]
        #[test]
        $(#[$attr])*
        fn tls() {
            $crate::common::Variant::tls($crate::common::Mode::$mode).run($test)
        }
    };
    (@cell $test:path, $mode:ident, h2c, [$(#[$attr:meta])*]) => {
        #[cfg(feature = "http2")]
        #[test]
        $(#[$attr])*
        fn h2c() {
            $crate::common::Variant::h2c($crate::common::Mode::$mode).run($test)
        }
    };
    (@cell $test:path, $mode:ident, h2_tls, [$(#[$attr:meta])*]) => {
        #[cfg(all(feature = "tls", feature = "http2"))]
        #[test]
        $(#[$attr])*
        fn h2_tls() {
            $crate::common::Variant::h2_tls($crate::common::Mode::$mode).run($test)
        }
    };
    (@cell $test:path, Inetd, h3, $attrs:tt) => {};
    (@cell $test:path, Standalone, h3, [$(#[$attr:meta])*]) => {
        #[cfg(feature = "http3")]
        #[test]
        $(#[$attr])*
        fn h3() {
            $crate::common::Variant::h3($crate::common::Mode::Standalone).run($test)
        }
    };
    (@cell $test:path, Inetd, uring, $attrs:tt) => {};
    (@cell $test:path, Standalone, uring, [$(#[$attr:meta])*]) => {
        #[cfg(feature = "uring")]
        #[test]
        $(#[$attr])*
        fn uring() {
            $crate::common::Variant::uring($crate::common::Mode::Standalone).run($test)
        }
    };
}
