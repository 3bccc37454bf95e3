//! HTTPS for the comparison: the one certificate every server is given, and
//! the harness's own TLS client (rustls on aws-lc-rs), which checks the
//! servers, holds the idle TLS connections and runs the resumed-handshake
//! cells (`resume`).
//!
//! The client offers what wrk's OpenSSL 3 offers first, so that a server
//! negotiates the same with both: TLS 1.3, the cipher suites in OpenSSL's
//! default order (AES-256-GCM first) and X25519 only (rustls on aws-lc-rs
//! would otherwise offer X25519MLKEM768 first, which the OpenSSL peers do
//! not have and rustls servers would take).

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::client::{
    ClientSessionStore, Resumption, Tls12ClientSessionValue, Tls13ClientSessionValue,
};
use rustls::crypto::{aws_lc_rs, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, NamedGroup, RootCertStore, StreamOwned};

/// The name the certificate is for and the client asks for (SNI).
pub const SERVER_NAME: &str = "localhost";

/// A TLS client connection over TCP.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// The certificate, key and ticket-key files, and what trusts them.
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// 80 random bytes in the format nginx's `ssl_session_ticket_key` and
    /// staticd's `--tls-ticket-key` read: given to staticd-inetd only, whose
    /// processes would otherwise each have their own ticket keys and could
    /// never resume a session.
    pub ticket_key: PathBuf,
    /// "ECDSA P-256, CN/SAN localhost and 127.0.0.1, self-signed".
    pub about: String,
    cert_der: CertificateDer<'static>,
}

/// Writes a self-signed ECDSA P-256 certificate for `localhost` and
/// 127.0.0.1, its PKCS#8 key and a ticket key into `dir`. The files are
/// world-readable: some peers read them after dropping privileges.
pub fn write_files(dir: &Path) -> Result<TlsFiles, String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut params =
        rcgen::CertificateParams::new(vec![SERVER_NAME.to_string(), "127.0.0.1".to_string()])
            .map_err(|e| format!("certificate: {e}"))?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, SERVER_NAME);
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| format!("key: {e}"))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("certificate: {e}"))?;
    let files = TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        ticket_key: dir.join("ticket.key"),
        about: "ECDSA P-256 (SHA-256), self-signed, for localhost and 127.0.0.1".into(),
        cert_der: cert.der().clone(),
    };
    let mut ticket = [0u8; 80];
    rustls::crypto::aws_lc_rs::default_provider()
        .secure_random
        .fill(&mut ticket)
        .map_err(|e| format!("random: {e:?}"))?;
    for (path, bytes) in [
        (&files.cert, cert.pem().into_bytes()),
        (&files.key, key.serialize_pem().into_bytes()),
        (&files.ticket_key, ticket.to_vec()),
    ] {
        fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(files)
}

impl TlsFiles {
    /// A client that trusts this certificate and nothing else. With
    /// `resume`, it keeps the sessions the server gives it and offers them:
    /// a fresh config per server, since every server has the same name.
    pub fn client(&self, resume: bool) -> Arc<ClientConfig> {
        let base = aws_lc_rs::default_provider();
        // OpenSSL 3's default TLS 1.3 order, then TLS 1.2's AEAD suites.
        let order = [
            rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
            rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
            rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ];
        let suites = order
            .iter()
            .filter_map(|want| base.cipher_suites.iter().find(|s| s.suite() == *want))
            .copied()
            .collect();
        let provider = CryptoProvider {
            cipher_suites: suites,
            kx_groups: vec![aws_lc_rs::kx_group::X25519],
            ..base
        };
        let mut roots = RootCertStore::empty();
        roots
            .add(self.cert_der.clone())
            .expect("the harness's own certificate is valid");
        let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .expect("TLS 1.3 and 1.2 with these suites")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.resumption = if resume {
            Resumption::store(Arc::new(Sessions::default()))
        } else {
            Resumption::disabled()
        };
        Arc::new(config)
    }

    /// The same client, offering ALPN h2 and nothing else (HTTP/2 over
    /// TLS, as h2load offers it first), without resumption.
    pub fn h2_client(&self) -> Arc<ClientConfig> {
        let mut config = (*self.client(false)).clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        Arc::new(config)
    }

    /// The same client, offering ALPN h3 and nothing else, without
    /// resumption: the harness's HTTP/3 client (h3load.rs), whose QUIC
    /// takes TLS 1.3 of it (QUIC has no other version).
    #[cfg_attr(not(feature = "http3"), allow(dead_code))]
    pub fn h3_client(&self) -> Arc<ClientConfig> {
        let mut config = (*self.client(false)).clone();
        config.alpn_protocols = vec![b"h3".to_vec()];
        Arc::new(config)
    }
}

