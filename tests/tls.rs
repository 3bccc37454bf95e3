//! HTTPS (cargo feature `tls`): handshakes and versions, ALPN, certificates by SNI,
//! key types and encodings, start-up errors, cleartext and broken handshakes on the TLS
//! port, `--redirect-http`, `--hsts`, session resumption, certificate reload on SIGHUP,
//! CGI's `HTTPS=on`, and TLS on inetd's pipes. Both modes wherever the behaviour applies
//! to both; every wait is bounded, everything runs on loopback.
//!
//! The test PKI (`common::Pki`) is made once per run of this binary: a root, an
//! intermediate, and leaves signed by it; clients trust the root alone.
#![cfg(feature = "tls")]

#[macro_use]
mod common;

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use rustls::client::Resumption;
use rustls::version::{TLS12, TLS13};
use rustls::{HandshakeKind, ProtocolVersion, SupportedProtocolVersion};

const STANDALONE: Mode = Mode::Standalone;

fn pki() -> &'static Pki {
    Pki::shared()
}

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root
}

/// The harness's certificate files (ECDSA, localhost, 127.0.0.1, ::1).
fn localhost_files() -> TlsFiles {
    pki().localhost().1.clone()
}

fn localhost_leaf() -> &'static Leaf {
    &pki().localhost().0
}

/// A client trusting the test root, offering `versions`, SNI `localhost`.
fn client(versions: &[&'static SupportedProtocolVersion]) -> TlsClient {
    TlsClient::new(pki().client_config_versions(versions), "localhost")
}

/// A client trusting the test root that never resumes: each handshake shows the
/// certificate the server uses now (a resumed session keeps the one it began with).
fn no_resumption_client() -> TlsClient {
    let mut config = pki().client_config();
    config.resumption = Resumption::disabled();
    TlsClient::new(config, "localhost")
}

/// A client that takes any certificate, sending `sni` (or no SNI at all).
fn any_cert_client(sni: Option<&str>) -> TlsClient {
    let mut config = client_config_accepting_any(rustls::DEFAULT_VERSIONS);
    config.enable_sni = sni.is_some();
    TlsClient::new(config, sni.unwrap_or("localhost"))
}

fn connect_with(server: &Server, client: &TlsClient) -> Conn {
    Connector::new(server.addr(), Some(client.clone())).connect()
}

fn get_a(conn: &mut Conn) -> Response {
    let resp = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body, b"alpha\n");
    resp
}

/// The certificate the server presented on `conn` (handshake completed).
fn served_cert(conn: &mut Conn) -> Vec<u8> {
    conn.handshake().expect("TLS handshake");
    conn.tls()
        .unwrap()
        .peer_certificates()
        .expect("a certificate")[0]
        .to_vec()
}

