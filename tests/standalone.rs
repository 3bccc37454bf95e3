//! Standalone mode only: start-up line and errors, flags, signals, listeners, file
//! descriptor exhaustion, concurrency, access log. What a running server does is
//! checked in every cell of the protocol matrix; start-up failures and usage errors
//! (no server to talk to) once.

#[macro_use]
mod common;

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpListener};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use rustix::process::Signal;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] standalone:
    startup_line_names_the_listening_address,
    sigint_on_an_idle_server_exits_zero,
    ipv6_loopback_listener_works,
    every_bind_address_gets_a_listener,
);

// Raw HTTP/1.1 connections over TCP (a stop with one in flight or idle, descriptors, one
// event-loop thread, the log line of an HTTP/1.1 request): no h3 cell. tests/http3.rs has
// HTTP/3's log line and a stop over HTTP/3.
matrix!([h1, tls, h2c, h2_tls, uring] standalone:
    sigterm_lets_the_in_flight_response_finish_and_exits_zero,
    sigterm_with_an_idle_keep_alive_connection_exits_zero_within_the_grace,
    running_out_of_file_descriptors_neither_crashes_nor_spins,
    a_stalled_client_does_not_block_others_on_one_thread,
    access_log_common_format_names_the_peer,
);

fn root_args(root: &Docroot) -> Vec<OsString> {
    vec!["--root".into(), root.path().into()]
}

