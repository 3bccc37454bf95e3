//! `--health-path`: 200 while serving, 503 once a graceful stop begins; decided before
//! `--auth`, `_redirects` and the files, never cached, never in the access log.

#[macro_use]
mod common;

use common::*;
use rustix::process::Signal;

matrix!([h1, tls, h2c, h2_tls] standalone:
    health_is_ok_unlogged_and_before_redirects_and_auth,
);

both_modes!(health_is_503_once_a_stop_begins);

/// alice:wonderland, bcrypt cost 4 (as tests/auth.rs).
const ALICE: &str = "alice:$2y$04$jEih4bNT9UwQY6C/9jCo6.dw/NPM2P3prfOZX8vj5Us4DQQxeKQ8m";

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("index.html", "<p>app</p>\n");
    root.file("a.txt", "alpha\n");
    // A single-page app's catch-all: every path that is no file is the app.
    root.file("_redirects", "/* /index.html 200\n");
    root
}

fn health_is_ok_unlogged_and_before_redirects_and_auth(v: Variant) {
    let root = site();
    let etc = Docroot::new();
    let users = etc.file("users.htpasswd", format!("{ALICE}\n"));
    let mut builder = Server::builder(v, root.path())
        .log_format("common")
        .args(["--health-path", "/healthz"]);
    if cfg!(feature = "auth") {
        builder = builder.arg(format!("--auth=/={}", users.display()));
    }
    let server = builder.start();
    let ok = server.get("/healthz");
    assert_eq!((ok.status, ok.body.as_slice()), (200, &b"ok\n"[..]));
    assert_eq!(ok.header("cache-control"), Some("no-store"));
    assert_eq!(server.get("/healthz?probe=1").status, 200);
    let head = server.request("HEAD", "/healthz", &[]);
    assert_eq!((head.status, head.body.len()), (200, 0));
    // Any other path goes through --auth, then the catch-all rule.
    let other = server.get("/healthz/more");
    match cfg!(feature = "auth") {
        true => assert_eq!(other.status, 401),
        false => assert_eq!(other.body, b"<p>app</p>\n"),
    }
    // Logged: the other request; not logged: the probes.
    let stderr = server.stderr();
    stderr.wait_for(IO_TIMEOUT, |l| {
        l.iter().any(|l| l.contains("/healthz/more"))
    });
    let lines = stderr.snapshot();
    let probes: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("/healthz ") || l.contains("/healthz?"))
        .collect();
    assert!(probes.is_empty(), "{lines:#?}");
}

/// A probe pipelined behind a large download, decided after SIGTERM: 503, so a
/// balancer stops sending clients while the download finishes.
fn health_is_503_once_a_stop_begins(mode: Mode) {
    if mode == Mode::Inetd {
        // One connection per process: there is no stop to drain for.
        let root = site();
        let server = Server::builder(Variant::h1(mode), root.path())
            .args(["--health-path", "/healthz"])
            .start();
        assert_eq!(server.get("/healthz").status, 200);
        return;
    }
    const BIG: u64 = 64 << 20;
    let root = site();
    write_pattern_file(&root.join("big.bin"), BIG);
    let mut server = Server::builder(Variant::h1(mode), root.path())
        .args(["--health-path", "/healthz"])
        .start();
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/healthz", &[])).status, 200);
    conn.send(request("GET", "/big.bin", &[]) + &request("GET", "/healthz", &[]));
    let head = conn.read_head();
    assert_eq!(head.content_length(), Some(BIG));
    server.process().signal(Signal::TERM);
    assert_eq!(conn.skip_up_to(BIG), BIG);
    let probe = conn.read_response();
    assert_eq!(probe.status, 503, "{probe:?}");
    assert_eq!(probe.body, b"stopping\n");
}

/// Probes that cannot speak TLS to a certificate chosen by SNI (kubelet's) come to
/// the `--redirect-http` port: the health path is answered there, every other path
/// redirected.
#[cfg(feature = "tls")]
#[test]
fn health_is_answered_on_the_redirect_port() {
    let root = site();
    let port = free_port();
    let server = Server::builder(Mode::Standalone, root.path())
        .tls_files(&Pki::shared().localhost().1)
        .args([
            "--health-path",
            "/healthz",
            "--redirect-http",
            &port.to_string(),
        ])
        .start();
    let line = server
        .stderr()
        .wait_line(|l| l.starts_with("staticd: redirecting to https on "));
    let addr: std::net::SocketAddr = line
        .trim_start_matches("staticd: redirecting to https on ")
        .trim()
        .parse()
        .unwrap();
    let connect = || Conn::new(std::net::TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap());
    let probe = connect().roundtrip(request("GET", "/healthz", &[]));
    assert_eq!((probe.status, probe.body.as_slice()), (200, &b"ok\n"[..]));
    let other = connect().roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(other.status, 308);
}
