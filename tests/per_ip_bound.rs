//! The per-address bound (`--max-connections-per-ip`) counts what it is for: many
//! connections from one outside client (issue 39, finding 6). A load generator, or a
//! proxy on the same machine, brings every client from one loopback address: by
//! default loopback clients are not counted, so a benchmark with default flags fails
//! no request; `--per-ip-loopback` counts them, which is also how these tests (which
//! may use loopback only) check that the bound still refuses.
//!
//! Standalone only: inetd mode has no per-address bound of its own (the
//! super-server's, see tests/availability.rs). ab and wrk are Debian's
//! apache2-utils and wrk; `.ci/run` installs both.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::*;

/// The address every client here comes from.
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The default `--max-connections-per-ip`.
const BOUND: usize = 256;

/// One test at a time: each opens hundreds or thousands of connections, and a load
/// generator's figures mean nothing with another test's load beside it.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A root with the seeds' 1 KB file.
fn site_1k() -> Docroot {
    let root = Docroot::new();
    root.file("1k.html", "x".repeat(1024));
    root
}

/// A server for `open_and_get`: the connections it holds are quiet while the others
/// open, which on a loaded machine can take longer than the default keep-alive timeout
/// (15 s) that would close the first ones, for all the bound cares.
fn holding_server(v: Variant, root: &Docroot) -> Builder {
    Server::builder(v, root.path()).args(["--keepalive-timeout", "600"])
}

/// `n` connections from 127.0.0.1 held open at once, each asked for the file as it
/// is opened.
fn open_and_get(server: &Server, n: usize) -> Vec<Client> {
    (0..n)
        .map(|i| {
            let mut client = server.client();
            let resp = client.get("/1k.html");
            assert_eq!(resp.status, 200, "connection {} of {n}: {resp:#?}", i + 1);
            client
        })
        .collect()
}

// --- Loopback is not counted by default ---------------------------------------------

/// Default flags: 300 connections from 127.0.0.1 (more than the bound's 256) are open
/// at once and every one is served, in every cell (HTTP/3's admission included), and
/// nothing is logged about the bound.
fn loopback_clients_are_not_bounded_by_default(v: Variant) {
    let _serial = serial();
    raise_nofile(4096);
    let root = site_1k();
    let server = holding_server(v, &root).start();
    let mut clients = open_and_get(&server, 300);
    // All still there: each answers again while the other 299 are open.
    for client in &mut clients {
        assert_eq!(client.get("/1k.html").status, 200);
    }
    let lines = server.stderr().snapshot();
    assert!(
        !lines.iter().any(|l| l.contains("connections refused")),
        "{lines:#?}"
    );
}

// --- --per-ip-loopback: the bound still refuses -------------------------------------

/// `--per-ip-loopback`: 256 connections from 127.0.0.1 are served, and the 257th is
/// refused: over cleartext a 503 with Retry-After or a close, over TLS a handshake
/// that fails, over QUIC a refused connection. The refusal is logged.
fn per_ip_loopback_refuses_the_257th(v: Variant) {
    let _serial = serial();
    raise_nofile(4096);
    let root = site_1k();
    let server = holding_server(v, &root).arg("--per-ip-loopback").start();
    let _held = open_and_get(&server, BOUND);
    assert_refused(&server);
    server.stderr().wait_line(|l| {
        l == "staticd: 127.0.0.1: over --max-connections-per-ip (256): connections refused"
    });
}

/// A 257th connection from 127.0.0.1 is not served.
fn assert_refused(server: &Server) {
    if server.is_h3() {
        let tls = server.connector().tls.expect("HTTP/3 has TLS");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let got = rt.block_on(H3Conn::connect(server.addr(), &tls));
        assert!(got.is_err(), "a 257th QUIC connection was accepted");
        return;
    }
    if server.is_tls() {
        let mut conn = server.connect_from(LOOPBACK);
        assert!(
            conn.handshake().is_err(),
            "a 257th TLS connection was accepted"
        );
        return;
    }
    // Cleartext (HTTP/1.1 or h2c): an HTTP/1.1 request, to be told why.
    let mut conn = Conn::new(connect_from(LOOPBACK, server.addr()));
    conn.send_lossy(request("GET", "/1k.html", &["Connection: close"]));
    let (got, _) = conn.read_to_end();
    if got.is_empty() {
        return;
    }
    let resp = parse_responses(&got, &["GET"]).remove(0);
    assert_eq!(resp.status, 503, "a 257th connection: {resp:#?}");
    assert_eq!(resp.header("retry-after"), Some("1"), "{resp:#?}");
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] standalone:
    loopback_clients_are_not_bounded_by_default,
    per_ip_loopback_refuses_the_257th,
);

