//! Automatic HTTPS (issue 13, cargo feature `acme`) against a real ACME server:
//! Debian's Pebble, with pebble-challtestsrv as its DNS server (`common::Pebble`),
//! everything on loopback. Each test starts its own Pebble, whose DNS server sends
//! every name to 127.0.0.1, so Pebble validates TLS-ALPN-01 and HTTP-01 against the
//! staticd the test started on the ports it told Pebble.
//!
//! Covered: issuance by TLS-ALPN-01 and by HTTP-01 (files, modes, what curl sees), a
//! renewal while a download is in flight, a CA that refuses (backoff, fallback
//! certificate), two processes sharing one state directory, `--acme-vhosts`, and the
//! start-up errors. Pebble issues in well under a second; every wait has a deadline.
//! Without pebble (or curl) the tests skip, or fail under STATICD_TEST_REQUIRE_TOOLS=1.
#![cfg(feature = "acme")]

#[macro_use]
mod common;

use std::ffi::OsString;
use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use common::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// Bound for a first certificate: Pebble takes about a second, a busy machine longer.
const ISSUE_TIMEOUT: Duration = Duration::from_secs(30);

/// Bound for one curl run.
const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// The name most tests order a certificate for (any name resolves to 127.0.0.1).
const NAME: &str = "a.staticd.test";

/// The start of every line staticd logs about `name`'s certificate.
fn about(name: &str) -> String {
    format!("staticd: acme: {name}: ")
}

/// Whether `line` says a certificate for `name` was issued (by any challenge, or by an
/// authorization Pebble reused).
fn is_issued(line: &str, name: &str) -> bool {
    line.strip_prefix(&about(name))
        .is_some_and(|rest| rest.starts_with("certificate issued ("))
}

/// One test's Pebble, the two ports it validates on, and a state directory.
struct Acme {
    pebble: Pebble,
    /// staticd's `--port`: HTTPS, and TLS-ALPN-01.
    tls_port: u16,
    /// staticd's `--redirect-http`: HTTP-01.
    http_port: u16,
    state: tempfile::TempDir,
}

impl Acme {
    /// Pebble as `configure` makes it, or None after `skip` (no pebble installed).
    fn start(configure: impl FnOnce(PebbleBuilder) -> PebbleBuilder) -> Option<Acme> {
        let (tls_port, http_port) = (unused_port(), unused_port());
        let pebble = configure(Pebble::builder(http_port, tls_port)).start()?;
        Some(Acme {
            pebble,
            tls_port,
            http_port,
            state: tempfile::tempdir().expect("temp dir for the ACME state"),
        })
    }

    /// `--acme-dir`: made by staticd itself (it must create it 0700).
    fn dir(&self) -> PathBuf {
        self.state.path().join("acme")
    }

    /// staticd serving `root` on 127.0.0.1:`tls_port`, ordering from this Pebble, with
    /// a 1 s first retry; the test adds `--acme NAME` and the rest.
    fn args(&self, root: &Path, log_format: &str) -> Vec<OsString> {
        self.args_at(Ipv4Addr::LOCALHOST, root, log_format)
    }

