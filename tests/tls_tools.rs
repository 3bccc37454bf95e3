//! HTTPS against real outside clients: curl, openssl s_client, Python's `ssl` module,
//! ucspi-tcp's tcpserver and testssl.sh. Every test makes its own certificates with the
//! openssl CLI (an ECDSA P-256 CA and leaves signed by it), and skips itself when a tool
//! is missing (a failure under STATICD_TEST_REQUIRE_TOOLS=1, as in `.ci/run`).

#![cfg(feature = "tls")]

#[macro_use]
mod common;

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// Bound for one run of curl, openssl or python3.
const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// Bound for one testssl.sh run: about 70 s on loopback when run alone.
const TESTSSL_TIMEOUT: Duration = Duration::from_secs(420);

/// Prints straight to the process's stderr, where `cargo test` shows it even for a test
/// that passes (as `skip` does).
fn announce(line: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
}

/// `openssl` arguments that make a private key `{key}` in each format staticd reads.
const P256_PKCS8: &[&str] = &[
    "genpkey",
    "-algorithm",
    "EC",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-out",
    "{key}",
];
const P384_SEC1: &[&str] = &[
    "ecparam",
    "-name",
    "secp384r1",
    "-genkey",
    "-noout",
    "-out",
    "{key}",
];
const RSA_PKCS1: &[&str] = &["genrsa", "-traditional", "-out", "{key}", "2048"];
const ED25519_PKCS8: &[&str] = &["genpkey", "-algorithm", "ed25519", "-out", "{key}"];

/// A throw-away PKI: an ECDSA P-256 CA, and leaf certificates it signs.
struct Pki {
    openssl: PathBuf,
    dir: tempfile::TempDir,
}

/// A leaf certificate (the whole chain file: just the leaf, the CA is the trust anchor)
/// and its key.
#[derive(Clone)]
struct Leaf {
    cert: PathBuf,
    key: PathBuf,
}

