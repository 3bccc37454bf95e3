//! Idle keep-alive connections in standalone mode are parked outside the
//! runtime after a short quiet spell (src/serve/park.rs): they must carry
//! on exactly as before, still close at the keep-alive timeout, and still
//! end cleanly when the server stops. Over TLS, HTTP/2 and io_uring they
//! are not parked; these tests then check the same behaviour unparked.

#[macro_use]
mod common;

use std::time::{Duration, Instant};

use common::*;

matrix!([h1, tls] standalone:
    a_parked_connection_serves_its_next_requests,
    a_parked_connection_still_closes_at_the_keepalive_timeout,
    parked_connections_do_not_hold_up_a_stop,
    a_parked_connection_that_sent_during_the_stop_is_answered,
);

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root
}

fn a_parked_connection_serves_its_next_requests(v: Variant) {
    let root = site();
    let mut server = Server::start(v, &root);
    let mut conns: Vec<Conn> = (0..20).map(|_| server.connect()).collect();
    for conn in &mut conns {
        let resp = conn.roundtrip(request("GET", "/a.txt", &[]));
        assert_eq!(resp.body, b"alpha\n");
    }
    // All 20 idle connections park.
    wait_idle(&mut server, 20);
    // Each carries on, pipelining included, and parks again.
    for round in 0..2 {
        for conn in &mut conns {
            let two = format!(
                "{}{}",
                request("GET", "/a.txt", &[]),
                request("HEAD", "/a.txt", &[])
            );
            conn.send(two);
            assert_eq!(conn.read_response().body, b"alpha\n", "round {round}");
            let head = conn.read_response_to("HEAD");
            assert_eq!(head.status, 200);
        }
        wait_idle(&mut server, 20);
    }
    // A client that closes a parked connection frees it.
    conns.truncate(5);
    if parks(&server) {
        wait_parked(&mut server, 5);
    }
}

fn a_parked_connection_still_closes_at_the_keepalive_timeout(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .args(["--keepalive-timeout", "1"])
        .start();
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    let sent = Instant::now();
    // Closed by the server between 1 s and the sweep after it (1 s more).
    assert!(
        conn.wait_closed(sent + Duration::from_secs(5)),
        "still open after 5 s"
    );
    let after = sent.elapsed();
    assert!(
        after >= Duration::from_millis(900),
        "closed after {after:?}"
    );
    assert!(
        after < Duration::from_millis(2500),
        "closed after {after:?}"
    );
}

fn parked_connections_do_not_hold_up_a_stop(v: Variant) {
    let root = site();
    let mut server = Server::start(v, &root);
    let mut conns: Vec<Conn> = (0..50).map(|_| server.connect()).collect();
    for conn in &mut conns {
        assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    }
    wait_idle(&mut server, 50);
    let stopping = Instant::now();
    server.process().signal(rustix::process::Signal::TERM);
    let status = server.process().wait_timeout(Duration::from_secs(10));
    assert!(status.is_some(), "still running 10 s after SIGTERM");
    // The last call for idle connections is 1 s.
    assert!(
        stopping.elapsed() < Duration::from_secs(4),
        "{:?}",
        stopping.elapsed()
    );
    for conn in &mut conns {
        // The process has exited: the kernel has closed them.
        assert!(conn.wait_closed(Instant::now() + IO_TIMEOUT));
    }
}

fn a_parked_connection_that_sent_during_the_stop_is_answered(v: Variant) {
    let root = site();
    let mut server = Server::start(v, &root);
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    wait_idle(&mut server, 1);
    server.process().signal(rustix::process::Signal::TERM);
    // Its last call: a request sent just as the stop began (its listeners
    // closed) is answered, and the connection is told to close.
    wait_listener_closed(server.addr());
    let mut resp = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.status, 200);
    // Connections are told of the stop only once every worker has said its
    // listeners closed (src/serve/stop.rs), a few milliseconds after the
    // last one went from /proc/net/tcp, more on a loaded machine: a request
    // in between is answered as before the stop. The next ones on the same
    // connection are answered too, and soon with Connection: close.
    let mut answered = 1;
    while !resp.has_token("connection", "close") {
        assert!(
            answered < 50,
            "{answered} answers, none with Connection: close: {resp:#?}"
        );
        std::thread::sleep(Duration::from_millis(10));
        resp = conn.roundtrip(request("GET", "/a.txt", &[]));
        assert_eq!(resp.status, 200, "request {} in the stop", answered + 1);
        answered += 1;
    }
}