    /// [`Acme::args`] listening on `ip` (Pebble validates at 127.0.0.1 only).
    fn args_at(&self, ip: Ipv4Addr, root: &Path, log_format: &str) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--root".into(), root.into()];
        for (flag, value) in [
            ("--port", self.tls_port.to_string()),
            ("--bind", ip.to_string()),
            ("--log-format", log_format.to_string()),
            ("--acme-directory", self.pebble.directory_url()),
            ("--acme-backoff", "1".to_string()),
        ] {
            args.push(flag.into());
            args.push(value.into());
        }
        args.extend(["--acme-dir".into(), self.dir().into_os_string()]);
        args.extend([
            "--acme-ca".into(),
            self.pebble.listener_ca().into_os_string(),
        ]);
        args
    }

    /// The HTTPS address; `name` resolves to it.
    fn tls_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.tls_port))
    }

    /// A connection to staticd that accepts only a certificate for `name` from Pebble.
    fn connect(&self, name: &str) -> Conn {
        self.connect_at(self.tls_addr(), name)
    }

    fn connect_at(&self, addr: SocketAddr, name: &str) -> Conn {
        Connector::new(addr, Some(self.pebble.client(name))).connect()
    }

    /// The leaf certificate a new connection for `name` gets (checked against Pebble's
    /// root).
    fn served_leaf(&self, name: &str) -> CertificateDer<'static> {
        self.served_leaf_at(self.tls_addr(), name)
    }

    fn served_leaf_at(&self, addr: SocketAddr, name: &str) -> CertificateDer<'static> {
        let mut conn = self.connect_at(addr, name);
        conn.handshake()
            .unwrap_or_else(|e| panic!("TLS handshake for {name}: {e}"));
        peer_leaf(&conn)
    }

    /// `curl https://NAME:PORT/PATH`, trusting Pebble's root only.
    fn curl(&self, curl: &Path, name: &str, path: &str) -> Run {
        let port = self.tls_port;
        run_bounded(
            Command::new(curl)
                .args(["--silent", "--show-error", "--fail"])
                .arg("--cacert")
                .arg(self.pebble.root_file())
                .arg("--resolve")
                .arg(format!("{name}:{port}:127.0.0.1"))
                .arg(format!("https://{name}:{port}{path}")),
            b"",
            TOOL_TIMEOUT,
        )
    }
}

/// A staticd started with the test's own arguments (a fixed `--port`, which the
/// harness's `Server` does not take), killed on drop.
struct Staticd {
    child: ChildGuard,
    stderr: Lines,
    /// Pebble's log, shown with staticd's when a wait fails.
    pebble_log: Lines,
}

impl Staticd {
    /// Starts staticd and waits for its `listening on` line.
    fn start(args: &[OsString], pebble: &Pebble) -> Staticd {
        let mut cmd = Command::new(staticd_bin());
        cmd.args(args);
        let (child, stderr) = spawn_with_stderr(&mut cmd);
        let mut started = Staticd {
            child,
            stderr,
            pebble_log: pebble.log(),
        };
        started.wait_line(IO_TIMEOUT, "`listening on` line", |l| {
            l.starts_with("staticd: listening on ")
        });
        started
    }

    /// Waits up to `timeout` for `count` lines satisfying `pred`, and returns them;
    /// panics (showing stderr and Pebble's log) after the timeout or when staticd exits.
    fn wait_lines(
        &mut self,
        timeout: Duration,
        count: usize,
        what: &str,
        pred: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let matching = |lines: &[String]| -> Vec<String> {
            lines.iter().filter(|l| pred(l)).cloned().collect()
        };
        loop {
            // Short slices: a staticd that died is reported at once, not at the deadline.
            let slice = Duration::from_millis(100);
            if let Some(lines) = self
                .stderr
                .wait_for(slice, |lines| matching(lines).len() >= count)
            {
                return matching(&lines);
            }
            let failure = if let Some(status) = self.child.try_status() {
                thread::sleep(Duration::from_millis(100));
                format!("staticd exited ({}) waiting for {what}", describe(status))
            } else if Instant::now() >= deadline {
                format!("no {what} within {timeout:?}")
            } else {
                continue;
            };
            panic!(
                "{failure}; stderr: {:#?}\nPebble's log: {:#?}",
                self.stderr.snapshot(),
                self.pebble_log.snapshot()
            );
        }
    }

    /// [`Staticd::wait_lines`] for the first such line.
    fn wait_line(&mut self, timeout: Duration, what: &str, pred: impl Fn(&str) -> bool) -> String {
        self.wait_lines(timeout, 1, what, pred).remove(0)
    }

    /// Waits for `name`'s `certificate issued` line.
    fn wait_issued(&mut self, name: &str) -> String {
        self.wait_issued_within(ISSUE_TIMEOUT, name)
    }

    fn wait_issued_within(&mut self, timeout: Duration, name: &str) -> String {
        let what = format!("`{name}: certificate issued` line");
        self.wait_line(timeout, &what, |l| is_issued(l, name))
    }

    fn lines(&self) -> Vec<String> {
        self.stderr.snapshot()
    }
}