impl Pki {
    fn new(openssl: PathBuf) -> Pki {
        let pki = Pki {
            openssl,
            dir: tempfile::tempdir().expect("temp dir for certificates"),
        };
        pki.openssl(&[
            "req",
            "-x509",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "30",
            "-subj",
            "/CN=staticd test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        pki
    }

    fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The CA-signed leaf for `localhost` and `127.0.0.1`.
    fn localhost(&self) -> Leaf {
        self.leaf("localhost", "DNS:localhost,IP:127.0.0.1")
    }

    /// A leaf with CN `cn` and the subjectAltNames `sans` (`DNS:a.test,IP:...`) and a
    /// P-256 key (PKCS#8), written as `<cn>.pem` and `<cn>.key` (a `*` in `cn` becomes
    /// `_`).
    fn leaf(&self, cn: &str, sans: &str) -> Leaf {
        self.leaf_with_key(cn, sans, P256_PKCS8)
    }

    /// As `leaf`, with the key made by `openssl KEYGEN...` (`{key}` is the key file).
    fn leaf_with_key(&self, cn: &str, sans: &str, keygen: &[&str]) -> Leaf {
        let base = cn.replace('*', "_");
        let (csr, ext) = (format!("{base}.csr"), format!("{base}.ext"));
        let leaf = Leaf {
            cert: self.path(&format!("{base}.pem")),
            key: self.path(&format!("{base}.key")),
        };
        // The CRL URI is never fetched; it keeps testssl.sh from rating a certificate
        // without any revocation information "NOT ok".
        fs::write(
            self.path(&ext),
            format!(
                "subjectAltName={sans}\n\
                 basicConstraints=critical,CA:FALSE\n\
                 keyUsage=critical,digitalSignature\n\
                 extendedKeyUsage=serverAuth\n\
                 crlDistributionPoints=URI:http://127.0.0.1/staticd-test-ca.crl\n"
            ),
        )
        .unwrap();
        let key = leaf.key.to_str().unwrap();
        let keygen: Vec<&str> = keygen
            .iter()
            .map(|a| if *a == "{key}" { key } else { a })
            .collect();
        self.openssl(&keygen);
        self.openssl(&[
            "req",
            "-new",
            "-key",
            key,
            "-out",
            &csr,
            "-subj",
            &format!("/CN={cn}"),
        ]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            &ext,
            "-out",
            leaf.cert.to_str().unwrap(),
        ]);
        leaf
    }

    /// `openssl rand -out FILE BYTES`: a `--tls-ticket-key` file.
    fn ticket_key(&self, name: &str, bytes: usize) -> PathBuf {
        let path = self.path(name);
        self.openssl(&["rand", "-out", path.to_str().unwrap(), &bytes.to_string()]);
        assert_eq!(fs::metadata(&path).unwrap().len(), bytes as u64);
        path
    }

    fn openssl(&self, args: &[&str]) {
        let run = run_bounded(
            Command::new(&self.openssl)
                .args(args)
                .current_dir(self.dir.path()),
            b"",
            TOOL_TIMEOUT,
        );
        assert!(
            run.status.success(),
            "{}",
            run.describe(&format!("openssl {args:?}"))
        );
    }
}

fn site() -> Docroot {
    let root = Docroot::new();
    root.file(
        "index.html",
        "<!doctype html><title>staticd</title><p>hello\n",
    );
    root.file("a.txt", "alpha\n");
    root.file("b.txt", "bravo bravo\n");
    root.file("big.bin", pattern(1 << 20));
    root
}

/// `staticd --tls-cert CERT --tls-key KEY ARGS` over `root`, in `mode`.
fn tls_server(mode: Mode, root: &Docroot, leaf: &Leaf, args: &[&OsStr]) -> Server {
    Server::builder(mode, root.path())
        .arg("--tls-cert")
        .arg(&leaf.cert)
        .arg("--tls-key")
        .arg(&leaf.key)
        .args(args)
        .start()
}

/// openssl (for the certificates) and the tool the test drives, or None after `skip`.
fn tools(program: &str, package: &str) -> Option<(PathBuf, PathBuf)> {
    let openssl = tool("openssl", "openssl")?;
    let other = tool(program, package)?;
    Some((openssl, other))
}

// ---------------------------------------------------------------------------------------
// curl

/// `curl -sS -v --max-time 10 --cacert CA --resolve localhost:PORT:127.0.0.1 ARGS` (the
/// options repeated after each `--next`, which resets them); the run must succeed.
/// Returns stdout and the trace (stderr).
fn curl(curl: &Path, ca: &Path, addr: SocketAddr, args: &[&str]) -> (Vec<u8>, String) {
    let ca = ca.to_str().unwrap();
    let resolve = format!("localhost:{}:127.0.0.1", addr.port());
    // HTTP/1.1: these tests are about TLS under it; curl over h2 is in
    // tests/http2_tools.rs.
    let options = ["--cacert", ca, "--resolve", &resolve, "--http1.1"];
    let mut cmd = Command::new(curl);
    cmd.args(["-sS", "-v", "--max-time", "10"]).args(options);
    for arg in args {
        cmd.arg(arg);
        if *arg == "--next" {
            cmd.args(options);
        }
    }
    let run = run_bounded(&mut cmd, b"", TOOL_TIMEOUT);
    assert!(
        run.status.success(),
        "{}",
        run.describe(&format!("{cmd:?}"))
    );
    (run.raw_stdout, run.stderr)
}

fn https(addr: SocketAddr, path: &str) -> String {
    format!("https://localhost:{}{path}", addr.port())
}

fn assert_trace(trace: &str, expected: &[&str]) {
    let lower = trace.to_ascii_lowercase();
    for needle in expected {
        assert!(
            lower.contains(&needle.to_ascii_lowercase()),
            "curl's trace has no {needle:?}:\n{trace}"
        );
    }
}

fn curl_https_get_verifies_the_certificate(mode: Mode) {
    let Some((openssl, curl_bin)) = tools("curl", "curl") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    // curl offers h2 and http/1.1; the server must pick http/1.1.
    let (body, trace) = curl(
        &curl_bin,
        &pki.ca(),
        server.addr(),
        &[&https(server.addr(), "/a.txt")],
    );
    assert_eq!(body, b"alpha\n");
    assert_trace(
        &trace,
        &[
            "SSL connection using TLSv1.3",
            "ALPN: server accepted http/1.1",
            "subjectAltName: host \"localhost\" matched",
            "SSL certificate verify ok",
            "< HTTP/1.1 200",
            "< content-length: 6",
            "< server: staticd",
        ],
    );
    // The same certificate names 127.0.0.1.
    let url = format!("https://127.0.0.1:{}/b.txt", server.addr().port());
    let (body, trace) = curl(&curl_bin, &pki.ca(), server.addr(), &[&url]);
    assert_eq!(body, b"bravo bravo\n");
    assert_trace(
        &trace,
        &["matched cert's IP address", "SSL certificate verify ok"],
    );
}

fn curl_https_head_then_get_on_one_connection(mode: Mode) {
    let Some((openssl, curl_bin)) = tools("curl", "curl") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    let url = https(server.addr(), "/a.txt");
    // A HEAD response must leave no body bytes in the TLS stream: the GET after it on
    // the same connection gets exactly its own response.
    let (stdout, trace) = curl(
        &curl_bin,
        &pki.ca(),
        server.addr(),
        &["-I", &url, "--next", &url],
    );
    let stdout = String::from_utf8(stdout).unwrap();
    let (head, body) = stdout
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no header block in {stdout:?}"));
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-length: 6"), "{head}");
    assert_eq!(body, "alpha\n", "HEAD then GET: {stdout:?}");
    assert_trace(&trace, &["Re-using existing connection"]);
}

fn curl_https_ranges(mode: Mode) {
    let Some((openssl, curl_bin)) = tools("curl", "curl") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    let (body, trace) = curl(
        &curl_bin,
        &pki.ca(),
        server.addr(),
        &["-r", "2-4", &https(server.addr(), "/a.txt")],
    );
    assert_eq!(body, b"pha");
    assert_trace(&trace, &["< HTTP/1.1 206", "< content-range: bytes 2-4/6"]);

    // A range of a large file, crossing many TLS records, and the whole file.
    let big = https(server.addr(), "/big.bin");
    let (body, trace) = curl(
        &curl_bin,
        &pki.ca(),
        server.addr(),
        &["-r", "100000-299999", &big],
    );
    assert_trace(
        &trace,
        &[
            "< HTTP/1.1 206",
            "< content-range: bytes 100000-299999/1048576",
        ],
    );
    assert!(body == pattern(300_000)[100_000..], "range body differs");
    let (body, _) = curl(&curl_bin, &pki.ca(), server.addr(), &[&big]);
    assert_eq!(body.len(), 1 << 20);
    assert!(body == pattern(1 << 20), "whole-file body differs");

    // Two ranges: multipart/byteranges.
    let (body, trace) = curl(
        &curl_bin,
        &pki.ca(),
        server.addr(),
        &["-r", "0-0,4-5", &https(server.addr(), "/a.txt")],
    );
    assert_trace(&trace, &["< HTTP/1.1 206"]);
    let content_type = trace
        .lines()
        .find_map(|l| {
            let (name, value) = l.strip_prefix("< ")?.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no Content-Type:\n{trace}"));
    let parts = parse_multipart(&body, &boundary_of(&content_type));
    let got: Vec<(Option<&str>, &[u8])> = parts
        .iter()
        .map(|p| (p.header("content-range"), p.body.as_slice()))
        .collect();
    assert_eq!(
        got,
        [
            (Some("bytes 0-0/6"), &b"a"[..]),
            (Some("bytes 4-5/6"), &b"a\n"[..]),
        ]
    );
}

fn curl_https_keep_alive_reuses_the_connection(mode: Mode) {
    let Some((openssl, curl_bin)) = tools("curl", "curl") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    let (body, trace) = curl(
        &curl_bin,
        &pki.ca(),
        server.addr(),
        &[
            &https(server.addr(), "/a.txt"),
            &https(server.addr(), "/b.txt"),
            &https(server.addr(), "/a.txt"),
        ],
    );
    assert_eq!(body, b"alpha\nbravo bravo\nalpha\n");
    assert_eq!(
        trace.matches("Re-using existing connection").count(),
        2,
        "curl did not reuse the connection twice:\n{trace}"
    );
    assert_eq!(
        trace.matches("TLS handshake, Client hello").count(),
        1,
        "more than one handshake:\n{trace}"
    );
    if mode == Mode::Inetd {
        // One connection, so one staticd --inetd process served all three.
        assert_eq!(server.wait_inetd_exits(1).len(), 1);
    }
}

/// Cleartext HTTP to the TLS port gets a cleartext 400 that says to use HTTPS.
fn curl_http_to_the_tls_port_is_told_to_use_https(mode: Mode) {
    let Some((openssl, curl_bin)) = tools("curl", "curl") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    let url = format!("http://localhost:{}/a.txt", server.addr().port());
    let (body, trace) = curl(&curl_bin, &pki.ca(), server.addr(), &[&url]);
    assert_trace(&trace, &["< HTTP/1.1 400", "< connection: close"]);
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("HTTPS"), "body does not say HTTPS: {body:?}");
}

/// `--redirect-http`: curl -L goes from the cleartext port to the TLS one and gets the
/// file, with the HSTS header on it.
#[test]
fn curl_follows_redirect_http_to_https() {
    let Some((openssl, curl_bin)) = tools("curl", "curl") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = site();
    // Port 0, as with --port: the kernel picks one and the start-up line names it.
    let server = tls_server(
        Mode::Standalone,
        &root,
        &pki.localhost(),
        &[
            OsStr::new("--redirect-http"),
            OsStr::new("0"),
            OsStr::new("--hsts"),
            OsStr::new("600"),
        ],
    );
    let prefix = "staticd: redirecting to https on 127.0.0.1:";
    let announced = server.stderr().wait_line(|l| l.starts_with(prefix));
    let http_port: u16 = announced[prefix.len()..]
        .parse()
        .unwrap_or_else(|e| panic!("{announced:?}: {e}"));
    let tls_port = server.addr().port();
    let (body, trace) = curl(
        &curl_bin,
        &pki.ca(),
        server.addr(),
        &["-L", &format!("http://localhost:{http_port}/a.txt?x=1")],
    );
    assert_eq!(body, b"alpha\n");
    assert_trace(
        &trace,
        &[
            "< HTTP/1.1 308",
            &format!("< location: https://localhost:{tls_port}/a.txt?x=1"),
            "SSL certificate verify ok",
            "< HTTP/1.1 200",
            "< strict-transport-security: max-age=600",
        ],
    );
}

/// `--tls-dir` with `--vhosts`: curl, verifying each host's own certificate, gets each
/// host's own files.
fn curl_https_sni_with_vhosts(mode: Mode) {
    let Some((openssl, curl_bin)) = tools("curl", "curl") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = Docroot::new();
    root.file("a.test/index.html", "site a\n");
    root.file("b.test/index.html", "site b\n");
    root.file("x.w.test/index.html", "site x.w\n");
    let tls_dir = tls_dir(&pki);
    let server = Server::builder(mode, root.path())
        .arg("--tls-dir")
        .arg(&tls_dir)
        .arg("--vhosts")
        .start();
    let port = server.addr().port();
    for (host, subject, body) in [
        ("a.test", "CN=a.test", "site a\n"),
        ("b.test", "CN=b.test", "site b\n"),
        ("x.w.test", "CN=*.w.test", "site x.w\n"),
    ] {
        let (got, trace) = curl(
            &curl_bin,
            &pki.ca(),
            server.addr(),
            &[
                "--resolve",
                &format!("{host}:{port}:127.0.0.1"),
                &format!("https://{host}:{port}/"),
            ],
        );
        assert_eq!(String::from_utf8_lossy(&got), body, "{host}");
        assert_trace(
            &trace,
            &[&format!("subject: {subject}"), "SSL certificate verify ok"],
        );
    }
}

both_modes!(
    curl_https_sni_with_vhosts,
    curl_http_to_the_tls_port_is_told_to_use_https,
    curl_https_get_verifies_the_certificate,
    curl_https_head_then_get_on_one_connection,
    curl_https_ranges,
    curl_https_keep_alive_reuses_the_connection,
);

// ---------------------------------------------------------------------------------------
// tcpserver

/// `tcpserver -RHl0 127.0.0.1 PORT staticd --inetd --tls-cert .. --tls-key .. --root ..`
/// (the harness's `start_tcpserver`, which retries on a port taken meanwhile).
fn start_tcpserver(tcpserver: &Path, leaf: &Leaf, root: &Docroot) -> (ChildGuard, SocketAddr) {
    let path = |p: &Path| p.to_str().expect("UTF-8 test path").to_string();
    let args: Vec<String> = vec![
        "--inetd".into(),
        "--log-format".into(),
        "off".into(),
        "--tls-cert".into(),
        path(&leaf.cert),
        "--tls-key".into(),
        path(&leaf.key),
        "--root".into(),
        path(root.path()),
    ];
    let (process, _stderr, addr) = common::start_tcpserver(tcpserver, &args);
    (process, addr)
}

#[test]
fn tcpserver_serves_https() {
    let Some((openssl, tcpserver)) = tools("tcpserver", "ucspi-tcp") else {
        return;
    };
    let Some(curl_bin) = tool("curl", "curl") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = site();
    let (_tcpserver, addr) = start_tcpserver(&tcpserver, &pki.localhost(), &root);
    let (body, trace) = curl(
        &curl_bin,
        &pki.ca(),
        addr,
        &[&https(addr, "/a.txt"), &https(addr, "/b.txt")],
    );
    assert_eq!(body, b"alpha\nbravo bravo\n");
    assert_trace(
        &trace,
        &[
            "SSL certificate verify ok",
            "ALPN: server accepted http/1.1",
            "Re-using existing connection",
        ],
    );
    let (body, _) = curl(
        &curl_bin,
        &pki.ca(),
        addr,
        &["-r", "-5", &https(addr, "/b.txt")],
    );
    assert_eq!(body, b"ravo\n");
}

// ---------------------------------------------------------------------------------------
// openssl s_client

/// TLS alert numbers (RFC 8446 §6.2, RFC 7301 §3.2) the server is expected to send.
const HANDSHAKE_FAILURE: u8 = 40;
const PROTOCOL_VERSION: u8 = 70;
const NO_APPLICATION_PROTOCOL: u8 = 120;

/// What one `openssl s_client -msg` run showed.
struct Handshake {
    run: Run,
}

impl Handshake {
    /// The `New, TLSv1.3, Cipher is ...` / `Reused, ...` line. (It names a cipher as
    /// soon as a ServerHello came, even if the handshake failed after it.)
    fn session_line(&self) -> &str {
        self.run
            .stdout
            .lines()
            .find(|l| l.starts_with("New, ") || l.starts_with("Reused, "))
            .unwrap_or("")
    }

    fn reused(&self) -> bool {
        self.session_line().starts_with("Reused, ")
    }

    /// `TLSv1.3`, `TLSv1.2` from the session line.
    fn protocol(&self) -> &str {
        self.session_line().split(", ").nth(1).unwrap_or("")
    }

    fn cipher(&self) -> &str {
        self.session_line()
            .split_once("Cipher is ")
            .map_or("", |(_, c)| c)
    }

    /// The fatal alert received from the server: openssl reports one it receives as
    /// `...:SSL alert number N` on stderr. (`-msg` shows alerts too, but names an
    /// encrypted TLS 1.3 alert such as no_application_protocol `???`.)
    fn received_alert(&self) -> Option<u8> {
        let (_, after) = self.run.stderr.split_once("SSL alert number ")?;
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    }

    fn line_starting(&self, prefix: &str) -> Option<&str> {
        self.run.stdout.lines().find(|l| l.starts_with(prefix))
    }

    fn show(&self) -> String {
        self.run.describe("openssl s_client")
    }

    /// The handshake worked, the certificate verified, and the request got `200` and
    /// the file.
    fn assert_served(&self) {
        assert!(
            self.run.stdout.contains("Verify return code: 0 (ok)"),
            "certificate not verified: {}",
            self.show()
        );
        assert!(
            self.run.stdout.contains("HTTP/1.1 200 OK") && self.run.stdout.contains("\nalpha"),
            "no response: {}",
            self.show()
        );
        assert_eq!(self.received_alert(), None, "{}", self.show());
        // After its response to HTTP/1.0 the server closes the TLS session properly, so
        // that a client can tell the end from a truncation.
        assert!(
            self.run
                .stdout
                .lines()
                .any(|l| l.starts_with("<<< ") && l.ends_with(", warning close_notify")),
            "no close_notify from the server: {}",
            self.show()
        );
    }

    /// The handshake failed because the server sent a fatal alert, one of `alerts`
    /// (any alert if empty).
    fn assert_refused_with(&self, alerts: &[u8]) {
        assert!(
            !self.run.status.success() && !self.run.stdout.contains("HTTP/1.1 "),
            "the handshake succeeded: {}",
            self.show()
        );
        let alert = self.received_alert();
        assert!(
            alert.is_some_and(|a| alerts.is_empty() || alerts.contains(&a)),
            "expected an alert {alerts:?} from the server, got {alert:?}: {}",
            self.show()
        );
    }
}

/// `openssl s_client -connect ADDR -msg -ign_eof -CAfile CA -verify_return_error ARGS`,
/// sending one HTTP/1.0 request (the server answers and closes, so s_client has read
/// any TLS 1.3 session tickets by the time it exits).
fn s_client(openssl: &Path, ca: &Path, addr: SocketAddr, args: &[&str]) -> Handshake {
    let run = run_bounded(
        Command::new(openssl)
            .args(["s_client", "-connect", &addr.to_string()])
            .args(["-msg", "-ign_eof", "-verify_return_error", "-CAfile"])
            .arg(ca)
            .args(args),
        b"GET /a.txt HTTP/1.0\r\n\r\n",
        TOOL_TIMEOUT,
    );
    Handshake { run }
}

fn localhost_args<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["-servername", "localhost", "-verify_hostname", "localhost"];
    all.extend_from_slice(args);
    all
}

fn s_client_tls13_and_tls12_with_aead_suites(mode: Mode) {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    let hs = |args: &[&str]| s_client(&openssl, &pki.ca(), server.addr(), &localhost_args(args));

    let default = hs(&[]);
    default.assert_served();
    assert_eq!(default.protocol(), "TLSv1.3", "{}", default.show());

    for suite in [
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
    ] {
        let h = hs(&["-tls1_3", "-ciphersuites", suite]);
        h.assert_served();
        assert_eq!(
            (h.protocol(), h.cipher()),
            ("TLSv1.3", suite),
            "{}",
            h.show()
        );
    }
    for suite in [
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
    ] {
        let h = hs(&["-tls1_2", "-cipher", suite]);
        h.assert_served();
        assert_eq!(
            (h.protocol(), h.cipher()),
            ("TLSv1.2", suite),
            "{}",
            h.show()
        );
    }
    // Key exchange on each group a client may insist on.
    for group in ["X25519", "P-256", "P-384"] {
        let h = hs(&["-groups", group]);
        h.assert_served();
        assert!(
            h.run
                .stdout
                .contains(&format!("Server Temp Key: {}", temp_key_name(group))),
            "{group}: {}",
            h.show()
        );
    }
    // The server's pick when the client offers everything it has.
    let h = hs(&["-tls1_2"]);
    h.assert_served();
    assert!(
        h.cipher().contains("GCM") || h.cipher().contains("CHACHA20"),
        "not an AEAD suite: {}",
        h.show()
    );
}

fn s_client_tls11_and_tls10_refused_by_the_server(mode: Mode) {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    for version in ["-tls1_1", "-tls1"] {
        // SECLEVEL=0: Debian's openssl would not offer TLS 1.1 or 1.0 otherwise, and the
        // refusal must be the server's: a protocol_version alert it sent.
        let h = s_client(
            &openssl,
            &pki.ca(),
            server.addr(),
            &localhost_args(&[version, "-cipher", "DEFAULT@SECLEVEL=0"]),
        );
        assert!(
            h.run.stdout.contains(">>> ") && h.run.stdout.contains("ClientHello"),
            "{version}: the client sent no ClientHello: {}",
            h.show()
        );
        // RFC 8446 §4.2.1 asks for protocol_version, and rustls sends it, but only after
        // checking for a signature_algorithms extension, which a TLS 1.1 or 1.0
        // ClientHello never has: so rustls answers these with handshake_failure.
        h.assert_refused_with(&[PROTOCOL_VERSION, HANDSHAKE_FAILURE]);
    }
}

fn s_client_cbc_suites_refused(mode: Mode) {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    for suite in [
        "AES128-SHA",
        "ECDHE-ECDSA-AES128-SHA",
        "ECDHE-ECDSA-AES256-SHA",
        "ECDHE-ECDSA-AES128-SHA256",
        "ECDHE-ECDSA-AES256-SHA384",
    ] {
        let h = s_client(
            &openssl,
            &pki.ca(),
            server.addr(),
            &localhost_args(&["-tls1_2", "-cipher", suite]),
        );
        h.assert_refused_with(&[HANDSHAKE_FAILURE]);
    }
}

fn s_client_alpn(mode: Mode) {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    let hs = |args: &[&str]| s_client(&openssl, &pki.ca(), server.addr(), &localhost_args(args));

    // HTTP/2 first when the client offers it, as the server prefers it. Once ALPN
    // agreed on h2 the connection speaks only HTTP/2: s_client's HTTP/1.0 request is a
    // bad connection preface there, answered with GOAWAY (RFC 9113 §3.4), not served.
    for (offer, agreed) in [
        ("http/1.1", "http/1.1"),
        ("h2,http/1.1", "h2"),
        ("http/1.1,h2", "h2"),
        ("h2", "h2"),
    ] {
        let h = hs(&["-alpn", offer]);
        if agreed == "h2" {
            assert_eq!(h.received_alert(), None, "{}", h.show());
            assert!(!h.run.stdout.contains("HTTP/1.1 200"), "{}", h.show());
        } else {
            h.assert_served();
        }
        assert_eq!(
            h.line_starting("ALPN protocol: "),
            Some(format!("ALPN protocol: {agreed}").as_str()),
            "{}",
            h.show()
        );
    }
    let none = hs(&[]);
    none.assert_served();
    assert!(
        none.run.stdout.contains("No ALPN negotiated"),
        "{}",
        none.show()
    );
    // Offering only protocols the server does not speak: RFC 7301 §3.2's alert.
    for offer in ["spdy/3", "h3,spdy/3"] {
        hs(&["-alpn", offer]).assert_refused_with(&[NO_APPLICATION_PROTOCOL]);
    }
    // With --no-http2, h2 is one of those.
    let h1_only = tls_server(mode, &root, &pki.localhost(), &[OsStr::new("--no-http2")]);
    let hs = |args: &[&str]| s_client(&openssl, &pki.ca(), h1_only.addr(), &localhost_args(args));
    hs(&["-alpn", "h2"]).assert_refused_with(&[NO_APPLICATION_PROTOCOL]);
    let h = hs(&["-alpn", "h2,http/1.1"]);
    h.assert_served();
    assert_eq!(
        h.line_starting("ALPN protocol: "),
        Some("ALPN protocol: http/1.1"),
        "{}",
        h.show()
    );
}

/// A `--tls-dir` in certbot's layout, `DIR/<name>/fullchain.pem` and `privkey.pem`, for
/// a.test, b.test (and www.b.test) and *.w.test.
fn tls_dir(pki: &Pki) -> PathBuf {
    let dir = pki.path("live");
    for (name, cn, sans) in [
        ("a.test", "a.test", "DNS:a.test"),
        ("b.test", "b.test", "DNS:b.test,DNS:www.b.test"),
        ("w.test", "*.w.test", "DNS:*.w.test"),
    ] {
        let leaf = pki.leaf(cn, sans);
        fs::create_dir_all(dir.join(name)).unwrap();
        fs::copy(&leaf.cert, dir.join(name).join("fullchain.pem")).unwrap();
        fs::copy(&leaf.key, dir.join(name).join("privkey.pem")).unwrap();
    }
    dir
}

fn s_client_sni_picks_the_certificate(mode: Mode) {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let tls_dir = tls_dir(&pki);
    let sni = |server: &Server, name: &str| {
        let args: Vec<&str> = if name.is_empty() {
            vec!["-noservername"]
        } else {
            vec!["-servername", name, "-verify_hostname", name]
        };
        s_client(&openssl, &pki.ca(), server.addr(), &args)
    };

    let dir_only = Server::builder(mode, root.path())
        .arg("--tls-dir")
        .arg(&tls_dir)
        .start();
    for (name, subject) in [
        ("a.test", "subject=CN = a.test"),
        ("b.test", "subject=CN = b.test"),
        ("www.b.test", "subject=CN = b.test"),
        ("x.w.test", "subject=CN = *.w.test"),
    ] {
        let h = sni(&dir_only, name);
        h.assert_served();
        assert!(h.run.stdout.contains(subject), "{name}: {}", h.show());
    }
    // A wildcard matches one label only, and no certificate means no handshake.
    for name in ["x.y.w.test", "w.test", "c.test", ""] {
        let h = sni(&dir_only, name);
        h.assert_refused_with(&[]);
    }

    // With --tls-cert as well, a name without a certificate of its own, and a client
    // without SNI, get that one.
    let with_fallback = tls_server(
        mode,
        &root,
        &pki.localhost(),
        &[OsStr::new("--tls-dir"), tls_dir.as_os_str()],
    );
    let h = sni(&with_fallback, "a.test");
    h.assert_served();
    assert!(h.run.stdout.contains("subject=CN = a.test"), "{}", h.show());
    for name in ["localhost", ""] {
        let h = sni(&with_fallback, name);
        h.assert_served();
        assert!(
            h.run.stdout.contains("subject=CN = localhost"),
            "{name:?}: {}",
            h.show()
        );
    }
}

/// How s_client names a key-exchange group on its `Server Temp Key:` line.
fn temp_key_name(group: &str) -> &str {
    match group {
        "P-256" => "ECDH, prime256v1",
        "P-384" => "ECDH, secp384r1",
        other => other,
    }
}

fn s_client_pipelined_requests(mode: Mode) {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    // Three requests in one write: TLS records carry them together, the answers come in
    // order, and the last one's Connection: close ends the connection (and s_client).
    let run = run_bounded(
        Command::new(&openssl)
            .args(["s_client", "-quiet", "-ign_eof", "-verify_return_error"])
            .args(["-connect", &server.addr().to_string(), "-CAfile"])
            .arg(pki.ca())
            .args(localhost_args(&[])),
        b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n\
          HEAD /b.txt HTTP/1.1\r\nHost: localhost\r\n\r\n\
          GET /b.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        TOOL_TIMEOUT,
    );
    let responses = parse_responses(&run.raw_stdout, &["GET", "HEAD", "GET"]);
    let got: Vec<(u16, &[u8])> = responses
        .iter()
        .map(|r| (r.status, r.body.as_slice()))
        .collect();
    assert_eq!(
        got,
        [(200, &b"alpha\n"[..]), (200, b""), (200, b"bravo bravo\n")],
        "{}",
        run.describe("openssl s_client")
    );
    assert!(responses[2].has_token("connection", "close"));
}

both_modes!(
    s_client_pipelined_requests,
    s_client_tls13_and_tls12_with_aead_suites,
    s_client_tls11_and_tls10_refused_by_the_server,
    s_client_cbc_suites_refused,
    s_client_alpn,
    s_client_sni_picks_the_certificate,
);

/// Keys as openssl writes them: RSA in PKCS#1, P-384 in SEC1, Ed25519 in PKCS#8 (P-256
/// in PKCS#8 is every other test's). Each serves TLS 1.3 and 1.2 with a signature of
/// its own kind.
fn s_client_key_types_and_formats(mode: Mode) {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    for (cn, keygen, header, signature) in [
        (
            "rsa.test",
            RSA_PKCS1,
            "-----BEGIN RSA PRIVATE KEY-----",
            "RSA-PSS",
        ),
        (
            "p384.test",
            P384_SEC1,
            "-----BEGIN EC PRIVATE KEY-----",
            "ECDSA",
        ),
        (
            "ed25519.test",
            ED25519_PKCS8,
            "-----BEGIN PRIVATE KEY-----",
            "Ed25519",
        ),
    ] {
        let leaf = pki.leaf_with_key(cn, &format!("DNS:{cn}"), keygen);
        let pem = fs::read_to_string(&leaf.key).unwrap();
        assert!(pem.starts_with(header), "{cn}: openssl wrote {pem:?}");
        let server = tls_server(mode, &root, &leaf, &[]);
        for version in ["-tls1_3", "-tls1_2"] {
            let h = s_client(
                &openssl,
                &pki.ca(),
                server.addr(),
                &[version, "-servername", cn, "-verify_hostname", cn],
            );
            h.assert_served();
            let peer = h.line_starting("Peer signature type: ").unwrap_or("");
            assert!(
                peer.to_ascii_lowercase()
                    .contains(&signature.to_ascii_lowercase()),
                "{cn} {version}: want a {signature} signature: {}",
                h.show()
            );
        }
    }
}

both_modes!(s_client_key_types_and_formats);

// ---------------------------------------------------------------------------------------
// Session resumption

/// The ways a client can resume: a TLS 1.3 ticket, a TLS 1.2 ticket, a TLS 1.2 session
/// ID (the client sends no ticket extension).
const TLS13_TICKET: &[&str] = &["-tls1_3"];
const TLS12_TICKET: &[&str] = &["-tls1_2"];
const TLS12_SESSION_ID: &[&str] = &["-tls1_2", "-no_ticket"];

/// A full handshake with `first` saving the session, then one with `second` offering it;
/// returns the second.
fn resume(
    openssl: &Path,
    pki: &Pki,
    first: SocketAddr,
    second: SocketAddr,
    how: &[&str],
) -> Handshake {
    resume_with(openssl, pki, first, second, how, &[])
}

/// As `resume`, with `extra` arguments for the second handshake.
fn resume_with(
    openssl: &Path,
    pki: &Pki,
    first: SocketAddr,
    second: SocketAddr,
    how: &[&str],
    extra: &[&str],
) -> Handshake {
    let session = tempfile::NamedTempFile::new_in(pki.dir.path()).unwrap();
    let session_path = session.path().to_str().unwrap();
    fs::remove_file(session_path).unwrap();
    let mut args = localhost_args(how);
    args.extend(["-sess_out", session_path]);
    let h = s_client(openssl, &pki.ca(), first, &args);
    h.assert_served();
    assert!(!h.reused(), "{}", h.show());
    assert!(
        Path::new(session_path).exists(),
        "{how:?}: s_client saved no session (no ticket or session ID?): {}",
        h.show()
    );
    let mut args = localhost_args(how);
    args.extend(["-sess_in", session_path]);
    args.extend(extra);
    let h = s_client(openssl, &pki.ca(), second, &args);
    h.assert_served();
    h
}

fn assert_resumed(h: &Handshake, how: &[&str]) {
    assert!(h.reused(), "{how:?}: not resumed: {}", h.show());
}

fn assert_not_resumed(h: &Handshake, how: &[&str]) {
    assert!(!h.reused(), "{how:?}: resumed: {}", h.show());
}

#[test]
fn standalone_resumes_tickets_and_session_ids() {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let server = tls_server(Mode::Standalone, &root, &pki.localhost(), &[]);
    for how in [TLS13_TICKET, TLS12_TICKET, TLS12_SESSION_ID] {
        let h = resume(&openssl, &pki, server.addr(), server.addr(), how);
        assert_resumed(&h, how);
    }
    // TLS 1.3 early data (0-RTT) could be replayed: the server takes none, and the
    // request goes through after the handshake instead.
    let early = pki.path("early.txt");
    fs::write(&early, "GET /b.txt HTTP/1.0\r\n\r\n").unwrap();
    let h = resume_with(
        &openssl,
        &pki,
        server.addr(),
        server.addr(),
        TLS13_TICKET,
        &["-early_data", early.to_str().unwrap()],
    );
    assert_resumed(&h, TLS13_TICKET);
    // Its tickets allow no early data ("not sent"); were one sent, it must be rejected.
    let out = &h.run.stdout;
    assert!(
        (out.contains("Early data was not sent") || out.contains("Early data was rejected"))
            && !out.contains("bravo"),
        "the server took early data: {}",
        h.show()
    );
}

#[test]
fn shared_ticket_key_resumes_across_processes() {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let leaf = pki.localhost();
    let key = pki.ticket_key("ticket.key", 80);
    let key_args = [OsStr::new("--tls-ticket-key"), key.as_os_str()];
    let one = tls_server(Mode::Standalone, &root, &leaf, &key_args);
    let two = tls_server(Mode::Standalone, &root, &leaf, &key_args);
    for how in [TLS13_TICKET, TLS12_TICKET] {
        assert_resumed(&resume(&openssl, &pki, one.addr(), two.addr(), how), how);
    }
    // Session IDs live in each process's own cache.
    let how = TLS12_SESSION_ID;
    assert_not_resumed(&resume(&openssl, &pki, one.addr(), two.addr(), how), how);
}

/// `--tls-ticket-key K` for each of `keys`.
fn ticket_key_args<'a>(keys: &[&'a OsStr]) -> Vec<&'a OsStr> {
    keys.iter()
        .flat_map(|k| [OsStr::new("--tls-ticket-key"), k])
        .collect()
}

