//! HTTPS: rustls between the transport and the `Session`.
//!
//! An `Acceptor` holds what every TLS connection of the process shares: the
//! rustls configuration, the certificates (swapped whole on reload), the
//! session-ticket keys and the TLS 1.2 session cache. Each connection is a
//! `Connection`, which the transports drive like a socket.

mod certs;
mod connection;
mod tickets;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::{ProducesTickets, ServerSessionMemoryCache};
use rustls::ServerConfig;

pub use connection::{Connection, Received};

use crate::config::Https;

/// TLS 1.2 sessions remembered for resumption by session ID, per process.
const SESSION_CACHE: usize = 16 * 1024;

pub struct Acceptor {
    config: Arc<ServerConfig>,
    resolver: Arc<certs::Resolver>,
    provider: Arc<CryptoProvider>,
    settings: Https,
}

impl Acceptor {
    /// Loads the certificates and ticket keys. The error is one line naming
    /// the file and the problem; `warn` hears of expired certificates.
    /// `h2`: offer HTTP/2 in ALPN, before http/1.1.
    pub fn new(
        settings: &Https,
        h2: bool,
        warn: &mut dyn FnMut(String),
    ) -> Result<Acceptor, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let store = certs::Store::load(settings, &provider, warn)?;
        Acceptor::with_store(store, settings, h2, provider)
    }

    /// An acceptor serving one certificate given as PEM text, for every
    /// name (for tests and fuzzing: no files, nothing to reload).
    pub fn from_pem(chain: &[u8], key: &[u8]) -> Result<Acceptor, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let store = certs::Store::from_pem(chain, key, &provider)?;
        Acceptor::with_store(store, &Https::default(), false, provider)
    }

    fn with_store(
        store: certs::Store,
        settings: &Https,
        h2: bool,
        provider: Arc<CryptoProvider>,
    ) -> Result<Acceptor, String> {
        let resolver = Arc::new(certs::Resolver::new(store));
        let ticketer: Arc<dyn ProducesTickets> = if settings.ticket_keys.is_empty() {
            // Random keys, rotated by rustls: resumption within this process.
            rustls::crypto::aws_lc_rs::Ticketer::new()
                .map_err(|e| format!("session tickets: {e}"))?
        } else {
            Arc::new(tickets::FileTicketer::load(&settings.ticket_keys)?)
        };
        // TLS 1.3 and 1.2 only; every suite rustls has is an AEAD one.
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("TLS configuration: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&resolver) as _);
        config.alpn_protocols = match h2 {
            true => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            false => vec![b"http/1.1".to_vec()],
        };
        // The server's order of suites, which puts AES-GCM first on CPUs
        // with AES instructions, rather than whatever a client lists first.
        config.ignore_client_order = true;
        config.ticketer = ticketer;
        config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
        Ok(Acceptor {
            config: Arc::new(config),
            resolver,
            provider,
            settings: settings.clone(),
        })
    }

    /// A new connection's TLS state.
    pub fn accept(&self) -> std::io::Result<Connection> {
        Connection::new(Arc::clone(&self.config))
    }

    /// Reads the certificate files again and, if every one loads, serves
    /// them to new handshakes from now on; otherwise keeps the old ones.
    /// Connections in flight keep what they negotiated either way.
    pub fn reload(&self, warn: &mut dyn FnMut(String)) -> Result<(), String> {
        let store = certs::Store::load(&self.settings, &self.provider, warn)?;
        self.resolver.replace(store);
        Ok(())
    }
}
