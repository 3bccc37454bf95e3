//! Transports: they move bytes between a socket (or stdin/stdout) and a
//! `Session`, and decide nothing about HTTP.

pub(crate) mod accept;
pub mod activation;
pub(crate) mod announce;
pub mod cgi_exchange;
pub(crate) mod cgi_task;
pub(crate) mod clients;
pub(crate) mod connection;
pub mod event_loop;
#[cfg(feature = "http2")]
pub mod h2;
#[cfg(feature = "http3")]
pub mod h3;
pub(crate) mod idle;
pub(crate) mod lazy;
pub(crate) mod limits;
pub mod listen;
pub mod notify;
pub(crate) mod pacing;
pub(crate) mod park;
pub(crate) mod prelude;
pub(crate) mod proxy_header;
#[cfg(any(feature = "http2", feature = "http3"))]
pub(crate) mod script_pipes;
pub(crate) mod socket;
pub mod stdio;
pub(crate) mod stop;
#[cfg(feature = "uring")]
pub mod uring;
pub(crate) mod workers;
pub mod writer;

use std::time::{Duration, Instant};

/// After closing our side with unread client data around, keep reading for
/// at most this long, so that the client receives our last response before
/// the kernel would reset the connection over the unread bytes.
const LINGER: Duration = Duration::from_secs(2);

fn linger_deadline() -> Instant {
    Instant::now() + LINGER
}

/// After a response could not be sent: a client that took it slower than
/// `--min-rate` allows is named in the log (see `complaint`).
pub(crate) fn response_failed(
    e: &std::io::Error,
    pace: &crate::pace::Pace,
    client: &str,
    cfg: &crate::config::Config,
) {
    if e.kind() == std::io::ErrorKind::TimedOut && pace.too_slow() {
        let rate = cfg.min_rate;
        crate::complaint::complain(client, crate::complaint::Complaint::SlowResponse { rate });
    }
}

/// What the transports are given besides the configuration: the TLS
/// settings when they speak HTTPS.
#[derive(Clone, Default)]
pub struct Extras {
    #[cfg(feature = "tls")]
    pub tls: Option<std::sync::Arc<crate::tls::Acceptor>>,
    /// HTTP/3's UDP sockets, bound at start-up; the transport takes them.
    #[cfg(feature = "http3")]
    pub quic: std::sync::Arc<std::sync::Mutex<Vec<std::net::UdpSocket>>>,
}

impl Extras {
    /// Whether connections speak TLS.
    pub fn tls_on(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// A new connection's wire and kind: TLS when there are certificates.
    pub fn wire(&self) -> std::io::Result<(Wire, crate::session::Kind)> {
        use crate::session::Kind;
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return Ok((Wire::Tls(Box::new(tls.accept()?)), Kind::Https));
        }
        Ok((Wire::Clear, Kind::Http))
    }
}

/// How a connection's bytes travel: as they are, or through TLS.
pub enum Wire {
    Clear,
    #[cfg(feature = "tls")]
    Tls(Box<crate::tls::Connection>),
}

impl Wire {
    /// Where a response goes: `fd` (a socket when `socket`), through TLS
    /// when the connection has it.
    pub fn out<'a>(&'a mut self, fd: std::os::fd::BorrowedFd<'a>, socket: bool) -> writer::Out<'a> {
        match self {
            Wire::Clear => writer::Out::fd(fd, socket),
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => writer::Out::Tls { fd, tls },
        }
    }

    /// Reads what `fd` has and appends it to `buf`, decrypted over TLS.
    /// WouldBlock passes through.
    pub fn read(
        &mut self,
        fd: std::os::fd::BorrowedFd<'_>,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<Got> {
        match self {
            Wire::Clear => {
                let start = buf.len();
                buf.resize(start + READ_CHUNK, 0);
                let result = crate::sys::read(fd, &mut buf[start..]);
                buf.truncate(start + *result.as_ref().unwrap_or(&0));
                Ok(if result? == 0 {
                    Got::Closed
                } else {
                    Got::Bytes
                })
            }
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => match tls.receive(fd, buf)? {
                crate::tls::Received::Progress => Ok(Got::Bytes),
                crate::tls::Received::Closed => Ok(Got::Closed),
                crate::tls::Received::Cleartext => {
                    *self = Wire::Clear;
                    Ok(Got::Cleartext)
                }
            },
        }
    }

    /// Whether TLS agreed on HTTP/2 by ALPN.
    pub fn alpn_h2(&self) -> bool {
        match self {
            Wire::Clear => false,
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => tls.protocol() == Some(b"h2"),
        }
    }

    /// What TLS agreed on, once its handshake is over (for the log).
    pub fn tls_summary(&self) -> Option<crate::log::Tls> {
        match self {
            Wire::Clear => None,
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => tls.summary(),
        }
    }

    /// Whether the last read emptied the descriptor, as far as TLS can
    /// tell (a cleartext wire reads in the transport's own way: false).
    pub fn drained(&self) -> bool {
        match self {
            Wire::Clear => false,
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => tls.drained(),
        }
    }

    /// Over TLS: queues close_notify and writes what it can without
    /// waiting, before the descriptor closes.
    pub fn close(&mut self, fd: std::os::fd::BorrowedFd<'_>) {
        self.close_notify();
        let _ = self.out(fd, true).flush();
    }

    /// Over TLS: queues close_notify, for the next flush.
    pub fn close_notify(&mut self) {
        #[cfg(feature = "tls")]
        if let Wire::Tls(tls) = self {
            tls.close();
        }
    }
}

/// What a read brought.
#[derive(Debug, PartialEq, Eq)]
pub enum Got {
    /// Bytes for the session (over TLS, possibly none: a handshake step).
    Bytes,
    /// The client closed.
    Closed,
    /// A cleartext request on a TLS port: its bytes are in the buffer, and
    /// the wire is now `Clear`, for the answer `Session::https_required`
    /// gives.
    Cleartext,
}

/// How much is read per call.
pub(crate) const READ_CHUNK: usize = 16 * 1024;