/// A plain TCP connection to `addr`.
fn plain(addr: SocketAddr) -> Conn {
    Conn::new(TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect"))
}

/// A scratch directory for certificate files, traversable by everyone.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

// ---------------------------------------------------------------------------------------
// Handshakes, versions, ALPN
// ---------------------------------------------------------------------------------------

fn get_over(mode: Mode, version: &'static SupportedProtocolVersion, wire: ProtocolVersion) {
    let root = site();
    let server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .log_format("common")
        .start();
    let mut conn = connect_with(&server, &client(&[version]));
    get_a(&mut conn);
    // Keep-alive over TLS: a second request on the same connection.
    get_a(&mut conn);
    let tls = conn.tls().unwrap();
    assert_eq!(tls.protocol_version(), Some(wire));
    assert_eq!(tls.alpn_protocol(), Some(&b"http/1.1"[..]), "ALPN http/1.1");
    let chain = tls.peer_certificates().unwrap();
    assert_eq!(chain[0], localhost_leaf().der, "the configured certificate");
    assert_eq!(chain.len(), 2, "leaf and intermediate, as in the file");
    // The access log is the same over TLS, with the body size.
    let line = server
        .stderr()
        .wait_line(|l| l.contains("\"GET /a.txt HTTP/1.1\""));
    assert!(
        line.starts_with("127.0.0.1 - - [") && line.ends_with("\" 200 6"),
        "{line}"
    );
}

fn get_over_tls13(mode: Mode) {
    get_over(mode, &TLS13, ProtocolVersion::TLSv1_3);
}

fn get_over_tls12(mode: Mode) {
    get_over(mode, &TLS12, ProtocolVersion::TLSv1_2);
}

/// A client that offers no ALPN is served all the same.
fn client_without_alpn_is_served(mode: Mode) {
    let root = site();
    let server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .start();
    let mut config = pki().client_config();
    config.alpn_protocols.clear();
    let mut conn = connect_with(&server, &TlsClient::new(config, "localhost"));
    get_a(&mut conn);
    assert_eq!(conn.tls().unwrap().alpn_protocol(), None);
}

/// A ClientHello without the supported_versions extension (so no TLS 1.3), as older
/// clients send it: legacy `version`, the given cipher suites, SNI localhost, P-256 and
/// ECDSA-SHA256 signatures.
fn legacy_client_hello(version: [u8; 2], suites: &[u16]) -> Vec<u8> {
    fn with_len16(bytes: &[u8]) -> Vec<u8> {
        let mut out = (bytes.len() as u16).to_be_bytes().to_vec();
        out.extend_from_slice(bytes);
        out
    }
    let mut sni = vec![0x00];
    sni.extend(with_len16(b"localhost"));
    let mut extensions = vec![0x00, 0x00];
    extensions.extend(with_len16(&with_len16(&sni)));
    extensions.extend([0x00, 0x0a]); // supported_groups: secp256r1
    extensions.extend(with_len16(&with_len16(&[0x00, 0x17])));
    extensions.extend([0x00, 0x0b, 0x00, 0x02, 0x01, 0x00]); // ec_point_formats
    extensions.extend([0x00, 0x0d]); // signature_algorithms: ecdsa_secp256r1_sha256
    extensions.extend(with_len16(&with_len16(&[0x04, 0x03])));
    let mut body = version.to_vec();
    body.extend((0..32u8).map(|i| i.wrapping_mul(37)));
    body.push(0); // no session id
    let suites: Vec<u8> = suites.iter().flat_map(|s| s.to_be_bytes()).collect();
    body.extend(with_len16(&suites));
    body.extend([0x01, 0x00]); // compression: null
    body.extend(with_len16(&extensions));
    let mut handshake = vec![0x01];
    handshake.extend(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend(body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend(with_len16(&handshake));
    record
}

/// ECDHE-ECDSA with AES-128-CBC-SHA and AES-256-CBC-SHA.
const CBC_SUITES: [u16; 2] = [0xc009, 0xc00a];
/// ECDHE-ECDSA with AES-128-GCM-SHA256.
const GCM_SUITE: u16 = 0xc02b;

/// What the server answers to a raw ClientHello before it closes.
fn answer_to(server: &Server, hello: &[u8]) -> Vec<u8> {
    let mut conn = plain(server.addr());
    conn.send(hello);
    conn.read_to_end().0
}

/// TLS 1.1 (whatever the suites) and TLS 1.2 with only CBC suites get an alert (or
/// nothing), never a ServerHello; the same hand-made hello with TLS 1.2 and an AEAD
/// suite does get one, so the refusals are about the version and the suites.
fn tls11_and_cbc_only_clients_are_refused(mode: Mode) {
    let root = site();
    let mut server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .start();
    let accepted = {
        let mut conn = plain(server.addr());
        conn.send(legacy_client_hello([0x03, 0x03], &[GCM_SUITE]));
        conn.take_exact(6)
    };
    assert_eq!(
        [accepted[0], accepted[1], accepted[2], accepted[5]],
        [0x16, 0x03, 0x03, 0x02],
        "TLS 1.2 with an AEAD suite: a ServerHello in a TLS 1.2 record"
    );
    let refused = [
        (
            "TLS 1.1, CBC",
            legacy_client_hello([0x03, 0x02], &CBC_SUITES),
        ),
        (
            "TLS 1.1, GCM offered",
            legacy_client_hello([0x03, 0x02], &[GCM_SUITE]),
        ),
        ("TLS 1.0", legacy_client_hello([0x03, 0x01], &CBC_SUITES)),
        (
            "TLS 1.2, CBC only",
            legacy_client_hello([0x03, 0x03], &CBC_SUITES),
        ),
    ];
    for (what, hello) in refused {
        let answer = answer_to(&server, &hello);
        assert!(
            answer.is_empty() || answer[0] == 0x15,
            "{what}: something other than an alert: {:02x?}",
            &answer[..answer.len().min(16)]
        );
    }
    server.assert_survived("/a.txt");
}

both_modes!(
    get_over_tls13,
    get_over_tls12,
    client_without_alpn_is_served,
    tls11_and_cbc_only_clients_are_refused,
);

// ---------------------------------------------------------------------------------------
// Bodies over TLS
// ---------------------------------------------------------------------------------------

/// An 8 MiB file, whole and as a range, and two pipelined requests in one TLS record.
fn large_file_and_pipelining_over_tls(mode: Mode) {
    const SIZE: usize = 8 << 20;
    let root = site();
    write_pattern_file(&root.join("big.bin"), SIZE as u64);
    let server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .start();
    let mut conn = connect_with(&server, &client(rustls::DEFAULT_VERSIONS));
    let resp = conn.roundtrip(request("GET", "/big.bin", &[]));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body.len(), SIZE);
    assert!(resp.body == pattern(SIZE), "the body differs from the file");
    let resp = conn.roundtrip(request(
        "GET",
        "/big.bin",
        &["Range: bytes=5000000-5000999"],
    ));
    assert_eq!(resp.status, 206);
    assert!(resp.body == pattern(5_001_000)[5_000_000..], "range bytes");
    let two = format!(
        "{}{}",
        request("GET", "/a.txt", &[]),
        request("HEAD", "/big.bin", &[])
    );
    conn.send(two);
    assert_eq!(conn.read_response().body, b"alpha\n");
    let head = conn.read_response_to("HEAD");
    assert_eq!(head.content_length(), Some(SIZE as u64));
}

both_modes!(large_file_and_pipelining_over_tls);

// ---------------------------------------------------------------------------------------
// Certificates by SNI: --tls-dir
// ---------------------------------------------------------------------------------------

/// A `--tls-dir` with an exact name, a wildcard and an unrelated name. The directory
/// names are not the certificates' names: the subjectAltNames decide.
struct SniDir {
    dir: tempfile::TempDir,
    exact: Leaf,
    wildcard: Leaf,
    other: Leaf,
}

fn sni_dir() -> SniDir {
    let dir = scratch();
    let exact = pki().leaf(&["www.example.org"]);
    let wildcard = pki().leaf(&["*.example.org"]);
    let other = pki().leaf(&["other.example", "alias.example"]);
    exact.write_certbot(dir.path(), "site-one");
    wildcard.write_certbot(dir.path(), "site-two");
    other.write_certbot(dir.path(), "site-three");
    SniDir {
        dir,
        exact,
        wildcard,
        other,
    }
}

fn tls_dir_server(mode: Mode, root: &Docroot, sni: &SniDir, fallback: bool) -> Server {
    let mut builder = Server::builder(mode, root.path())
        .arg("--tls-dir")
        .arg(sni.dir.path())
        .tls_client(any_cert_client(Some("localhost")));
    if fallback {
        builder = builder.args(localhost_files().args());
    }
    builder.start()
}

fn cert_for(server: &Server, sni: Option<&str>) -> Vec<u8> {
    served_cert(&mut connect_with(server, &any_cert_client(sni)))
}

/// An exact name beats the wildcard; the wildcard matches one label; other names, and
/// clients without SNI, get --tls-cert's certificate.
fn sni_picks_the_certificate(mode: Mode) {
    let root = site();
    let sni = sni_dir();
    let server = tls_dir_server(mode, &root, &sni, true);
    let fallback = localhost_leaf().der.to_vec();
    let cases: [(Option<&str>, &[u8], &str); 7] = [
        (
            Some("www.example.org"),
            &sni.exact.der,
            "exact beats wildcard",
        ),
        (Some("shop.example.org"), &sni.wildcard.der, "wildcard"),
        (Some("alias.example"), &sni.other.der, "second name"),
        (
            Some("a.b.example.org"),
            &fallback,
            "a wildcard is one label",
        ),
        (Some("example.org"), &fallback, "a wildcard needs its label"),
        (Some("unknown.test"), &fallback, "no match: --tls-cert"),
        (None, &fallback, "no SNI: --tls-cert"),
    ];
    for (name, want, why) in cases {
        assert!(cert_for(&server, name) == want, "{name:?}: {why}");
    }
    // A client that checks the name accepts what it gets, and is served.
    for name in ["www.example.org", "shop.example.org", "other.example"] {
        let verified = TlsClient::new(pki().client_config(), name);
        get_a(&mut connect_with(&server, &verified));
    }
}

/// Without --tls-cert, a name no certificate holds, and a client without SNI, are
/// refused in the handshake; the server goes on serving the names it has.
fn sni_without_fallback_refuses_unknown_names(mode: Mode) {
    let root = site();
    let sni = sni_dir();
    let mut server = tls_dir_server(mode, &root, &sni, false);
    for name in [Some("unknown.test"), Some("a.b.example.org"), None] {
        let mut conn = connect_with(&server, &any_cert_client(name));
        let result = conn.handshake();
        assert!(result.is_err(), "{name:?}: handshake succeeded");
    }
    assert!(cert_for(&server, Some("www.example.org")) == sni.exact.der.as_ref());
    if mode == STANDALONE {
        // Still the same process, serving.
        assert!(server.process().try_status().is_none(), "staticd died");
    }
}

/// --vhosts and --tls-dir together: SNI picks the certificate, Host the site.
fn vhosts_with_tls_dir(mode: Mode) {
    let root = Docroot::new();
    root.file("www.example.org/index.html", "www site\n");
    root.file("shop.example.org/index.html", "shop site\n");
    root.file("default/index.html", "default site\n");
    let sni = sni_dir();
    let server = Server::builder(mode, root.path())
        .arg("--vhosts")
        .arg("--tls-dir")
        .arg(sni.dir.path())
        .tls_client(any_cert_client(Some("localhost")))
        .start();
    for (name, body) in [
        ("www.example.org", "www site\n"),
        ("shop.example.org", "shop site\n"),
    ] {
        let verified = TlsClient::new(pki().client_config(), name);
        let mut conn = connect_with(&server, &verified);
        let host = format!("Host: {name}");
        let resp = conn.roundtrip(format!("GET / HTTP/1.1\r\n{host}\r\n\r\n"));
        assert_eq!(resp.status, 200, "{name}: {resp:#?}");
        assert_eq!(resp.body_str(), body, "{name}");
        // The Host header, not SNI, picks the site.
        let resp = conn.roundtrip("GET / HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n");
        assert_eq!(resp.body_str(), "default site\n", "{name}");
    }
}

both_modes!(
    sni_picks_the_certificate,
    sni_without_fallback_refuses_unknown_names,
    vhosts_with_tls_dir,
);

// ---------------------------------------------------------------------------------------
// Key types and encodings
// ---------------------------------------------------------------------------------------

/// ECDSA P-256 (PKCS#8, SEC1), RSA 2048 (PKCS#8, PKCS#1) and Ed25519 (PKCS#8) keys
/// each serve TLS 1.3 and TLS 1.2.
fn every_key_type_and_encoding_serves(mode: Mode) {
    let root = site();
    let dir = scratch();
    let cases = [
        (KeyType::EcdsaP256, KeyEncoding::Pkcs8),
        (KeyType::EcdsaP256, KeyEncoding::Sec1),
        (KeyType::Rsa2048, KeyEncoding::Pkcs8),
        (KeyType::Rsa2048, KeyEncoding::Pkcs1),
        (KeyType::Ed25519, KeyEncoding::Pkcs8),
    ];
    for (key_type, encoding) in cases {
        let leaf = pki().leaf_with(&LOCALHOST_NAMES, key_type, Validity::Current);
        let files = leaf.write_encoded(dir.path(), &format!("{key_type:?}-{encoding:?}"), encoding);
        let server = Server::builder(mode, root.path()).tls_files(&files).start();
        for version in [&TLS13, &TLS12] {
            let mut conn = connect_with(&server, &client(&[version]));
            get_a(&mut conn);
            assert!(
                conn.tls().unwrap().peer_certificates().unwrap()[0] == leaf.der,
                "{key_type:?} {encoding:?}"
            );
        }
    }
}

both_modes!(every_key_type_and_encoding_serves);

// ---------------------------------------------------------------------------------------
// Start-up errors
// ---------------------------------------------------------------------------------------

/// `staticd --root ROOT (--inetd | --port 0 --bind 127.0.0.1) ARGS` run to its exit.
fn run_with(mode: Mode, root: &Docroot, args: Vec<OsString>) -> Outcome {
    let mut all: Vec<OsString> = vec!["--root".into(), root.path().into()];
    match mode {
        Mode::Standalone => all.extend(["--port", "0", "--bind", "127.0.0.1"].map(OsString::from)),
        Mode::Inetd => all.push("--inetd".into()),
    }
    all.extend(args);
    run_to_exit(&all)
}

fn files_args(cert: &Path, key: &Path) -> Vec<OsString> {
    vec![
        "--tls-cert".into(),
        cert.into(),
        "--tls-key".into(),
        key.into(),
    ]
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Each broken certificate or key: one line naming the file, exit 1.
fn broken_files_are_one_line_startup_errors(mode: Mode) {
    let root = site();
    let dir = scratch();
    let good = localhost_files();
    let leaf = localhost_leaf();
    let write = |name: &str, contents: &[u8]| -> PathBuf {
        let path = dir.path().join(name);
        fs::write(&path, contents).unwrap();
        path
    };
    let missing_cert = dir.path().join("missing-cert.pem");
    let missing_key = dir.path().join("missing-key.pem");
    let cert_as_key = write("cert-as-key.pem", leaf.chain_pem.as_bytes());
    let key_as_cert = write(
        "key-as-cert.pem",
        leaf.key_pem(KeyEncoding::Pkcs8).as_bytes(),
    );
    let not_pem = write("not-pem.pem", b"this is not a certificate\n");
    let empty = write("empty.pem", b"");
    // The shape of `openssl pkcs8 -topk8 -v2 aes-256-cbc`: PBES2 and an opaque blob.
    let encrypted_der = der::encode(
        0x30,
        &[
            der::encode(
                0x30,
                &[
                    der::encode(
                        0x06,
                        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0d],
                    ),
                    der::encode(0x30, &[]),
                ]
                .concat(),
            ),
            der::encode(0x04, &[0x5a; 64]),
        ]
        .concat(),
    );
    let encrypted = write(
        "encrypted.key",
        pem("ENCRYPTED PRIVATE KEY", &encrypted_der).as_bytes(),
    );
    let other_key = write(
        "other.key",
        pki()
            .leaf(&["localhost"])
            .key_pem(KeyEncoding::Pkcs8)
            .as_bytes(),
    );

    let cases: Vec<(&str, Vec<OsString>, Vec<&str>)> = vec![
        (
            "missing certificate file",
            files_args(&missing_cert, &good.key),
            vec![path_str(&missing_cert)],
        ),
        (
            "missing key file",
            files_args(&good.cert, &missing_key),
            vec![path_str(&missing_key)],
        ),
        (
            "a key where the certificate should be",
            files_args(&key_as_cert, &good.key),
            vec![path_str(&key_as_cert), "certificate"],
        ),
        (
            "not PEM at all",
            files_args(&not_pem, &good.key),
            vec![path_str(&not_pem)],
        ),
        (
            "an empty certificate file",
            files_args(&empty, &good.key),
            vec![path_str(&empty)],
        ),
        (
            "a certificate where the key should be",
            files_args(&good.cert, &cert_as_key),
            vec![path_str(&cert_as_key), "key"],
        ),
        (
            "an encrypted key",
            files_args(&good.cert, &encrypted),
            vec![path_str(&encrypted), "encrypted"],
        ),
        (
            "a key that is not the certificate's",
            files_args(&good.cert, &other_key),
            vec![path_str(&other_key), "match"],
        ),
    ];
    for (what, args, needles) in cases {
        let outcome = run_with(mode, &root, args);
        eprintln!("{what}: {:?}", outcome.stderr);
        assert_startup_failure(&outcome, 1, &needles);
    }
}

/// --tls-dir problems and a bad ticket key: one line naming the path, exit 1.
fn broken_tls_dir_and_ticket_key_are_one_line_startup_errors(mode: Mode) {
    let root = site();
    let dir = scratch();
    let missing = dir.path().join("no-such-dir");
    let half = dir.path().join("half");
    fs::create_dir_all(half.join("site")).unwrap();
    fs::write(
        half.join("site/fullchain.pem"),
        localhost_leaf().chain_pem.as_bytes(),
    )
    .unwrap();
    let short_key = dir.path().join("short.key");
    fs::write(&short_key, [7u8; 32]).unwrap();

    let outcome = run_with(
        mode,
        &root,
        vec!["--tls-dir".into(), missing.clone().into()],
    );
    assert_startup_failure(&outcome, 1, &[path_str(&missing)]);

    // A host directory without privkey.pem.
    let outcome = run_with(mode, &root, vec!["--tls-dir".into(), half.clone().into()]);
    assert_startup_failure(&outcome, 1, &[path_str(&half.join("site"))]);

    let mut args = localhost_files().args();
    args.extend(["--tls-ticket-key".into(), short_key.clone().into()]);
    let outcome = run_with(mode, &root, args);
    assert_startup_failure(&outcome, 1, &[path_str(&short_key)]);
}

both_modes!(
    broken_files_are_one_line_startup_errors,
    broken_tls_dir_and_ticket_key_are_one_line_startup_errors,
);

#[test]
fn tls_cert_without_tls_key_is_a_usage_error() {
    let files = localhost_files();
    let outcome = run_to_exit(&[OsString::from("--tls-cert"), files.cert.into()]);
    assert_usage_error(&outcome, &["--tls-key"]);
}

/// An expired certificate: the server starts, warns once naming the file, and serves it.
#[test]
fn expired_certificate_warns_and_serves() {
    let root = site();
    let dir = scratch();
    let leaf = pki().leaf_with(&LOCALHOST_NAMES, KeyType::EcdsaP256, Validity::Expired);
    let files = leaf.write(dir.path(), "expired");
    let server = Server::builder(STANDALONE, root.path())
        .tls_files(&files)
        .tls_client(any_cert_client(Some("localhost")))
        .start();
    let cert = path_str(&files.cert).to_string();
    let is_warning =
        |l: &str| l.starts_with("staticd: warning: ") && l.contains(&cert) && l.contains("expired");
    server.stderr().wait_line(is_warning);
    let mut conn = server.connect();
    get_a(&mut conn);
    assert!(served_cert(&mut conn) == leaf.der.as_ref());
    let warnings = server
        .stderr()
        .snapshot()
        .iter()
        .filter(|l| is_warning(l))
        .count();
    assert_eq!(warnings, 1, "{:#?}", server.stderr().snapshot());
}

/// In inetd mode each process warns (on stderr, not into the connection) and serves.
#[test]
fn expired_certificate_warns_in_inetd_mode() {
    let root = site();
    let dir = scratch();
    let leaf = pki().leaf_with(&LOCALHOST_NAMES, KeyType::EcdsaP256, Validity::Expired);
    let files = leaf.write(dir.path(), "expired");
    let outcome = run_with(Mode::Inetd, &root, files.args());
    assert_eq!(outcome.status.code(), Some(0), "{outcome:#?}");
    let cert = path_str(&files.cert);
    assert!(
        outcome
            .stderr
            .iter()
            .any(|l| l.starts_with("staticd: warning: ")
                && l.contains(cert)
                && l.contains("expired")),
        "{outcome:#?}"
    );
}

// ---------------------------------------------------------------------------------------
// What else arrives on the TLS port
// ---------------------------------------------------------------------------------------

/// A cleartext HTTP request on the TLS port: a cleartext 400 that says to use HTTPS,
/// then the connection closes.
fn cleartext_request_gets_a_cleartext_400(mode: Mode) {
    let root = site();
    let mut server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .start();
    let mut conn = plain(server.addr());
    let resp = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.status, 400, "{resp:#?}");
    assert!(resp.has_token("connection", "close"), "{resp:#?}");
    assert!(
        resp.body_str().to_ascii_lowercase().contains("https"),
        "the body should say the port speaks HTTPS: {:?}",
        resp.body_str()
    );
    conn.assert_closed();
    server.assert_survived("/a.txt");
}

/// What a broken handshake may get: nothing, or a TLS alert record.
fn assert_alert_or_nothing(what: &str, got: &[u8]) {
    assert!(
        got.is_empty() || got.starts_with(&[0x15, 0x03]),
        "{what}: expected an alert or nothing, got {:02x?}",
        &got[..got.len().min(32)]
    );
}

/// A real ClientHello, as rustls sends it.
fn client_hello() -> Vec<u8> {
    let mut conn = client(rustls::DEFAULT_VERSIONS).connection();
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).unwrap();
    }
    hello
}

