//! A test PKI made in-process with rcgen (a root CA, an intermediate that signs every leaf,
//! leaves of each key type and encoding, expired ones), written as PEM files, and rustls
//! client configurations that trust its root.
//!
//! A leaf's chain file holds the leaf and the intermediate, as certbot's `fullchain.pem`
//! does; clients trust only the root, so a server that sent the leaf alone would fail.

use super::*;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::client::Resumption;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};
use std::sync::OnceLock;

/// The names of the harness's own certificate (`Pki::localhost`).
pub const LOCALHOST_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    EcdsaP256,
    Rsa2048,
    Ed25519,
}

/// How a private key is written in its PEM file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEncoding {
    /// `PRIVATE KEY` (every key type).
    Pkcs8,
    /// `EC PRIVATE KEY` (ECDSA only).
    Sec1,
    /// `RSA PRIVATE KEY` (RSA only).
    Pkcs1,
}

/// A certificate file and its key file, as `--tls-cert`/`--tls-key` take them.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    pub fn args(&self) -> Vec<OsString> {
        vec![
            "--tls-cert".into(),
            self.cert.clone().into(),
            "--tls-key".into(),
            self.key.clone().into(),
        ]
    }
}

/// A leaf certificate with its key and the chain up to (not including) the root.
pub struct Leaf {
    pub names: Vec<String>,
    pub key_type: KeyType,
    /// The leaf alone, as a client sees it first in the server's chain.
    pub der: CertificateDer<'static>,
    /// Leaf, then intermediate: a `fullchain.pem`.
    pub chain_pem: String,
    key_pkcs8: Vec<u8>,
}

impl Leaf {
    pub fn key_pem(&self, encoding: KeyEncoding) -> String {
        match encoding {
            KeyEncoding::Pkcs8 => pem("PRIVATE KEY", &self.key_pkcs8),
            KeyEncoding::Sec1 => {
                assert_eq!(self.key_type, KeyType::EcdsaP256, "SEC1 is for EC keys");
                pem("EC PRIVATE KEY", &der::pkcs8_to_sec1(&self.key_pkcs8))
            }
            KeyEncoding::Pkcs1 => {
                assert_eq!(self.key_type, KeyType::Rsa2048, "PKCS#1 is for RSA keys");
                pem("RSA PRIVATE KEY", &der::pkcs8_inner_key(&self.key_pkcs8))
            }
        }
    }

    /// Writes `DIR/STEM.crt` (the chain) and `DIR/STEM.key` (PKCS#8), readable by all
    /// (servers started `unprivileged()` must read them).
    pub fn write(&self, dir: &Path, stem: &str) -> TlsFiles {
        self.write_encoded(dir, stem, KeyEncoding::Pkcs8)
    }

    pub fn write_encoded(&self, dir: &Path, stem: &str, encoding: KeyEncoding) -> TlsFiles {
        fs::create_dir_all(dir).unwrap();
        let files = TlsFiles {
            cert: dir.join(format!("{stem}.crt")),
            key: dir.join(format!("{stem}.key")),
        };
        write_readable(&files.cert, self.chain_pem.as_bytes());
        write_readable(&files.key, self.key_pem(encoding).as_bytes());
        files
    }

    /// certbot's layout under a `--tls-dir`: `DIR/NAME/fullchain.pem` and
    /// `DIR/NAME/privkey.pem`.
    pub fn write_certbot(&self, tls_dir: &Path, name: &str) -> TlsFiles {
        let dir = tls_dir.join(name);
        fs::create_dir_all(&dir).unwrap();
        let files = TlsFiles {
            cert: dir.join("fullchain.pem"),
            key: dir.join("privkey.pem"),
        };
        write_readable(&files.cert, self.chain_pem.as_bytes());
        write_readable(&files.key, self.key_pem(KeyEncoding::Pkcs8).as_bytes());
        files
    }
}

/// A root CA, an intermediate CA and a directory for PEM files. [`Pki::shared`] is one per
/// test binary; the harness's own server certificate is [`Pki::localhost`].
pub struct Pki {
    root: CertificateDer<'static>,
    root_pem: String,
    intermediate: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
    localhost: OnceLock<(Leaf, TlsFiles)>,
}

impl Pki {
    pub fn new() -> Pki {
        let mut root_params = CertificateParams::default();
        root_params.distinguished_name = rcgen::DistinguishedName::new();
        root_params
            .distinguished_name
            .push(DnType::CommonName, "staticd test root CA");
        root_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        root_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let root = CertifiedIssuer::self_signed(root_params, KeyPair::generate().unwrap())
            .expect("root CA");

        let mut mid_params = CertificateParams::default();
        mid_params.distinguished_name = rcgen::DistinguishedName::new();
        mid_params
            .distinguished_name
            .push(DnType::CommonName, "staticd test intermediate CA");
        mid_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        mid_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        mid_params.use_authority_key_identifier_extension = true;
        let intermediate =
            CertifiedIssuer::signed_by(mid_params, KeyPair::generate().unwrap(), &root)
                .expect("intermediate CA");

        Pki {
            root: root.der().clone(),
            root_pem: root.pem(),
            intermediate,
            dir: pki_dir(),
            localhost: OnceLock::new(),
        }
    }

