//! The io_uring transport (`--io-uring`, cargo feature `uring`) checked
//! directly: HTTP/1.1, and the connection prelude it shares with the other
//! transports (TLS, HTTP/2 with prior knowledge and over ALPN, the PROXY
//! header). The black-box suites run on it too, in their `uring` cells
//! (tests/common/variant.rs).
#![cfg(feature = "uring")]

#[macro_use]
mod common;

use std::ffi::OsString;
use std::io::Write;
use std::net::TcpListener;
use std::time::Duration;

use common::*;
use rustix::process::Signal;

/// A bigger file than one io_uring file read moves, so that it goes out in
/// several blocks.
const BIG: usize = 3 << 20;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root.file("b.txt", "bravo, a little longer\n");
    root.file("big.bin", pattern(BIG));
    root
}

// Each a `uring` cell (NAME::uring), as the other suites' io_uring runs are, so that
// `cargo test --features uring -- ::uring` picks every io_uring cell of every suite.
matrix!([uring] standalone:
    serves_a_file,
    keep_alive_carries_several_requests,
    pipelined_requests_are_answered_in_order,
    large_file_and_a_range_of_it,
    idle_keep_alive_connection_is_closed_after_the_timeout,
    sigterm_with_an_idle_connection_exits_zero,
);

/// The `uring` cell's server: standalone with `--io-uring`.
fn start(v: Variant, root: &Docroot) -> Server {
    Server::builder(v, root.path()).io_uring().start()
}

fn serves_a_file(v: Variant) {
    let root = site();
    let server = start(v, &root);
    let resp = server.get("/a.txt");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body_str(), "alpha\n");
    assert_eq!(resp.header("content-length"), Some("6"));
    assert_eq!(server.get("/nope").status, 404);
}

fn keep_alive_carries_several_requests(v: Variant) {
    let root = site();
    let server = start(v, &root);
    let mut conn = server.connect();
    for path in ["/a.txt", "/b.txt", "/big.bin", "/a.txt"] {
        let resp = conn.roundtrip(request("GET", path, &[]));
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(resp.body, root_bytes(&root, path), "{path}");
    }
}

fn pipelined_requests_are_answered_in_order(v: Variant) {
    let root = site();
    let server = start(v, &root);
    let mut conn = server.connect();
    let mut batch = String::new();
    for path in ["/a.txt", "/b.txt", "/nope", "/a.txt"] {
        batch.push_str(&request("GET", path, &[]));
    }
    batch.push_str(&request("GET", "/b.txt", &["Connection: close"]));
    conn.send(batch);
    let (bytes, ended) = conn.read_to_end();
    assert!(
        matches!(ended, Ended::Eof),
        "the last response ends with FIN"
    );
    let responses = parse_responses(&bytes, &["GET"; 5]);
    let statuses: Vec<u16> = responses.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 404, 200, 200]);
    assert_eq!(responses[0].body_str(), "alpha\n");
    assert_eq!(responses[1].body_str(), "bravo, a little longer\n");
    assert_eq!(responses[4].body_str(), "bravo, a little longer\n");
}

fn large_file_and_a_range_of_it(v: Variant) {
    let root = site();
    let server = start(v, &root);
    let whole = server.get("/big.bin");
    assert_eq!(whole.status, 200);
    assert!(whole.body == pattern(BIG), "the whole file, byte for byte");

    let (first, last) = (100_000, 2_500_000);
    let part = server.request(
        "GET",
        "/big.bin",
        &[("range", &format!("bytes={first}-{last}"))],
    );
    assert_eq!(part.status, 206);
    assert_eq!(
        part.header("content-range"),
        Some(format!("bytes {first}-{last}/{BIG}").as_str())
    );
    assert!(part.body == pattern(BIG)[first..=last], "the range's bytes");
}

fn idle_keep_alive_connection_is_closed_after_the_timeout(v: Variant) {
    let root = site();
    let mut server = Server::builder(v, root.path())
        .io_uring()
        .args(["--keepalive-timeout", "1"])
        .start();
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    // The read in flight is ended by the timeout: the client sees the close.
    let (rest, ended) = conn.read_to_end();
    assert!(rest.is_empty());
    assert!(matches!(ended, Ended::Eof), "closed with FIN");
    server.assert_survived("/a.txt");
}

fn sigterm_with_an_idle_connection_exits_zero(v: Variant) {
    let root = site();
    let mut server = start(v, &root);
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    server.process().signal(Signal::TERM);
    let status = server
        .process()
        .wait_timeout(Duration::from_secs(5))
        .expect("staticd --io-uring still running after SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", describe(status));
    conn.assert_closed();
}

#[test]
fn port_in_use_fails_with_one_line() {
    let root = site();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let mut args: Vec<OsString> = vec!["--root".into(), root.path().into()];
    args.extend(["--io-uring", "--port", &port, "--bind", "127.0.0.1"].map(OsString::from));
    let outcome = run_to_exit(&args);
    assert_startup_failure(&outcome, 1, &["in use", &port]);
}

// --- the prelude: TLS, HTTP/2, the PROXY header ---------------------------------------

matrix!([uring] standalone:
    serves_https,
    cleartext_on_the_tls_port_is_told_to_use_https,
    #[cfg(feature = "http2")] serves_h2c_with_prior_knowledge,
    #[cfg(feature = "http2")] serves_h2_over_tls,
    proxy_protocol_names_the_client,
    proxy_protocol_before_tls,
);

/// The `uring` cell's server over TLS, with `args`.
fn start_tls(v: Variant, root: &Docroot, args: &[&str]) -> Server {
    Server::builder(v, root.path())
        .io_uring()
        .tls_files(&Pki::shared().localhost().1)
        .log_format("common")
        .args(args)
        .start()
}