#[test]
fn no_resumption_across_processes_without_a_shared_key() {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let leaf = pki.localhost();
    let key = pki.ticket_key("one.key", 80);
    let other_key = pki.ticket_key("two.key", 80);
    let pairs = [
        (vec![], vec![]),
        (vec![key.as_os_str()], vec![other_key.as_os_str()]),
    ];
    for (first_keys, second_keys) in pairs {
        let one = tls_server(
            Mode::Standalone,
            &root,
            &leaf,
            &ticket_key_args(&first_keys),
        );
        let two = tls_server(
            Mode::Standalone,
            &root,
            &leaf,
            &ticket_key_args(&second_keys),
        );
        for how in [TLS13_TICKET, TLS12_TICKET, TLS12_SESSION_ID] {
            let h = resume(&openssl, &pki, one.addr(), two.addr(), how);
            assert_not_resumed(&h, how);
        }
    }
}

#[test]
fn ticket_key_rotation_first_encrypts_all_decrypt() {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let leaf = pki.localhost();
    let old = pki.ticket_key("old.key", 80);
    let new = pki.ticket_key("new.key", 48);
    let flag = OsStr::new("--tls-ticket-key");
    let old_only = tls_server(Mode::Standalone, &root, &leaf, &[flag, old.as_os_str()]);
    let rotated = tls_server(
        Mode::Standalone,
        &root,
        &leaf,
        &[flag, new.as_os_str(), flag, old.as_os_str()],
    );
    for how in [TLS13_TICKET, TLS12_TICKET] {
        // A ticket made with the old key still works after the rotation...
        let h = resume(&openssl, &pki, old_only.addr(), rotated.addr(), how);
        assert_resumed(&h, how);
        // ...and the rotated server's tickets are made with the new key.
        let h = resume(&openssl, &pki, rotated.addr(), old_only.addr(), how);
        assert_not_resumed(&h, how);
    }
}