    /// The PKI of this test binary, made on first use.
    pub fn shared() -> &'static Pki {
        static PKI: OnceLock<Pki> = OnceLock::new();
        PKI.get_or_init(Pki::new)
    }

    /// A directory (kept until the test binary's next run) for files of this PKI.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The root certificate, PEM, for tools that take a CA file (`curl --cacert`).
    pub fn root_pem(&self) -> &str {
        &self.root_pem
    }

    pub fn root_der(&self) -> &CertificateDer<'static> {
        &self.root
    }

    /// Writes the root certificate to a file and returns its path.
    pub fn root_file(&self) -> PathBuf {
        let path = self.dir.join("root-ca.pem");
        if !path.exists() {
            write_readable(&path, self.root_pem.as_bytes());
        }
        path
    }

    /// The harness's server certificate (ECDSA P-256, for localhost, 127.0.0.1 and ::1)
    /// and its files.
    pub fn localhost(&self) -> &(Leaf, TlsFiles) {
        self.localhost.get_or_init(|| {
            let leaf = self.leaf(&LOCALHOST_NAMES);
            let files = leaf.write(&self.dir, "localhost");
            (leaf, files)
        })
    }

    /// A valid ECDSA P-256 leaf for `names` (DNS names, `*.` wildcards or IP addresses).
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        self.leaf_with(names, KeyType::EcdsaP256, Validity::Current)
    }

    pub fn leaf_with(&self, names: &[&str], key_type: KeyType, validity: Validity) -> Leaf {
        let key = match key_type {
            KeyType::EcdsaP256 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256),
            KeyType::Rsa2048 => KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256),
            KeyType::Ed25519 => KeyPair::generate_for(&rcgen::PKCS_ED25519),
        }
        .expect("generate a key");
        let owned: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(owned.clone()).expect("certificate names");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("staticd"),
        );
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if key_type == KeyType::Rsa2048 {
            params.key_usages.push(KeyUsagePurpose::KeyEncipherment);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        if validity == Validity::Expired {
            params.not_before = rcgen::date_time_ymd(2001, 1, 1);
            params.not_after = rcgen::date_time_ymd(2002, 1, 1);
        } else {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2999, 1, 1);
        }
        let cert = params
            .signed_by(&key, &self.intermediate)
            .expect("sign leaf");
        Leaf {
            names: owned,
            key_type,
            der: cert.der().clone(),
            chain_pem: format!("{}{}", cert.pem(), self.intermediate.pem()),
            key_pkcs8: key.serialize_der(),
        }
    }

    /// A client trusting this PKI's root: TLS 1.3 and 1.2, ALPN `http/1.1`, and a
    /// session cache of its own (so resumption depends only on what this config saw).
    pub fn client_config(&self) -> ClientConfig {
        self.client_config_versions(rustls::DEFAULT_VERSIONS)
    }

    /// [`Pki::client_config`] offering only `versions`.
    pub fn client_config_versions(
        &self,
        versions: &[&'static SupportedProtocolVersion],
    ) -> ClientConfig {
        let mut roots = RootCertStore::empty();
        roots.add(self.root.clone()).expect("trust the test root");
        let mut config = ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_protocol_versions(versions)
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config.resumption = Resumption::in_memory_sessions(64);
        config
    }
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// 2020 to 2999.
    Current,
    /// 2001 to 2002.
    Expired,
}

/// A client configuration and the name it sends as SNI (and checks the certificate for).
#[derive(Clone)]
pub struct TlsClient {
    pub config: Arc<ClientConfig>,
    pub name: ServerName<'static>,
}

impl TlsClient {
    pub fn new(config: ClientConfig, name: &str) -> TlsClient {
        TlsClient {
            config: Arc::new(config),
            name: ServerName::try_from(name.to_string()).expect("a valid server name"),
        }
    }

    /// What the harness uses in a TLS cell: the shared PKI, SNI `localhost`, a
    /// session cache of its own.
    pub fn localhost() -> TlsClient {
        TlsClient::new(Pki::shared().client_config(), "localhost")
    }

    /// The same client offering `h2` before `http/1.1` in ALPN, as curl does.
    pub fn offering_h2(&self) -> TlsClient {
        let mut config = (*self.config).clone();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        TlsClient {
            config: Arc::new(config),
            name: self.name.clone(),
        }
    }