/// Garbage, a truncated ClientHello, and a client that stops after its ClientHello are
/// each closed within `--read-timeout 1` (well before the default ten seconds).
fn broken_handshakes_are_closed_within_the_read_timeout(mode: Mode) {
    let root = site();
    let mut server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .args(["--read-timeout", "1"])
        .start();
    let hello = client_hello();
    let garbage: Vec<u8> = (0..200u32).map(|i| (i * 97 % 251) as u8 | 0x80).collect();
    let cases: [(&str, &[u8]); 5] = [
        ("garbage", &garbage),
        ("a TLS record header only", &hello[..5]),
        ("a truncated ClientHello", &hello[..hello.len() / 2]),
        ("a ClientHello, then silence", &hello),
        ("nothing at all", &[]),
    ];
    // All at once: each is on its own timer.
    let started = Instant::now();
    let mut conns: Vec<Conn> = cases
        .iter()
        .map(|(_, bytes)| {
            let mut conn = plain(server.addr());
            conn.send(bytes);
            conn
        })
        .collect();
    // Default --read-timeout is 10 s: 8 s tells the two apart, with room for a slow
    // machine.
    let deadline = started + Duration::from_secs(8);
    for ((what, bytes), conn) in cases.iter().zip(&mut conns) {
        assert!(
            conn.wait_closed(deadline),
            "{what}: still open {:?} later, with --read-timeout 1",
            started.elapsed()
        );
        let got = conn.take_buffered();
        if bytes.len() == hello.len() {
            // The server's flight (ServerHello ...), then the close.
            assert!(got.starts_with(&[0x16, 0x03]), "{what}: {got:02x?}");
        } else {
            assert_alert_or_nothing(what, &got);
        }
    }
    server.assert_survived("/a.txt");
}

