//! The io_uring transport (`--io-uring`, cargo feature `uring`) checked
//! directly. The black-box suites run on it too, in their `uring` cells
//! (tests/common/variant.rs).
#![cfg(feature = "uring")]

#[macro_use]
mod common;

use std::ffi::OsString;
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

fn root_bytes(root: &Docroot, path: &str) -> Vec<u8> {
    std::fs::read(root.join(path.trim_start_matches('/'))).unwrap()
}