/// The leaf certificate of a TLS connection whose handshake is done.
fn peer_leaf(conn: &Conn) -> CertificateDer<'static> {
    let tls = conn.tls().expect("a TLS connection");
    tls.peer_certificates().expect("the server's certificates")[0]
        .clone()
        .into_owned()
}

/// A certificate's serial number, in hex.
fn serial(der: &CertificateDer<'_>) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("a parsable certificate");
    cert.raw_serial_as_string()
}

/// The mode bits of `path` (not following a symlink at the end).
fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Checks the state directory after `name` was issued: `DIR` 0700; `DIR/NAME` a symlink
/// to a hidden version directory holding `fullchain.pem` (leaf and Pebble's
/// intermediate) and `privkey.pem` (0600); the account file 0600.
fn assert_state_files(dir: &Path, name: &str) {
    assert_eq!(mode(dir), 0o700, "{} must be 0700", dir.display());
    let live = dir.join(name);
    let version =
        fs::read_link(&live).unwrap_or_else(|e| panic!("{} is no symlink: {e}", live.display()));
    let version_name = version.file_name().unwrap().to_string_lossy().into_owned();
    let stamp = version_name.strip_prefix(&format!(".{name}."));
    assert!(
        stamp.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())),
        "{} points to {}, want .{name}.<unix-seconds>",
        live.display(),
        version.display()
    );
    let chain = fs::read_to_string(live.join("fullchain.pem")).expect("fullchain.pem");
    assert!(
        chain.matches("-----BEGIN CERTIFICATE-----").count() >= 2,
        "fullchain.pem holds no chain: {chain}"
    );
    let key = live.join("privkey.pem");
    assert!(
        fs::read_to_string(&key)
            .expect("privkey.pem")
            .contains("PRIVATE KEY-----"),
        "{} holds no key",
        key.display()
    );
    assert_eq!(mode(&key), 0o600, "{} must be 0600", key.display());
    let accounts: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let file = p.file_name().unwrap().to_string_lossy();
            file.starts_with("account-") && file.ends_with(".json")
        })
        .collect();
    assert_eq!(accounts.len(), 1, "one account file in {}", dir.display());
    assert_eq!(mode(&accounts[0]), 0o600, "{}", accounts[0].display());
}

/// A document root with one small file.
fn site() -> Docroot {
    let root = Docroot::new();
    root.file("file", "served over ACME\n");
    root
}

/// `args` and then `more`.
fn args_with<S: AsRef<str>>(mut args: Vec<OsString>, more: &[S]) -> Vec<OsString> {
    args.extend(more.iter().map(|s| OsString::from(s.as_ref())));
    args
}

// ---------------------------------------------------------------------------------------
// Issuance
// ---------------------------------------------------------------------------------------

/// The harness itself: Pebble starts, its directory answers (checked by `start`), and
/// its management API hands out the root it issues under.
#[test]
fn pebble_starts_and_hands_out_its_root() {
    let Some(acme) = Acme::start(|p| p) else {
        return;
    };
    let root = fs::read_to_string(acme.pebble.root_file()).unwrap();
    assert!(root.contains("-----END CERTIFICATE-----"), "{root}");
}