both_modes!(
    cleartext_request_gets_a_cleartext_400,
    broken_handshakes_are_closed_within_the_read_timeout,
);

// ---------------------------------------------------------------------------------------
// --redirect-http and --hsts
// ---------------------------------------------------------------------------------------

/// The redirect port's address, from its announcement.
fn redirect_addr(server: &Server, port: u16) -> SocketAddr {
    let line = server
        .stderr()
        .wait_line(|l| l.starts_with("staticd: redirecting to https on "));
    let addr: SocketAddr = line
        .trim_start_matches("staticd: redirecting to https on ")
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{line:?}: {e}"));
    assert_eq!(addr.port(), port, "{line}");
    addr
}

#[test]
fn redirect_http_answers_308_to_the_https_url() {
    let root = site();
    let port = free_port();
    let server = Server::builder(STANDALONE, root.path())
        .tls_files(&localhost_files())
        .args(["--redirect-http", &port.to_string(), "--hsts", "600"])
        .start();
    let addr = redirect_addr(&server, port);
    let tls_port = server.addr().port();
    // The redirect listener is no `listening on` line.
    let listening = server
        .stderr()
        .snapshot()
        .iter()
        .filter(|l| l.starts_with("staticd: listening on "))
        .count();
    assert_eq!(listening, 1, "{:#?}", server.stderr().snapshot());

    let cases = [
        (
            "GET /dir/a.txt?x=1&y=2 HTTP/1.1\r\nHost: example.test:8080\r\n\r\n",
            "GET",
            format!("https://example.test:{tls_port}/dir/a.txt?x=1&y=2"),
        ),
        (
            "HEAD / HTTP/1.1\r\nHost: example.test\r\n\r\n",
            "HEAD",
            format!("https://example.test:{tls_port}/"),
        ),
        (
            "POST /form HTTP/1.1\r\nHost: Example.Test\r\nContent-Length: 3\r\n\r\nabc",
            "POST",
            format!("https://Example.Test:{tls_port}/form"),
        ),
        (
            "GET /a.txt HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
            "GET",
            format!("https://[::1]:{tls_port}/a.txt"),
        ),
    ];
    for (req, method, location) in cases {
        let mut conn = plain(addr);
        conn.send(req);
        let resp = conn.read_response_to(method);
        assert_eq!(resp.status, 308, "{req:?}: {resp:#?}");
        let got = resp.header("location").unwrap_or_default();
        assert!(
            got.eq_ignore_ascii_case(&location),
            "{req:?}: Location {got:?}, want {location:?}"
        );
        assert_eq!(
            resp.header("strict-transport-security"),
            None,
            "no HSTS in cleartext"
        );
    }
    // The TLS port itself serves, with HSTS.
    let resp = server.connect().roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.body, b"alpha\n");
    assert_eq!(
        resp.header("strict-transport-security"),
        Some("max-age=600")
    );
}