/// In inetd mode every connection is a new process: only a --tls-ticket-key lets a
/// client resume.
#[test]
fn inetd_resumes_only_with_a_ticket_key() {
    let Some(openssl) = tool("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new(openssl.clone());
    let root = site();
    let leaf = pki.localhost();
    let key = pki.ticket_key("ticket.key", 80);
    let keyed = tls_server(
        Mode::Inetd,
        &root,
        &leaf,
        &[OsStr::new("--tls-ticket-key"), key.as_os_str()],
    );
    let keyless = tls_server(Mode::Inetd, &root, &leaf, &[]);
    for how in [TLS13_TICKET, TLS12_TICKET] {
        assert_resumed(
            &resume(&openssl, &pki, keyed.addr(), keyed.addr(), how),
            how,
        );
        assert_not_resumed(
            &resume(&openssl, &pki, keyless.addr(), keyless.addr(), how),
            how,
        );
    }
    for server in [&keyed, &keyless] {
        let how = TLS12_SESSION_ID;
        assert_not_resumed(
            &resume(&openssl, &pki, server.addr(), server.addr(), how),
            how,
        );
    }
}

// ---------------------------------------------------------------------------------------
// Python's ssl module

const PYTHON_CLIENT: &str = r#"
import http.client, socket, ssl, sys

host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["http/1.1"])
conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
ports = set()
for path in ("/a.txt", "/b.txt"):
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    ports.add(conn.sock.getsockname()[1])
    print("response", resp.status, resp.getheader("Server"), repr(body))
