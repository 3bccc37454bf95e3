//! Transports: they move bytes between a socket (or stdin/stdout) and a
//! [`Session`](crate::session::Session), and decide nothing about HTTP.

pub(crate) mod accept;
pub mod activation;
pub(crate) mod announce;
pub mod cgi;
pub(crate) mod clients;
pub(crate) mod connection;
pub mod event_loop;
#[cfg(feature = "http2")]
pub mod h2;
#[cfg(feature = "http3")]
pub mod h3;
pub(crate) mod http1;
pub(crate) mod idle;
pub(crate) mod launch;
pub(crate) mod lazy;
pub(crate) mod limits;
pub mod listen;
pub mod notify;
pub(crate) mod pacing;
pub(crate) mod park;
pub(crate) mod prelude;
pub(crate) mod proxy_header;
pub(crate) mod ready;
pub(crate) mod socket;
pub mod stdio;
pub(crate) mod stop;
#[cfg(feature = "uring")]
pub mod uring;
pub mod wire;
pub(crate) mod workers;
pub mod writer;

use std::time::{Duration, Instant};

use wire::Wire;

/// After closing our side with unread client data around, keep reading for
/// at most this long, so that the client receives our last response before
/// the kernel would reset the connection over the unread bytes.
const LINGER: Duration = Duration::from_secs(2);

fn linger_deadline() -> Instant {
    Instant::now() + LINGER
}

/// What the transports are given besides the configuration: the TLS
/// settings when they speak HTTPS.
#[derive(Clone, Default)]
pub struct Extras {
    #[cfg(feature = "tls")]
    pub tls: Option<std::sync::Arc<crate::tls::Acceptor>>,
    /// HTTP/3's UDP sockets, bound at start-up, by worker; each worker
    /// takes its own.
    #[cfg(feature = "http3")]
    pub quic: std::sync::Arc<h3::Quic>,
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
    pub fn wire(&self) -> std::io::Result<(Wire, crate::origin::Kind)> {
        use crate::origin::Kind;
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return Ok((Wire::Tls(Box::new(tls.accept()?)), Kind::Https));
        }
        Ok((Wire::Clear, Kind::Http))
    }
}