/// With the TLS port 443, the redirect's Location names no port. Binding 443 needs
/// root (as in CI); elsewhere, or with 443 taken, there is nothing to test.
#[test]
fn redirect_to_port_443_names_no_port() {
    let ip = "127.0.0.44";
    let free =
        rustix::process::geteuid().is_root() && std::net::TcpListener::bind((ip, 443)).is_ok();
    if !free {
        eprintln!("not root, or {ip}:443 is taken: nothing to test");
        return;
    }
    let root = site();
    let port = free_port();
    let mut cmd = Command::new(staticd_bin());
    cmd.arg("--root")
        .arg(root.path())
        .args(["--port", "443", "--bind", ip, "--log-format", "off"])
        .args(["--redirect-http", &port.to_string()])
        .args(localhost_files().args());
    let (_child, stderr) = spawn_with_stderr(&mut cmd);
    let line = stderr.wait_line(|l| l.starts_with("staticd: redirecting to https on "));
    let addr: SocketAddr = line
        .trim_start_matches("staticd: redirecting to https on ")
        .parse()
        .unwrap_or_else(|e| panic!("{line:?}: {e}"));
    let resp = plain(addr).roundtrip("GET /x/y?z=1 HTTP/1.1\r\nHost: example.test:80\r\n\r\n");
    assert_eq!(resp.status, 308, "{resp:#?}");
    assert_eq!(
        resp.header("location"),
        Some("https://example.test/x/y?z=1"),
        "{resp:#?}"
    );
}

/// Every TLS response carries Strict-Transport-Security: files, errors, 304s.
fn hsts_on_every_tls_response(mode: Mode) {
    let root = site();
    let server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .args(["--hsts", "31536000"])
        .start();
    let mut conn = server.connect();
    let ok = conn.roundtrip(request("GET", "/a.txt", &[]));
    let etag = ok.header("etag").expect("ETag").to_string();
    let not_modified = conn.roundtrip(request(
        "GET",
        "/a.txt",
        &[&format!("If-None-Match: {etag}")],
    ));
    assert_eq!(not_modified.status, 304);
    let missing = conn.roundtrip(request("GET", "/missing", &[]));
    assert_eq!(missing.status, 404);
    for resp in [ok, not_modified, missing] {
        assert_eq!(
            resp.header("strict-transport-security"),
            Some("max-age=31536000"),
            "{resp:#?}"
        );
        assert_eq!(resp.header_count("strict-transport-security"), 1);
    }
}

/// Without --hsts, no Strict-Transport-Security.
fn no_hsts_without_the_flag(mode: Mode) {
    let root = site();
    let server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .start();
    let resp = server.connect().roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.header("strict-transport-security"), None);
}

both_modes!(hsts_on_every_tls_response, no_hsts_without_the_flag);