// --- The seeds' benchmarks against default flags -------------------------------------

/// What ab printed after `label` (`Complete requests:`, `Failed requests:`, ...), or
/// None when it left the line out (it prints `Non-2xx responses:` only when there
/// were some).
fn ab_count(stdout: &str, label: &str) -> Option<u64> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .map(|n| n.trim().parse().unwrap_or_else(|_| panic!("{label}{n}")))
}

/// `ab -k -c 1500 -n 30000` on a 1 KB file, as the seeds' comparisons run it, against
/// default flags: every request completes, none failed, none non-2xx (with the bound
/// applied to loopback, 256 was the most ab could have open, and a run like this one
/// failed tens of thousands of requests).
fn ab_with_1500_connections_fails_no_request(v: Variant) {
    let Some(ab) = tool("ab", "apache2-utils") else {
        return;
    };
    let _serial = serial();
    raise_nofile(8192);
    let root = site_1k();
    let server = Server::start(v, &root);
    let mut cmd = Command::new(ab);
    cmd.args(["-k", "-c", "1500", "-n", "30000", "-s", "20"])
        .arg(server.url("/1k.html"));
    let run = run_bounded(&mut cmd, b"", Duration::from_secs(60));
    let shown = run.describe("ab");
    run.assert_success("ab");
    eprintln!("{shown}");
    assert_eq!(
        ab_count(&run.stdout, "Complete requests:"),
        Some(30000),
        "{shown}"
    );
    assert_eq!(
        ab_count(&run.stdout, "Failed requests:"),
        Some(0),
        "{shown}"
    );
    assert_eq!(ab_count(&run.stdout, "Non-2xx responses:"), None, "{shown}");
    assert_eq!(
        ab_count(&run.stdout, "Keep-Alive requests:"),
        Some(30000),
        "{shown}"
    );
}

/// How many connections wrk holds open, from one address.
const WRK_CONNECTIONS: u64 = 10_000;

/// wrk with 10,000 keep-alive connections from 127.0.0.1 for three seconds against
/// default flags: no socket error (connect, read, write, timeout) and no non-2xx
/// response. Both ends need more than 10,000 descriptors: the test raises its soft
/// limit (wrk and the server inherit it), and the server's default
/// `--max-connections` follows from it.
fn wrk_with_10000_connections_fails_no_request(v: Variant) {
    let Some(wrk) = tool("wrk", "wrk") else {
        return;
    };
    let _serial = serial();
    // The server's default --max-connections is the limit less 64 and 256 per thread.
    let want = WRK_CONNECTIONS + 4096;
    let nofile = raise_nofile(want);
    if nofile < want {
        // The hard limit is the machine's: not a missing tool, so never a failure.
        eprintln!(
            "skipped: wrk_with_10000_connections_fails_no_request: RLIMIT_NOFILE's hard \
             limit is {nofile}, {want} needed"
        );
        return;
    }
    let root = site_1k();
    let server = Server::start(v, &root);
    let mut cmd = Command::new(wrk);
    cmd.args([
        "-t2",
        "-c",
        &WRK_CONNECTIONS.to_string(),
        "-d3s",
        "--timeout",
        "10s",
    ])
    .arg(server.url("/1k.html"));
    let run = run_bounded(&mut cmd, b"", Duration::from_secs(40));
    run.assert_success("wrk");
    eprintln!("{}", run.describe("wrk"));
    let failures = wrk_failures(&run.stdout);
    assert!(failures.is_empty(), "{failures:?}\n{}", run.stdout);
    assert!(wrk_requests(&run.stdout) > 0, "{}", run.stdout);
}

matrix!([h1, tls, uring] standalone: ab_with_1500_connections_fails_no_request);
matrix!([h1, uring] standalone: wrk_with_10000_connections_fails_no_request);