print("version", conn.sock.version())
print("alpn", conn.sock.selected_alpn_protocol())
print("connections", len(ports))
conn.close()

# A request head in one-byte TLS records (each sendall is one record).
raw = ctx.wrap_socket(socket.create_connection((host, port), timeout=10), server_hostname=host)
for byte in b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n":
    raw.sendall(bytes([byte]))
answer = b""
while chunk := raw.recv(65536):
    answer += chunk
print("bytewise", answer.split(b"\r\n")[0].decode(), repr(answer.split(b"\r\n\r\n", 1)[1]))
raw.close()

# Without the test CA the same server must not verify.
plain = http.client.HTTPSConnection(host, port, context=ssl.create_default_context(), timeout=10)
try:
    plain.request("GET", "/a.txt")
    print("unverified", "accepted")
except ssl.SSLCertVerificationError as e:
    print("unverified", "refused", e.verify_code)
"#;

fn python_ssl_client_gets_files(mode: Mode) {
    let Some((openssl, python)) = tools("python3", "python3") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = site();
    let server = tls_server(mode, &root, &pki.localhost(), &[]);
    let run = run_bounded(
        Command::new(python)
            .args(["-c", PYTHON_CLIENT, "localhost"])
            .arg(server.addr().port().to_string())
            .arg(pki.ca()),
        b"",
        TOOL_TIMEOUT,
    );
    assert!(run.status.success(), "{}", run.describe("python3"));
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "response 200 staticd b'alpha\\n'",
            "response 200 staticd b'bravo bravo\\n'",
            "version TLSv1.3",
            "alpn http/1.1",
            "connections 1",
            "bytewise HTTP/1.1 200 OK b'alpha\\n'",
            // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
            "unverified refused 20",
        ],
        "{}",
        run.describe("python3")
    );
}