// ---------------------------------------------------------------------------------------
// Session resumption
// ---------------------------------------------------------------------------------------

/// A file of `len` random-looking bytes, as `openssl rand 80` makes.
fn ticket_key(dir: &Path, name: &str, len: usize) -> PathBuf {
    let path = dir.join(name);
    let mut bytes = Vec::with_capacity(len);
    let mut state = std::process::id() as u64 ^ name.len() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    for _ in 0..len {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        bytes.push((state >> 33) as u8);
    }
    fs::write(&path, bytes).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    path
}

/// One full request on a new connection; how its handshake went.
fn handshake_kind(server: &Server, client: &TlsClient) -> HandshakeKind {
    let mut conn = connect_with(server, client);
    // Reading the response also takes in the session tickets sent before it.
    get_a(&mut conn);
    conn.tls()
        .unwrap()
        .handshake_kind()
        .expect("handshake done")
}

/// Two servers (standalone) or two per-connection processes (inetd) given `args`.
fn two_servers(mode: Mode, root: &Docroot, args: &[OsString]) -> (Server, Option<Server>) {
    let start = || {
        Server::builder(mode, root.path())
            .tls_files(&localhost_files())
            .args(args)
            .start()
    };
    match mode {
        Mode::Standalone => (start(), Some(start())),
        Mode::Inetd => (start(), None),
    }
}

fn resumption_across_processes(
    mode: Mode,
    version: &'static SupportedProtocolVersion,
    shared_key: bool,
) -> HandshakeKind {
    let root = site();
    let dir = scratch();
    let mut args = Vec::new();
    if shared_key {
        args.push("--tls-ticket-key".into());
        args.push(ticket_key(dir.path(), "ticket.key", 80).into());
    }
    let (first, second) = two_servers(mode, &root, &args);
    let tls = client(&[version]);
    assert_eq!(handshake_kind(&first, &tls), HandshakeKind::Full);
    handshake_kind(second.as_ref().unwrap_or(&first), &tls)
}

/// --tls-ticket-key shared by two processes: a session from one resumes on the other,
/// with TLS 1.3 and TLS 1.2 tickets.
fn shared_ticket_key_resumes_across_processes(mode: Mode) {
    for version in [&TLS13, &TLS12] {
        assert_eq!(
            resumption_across_processes(mode, version, true),
            HandshakeKind::Resumed,
            "{:?}",
            version.version
        );
    }
}

/// Without it, each process has its own ticket keys: no resumption across processes.
fn no_resumption_across_processes_without_a_ticket_key(mode: Mode) {
    assert_eq!(
        resumption_across_processes(mode, &TLS13, false),
        HandshakeKind::Full
    );
}

/// Two ticket keys: the first issues, the second still decrypts. A server given (new,
/// old) resumes sessions that a server given only `old` issued.
fn second_ticket_key_still_decrypts(mode: Mode) {
    let root = site();
    let dir = scratch();
    let old = ticket_key(dir.path(), "old.key", 48);
    let new = ticket_key(dir.path(), "new-key.key", 80);
    let issuer = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .args(["--tls-ticket-key".as_ref(), old.as_os_str()])
        .start();
    let rotated = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .args([
            "--tls-ticket-key",
            path_str(&new),
            "--tls-ticket-key",
            path_str(&old),
        ])
        .start();
    let tls = client(&[&TLS13]);
    assert_eq!(handshake_kind(&issuer, &tls), HandshakeKind::Full);
    assert_eq!(handshake_kind(&rotated, &tls), HandshakeKind::Resumed);
}

both_modes!(
    shared_ticket_key_resumes_across_processes,
    no_resumption_across_processes_without_a_ticket_key,
    second_ticket_key_still_decrypts,
);

/// Within one process: TLS 1.3 tickets, and TLS 1.2 session IDs (a client that offers
/// no tickets), resume without any ticket key.
#[test]
fn sessions_resume_within_one_process() {
    let root = site();
    let server = Server::builder(STANDALONE, root.path())
        .tls_files(&localhost_files())
        .start();
    let tls13 = client(&[&TLS13]);
    assert_eq!(handshake_kind(&server, &tls13), HandshakeKind::Full);
    assert_eq!(handshake_kind(&server, &tls13), HandshakeKind::Resumed);

    let mut config = pki().client_config_versions(&[&TLS12]);
    config.resumption = Resumption::in_memory_sessions(16)
        .tls12_resumption(rustls::client::Tls12Resumption::SessionIdOnly);
    let session_ids = TlsClient::new(config, "localhost");
    assert_eq!(handshake_kind(&server, &session_ids), HandshakeKind::Full);
    assert_eq!(
        handshake_kind(&server, &session_ids),
        HandshakeKind::Resumed
    );
}

// ---------------------------------------------------------------------------------------
// SIGHUP: certificate reload (standalone)
// ---------------------------------------------------------------------------------------

/// New certificate files and SIGHUP: new handshakes get the new certificate, while a
/// large download begun before goes on to its last byte, correct. A broken file then
/// keeps the certificate in use and says so in one line.
#[test]
fn sighup_reloads_certificates_without_disturbing_downloads() {
    const SIZE: usize = 32 << 20;
    let root = site();
    write_pattern_file(&root.join("big.bin"), SIZE as u64);
    let dir = scratch();
    let first = pki().leaf(&LOCALHOST_NAMES);
    let files = first.write(dir.path(), "site");
    let mut server = Server::builder(STANDALONE, root.path())
        .tls_files(&files)
        .start();
    let tls = no_resumption_client();

    let mut download = connect_with(&server, &tls);
    download.send(request("GET", "/big.bin", &[]));
    let head = download.read_head();
    assert_eq!(head.content_length(), Some(SIZE as u64));
    let mut body = download.take_exact(1 << 20);
    assert!(served_cert(&mut download) == first.der.as_ref());

    let second = pki().leaf(&LOCALHOST_NAMES);
    second.write(dir.path(), "site");
    server.process().signal(rustix::process::Signal::HUP);
    server
        .stderr()
        .wait_line(|l| l == "staticd: reloaded certificates");
    let mut fresh = connect_with(&server, &tls);
    get_a(&mut fresh);
    assert!(
        served_cert(&mut fresh) == second.der.as_ref(),
        "a new handshake after SIGHUP got the old certificate"
    );

    body.extend(download.take_exact(SIZE - body.len()));
    assert!(body == pattern(SIZE), "the download differs from the file");
    // The connection is still usable after the reload.
    get_a(&mut download);

    // A broken certificate file: the second certificate stays, one line says why.
    fs::write(&files.cert, "not a certificate\n").unwrap();
    server.process().signal(rustix::process::Signal::HUP);
    let cert = path_str(&files.cert).to_string();
    let line = server
        .stderr()
        .wait_line(|l| l.starts_with("staticd: reload: "));
    assert!(line.contains(&cert), "{line}");
    let mut after = connect_with(&server, &tls);
    get_a(&mut after);
    assert!(served_cert(&mut after) == second.der.as_ref());

    // A new certificate whose key file was not replaced (yet): the key does not match,
    // so the second certificate stays.
    let third = pki().leaf(&LOCALHOST_NAMES);
    fs::write(&files.cert, third.chain_pem.as_bytes()).unwrap();
    let reload_errors = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.starts_with("staticd: reload: "))
            .count()
    };
    server.process().signal(rustix::process::Signal::HUP);
    server
        .stderr()
        .wait_for(IO_TIMEOUT, |lines| reload_errors(lines) >= 2)
        .unwrap_or_else(|| {
            panic!(
                "no reload error for a key that does not match: {:#?}",
                server.stderr().snapshot()
            )
        });
    let mut after = connect_with(&server, &tls);
    get_a(&mut after);
    assert!(served_cert(&mut after) == second.der.as_ref());
    assert!(server.process().try_status().is_none(), "staticd died");
}