/// Connects and completes the handshake.
pub fn connect(
    addr: &SocketAddr,
    config: &Arc<ClientConfig>,
    timeout: Duration,
) -> io::Result<TlsStream> {
    let sock = TcpStream::connect_timeout(addr, timeout)?;
    sock.set_read_timeout(Some(timeout))?;
    sock.set_write_timeout(Some(timeout))?;
    sock.set_nodelay(true)?;
    let name = ServerName::try_from(SERVER_NAME).expect("a valid name");
    let conn = ClientConnection::new(config.clone(), name).map_err(io::Error::other)?;
    let mut stream = StreamOwned::new(conn, sock);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}

/// What a handshake with the harness's client settled on:
/// "TLSv1_3 TLS13_AES_256_GCM_SHA384 X25519".
pub fn negotiated(stream: &TlsStream) -> String {
    describe(&stream.conn)
}

/// What a client connection settled on, as `negotiated` says it.
pub fn describe(c: &ClientConnection) -> String {
    format!(
        "{} {} {}",
        c.protocol_version()
            .map_or("?".into(), |v| format!("{v:?}")),
        c.negotiated_cipher_suite()
            .map_or("?".into(), |s| format!("{:?}", s.suite())),
        c.negotiated_key_exchange_group()
            .map_or("?".into(), |g| format!("{:?}", g.name())),
    )
}

/// Reads what a `Connection: close` response sends until the end: a close
/// without close_notify (which rustls reports as UnexpectedEof) ends it too;
/// the caller checks the length.
pub fn read_to_close(stream: &mut impl Read, out: &mut Vec<u8>) -> io::Result<()> {
    match stream.read_to_end(out) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(()),
        Err(e) => Err(e),
    }
}

/// Sends close_notify, as a well-behaved client does before it closes.
pub fn close(stream: &mut TlsStream) {
    stream.conn.send_close_notify();
    let _ = stream.conn.complete_io(&mut stream.sock);
    let _ = stream.flush();
}

/// Whether the server has closed (or reset) the connection, without
/// blocking: records it sent meanwhile (tickets, a close_notify alert) are
/// taken in and looked at.
pub fn peer_gone(stream: &mut TlsStream) -> bool {
    if stream.sock.set_nonblocking(true).is_err() {
        return true;
    }
    loop {
        match stream.conn.read_tls(&mut stream.sock) {
            Ok(0) => return true,
            Ok(_) => match stream.conn.process_new_packets() {
                Ok(state) if state.peer_has_closed() => return true,
                Ok(_) => {}
                Err(_) => return true,
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// The sessions one server gave: every ticket is kept (up to `MAX_TICKETS`)
/// and the newest is offered first. rustls's own store keeps 8 tickets per
/// name, which 50 threads connecting at once would run out of: a thread
/// finding none makes a full handshake, which would be the client's doing,
/// not the server's. It serves one server, so it ignores the name.
#[derive(Debug, Default)]
struct Sessions {
    tls13: Mutex<VecDeque<Tls13ClientSessionValue>>,
    tls12: Mutex<Option<Tls12ClientSessionValue>>,
    kx_hint: Mutex<Option<NamedGroup>>,
}

const MAX_TICKETS: usize = 4096;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClientSessionStore for Sessions {
    fn set_kx_hint(&self, _: ServerName<'static>, group: NamedGroup) {
        *lock(&self.kx_hint) = Some(group);
    }

    fn kx_hint(&self, _: &ServerName<'_>) -> Option<NamedGroup> {
        *lock(&self.kx_hint)
    }

    fn set_tls12_session(&self, _: ServerName<'static>, value: Tls12ClientSessionValue) {
        *lock(&self.tls12) = Some(value);
    }

    fn tls12_session(&self, _: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        lock(&self.tls12).clone()
    }

    fn remove_tls12_session(&self, _: &ServerName<'static>) {
        *lock(&self.tls12) = None;
    }

    fn insert_tls13_ticket(&self, _: ServerName<'static>, value: Tls13ClientSessionValue) {
        let mut tickets = lock(&self.tls13);
        if tickets.len() == MAX_TICKETS {
            tickets.pop_front();
        }
        tickets.push_back(value);
    }

    fn take_tls13_ticket(&self, _: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        lock(&self.tls13).pop_back()
    }
}
