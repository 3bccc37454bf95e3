//! HTTPS: rustls between the transport and the [`Session`](crate::session::Session).
//!
//! An [`Acceptor`] holds what every TLS connection of the process shares: the
//! rustls configuration, the certificates (swapped whole on reload), the
//! session-ticket keys and the TLS 1.2 session cache. Each connection is a
//! [`Connection`], which the transports drive like a socket.

mod certs;
mod connection;
mod tickets;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::{ProducesTickets, ServerSessionMemoryCache};
use rustls::ServerConfig;

pub use certs::{Loaded, Managed};
pub use connection::{Connection, Received, MAX_SEALED};

use crate::config::Https;

/// TLS 1.2 sessions remembered for resumption by session ID, per process.
const SESSION_CACHE: usize = 16 * 1024;

/// The ALPN protocol of ACME's TLS-ALPN-01 validation (RFC 8737): the
/// handshake proves control of the name, and no data follows.
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// A chain and its key as PEM text (the chain may hold the key too),
/// checked to belong together, with the provider every acceptor uses.
pub fn certified_from_pem(chain: &[u8], key: &[u8]) -> Result<rustls::sign::CertifiedKey, String> {
    certs::certified_from_pem(chain, key, &rustls::crypto::aws_lc_rs::default_provider())
}

/// `certified_from_pem`, with what the leaf says (names, validity).
pub fn loaded_from_pem(chain: &[u8], key: &[u8]) -> Result<Loaded, String> {
    certified_from_pem(chain, key).map(certs::described)
}

/// A chain and key from files, checked to belong together, with what the
/// leaf says; errors name the file.
pub fn load_files(chain: &std::path::Path, key: &std::path::Path) -> Result<Loaded, String> {
    certs::load_pair(chain, key, &rustls::crypto::aws_lc_rs::default_provider())
}

/// A TLS-ALPN-01 challenge certificate and its key, both in `pem`. Not
/// checked to belong together: the check parses the certificate with
/// webpki, which refuses the critical acmeIdentifier extension (RFC 8737)
/// every such certificate has; the pair was made together by [`acme`](crate::acme).
pub fn challenge_from_pem(pem: &[u8]) -> Result<rustls::sign::CertifiedKey, String> {
    certs::unchecked_from_pem(pem, &rustls::crypto::aws_lc_rs::default_provider())
}

pub struct Acceptor {
    config: Arc<ServerConfig>,
    resolver: Arc<certs::Resolver>,
    provider: Arc<CryptoProvider>,
    settings: Https,
}

impl Acceptor {
    /// Loads the certificates and ticket keys. The error is one line naming
    /// the file and the problem; `warn` hears of expired certificates.
    /// `h2`: offer HTTP/2 in ALPN, before http/1.1. `managed`: certificates
    /// kept by ACME, chosen before the files' and answering TLS-ALPN-01.
    pub fn new(
        settings: &Https,
        h2: bool,
        managed: Option<Arc<dyn Managed>>,
        warn: &mut dyn FnMut(String),
    ) -> Result<Acceptor, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let store = certs::Store::load(settings, &provider, warn)?;
        Acceptor::with_store(store, settings, h2, managed, provider)
    }

    /// An acceptor serving one certificate given as PEM text, for every
    /// name (for tests and fuzzing: no files, nothing to reload).
    pub fn from_pem(chain: &[u8], key: &[u8]) -> Result<Acceptor, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let store = certs::Store::from_pem(chain, key, &provider)?;
        Acceptor::with_store(store, &Https::default(), false, None, provider)
    }

    fn with_store(
        store: certs::Store,
        settings: &Https,
        h2: bool,
        managed: Option<Arc<dyn Managed>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Acceptor, String> {
        let acme = managed.is_some();
        let resolver = Arc::new(certs::Resolver::new(store, managed));
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
        if acme {
            // Last: rustls picks by the server's order, so only a client
            // that offers nothing else (a CA validating) gets it.
            config.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
        }
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

    /// The configuration QUIC handshakes use: the same certificates (and
    /// their reloads) as TCP's, TLS 1.3 only (QUIC has no other), ALPN
    /// `h3`, and 0-RTT allowed; a QUIC server's early-data limit is all or
    /// nothing (RFC 9001 §4.6.1). Resumption is stateful, from this
    /// process's session cache, not by `--tls-ticket-key` tickets: rustls
    /// accepts early data only so, and each cached session is taken once,
    /// so a 0-RTT flight replayed to this process finds nothing to resume.
    /// What a 0-RTT request may do is decided per request ([`serve::h3`](crate::serve::h3)).
    #[cfg(feature = "http3")]
    pub fn quic_config(&self) -> Result<ServerConfig, String> {
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("QUIC's TLS configuration: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&self.resolver) as _);
        config.alpn_protocols = vec![b"h3".to_vec()];
        config.ignore_client_order = true;
        config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
        config.max_early_data_size = u32::MAX;
        Ok(config)
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