/// After `--user`, a key only root may read (as certbot leaves it) cannot be reread:
/// SIGHUP then says so in one line naming the key and keeps serving the certificate
/// it has. Needs root to start as; elsewhere there is nothing to test.
#[test]
fn sighup_after_dropping_privileges_keeps_the_certificate_it_cannot_reread() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: nothing to test");
        return;
    }
    let root = site();
    let dir = scratch();
    let files = localhost_leaf().write(dir.path(), "site");
    fs::set_permissions(&files.key, fs::Permissions::from_mode(0o600)).unwrap();
    let mut server = Server::builder(STANDALONE, root.path())
        .tls_files(&files)
        .args(["--user", "nobody"])
        .start();
    let tls = no_resumption_client();
    get_a(&mut connect_with(&server, &tls));
    server.process().signal(rustix::process::Signal::HUP);
    let key = path_str(&files.key).to_string();
    let line = server
        .stderr()
        .wait_line(|l| l.starts_with("staticd: reload: "));
    assert!(line.contains(&key), "{line}");
    let mut conn = connect_with(&server, &tls);
    get_a(&mut conn);
    assert!(served_cert(&mut conn) == localhost_leaf().der.as_ref());
}

/// certbot's own layout: `live/README` beside the host directories, whose files are
/// relative symlinks into `archive/` (`fullchain1.pem`, ...). A renewal adds
/// `fullchain2.pem` and points the links at it; SIGHUP picks it up.
#[test]
fn certbot_live_directory_with_symlinks_and_renewal() {
    let root = site();
    let le = scratch();
    let live = le.path().join("live");
    let archive = le.path().join("archive/www.example.org");
    fs::create_dir_all(live.join("www.example.org")).unwrap();
    fs::create_dir_all(&archive).unwrap();
    fs::write(
        live.join("README"),
        "This directory contains your keys and certificates.\n",
    )
    .unwrap();
    let issue = |n: u32| -> Leaf {
        let leaf = pki().leaf(&["www.example.org"]);
        fs::write(
            archive.join(format!("fullchain{n}.pem")),
            leaf.chain_pem.as_bytes(),
        )
        .unwrap();
        fs::write(
            archive.join(format!("privkey{n}.pem")),
            leaf.key_pem(KeyEncoding::Pkcs8).as_bytes(),
        )
        .unwrap();
        for name in ["fullchain", "privkey"] {
            let link = live.join(format!("www.example.org/{name}.pem"));
            let tmp = live.join(format!("www.example.org/{name}.pem.new"));
            std::os::unix::fs::symlink(
                format!("../../archive/www.example.org/{name}{n}.pem"),
                &tmp,
            )
            .unwrap();
            fs::rename(&tmp, &link).unwrap();
        }
        leaf
    };
    let first = issue(1);
    let mut server = Server::builder(STANDALONE, root.path())
        .arg("--tls-dir")
        .arg(&live)
        .tls_client(any_cert_client(Some("localhost")))
        .start();
    assert!(cert_for(&server, Some("www.example.org")) == first.der.as_ref());
    let renewed = issue(2);
    server.process().signal(rustix::process::Signal::HUP);
    server
        .stderr()
        .wait_line(|l| l == "staticd: reloaded certificates");
    assert!(cert_for(&server, Some("www.example.org")) == renewed.der.as_ref());
    let verified = TlsClient::new(pki().client_config(), "www.example.org");
    get_a(&mut connect_with(&server, &verified));
}

/// SIGHUP rereads --tls-dir too: a host added afterwards gets its certificate.
#[test]
fn sighup_rereads_the_tls_dir() {
    let root = site();
    let sni = sni_dir();
    let server = tls_dir_server(STANDALONE, &root, &sni, true);
    let fallback = localhost_leaf().der.to_vec();
    assert!(cert_for(&server, Some("new.example")) == fallback);
    let added = pki().leaf(&["new.example"]);
    added.write_certbot(sni.dir.path(), "site-four");
    let mut server = server;
    server.process().signal(rustix::process::Signal::HUP);
    server
        .stderr()
        .wait_line(|l| l == "staticd: reloaded certificates");
    assert!(cert_for(&server, Some("new.example")) == added.der.as_ref());
    assert!(cert_for(&server, Some("www.example.org")) == sni.exact.der.as_ref());
}

// ---------------------------------------------------------------------------------------
// CGI over TLS
// ---------------------------------------------------------------------------------------

fn cgi_gets_https_on(mode: Mode) {
    let root = site();
    let script = root.file(
        "env.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nHTTPS=%s' \"${HTTPS-unset}\"\n",
    );
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let tls = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .arg("--cgi")
        .start();
    let resp = tls.connect().roundtrip(request("GET", "/env.cgi", &[]));
    assert_eq!(resp.body_str(), "HTTPS=on", "{resp:#?}");
    let cleartext = Server::builder(mode, root.path())
        .plain()
        .arg("--cgi")
        .start();
    let resp = cleartext
        .connect()
        .roundtrip(request("GET", "/env.cgi", &[]));
    assert_eq!(resp.body_str(), "HTTPS=unset", "{resp:#?}");
}

both_modes!(cgi_gets_https_on);

// ---------------------------------------------------------------------------------------
// How the server ends a TLS connection
// ---------------------------------------------------------------------------------------