fn startup_line_names_the_listening_address(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let addr = server.addr();
    assert_eq!(addr.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_ne!(
        addr.port(),
        0,
        "the line must name the real (ephemeral) port"
    );
    let scheme = if server.is_tls() { "https" } else { "http" };
    let mut expected = vec![
        format!(
            "staticd: serving {} on {scheme}://127.0.0.1:{}/",
            root.path().display(),
            addr.port()
        ),
        // The per-address bound says who it leaves out (issue 39).
        "staticd: --max-connections-per-ip (256) does not count loopback clients \
         (--per-ip-loopback counts them too)"
            .to_string(),
        format!("staticd: listening on 127.0.0.1:{}", addr.port()),
    ];
    // With HTTPS, HTTP/3 on the same port over UDP, said once its endpoint is up (after
    // the TCP listeners).
    if server.is_tls() && cfg!(feature = "http3") {
        expected.push(format!(
            "staticd: HTTP/3 on 127.0.0.1:{} (UDP)",
            addr.port()
        ));
        server
            .stderr()
            .wait_line(|l| l.starts_with("staticd: HTTP/3 on "));
    }
    assert_eq!(
        server.stderr().snapshot(),
        expected,
        "with --log-format off nothing else is printed at start"
    );
    assert_eq!(server.get("/a.txt").body, b"alpha\n");
}

fn sigterm_lets_the_in_flight_response_finish_and_exits_zero(v: Variant) {
    const BIG: u64 = 64 << 20;
    let root = site();
    write_pattern_file(&root.join("big.bin"), BIG);
    let mut server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(request("GET", "/big.bin", &["Connection: close"]));
    let head = conn.read_head();
    assert_eq!(head.content_length(), Some(BIG));
    server.process().signal(Signal::TERM);
    let received = conn.skip_up_to(BIG);
    let status = server
        .process()
        .wait_timeout(Duration::from_secs(20))
        .expect("staticd still running 20 s after SIGTERM");
    assert_eq!(
        received,
        BIG,
        "the in-flight response was cut short; staticd: {}",
        describe(status)
    );
    assert_eq!(status.code(), Some(0), "{}", describe(status));
}

fn sigint_on_an_idle_server_exits_zero(v: Variant) {
    let root = site();
    let mut server = Server::start(v, &root);
    assert_eq!(server.get("/a.txt").status, 200);
    server.process().signal(Signal::INT);
    let status = server
        .process()
        .wait_timeout(IO_TIMEOUT)
        .expect("staticd still running after SIGINT");
    assert_eq!(status.code(), Some(0), "{}", describe(status));
}

fn sigterm_with_an_idle_keep_alive_connection_exits_zero_within_the_grace(v: Variant) {
    let root = site();
    let mut server = Server::start(v, &root);
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    server.process().signal(Signal::TERM);
    let status = server
        .process()
        .wait_timeout(Duration::from_secs(20))
        .expect("an idle keep-alive connection kept staticd alive past the 10 s grace");
    assert_eq!(status.code(), Some(0), "{}", describe(status));
}

#[test]
fn port_in_use_fails_with_one_line() {
    let root = site();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let mut args = root_args(&root);
    args.extend(["--port", &port, "--bind", "127.0.0.1"].map(OsString::from));
    let outcome = run_to_exit(&args);
    assert_startup_failure(&outcome, 1, &["in use", &port]);
}

#[test]
fn missing_root_fails_naming_the_path() {
    let outcome = run_to_exit(&[
        "--root",
        "/nonexistent/staticd-test-root",
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
    ]);
    assert_startup_failure(&outcome, 1, &["/nonexistent/staticd-test-root"]);
}

#[test]
fn root_that_is_a_file_fails_naming_the_path() {
    let root = site();
    let file = root.join("a.txt");
    let outcome = run_to_exit(&[
        "--root".as_ref(),
        file.as_os_str(),
        "--port".as_ref(),
        "0".as_ref(),
        "--bind".as_ref(),
        "127.0.0.1".as_ref(),
    ]);
    assert_startup_failure(&outcome, 1, &[file.to_str().unwrap()]);
}

#[cfg(not(feature = "uring"))]
#[test]
fn io_uring_without_the_feature_fails_with_one_line() {
    let root = site();
    let mut args = root_args(&root);
    args.extend(["--io-uring", "--port", "0", "--bind", "127.0.0.1"].map(OsString::from));
    let outcome = run_to_exit(&args);
    assert_startup_failure(
        &outcome,
        2,
        &["--io-uring", "no io_uring support", "--features uring"],
    );
}

#[test]
fn io_uring_with_inetd_is_a_usage_error() {
    let outcome = run_to_exit(&["--inetd", "--io-uring"]);
    assert_usage_error(&outcome, &["--io-uring", "--inetd"]);
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let outcome = run_to_exit(&["--bogus-flag"]);
    assert_usage_error(&outcome, &["--bogus-flag"]);
}

#[test]
fn non_numeric_port_is_a_usage_error() {
    let outcome = run_to_exit(&["--port", "eighty"]);
    assert_usage_error(&outcome, &["eighty"]);
}

#[test]
fn version_flag_prints_the_version() {
    let outcome = run_to_exit(&["--version"]);
    assert_eq!(outcome.status.code(), Some(0));
    assert!(
        outcome.stdout.contains(env!("CARGO_PKG_VERSION")),
        "{outcome:?}"
    );
}

#[test]
fn help_flag_lists_the_options() {
    let outcome = run_to_exit(&["--help"]);
    assert_eq!(outcome.status.code(), Some(0));
    for flag in [
        "--root",
        "--port",
        "--bind",
        "--threads",
        "--inetd",
        "--index",
        "--log-format",
        "--read-timeout",
        "--keepalive-timeout",
        "--send-timeout",
    ] {
        assert!(outcome.stdout.contains(flag), "--help lacks {flag}");
    }
}

fn ipv6_loopback_configured() -> bool {
    std::fs::read_to_string("/proc/net/if_inet6")
        .map(|t| {
            t.lines()
                .any(|l| l.starts_with("00000000000000000000000000000001"))
        })
        .unwrap_or(false)
}

fn ipv6_loopback_listener_works(v: Variant) {
    if let Err(e) = TcpListener::bind((Ipv6Addr::LOCALHOST, 0)) {
        assert!(
            !ipv6_loopback_configured(),
            "::1 is configured but the test cannot bind it: {e}"
        );
        eprintln!("environment limit: no IPv6 loopback ({e}); nothing to test");
        return;
    }
    let root = site();
    let server = Server::builder(v, root.path()).bind("::1").start();
    let addr = server.addr();
    assert_eq!(addr.ip(), IpAddr::V6(Ipv6Addr::LOCALHOST));
    assert!(
        server
            .stderr()
            .snapshot()
            .contains(&format!("staticd: listening on [::1]:{}", addr.port())),
        "{:?}",
        server.stderr().snapshot()
    );
    assert_eq!(server.get("/a.txt").body, b"alpha\n");
}

fn every_bind_address_gets_a_listener(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .bind("127.0.0.1")
        .bind("127.0.0.2")
        .start();
    let ips: Vec<IpAddr> = server.addrs().iter().map(|a| a.ip()).collect();
    assert_eq!(
        ips,
        vec![
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))
        ]
    );
    for addr in server.addrs() {
        let mut conn = server.connector_to(*addr).connect();
        assert_eq!(
            conn.roundtrip(request("GET", "/a.txt", &[])).body,
            b"alpha\n",
            "{addr}"
        );
        // And the cell's protocol (HTTP/3 on each address's port over UDP in the h3 cell).
        let mut client = server.connector_to(*addr).client();
        assert_eq!(client.get("/a.txt").body, b"alpha\n", "{addr}");
    }
}