both_modes!(python_ssl_client_gets_files);

// ---------------------------------------------------------------------------------------
// testssl.sh

/// Where the last testssl.sh report goes: `target/testssl/staticd.txt`.
fn testssl_report_path() -> PathBuf {
    // CARGO_BIN_EXE_staticd is target/<profile>/staticd.
    let target = Path::new(staticd_bin())
        .ancestors()
        .nth(2)
        .expect("target directory")
        .to_path_buf();
    target.join("testssl").join("staticd.txt")
}

#[test]
fn testssl_finds_nothing_vulnerable() {
    let Some((openssl, testssl)) = tools("testssl", "testssl.sh") else {
        return;
    };
    let pki = Pki::new(openssl);
    let root = site();
    let server = tls_server(
        Mode::Standalone,
        &root,
        &pki.localhost(),
        &[OsStr::new("--hsts"), OsStr::new("31536000")],
    );
    let started = Instant::now();
    // The full default run. --nodns none: no DNS lookups (loopback only); --add-ca: the
    // test CA is a trust anchor, so the chain of trust is checked too; --warnings batch:
    // never wait for an answer on stdin.
    let run = run_bounded(
        Command::new(&testssl)
            .args([
                "--quiet",
                "--color",
                "0",
                "--warnings",
                "batch",
                "--nodns",
                "none",
            ])
            .arg("--add-ca")
            .arg(pki.ca())
            .arg(format!("https://127.0.0.1:{}", server.addr().port())),
        b"",
        TESTSSL_TIMEOUT,
    );
    let took = started.elapsed();
    let report = testssl_report_path();
    fs::create_dir_all(report.parent().unwrap()).unwrap();
    fs::write(&report, format!("{}{}", run.stdout, run.stderr)).unwrap();
    announce(&format!(
        "testssl_finds_nothing_vulnerable: testssl.sh took {:.0} s; report: {}",
        took.as_secs_f64(),
        report.display()
    ));

    let out = &run.stdout;
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("Done ")),
        "testssl.sh did not finish; {}",
        run.describe("testssl.sh")
    );
    let vulnerable: Vec<&str> = out.lines().filter(|l| l.contains("VULNERABLE")).collect();
    assert!(
        vulnerable.is_empty(),
        "testssl.sh found vulnerabilities (report: {}):\n{}",
        report.display(),
        vulnerable.join("\n")
    );
    // A self-signed test CA may be rated "NOT ok" as a chain of trust, nothing else.
    let not_ok: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("NOT ok") && !l.contains("Chain of trust"))
        .collect();
    assert!(
        not_ok.is_empty(),
        "testssl.sh rated these NOT ok (report: {}):\n{}",
        report.display(),
        not_ok.join("\n")
    );
    // Not "Session Resumption": with TLS 1.3, testssl.sh's s_client (stdin at EOF)
    // often closes before the server's tickets arrive, against nginx too, and then
    // reports a "Connect problem". The s_client tests above check resumption.
    for (name, expected) in [
        ("SSLv2", "not offered"),
        ("SSLv3", "not offered"),
        ("TLS 1 ", "not offered"),
        ("TLS 1.1", "not offered"),
        ("TLS 1.2", "offered (OK)"),
        ("TLS 1.3", "offered (OK)"),
        ("ALPN/HTTP2", "http/1.1 (offered)"),
        ("Obsolete CBC ciphers", "not offered"),
        ("Strong encryption (AEAD ciphers)", "offered (OK)"),
        ("Chain of trust", "Ok"),
        ("Strict Transport Security", "365 days"),
        ("Server banner", "staticd"),
    ] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} line (report: {})", report.display()));
        assert!(
            line.contains(expected),
            "{name}: want {expected:?}, got {line:?} (report: {})",
            report.display()
        );
    }
}