/// Whenever the server closes after a complete response (`Connection: close`, HTTP/1.0,
/// a 400, a CGI body that ends with the connection), it sends `close_notify` first: a
/// client can tell a whole close-delimited body from a cut one.
fn complete_responses_end_with_close_notify(mode: Mode) {
    let root = site();
    let script = root.file(
        "nolen.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nno length\\n'\n",
    );
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .arg("--cgi")
        .start();
    let cases = [
        (
            "Connection: close",
            "GET /a.txt HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
            "alpha\n",
        ),
        ("HTTP/1.0", "GET /a.txt HTTP/1.0\r\n\r\n", "alpha\n"),
        ("a 400", "GET /a.txt HTTP/1.1\r\n\r\n", "400 Bad Request\n"),
        (
            "a close-delimited CGI body",
            "GET /nolen.cgi HTTP/1.0\r\n\r\n",
            "no length\n",
        ),
    ];
    for (what, req, body) in cases {
        let mut conn = server.connect();
        conn.send(req);
        let (bytes, _) = conn.read_to_end();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.starts_with("HTTP/1.1 ") && text.ends_with(body),
            "{what}: {text:?}"
        );
        assert_eq!(
            conn.ended_with_close_notify(),
            Some(true),
            "{what}: closed without close_notify"
        );
    }
}

both_modes!(complete_responses_end_with_close_notify);

/// A request sent one byte per TLS record is read whole.
fn request_in_one_byte_records_is_served(mode: Mode) {
    let root = site();
    let server = Server::builder(mode, root.path())
        .tls_files(&localhost_files())
        .start();
    let mut conn = server.connect();
    for byte in request("GET", "/a.txt", &[]).bytes() {
        conn.send([byte]);
    }
    assert_eq!(conn.read_response().body, b"alpha\n");
}

both_modes!(request_in_one_byte_records_is_served);

// ---------------------------------------------------------------------------------------
// Inetd mode on pipes
// ---------------------------------------------------------------------------------------

/// Child stdout and stdin as one byte stream.
struct Pipes {
    from: std::process::ChildStdout,
    to: std::process::ChildStdin,
}

impl Read for Pipes {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.from.read(buf)
    }
}

impl Write for Pipes {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.to.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.to.flush()
    }
}

/// `staticd --inetd` with TLS on two pipes (stdin, stdout), as tcpsvd or a test might
/// run it: two requests, the second closing; the plaintext that came back.
#[test]
fn inetd_speaks_tls_on_pipes() {
    let root = site();
    let mut cmd = Command::new(staticd_bin());
    cmd.args(["--inetd", "--log-format", "off", "--root"])
        .arg(root.path())
        .args(localhost_files().args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn staticd --inetd");
    let pipes = Pipes {
        from: child.stdout.take().unwrap(),
        to: child.stdin.take().unwrap(),
    };
    let mut guard = ChildGuard::new(child);
    let (tx, rx) = mpsc::channel();
    let config = Arc::new(pki().client_config());
    thread::spawn(move || {
        let conn = rustls::ClientConnection::new(config, "localhost".try_into().unwrap()).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, pipes);
        let result = (|| -> std::io::Result<Vec<u8>> {
            tls.write_all(request("GET", "/a.txt", &[]).as_bytes())?;
            tls.write_all(request("HEAD", "/a.txt", &["Connection: close"]).as_bytes())?;
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match tls.read(&mut buf) {
                    Ok(0) => return Ok(got),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(got),
                    Err(e) => return Err(e),
                }
            }
        })();
        let _ = tx.send(result.map_err(|e| e.to_string()));
    });
    let got = rx
        .recv_timeout(IO_TIMEOUT)
        .expect("no end of the TLS exchange within IO_TIMEOUT")
        .expect("TLS over the pipes");
    let responses = parse_responses(&got, &["GET", "HEAD"]);
    assert_eq!(responses[0].body, b"alpha\n");
    assert_eq!(responses[1].status, 200);
    assert!(responses[1].has_token("connection", "close"));
    let status = guard
        .wait_timeout(IO_TIMEOUT)
        .expect("staticd --inetd exits");
    assert_eq!(status.code(), Some(0), "{}", describe(status));
}

// ---------------------------------------------------------------------------------------
// The test PKI itself
// ---------------------------------------------------------------------------------------

mod pki_self_check {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    /// rustls (as a server, in memory) takes every key type and encoding the tests write,
    /// and a client trusting the test root accepts the chain, for exact and wildcard names.
    #[test]
    fn every_key_type_and_encoding_makes_a_working_server() {
        let pki = Pki::shared();
        let cases = [
            (KeyType::EcdsaP256, KeyEncoding::Pkcs8),
            (KeyType::EcdsaP256, KeyEncoding::Sec1),
            (KeyType::Rsa2048, KeyEncoding::Pkcs8),
            (KeyType::Rsa2048, KeyEncoding::Pkcs1),
            (KeyType::Ed25519, KeyEncoding::Pkcs8),
        ];
        for (key_type, encoding) in cases {
            let leaf = pki.leaf_with(
                &["a.example", "*.b.example", "127.0.0.1"],
                key_type,
                Validity::Current,
            );
            let chain: Vec<CertificateDer> =
                CertificateDer::pem_slice_iter(leaf.chain_pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .unwrap();
            assert_eq!(chain.len(), 2);
            let key = PrivateKeyDer::from_pem_slice(leaf.key_pem(encoding).as_bytes())
                .unwrap_or_else(|e| panic!("{key_type:?} {encoding:?}: {e:?}"));
            let server = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap_or_else(|e| panic!("{key_type:?} {encoding:?}: {e}"));
            for name in ["a.example", "x.b.example"] {
                let mut client = rustls::ClientConnection::new(
                    Arc::new(pki.client_config()),
                    name.to_string().try_into().unwrap(),
                )
                .unwrap();
                let mut srv = rustls::ServerConnection::new(Arc::new(server.clone())).unwrap();
                for _ in 0..10 {
                    let mut buf = Vec::new();
                    client.write_tls(&mut buf).unwrap();
                    srv.read_tls(&mut &buf[..]).unwrap();
                    srv.process_new_packets().unwrap();
                    let mut buf = Vec::new();
                    srv.write_tls(&mut buf).unwrap();
                    client.read_tls(&mut &buf[..]).unwrap();
                    client
                        .process_new_packets()
                        .unwrap_or_else(|e| panic!("{key_type:?} {name}: {e}"));
                }
                assert!(!client.is_handshaking(), "{key_type:?} {name}");
                assert_eq!(client.peer_certificates().unwrap()[0], leaf.der);
            }
        }
    }
}