fn serves_https(v: Variant) {
    let root = site();
    let server = start_tls(v, &root, &[]);
    let mut conn = server.connect();
    // Keep-alive over TLS, a file larger than one io_uring file read included.
    for path in ["/a.txt", "/big.bin", "/nope", "/b.txt"] {
        let resp = conn.roundtrip(request("GET", path, &[]));
        let want = if path == "/nope" { 404 } else { 200 };
        assert_eq!(resp.status, want, "{path}");
        if want == 200 {
            assert!(resp.body == root_bytes(&root, path), "{path}: body differs");
        }
    }
    let resp = conn.roundtrip(request("GET", "/a.txt", &["Connection: close"]));
    assert_eq!(resp.body_str(), "alpha\n");
    let (_, ended) = conn.read_to_end();
    assert!(matches!(ended, Ended::Eof), "{ended:?}");
}

fn cleartext_on_the_tls_port_is_told_to_use_https(v: Variant) {
    let root = site();
    let server = start_tls(v, &root, &[]);
    let mut conn = Conn::from_stream(Stream::Plain(server.connector().tcp()));
    let resp = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.status, 400, "{resp:#?}");
    assert!(
        resp.body_str().to_ascii_lowercase().contains("https"),
        "{resp:#?}"
    );
}

#[cfg(feature = "http2")]
fn serves_h2c_with_prior_knowledge(v: Variant) {
    let root = site();
    let server = start(v, &root);
    let mut h2 = server.connector().client_proto(Proto::Http2);
    for path in ["/a.txt", "/big.bin", "/b.txt"] {
        let resp = h2.get(path);
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(resp.version, hyper::Version::HTTP_2, "{path}");
        assert!(resp.body == root_bytes(&root, path), "{path}: body differs");
    }
    assert_eq!(h2.get("/nope").status, 404);
    // HTTP/1.1 on the same port as before.
    assert_eq!(
        server.client_http1().get("/a.txt").version,
        hyper::Version::HTTP_11
    );
}

#[cfg(feature = "http2")]
fn serves_h2_over_tls(v: Variant) {
    let root = site();
    let server = start_tls(v, &root, &[]);
    let mut h2 = server.connector().client_proto(Proto::Http2);
    let requests = ["/a.txt", "/big.bin", "/b.txt", "/a.txt"].map(|path| {
        hyper::Request::get(path)
            .header("host", "localhost")
            .body(Default::default())
            .unwrap()
    });
    // Concurrent streams on the one connection.
    let responses = h2.send_all(requests.into());
    for (resp, path) in responses
        .iter()
        .zip(["/a.txt", "/big.bin", "/b.txt", "/a.txt"])
    {
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(resp.version, hyper::Version::HTTP_2, "{path}");
        assert!(resp.body == root_bytes(&root, path), "{path}: body differs");
    }
}

/// The access log's client for the request whose target holds `marker`.
fn logged_client(server: &Server, marker: &str) -> String {
    let line = server
        .stderr()
        .wait_line(|l| !l.starts_with("staticd: ") && l.contains(marker));
    line.split(' ').next().unwrap_or_default().to_string()
}

/// A connection that opens with `header`, then speaks as the server does.
fn connect_with(server: &Server, header: &[u8]) -> Conn {
    let connector = server.connector();
    let mut tcp = connector.tcp();
    tcp.write_all(header).expect("send the PROXY header");
    Conn::from_stream(connector.wrap(tcp))
}

fn proxy_protocol_names_the_client(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .io_uring()
        .log_format("common")
        .arg("--proxy-protocol")
        .start();
    // The header and the request in one write: what follows the header is the request's.
    let mut tcp = server.connector().tcp();
    let mut first = b"PROXY TCP4 203.0.113.7 127.0.0.1 40001 80\r\n".to_vec();
    first.extend_from_slice(request("GET", "/a.txt?one-write", &[]).as_bytes());
    tcp.write_all(&first).unwrap();
    let mut conn = Conn::from_stream(Stream::Plain(tcp));
    assert_eq!(conn.read_response().status, 200);
    assert_eq!(logged_client(&server, "one-write"), "203.0.113.7");
    // Two requests on the connection: the header counts for both.
    let mut conn = connect_with(&server, b"PROXY TCP6 2001:db8::17 ::1 40002 80\r\n");
    for marker in ["first", "second"] {
        let resp = conn.roundtrip(request("GET", &format!("/a.txt?{marker}"), &[]));
        assert_eq!(resp.body_str(), "alpha\n");
        assert_eq!(logged_client(&server, marker), "2001:db8::17");
    }
    // No header: closed unanswered.
    let mut conn = server.connect();
    conn.send(request("GET", "/a.txt", &[]));
    let (bytes, _) = conn.read_to_end();
    assert!(bytes.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));
}

fn proxy_protocol_before_tls(v: Variant) {
    let root = site();
    let server = start_tls(v, &root, &["--proxy-protocol"]);
    let mut conn = connect_with(&server, b"PROXY TCP4 198.51.100.9 127.0.0.1 5555 443\r\n");
    let resp = conn.roundtrip(request("GET", "/big.bin?over-tls", &[]));
    assert_eq!(resp.status, 200);
    assert!(resp.body == root_bytes(&root, "/big.bin"), "body differs");
    assert_eq!(logged_client(&server, "over-tls"), "198.51.100.9");
}

fn root_bytes(root: &Docroot, path: &str) -> Vec<u8> {
    std::fs::read(root.join(path.trim_start_matches('/'))).unwrap()
}