/// TLS-ALPN-01: the HTTPS port answers the challenge itself; the certificate is stored
/// in the state directory and served to curl, and after a restart at once.
#[test]
fn tls_alpn_01_issues_a_certificate_curl_accepts() {
    let Some(curl) = tool("curl", "curl") else {
        return;
    };
    let Some(acme) = Acme::start(|p| p) else {
        return;
    };
    let root = site();
    let args = args_with(
        acme.args(root.path(), "off"),
        &["--acme", NAME, "--acme-challenge", "tls-alpn-01"],
    );
    let mut server = Staticd::start(&args, &acme.pebble);
    let issued = server.wait_issued(NAME);
    assert!(
        issued.starts_with(&format!(
            "{}certificate issued (tls-alpn-01), valid until ",
            about(NAME)
        )) && issued.contains("; renewal due "),
        "{issued}"
    );
    assert!(
        server.lines().contains(&format!(
            "{}ordering a certificate (attempt 1, tls-alpn-01)",
            about(NAME)
        )),
        "{:#?}",
        server.lines()
    );
    assert_state_files(&acme.dir(), NAME);

    let run = acme.curl(&curl, NAME, "/file");
    run.assert_success("curl over the ACME certificate");
    assert_eq!(run.stdout, "served over ACME\n");
    // What is served is what was stored.
    let stored = fs::read_to_string(acme.dir().join(NAME).join("fullchain.pem")).unwrap();
    let leaf = acme.served_leaf(NAME);
    let first = CertificateDer::pem_slice_iter(stored.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(leaf, first, "the served leaf is not the stored one");

    // A restart serves the stored certificate from the start, and orders nothing.
    drop(server);
    let mut restarted = Staticd::start(&args, &acme.pebble);
    let live = acme.dir().join(NAME);
    let picked = format!(
        "{}certificate from {}, valid until ",
        about(NAME),
        live.display()
    );
    restarted.wait_line(IO_TIMEOUT, "`certificate from` line", |l| {
        l.starts_with(&picked)
    });
    assert_eq!(acme.served_leaf(NAME), leaf, "the restart serves another");
    let ordering: Vec<String> = restarted
        .lines()
        .into_iter()
        .filter(|l| l.starts_with(&format!("{}ordering", about(NAME))))
        .collect();
    assert!(ordering.is_empty(), "ordered again: {ordering:#?}");
}

/// HTTP-01: answered on the `--redirect-http` port, which otherwise still redirects, and
/// says 404 to a token it does not know.
#[test]
fn http_01_issues_a_certificate_on_the_redirect_port() {
    let Some(curl) = tool("curl", "curl") else {
        return;
    };
    let Some(acme) = Acme::start(|p| p) else {
        return;
    };
    let root = site();
    let http_port = acme.http_port.to_string();
    let args = args_with(
        acme.args(root.path(), "off"),
        &[
            "--acme",
            NAME,
            "--acme-challenge",
            "http-01",
            "--redirect-http",
            &http_port,
        ],
    );
    let mut server = Staticd::start(&args, &acme.pebble);
    let issued = server.wait_issued(NAME);
    assert!(
        issued.starts_with(&format!(
            "{}certificate issued (http-01), valid until ",
            about(NAME)
        )),
        "{issued}"
    );
    assert_state_files(&acme.dir(), NAME);
    let run = acme.curl(&curl, NAME, "/file");
    run.assert_success("curl over the ACME certificate");
    assert_eq!(run.stdout, "served over ACME\n");

    let cleartext = || Conn::new(TcpStream::connect(("127.0.0.1", acme.http_port)).unwrap());
    let host = format!("Host: {NAME}");
    let redirect = cleartext().roundtrip(request_to("/file", &host));
    assert_eq!(redirect.status, 308, "{redirect:#?}");
    assert_eq!(
        redirect.header("location"),
        Some(format!("https://{NAME}:{}/file", acme.tls_port).as_str()),
        "{redirect:#?}"
    );
    let unknown = cleartext().roundtrip(request_to(
        "/.well-known/acme-challenge/no-such-token_x",
        &host,
    ));
    assert_eq!(unknown.status, 404, "{unknown:#?}");
}

/// A GET of `target` with this Host line, on a connection closed after it.
fn request_to(target: &str, host: &str) -> String {
    format!("GET {target} HTTP/1.1\r\n{host}\r\nConnection: close\r\n\r\n")
}

// ---------------------------------------------------------------------------------------
// Renewal
// ---------------------------------------------------------------------------------------

/// The slow download's file: big enough that socket buffers (a few MB on loopback)
/// cannot hold it, so the server is still sending when the renewal comes.
const BIG: usize = 32 << 20;

/// How the slow reader paces itself until the renewal: 160 KiB/s.
const SLOW_CHUNK: usize = 16 << 10;
const SLOW_PAUSE: Duration = Duration::from_millis(100);

/// A renewal (Pebble's certificates last 30 s: renewal due at 20 s) swaps the new
/// certificate in for new connections, while a download begun on the old one completes
/// intact.
#[test]
fn renewal_swaps_the_certificate_under_a_download_in_flight() {
    // No nonce refused on purpose: the test asserts the renewal needs one attempt, and at
    // Pebble's default 5% three refusals in a row (the client's retries spent) fail one
    // in 8,000 signed requests, which once failed CI.
    let Some(acme) = Acme::start(|p| p.validity_secs(30).nonce_reject(0)) else {
        return;
    };
    let root = Docroot::new();
    let big = pattern(BIG);
    root.file("big", &big);
    let args = args_with(
        acme.args(root.path(), "off"),
        &["--acme", NAME, "--acme-challenge", "tls-alpn-01"],
    );
    let mut server = Staticd::start(&args, &acme.pebble);
    let issued = server.wait_issued(NAME);
    let (until, due) = validity_dates(&issued);
    let left = until.duration_since(due).unwrap_or_default();
    assert!(
        (9..=11).contains(&left.as_secs()),
        "renewal due {left:?} before the end of 30 s, want 10 s (at 2/3): {issued}"
    );
    let first = serial(&acme.served_leaf(NAME));
    let first_version = fs::read_link(acme.dir().join(NAME)).unwrap();

    let renewed = Arc::new(AtomicBool::new(false));
    let reader = {
        let conn = acme.connect(NAME);
        let renewed = renewed.clone();
        thread::spawn(move || slow_download(conn, "/big", &renewed))
    };
    let renewal_timeout = Duration::from_secs(45);
    let lines = server.wait_lines(renewal_timeout, 2, "renewal's issued line", |l| {
        is_issued(l, NAME)
    });
    renewed.store(true, Ordering::SeqCst);
    let download = reader.join().expect("the slow download");

    assert_eq!(
        download.serial, first,
        "the download began on the first certificate"
    );
    assert!(
        download.read_at_renewal < BIG,
        "the download was over ({} bytes) before the renewal: {lines:#?}",
        download.read_at_renewal
    );
    assert_eq!(download.body.len(), BIG, "the download was cut");
    assert!(
        download.body == big,
        "the download's bytes differ from the file"
    );

    let second = serial(&acme.served_leaf(NAME));
    assert_ne!(
        second, first,
        "a new connection still gets the old certificate: {lines:#?}"
    );
    let second_version = fs::read_link(acme.dir().join(NAME)).unwrap();
    assert_ne!(
        first_version, second_version,
        "DIR/NAME still points to the old version"
    );
    // Pebble neither refuses nor fails anything here (no nonce refused, see above): a
    // renewal needs one attempt.
    let failed: Vec<String> = server
        .lines()
        .into_iter()
        .filter(|l| l.starts_with(&about(NAME)) && l.contains(" failed: "))
        .collect();
    assert!(failed.is_empty(), "the renewal failed first: {failed:#?}");
}

/// The `valid until` and `renewal due` dates of a `certificate issued` or `certificate
/// from` line.
fn validity_dates(line: &str) -> (SystemTime, SystemTime) {
    let parse = |date: &str| {
        httpdate::parse_http_date(date.trim())
            .unwrap_or_else(|e| panic!("bad date {date:?} in {line:?}: {e}"))
    };
    let (_, dates) = line
        .split_once(", valid until ")
        .unwrap_or_else(|| panic!("no `valid until` in {line:?}"));
    let (until, due) = dates
        .split_once("; renewal due ")
        .unwrap_or_else(|| panic!("no `renewal due` in {line:?}"));
    (parse(until), parse(due))
}

/// What [`slow_download`] saw.
struct Download {
    /// The serial of the certificate its connection began with.
    serial: String,
    /// Body bytes read when it learnt of the renewal.
    read_at_renewal: usize,
    body: Vec<u8>,
}

/// GETs `target` and reads the body slowly until `renewed`, then at full speed.
fn slow_download(mut conn: Conn, target: &str, renewed: &AtomicBool) -> Download {
    conn.send(request("GET", target, &["Connection: close"]));
    let head = conn.read_head();
    assert_eq!(head.status, 200, "{head:#?}");
    let length = head.content_length().expect("Content-Length") as usize;
    let serial = serial(&peer_leaf(&conn));
    let mut body = Vec::with_capacity(length);
    let mut read_at_renewal = None;
    while body.len() < length {
        let chunk = SLOW_CHUNK.min(length - body.len());
        body.extend(conn.take_exact(chunk));
        if read_at_renewal.is_none() {
            if renewed.load(Ordering::SeqCst) {
                read_at_renewal = Some(body.len());
            } else {
                thread::sleep(SLOW_PAUSE);
            }
        }
    }
    Download {
        serial,
        read_at_renewal: read_at_renewal.unwrap_or(length),
        body,
    }
}

/// `len` bytes that differ from one KiB to the next, so a misplaced block shows.
fn pattern(len: usize) -> Vec<u8> {
    let mut state: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            // xorshift32: cheap, never repeats within the file.
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// A CA that refuses
// ---------------------------------------------------------------------------------------

/// Pebble refuses the name: staticd retries with a growing delay (from `--acme-backoff
/// 1`), and meanwhile serves HTTPS with its `--tls-cert` fallback.
#[test]
fn a_refusing_ca_gets_retries_with_backoff_while_the_fallback_serves() {
    const BLOCKED: &str = "blocked.staticd.test";
    let Some(acme) = Acme::start(|p| p.block(BLOCKED)) else {
        return;
    };
    let root = site();
    let fallback = Pki::shared().leaf(&[BLOCKED]);
    let files = fallback.write(acme.state.path(), "fallback");
    let mut args = args_with(acme.args(root.path(), "off"), &["--acme", BLOCKED]);
    args.extend(files.args());
    let mut server = Staticd::start(&args, &acme.pebble);

    let client = TlsClient::new(Pki::shared().client_config(), BLOCKED);
    let connector = Connector::new(acme.tls_addr(), Some(client));
    let failed = |l: &str| {
        l.strip_prefix(&about(BLOCKED))
            .is_some_and(|rest| rest.starts_with("attempt "))
    };
    // Requests while the retries go on: each one a new handshake on the fallback.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut served = 0;
    while server.lines().iter().filter(|l| failed(l)).count() < 3 {
        let mut conn = connector.connect();
        let resp = conn.roundtrip(request("GET", "/file", &[]));
        assert_eq!(resp.status, 200, "{resp:#?}");
        assert_eq!(resp.body, b"served over ACME\n");
        assert!(
            peer_leaf(&conn) == fallback.der,
            "not the fallback certificate"
        );
        served += 1;
        assert!(
            Instant::now() < deadline,
            "no 3 failed attempts within 30 s: {:#?}",
            server.lines()
        );
        thread::sleep(Duration::from_millis(200));
    }
    assert!(served >= 2, "requests were answered only {served} times");

    let failures = server.wait_lines(IO_TIMEOUT, 3, "failed attempts", failed);
    let mut delays = Vec::new();
    for (i, line) in failures.iter().take(3).enumerate() {
        let rest = line.strip_prefix(&about(BLOCKED)).unwrap();
        let attempt = format!("attempt {} failed: ", i + 1);
        assert!(
            rest.starts_with(&attempt),
            "want {attempt:?}: {failures:#?}"
        );
        let (why, next) = rest[attempt.len()..]
            .rsplit_once("; next attempt in ")
            .unwrap_or_else(|| panic!("no `; next attempt in`: {line}"));
        assert!(!why.trim().is_empty(), "no reason: {line}");
        let secs: u64 = next
            .strip_suffix('s')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("bad delay in {line}"));
        delays.push(secs);
    }
    assert!(
        delays.windows(2).all(|w| w[0] <= w[1]),
        "delays decrease: {delays:?}: {failures:#?}"
    );
    // 1 s, 2 s, 4 s with +-20% jitter.
    assert!(delays[0] <= 2, "--acme-backoff 1 not used: {delays:?}");
    assert!(delays[2] > delays[0], "the delay does not grow: {delays:?}");
    assert!(
        !server.lines().iter().any(|l| is_issued(l, BLOCKED)),
        "{:#?}",
        server.lines()
    );
}

// ---------------------------------------------------------------------------------------
// Two processes, one state directory
// ---------------------------------------------------------------------------------------

/// Two staticd sharing `--acme-dir`, on one port at two addresses (staticd will not
/// share an address and port with another process): one orders, holding `DIR/lock`;
/// Pebble's validation reaches the other, which answers from the shared challenges; the
/// other picks the certificate up; both serve it.
///
/// The roles are made certain: the test holds `DIR/lock` while the staticd at 127.0.0.1
/// (where Pebble validates) starts and finds it taken (it looks again 5 s later); then
/// the lock is let go and the staticd at 127.0.0.2 starts and takes it at once.
#[test]
fn two_processes_sharing_the_state_directory_order_once() {
    let Some(acme) = Acme::start(|p| p) else {
        return;
    };
    let root = site();
    let dir = acme.dir();
    fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    let lock = hold_lock(&dir.join("lock"));
    let args = |ip: Ipv4Addr| {
        args_with(
            acme.args_at(ip, root.path(), "off"),
            &["--acme", NAME, "--acme-challenge", "tls-alpn-01"],
        )
    };
    let validated_ip = Ipv4Addr::LOCALHOST;
    let mut validated = Staticd::start(&args(validated_ip), &acme.pebble);
    validated.wait_line(IO_TIMEOUT, "`another staticd holds` line", |l| {
        l.starts_with("staticd: acme: another staticd holds ")
    });
    drop(lock);
    let ordering_ip = Ipv4Addr::new(127, 0, 0, 2);
    let mut ordering = Staticd::start(&args(ordering_ip), &acme.pebble);

    let issued = ordering.wait_issued(NAME);
    assert!(
        issued.starts_with(&format!("{}certificate issued (tls-alpn-01)", about(NAME))),
        "{issued}"
    );
    let live = dir.join(NAME);
    let picked = format!(
        "{}certificate from {}, valid until ",
        about(NAME),
        live.display()
    );
    validated.wait_line(Duration::from_secs(15), "pick-up line", |l| {
        l.starts_with(&picked)
    });
    assert_state_files(&dir, NAME);

    // Both serve it, verified against Pebble's root.
    let mut serials = Vec::new();
    for ip in [validated_ip, ordering_ip] {
        let mut conn = acme.connect_at(SocketAddr::from((ip, acme.tls_port)), NAME);
        let resp = conn.roundtrip(request("GET", "/file", &[]));
        assert_eq!(resp.status, 200, "{ip}: {resp:#?}");
        serials.push(serial(&peer_leaf(&conn)));
    }
    assert_eq!(
        serials[0], serials[1],
        "the two serve different certificates"
    );
    let issued = |s: &Staticd| s.lines().iter().filter(|l| is_issued(l, NAME)).count();
    assert_eq!(
        (issued(&validated), issued(&ordering)),
        (0, 1),
        "one certificate issued, by the process holding the lock: {:#?}\n{:#?}",
        validated.lines(),
        ordering.lines()
    );
}

/// Takes the flock(2) lock staticd takes on `path` (the state directory's lock).
fn hold_lock(path: &Path) -> fs::File {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .expect("take the lock");
    file
}

// ---------------------------------------------------------------------------------------
// --acme-vhosts
// ---------------------------------------------------------------------------------------

/// `--acme-vhosts` orders for the virtual hosts' DNS names only: not `default`, not an
/// IP address, not a name with a port. `z.staticd.test` sorts after every other
/// directory: once it is issued, the others had their turn too.
#[test]
fn acme_vhosts_orders_for_dns_names_only() {
    let Some(curl) = tool("curl", "curl") else {
        return;
    };
    let Some(acme) = Acme::start(|p| p) else {
        return;
    };
    let root = Docroot::new();
    let wanted = [NAME, "z.staticd.test"];
    let unwanted = ["default", "127.0.0.1", "b.staticd.test:8080"];
    for dir in wanted.iter().chain(&unwanted) {
        root.file(&format!("{dir}/file"), format!("site {dir}\n"));
    }
    let args = args_with(
        acme.args(root.path(), "off"),
        &[
            "--vhosts",
            "--acme-vhosts",
            "--acme-challenge",
            "tls-alpn-01",
        ],
    );
    let mut server = Staticd::start(&args, &acme.pebble);
    for name in wanted {
        server.wait_issued(name);
    }
    for line in server.lines() {
        for name in unwanted {
            let name = name.split(':').next().unwrap();
            assert!(
                !line.starts_with(&about(name)),
                "a certificate for {name}: {line}"
            );
        }
    }
    for name in unwanted.iter().chain(&["b.staticd.test"]) {
        let path = acme.dir().join(name);
        assert!(!path.exists(), "{} exists", path.display());
    }
    let run = acme.curl(&curl, NAME, "/file");
    run.assert_success("curl to a virtual host");
    assert_eq!(run.stdout, format!("site {NAME}\n"));
}

// ---------------------------------------------------------------------------------------
// Start-up errors (no CA needed)
// ---------------------------------------------------------------------------------------

/// A state directory that cannot be made: one line naming `--acme-dir`, exit 1.
#[test]
fn acme_dir_under_a_regular_file_fails_naming_the_flag() {
    let root = site();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    fs::write(&file, "not a directory\n").unwrap();
    let dir = file.join("sub");
    let outcome = run_acme_to_exit(&root, &dir, &[]);
    assert_startup_failure(&outcome, 1, &["--acme-dir", &dir.display().to_string()]);
}

/// `--acme` is for the standalone server: refused with `--inetd` (a usage error, like
/// every flag that conflicts with `--inetd`).
#[test]
fn acme_with_inetd_is_refused() {
    let outcome = run_to_exit(&["--inetd", "--acme", NAME]);
    assert_usage_error(&outcome, &["--inetd", "--acme"]);
    let first = &outcome.stderr[0];
    assert!(
        first.contains("--inetd") && first.contains("--acme"),
        "the first line must name both flags: {:#?}",
        outcome.stderr
    );
}

/// HTTP-01 alone needs the cleartext port the CA validates on.
#[test]
fn http_01_without_redirect_http_fails_with_one_line() {
    let root = site();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("acme");
    let outcome = run_acme_to_exit(&root, &dir, &["--acme-challenge", "http-01"]);
    assert_startup_failure(&outcome, 1, &["http-01", "--redirect-http"]);
}

/// Runs staticd with `--acme NAME --acme-dir dir` and `extra` until it exits (a start-up
/// error is expected). Nothing listens at its CA: the error must come before any order.
fn run_acme_to_exit(root: &Docroot, dir: &Path, extra: &[&str]) -> Outcome {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "--root".as_ref(),
        root.path().as_os_str(),
        "--port".as_ref(),
        "0".as_ref(),
        "--bind".as_ref(),
        "127.0.0.1".as_ref(),
        "--acme".as_ref(),
        NAME.as_ref(),
        "--acme-dir".as_ref(),
        dir.as_os_str(),
        "--acme-directory".as_ref(),
        "https://127.0.0.1:9/dir".as_ref(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    run_to_exit(&args)
}

/// Pebble rejecting a quarter of valid nonces as badNonce: the client retries each on the
/// spot with the fresh nonce (RFC 8555 6.5; instant-acme, up to three times a request), so an
/// order still goes through in few attempts. An order makes ten signed requests or more (its
/// polls of the order under load among them). With the retries a request fails only when
/// three nonces in a row are refused (1/64), so an attempt fails 15% of the time at ten
/// requests, 22% at sixteen, so six failed attempts in a row come once in 100,000 runs at
/// ten requests, once in 8,000 at sixteen. Without the retries an attempt fails 94% of the
/// time (1 - 0.75^10) and six in a row come 70% of the time. (This test first allowed two
/// failed attempts, and a CI run saw three: at ten requests, once in 320 runs.)
#[test]
fn bad_nonces_are_retried_on_the_spot() {
    let Some(acme) = Acme::start(|p| p.nonce_reject(25)) else {
        return;
    };
    let root = site();
    let args = args_with(
        acme.args(root.path(), "off"),
        &["--acme", NAME, "--acme-challenge", "tls-alpn-01"],
    );
    let mut server = Staticd::start(&args, &acme.pebble);
    // Five failed attempts back off 1 + 2 + 4 + 8 + 16 s (+-20%) before the sixth.
    server.wait_issued_within(Duration::from_secs(90), NAME);
    let failed: Vec<String> = server
        .lines()
        .into_iter()
        .filter(|l| l.starts_with(&format!("{}attempt ", about(NAME))))
        .collect();
    assert!(failed.len() < 6, "too many failed attempts: {failed:#?}");
}