fn running_out_of_file_descriptors_neither_crashes_nor_spins(v: Variant) {
    let root = site();
    // A fixed thread count keeps the server's own descriptor use independent of the cores.
    // Room for the server's own descriptors plus a few connections; each
    // of the two workers takes one more for its ring (--io-uring) or for
    // its epoll set of parked idle connections (the event loop).
    let mut builder = Server::builder(v, root.path())
        .args(["--threads", "2"])
        .nofile_limit(26);
    if cfg!(feature = "http3") && v.is_tls() {
        // The test is about TCP's accept under EMFILE: HTTP/3's runtime
        // and UDP sockets would take the few descriptors it leaves.
        builder = builder.arg("--no-http3");
    }
    let mut server = builder.start();
    let mut conns: Vec<Conn> = (0..40)
        .map(|_| {
            let mut conn = server.connect();
            conn.send_lossy(request("GET", "/a.txt", &[]));
            conn
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let before = server.process().cpu_time();
    thread::sleep(Duration::from_secs(2));
    let used = server.process().cpu_time() - before;
    if let Some(status) = server.process().try_status() {
        panic!(
            "staticd died at the fd limit: {}; stderr: {:#?}",
            describe(status),
            server.stderr().snapshot()
        );
    }
    assert!(
        used < Duration::from_secs(1),
        "staticd burned {used:?} of CPU in 2 s while out of file descriptors: it spins"
    );
    conns.clear();
    // The clients that never got a place were queued in the listen backlog; as
    // descriptors free up the server accepts and answers them too, and a request
    // arriving meanwhile may meet the limit again: 503 (try later) is right then.
    // Once the backlog has drained, it is served.
    let deadline = Instant::now() + IO_TIMEOUT;
    let resp = loop {
        let resp = server.get("/a.txt");
        if resp.status == 200 || Instant::now() > deadline {
            break resp;
        }
        assert_eq!(resp.status, 503, "{resp:#?}");
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(resp.status, 200);
    assert!(server.process().try_status().is_none());
}

/// Eight workers on 127.0.0.1, port 0, over each transport this build has: the arguments
/// of the descriptor-limit tests, one set per transport.
fn eight_workers_args(root: &Docroot) -> Vec<Vec<OsString>> {
    let mut transports = vec![vec![]];
    if cfg!(feature = "uring") {
        transports.push(vec!["--io-uring"]);
    }
    transports
        .into_iter()
        .map(|transport| {
            let mut args = root_args(root);
            args.extend(
                ["--port", "0", "--bind", "127.0.0.1", "--threads", "8"].map(OsString::from),
            );
            args.extend(transport.into_iter().map(OsString::from));
            args
        })
        .collect()
}

/// Every worker builds its runtime before any accepts: a descriptor limit that leaves too
/// few for eight workers' runtimes is a start-up error naming what to change, not a server
/// that accepts on some listeners while the connections the kernel queued on the others
/// wait for a worker that never starts.
#[test]
fn a_descriptor_limit_too_low_for_the_workers_is_a_start_up_error() {
    let root = site();
    for args in eight_workers_args(&root) {
        // Start-up itself (the listeners of eight workers among them) takes about 17.
        let outcome = run_to_exit_with_nofile(&args, 24);
        assert_startup_failure(
            &outcome,
            1,
            &[
                "cannot start a worker thread",
                "Too many open files",
                "ulimit -n",
                "--threads",
            ],
        );
    }
}

/// Whichever step of start-up runs out first as the limit falls (the listeners, the root,
/// the signal loop, whose runtime tokio would panic in, a worker), the start fails with one
/// line that says what to change: never a panic, never a bare "Too many open files".
#[test]
fn every_descriptor_limit_too_low_to_start_is_one_line_naming_ulimit() {
    let root = site();
    for args in eight_workers_args(&root) {
        for nofile in 6..=24 {
            let outcome = run_to_exit_with_nofile(&args, nofile);
            assert!(
                !outcome.stderr.iter().any(|l| l.contains("panicked")),
                "nofile {nofile} {args:?}: {:#?}",
                outcome.stderr
            );
            assert_startup_failure(
                &outcome,
                1,
                &["Too many open files", "ulimit -n", "--threads"],
            );
        }
    }
}

fn a_stalled_client_does_not_block_others_on_one_thread(v: Variant) {
    let root = site();
    write_pattern_file(&root.join("big.bin"), 64 << 20);
    let server = Server::builder(v, root.path())
        .args(["--threads", "1"])
        .start();
    let mut not_reading = server.connect();
    not_reading.send(request("GET", "/big.bin", &[]));
    not_reading.wait_read_by_server();
    let _silent = server.connect();
    let mut half_request = server.connect();
    half_request.send("GET /a.txt HTTP/1.1\r\nHo");
    half_request.wait_read_by_server();
    assert_eq!(server.get("/a.txt").body, b"alpha\n");
}

fn access_log_common_format_names_the_peer(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path()).log_format("common").start();
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    let line = server
        .stderr()
        .wait_line(|l| l.contains("\"GET /a.txt HTTP/1.1\""));
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    assert!(line.ends_with("\"GET /a.txt HTTP/1.1\" 200 6"), "{line}");
}