    pub fn connection(&self) -> rustls::ClientConnection {
        let mut conn = rustls::ClientConnection::new(self.config.clone(), self.name.clone())
            .expect("start a TLS client connection");
        // Requests written before the handshake completes wait in rustls, unbounded.
        conn.set_buffer_limit(None);
        conn
    }
}

/// Writes a file with mode 0644.
fn write_readable(path: &Path, contents: &[u8]) {
    // Written aside and renamed into place: a server may be reading the old one.
    let tmp = path.with_extension("tmp-write");
    fs::write(&tmp, contents).unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).unwrap();
    fs::rename(&tmp, path).unwrap();
}

/// `CARGO_TARGET_TMPDIR/test-pki/<pid>` (or the temp directory's, see below), after removing the directories of processes
/// that are gone (earlier runs).
fn pki_dir() -> PathBuf {
    let target_tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    // A checkout other users cannot enter (root's 0700 home): the system's
    // temp directory instead, where a server running as nobody reads them.
    let base = match super::reachable_by_all(target_tmp) {
        true => target_tmp.join("test-pki"),
        false => std::env::temp_dir().join("staticd-test-pki"),
    };
    fs::create_dir_all(&base).unwrap();
    if let Ok(entries) = fs::read_dir(&base) {
        for entry in entries.flatten() {
            let pid = entry.file_name();
            let alive = Path::new("/proc").join(&pid).exists();
            if !alive && pid.to_string_lossy().parse::<u32>().is_ok() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = base.join(std::process::id().to_string());
    fs::create_dir_all(&dir).unwrap();
    // Traversable by a server that runs as nobody.
    for d in [base.as_path(), dir.as_path()] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// PEM armour: base64 in 64-column lines.
pub fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Just enough DER to re-wrap a PKCS#8 key as SEC1 or PKCS#1.
pub mod der {
    /// One TLV: (tag, the whole element, its contents).
    fn element(bytes: &[u8]) -> (u8, &[u8], &[u8]) {
        let tag = bytes[0];
        let (len, header) = match bytes[1] {
            n if n < 0x80 => (n as usize, 2),
            n => {
                let count = (n & 0x7f) as usize;
                let len = bytes[2..2 + count]
                    .iter()
                    .fold(0usize, |acc, b| (acc << 8) | *b as usize);
                (len, 2 + count)
            }
        };
        (tag, &bytes[..header + len], &bytes[header..header + len])
    }

    /// The elements inside a constructed element's contents.
    fn children(mut contents: &[u8]) -> Vec<(u8, &[u8], &[u8])> {
        let mut out = Vec::new();
        while !contents.is_empty() {
            let e = element(contents);
            contents = &contents[e.1.len()..];
            out.push(e);
        }
        out
    }

    pub fn encode(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let len = contents.len();
        if len < 0x80 {
            out.push(len as u8);
        } else {
            let bytes: Vec<u8> = len
                .to_be_bytes()
                .into_iter()
                .skip_while(|b| *b == 0)
                .collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
        out.extend_from_slice(contents);
        out
    }

    /// PKCS#8 PrivateKeyInfo -> the algorithm-specific key in its privateKey OCTET STRING
    /// (RSAPrivateKey for RSA: PKCS#1).
    pub fn pkcs8_inner_key(pkcs8: &[u8]) -> Vec<u8> {
        let (_, _, info) = element(pkcs8);
        let fields = children(info);
        assert_eq!(fields[2].0, 0x04, "PKCS#8 privateKey is an OCTET STRING");
        fields[2].2.to_vec()
    }

    /// PKCS#8 with an EC key -> SEC1 ECPrivateKey with the curve named in `[0]`, as
    /// `openssl ec` writes it.
    pub fn pkcs8_to_sec1(pkcs8: &[u8]) -> Vec<u8> {
        let (_, _, info) = element(pkcs8);
        let fields = children(info);
        let algorithm = children(fields[1].2);
        let curve = algorithm[1].1;
        let inner = pkcs8_inner_key(pkcs8);
        let (_, _, ec) = element(&inner);
        let ec_fields = children(ec);
        let mut contents = Vec::new();
        contents.extend_from_slice(ec_fields[0].1); // version 1
        contents.extend_from_slice(ec_fields[1].1); // the private key
        if !ec_fields.iter().any(|f| f.0 == 0xa0) {
            contents.extend(encode(0xa0, curve));
        }
        for f in &ec_fields[2..] {
            contents.extend_from_slice(f.1);
        }
        encode(0x30, &contents)
    }
}

/// A client that takes any certificate (still checking the handshake signatures), to see
/// which certificate a server chose when it is not one the client would accept: another
/// name's, or an expired one. What it got is in `peer_certificates()`.
pub fn client_config_accepting_any(versions: &[&'static SupportedProtocolVersion]) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .expect("protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = Resumption::disabled();
    config
}

#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
