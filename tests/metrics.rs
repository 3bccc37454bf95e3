//! `--metrics ADDR:PORT`: a listener of its own serving the Prometheus text format at
//! /metrics. Each test makes a known set of requests and checks that the counters moved
//! by exactly that much; `promtool` (Debian package prometheus) checks the page and the
//! scrape configuration docs/production.md shows (examples/prometheus/prometheus.yml), and Prometheus
//! itself, given that configuration, scrapes a running staticd.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("cached.txt", "cache\n");
    root.file("big.txt", pattern(10_000));
    let hello = root.file(
        "hello.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nhi\\n'\n",
    );
    let slow = root.file("slow.cgi", "#!/bin/sh\nexec sleep 30\n");
    for script in [hello, slow] {
        std::fs::set_permissions(script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    root
}

// The servers here are cleartext (`Builder::plain`), as is the metrics listener: the
// cells are the transports.
// Its own certificate, in both transports.
matrix!([h1, uring] standalone: #[cfg(feature = "tls")] counts_tls_handshakes);

matrix!([h1, uring] standalone:
    counts_exactly_what_was_served,
    the_metrics_listener_serves_only_metrics,
    connections_held_at_the_limit_are_counted,
    a_fast_download_raises_its_queue_and_gives_the_share_back,
    #[cfg(feature = "http2")]
    a_fast_h2_download_raises_its_queue_and_gives_the_share_back,
    promtool_accepts_the_page_and_the_scrape_config,
    prometheus_scrapes_staticd,
);

/// A standalone server with one worker thread (one open-file cache), `--metrics` on a
/// free loopback port, and `args`.
fn start(v: Variant, root: &Docroot, args: &[&str]) -> (Server, SocketAddr) {
    let server = Server::builder(v, root.path())
        .plain()
        .args(["--threads", "1", "--metrics", "127.0.0.1:0"])
        .args(args)
        .start();
    let line = server
        .stderr()
        .wait_line(|l| l.starts_with("staticd: metrics on "));
    let addr = line
        .trim_start_matches("staticd: metrics on http://")
        .trim_end_matches("/metrics")
        .parse()
        .unwrap_or_else(|e| panic!("address in {line:?}: {e}"));
    (server, addr)
}

/// One raw HTTP/1.1 exchange with the metrics listener: status, head, body.
fn fetch(addr: SocketAddr, request: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a whole response");
    let status = head[9..12].parse().unwrap();
    (status, head.to_string(), body.to_string())
}

/// The page `GET /metrics` returns.
fn page(addr: SocketAddr) -> String {
    let (status, head, body) = fetch(addr, "GET /metrics HTTP/1.1\r\nHost: m\r\n\r\n");
    assert_eq!(status, 200, "{head}");
    assert!(
        head.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    body
}

/// Every sample on a page, by its name and labels as written.
struct Samples(BTreeMap<String, f64>);

impl Samples {
    fn of(page: &str) -> Samples {
        let samples = page
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (key, value) = l.rsplit_once(' ').expect("NAME VALUE");
                (key.to_string(), value.parse().expect("a number"))
            })
            .collect();
        Samples(samples)
    }

    fn get(&self, key: &str) -> f64 {
        *self.0.get(key).unwrap_or_else(|| panic!("no sample {key}"))
    }

    /// How much each sample grew since `before`, the ones that did not left out.
    fn grown_since(&self, before: &Samples) -> BTreeMap<String, f64> {
        self.0
            .iter()
            .filter(|(k, _)| {
                !k.starts_with("process_start_time") && *k != "staticd_connections_open"
            })
            .map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0.0)))
            .filter(|(_, d)| *d != 0.0)
            .collect()
    }
}

fn scrape(addr: SocketAddr) -> Samples {
    Samples::of(&page(addr))
}

/// Scrapes until `done` holds (the server counts a closing connection, or a handshake
/// that failed, a moment after the client sees it), or panics after IO_TIMEOUT.
fn scrape_until(addr: SocketAddr, what: &str, done: impl Fn(&Samples) -> bool) -> Samples {
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        let samples = scrape(addr);
        if done(&samples) {
            return samples;
        }
        if Instant::now() >= deadline {
            panic!("{what}: not within {IO_TIMEOUT:?}: {:#?}", samples.0);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn requests(code: u16, method: &str, protocol: &str, scheme: &str) -> String {
    format!(
        "staticd_requests_total{{code=\"{}xx\",method=\"{method}\",protocol=\"{protocol}\",scheme=\"{scheme}\"}}",
        code / 100
    )
}

/// What the test expects a set of requests to add to the counters.
#[derive(Default)]
struct Expected(BTreeMap<String, f64>);

impl Expected {
    fn add(&mut self, key: impl Into<String>, n: f64) {
        *self.0.entry(key.into()).or_default() += n;
    }

    /// One answered request and the body bytes it brought.
    fn answered(&mut self, resp: &Response, method: &str, protocol: &str, scheme: &str) {
        self.add(requests(resp.status, method, protocol, scheme), 1.0);
        self.add("staticd_response_body_bytes_total", resp.body.len() as f64);
    }
}

/// Scrapes until the counters have grown since `before` by exactly `expected`, and
/// returns that scrape; panics with the difference if they do not within IO_TIMEOUT.
/// (A response's body bytes are counted once its last byte is written, a moment after
/// the client may have read it; a connection's close, once the server sees it.) With
/// `lookups`, open-file cache hits and misses are compared as their sum, for requests
/// whose cache entry may or may not be older than its second of freshness.
fn settle(metrics: SocketAddr, before: &Samples, expected: Expected, lookups: bool) -> Samples {
    let view = |mut grown: BTreeMap<String, f64>| {
        if lookups {
            let hits = grown.remove(CACHE_HITS).unwrap_or(0.0);
            let misses = grown.remove(CACHE_MISSES).unwrap_or(0.0);
            *grown.entry("lookups".into()).or_default() += hits + misses;
        }
        grown.retain(|_, v| *v != 0.0);
        grown
    };
    let expected = view(expected.0);
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        let after = scrape(metrics);
        let grown = view(after.grown_since(before));
        if grown == expected {
            return after;
        }
        if Instant::now() >= deadline {
            assert_eq!(grown, expected, "the counters did not grow as expected");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const CACHE_HITS: &str = "staticd_open_file_cache_hits_total";
const CACHE_MISSES: &str = "staticd_open_file_cache_misses_total";

/// Requests by status class, method and protocol, the body bytes, connections, the
/// open-file cache and CGI, counted exactly; and the public port has no /metrics.
fn counts_exactly_what_was_served(v: Variant) {
    let root = site();
    let (server, metrics) = start(v, &root, &["--cgi", "--cgi-timeout", "1"]);
    let start = scrape(metrics);
    assert_eq!(start.get("staticd_connections_open"), 0.0);

    // One keep-alive connection: a file twice, pipelined (a cache miss, then a hit well
    // within the entry's second of freshness), ...
    let mut conn = server.connect();
    let twice = request("GET", "/cached.txt", &[]).repeat(2);
    conn.send(twice);
    let mut expected = Expected::default();
    for _ in 0..2 {
        let resp = conn.read_response();
        assert_eq!(resp.body, b"cache\n");
        expected.answered(&resp, "GET", "http/1.1", "http");
    }
    expected.add(CACHE_MISSES, 1.0);
    expected.add(CACHE_HITS, 1.0);
    expected.add("staticd_connections_accepted_total", 1.0);
    let before = settle(metrics, &start, expected, false);

    // ... HEAD, a missing file, a range, a method nobody serves, and the public port's
    // /metrics, which is a missing file like any other.
    let head = conn.roundtrip(request("HEAD", "/cached.txt", &[]));
    let missing = conn.roundtrip(request("GET", "/missing", &[]));
    let range = conn.roundtrip(request("GET", "/big.txt", &["Range: bytes=10-109"]));
    let delete = conn.roundtrip(request("DELETE", "/cached.txt", &[]));
    let public = conn.roundtrip(request("GET", "/metrics", &[]));
    assert_eq!(
        [head.status, missing.status, range.status, public.status],
        [200, 404, 206, 404]
    );
    assert!(head.body.is_empty() && !missing.body.is_empty());
    assert_eq!(range.body.len(), 100);
    assert!((400..500).contains(&delete.status), "{delete:?}");
    assert!(!public.body_str().contains("staticd_requests_total"));
    let mut expected = Expected::default();
    expected.answered(&head, "HEAD", "http/1.1", "http");
    expected.answered(&missing, "GET", "http/1.1", "http");
    expected.answered(&range, "GET", "http/1.1", "http");
    expected.answered(&delete, "other", "http/1.1", "http");
    expected.answered(&public, "GET", "http/1.1", "http");
    expected.add("lookups", LOOKUPS_OF_THE_FIVE);
    let before = settle(metrics, &before, expected, true);

    // HTTP/1.0, h2c, and a CGI script by POST on connections of their own; and a
    // script that runs past --cgi-timeout.
    let old = server
        .connect()
        .roundtrip("GET /cached.txt HTTP/1.0\r\n\r\n");
    // A build without HTTP/2 speaks HTTP/1.x only: there, the same request over HTTP/1.1.
    let (h2, h2_resp, h2_protocol) = if !cfg!(feature = "http2") {
        let mut conn = server.connect();
        let resp = conn.roundtrip(request("GET", "/cached.txt", &[]));
        (Box::new(conn) as Box<dyn std::any::Any>, resp, "http/1.1")
    } else {
        let mut h2 = Client::connect_proto(server.connector().tcp(), None, Proto::Http2);
        let resp = h2.get("/cached.txt").to_raw();
        (Box::new(h2) as Box<dyn std::any::Any>, resp, "h2")
    };
    assert_eq!(h2_resp.body, b"cache\n");
    let post = "POST /hello.cgi HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc";
    let cgi = server.connect().roundtrip(post);
    assert_eq!((cgi.status, cgi.body_str().as_str()), (200, "hi\n"));
    let slow = server.connect().roundtrip(request("GET", "/slow.cgi", &[]));
    assert_eq!(slow.status, 504);
    let mut expected = Expected::default();
    expected.answered(&old, "GET", "http/1.0", "http");
    expected.answered(&h2_resp, "GET", h2_protocol, "http");
    expected.answered(&cgi, "POST", "http/1.1", "http");
    expected.answered(&slow, "GET", "http/1.1", "http");
    expected.add("staticd_cgi_runs_total", 2.0);
    expected.add("staticd_cgi_timeouts_total", 1.0);
    expected.add("staticd_connections_accepted_total", 4.0);
    // One each, and the 504's first look for a 504.html.
    expected.add("lookups", 5.0);
    settle(metrics, &before, expected, true);

    // The first keep-alive connection and the h2 one are still open; then none is.
    scrape_until(metrics, "two connections open", |s| {
        s.get("staticd_connections_open") == 2.0
    });
    drop((conn, h2));
    let end = scrape_until(metrics, "every connection closed", |s| {
        s.get("staticd_connections_open") == 0.0
    });
    assert_eq!(end.get("staticd_connections_accepted_total"), 5.0);
}

/// Path lookups the HEAD, the 404, the range, DELETE and the public /metrics make: one
/// each, but none for DELETE, refused before its path is looked at; and one for the page
/// of each error status at its first answer (404.html, 405.html), which the site does not
/// have: noted, so the second 404 looks for none.
const LOOKUPS_OF_THE_FIVE: f64 = 6.0;

/// Anything but GET or HEAD /metrics is refused; the page is the same for HEAD, without
/// its body.
fn the_metrics_listener_serves_only_metrics(v: Variant) {
    let root = site();
    let (_server, metrics) = start(v, &root, &[]);
    for (request, status) in [
        ("GET / HTTP/1.1\r\nHost: m\r\n\r\n", 404),
        ("GET /cached.txt HTTP/1.1\r\nHost: m\r\n\r\n", 404),
        ("GET /metrics/x HTTP/1.1\r\nHost: m\r\n\r\n", 404),
        (
            "POST /metrics HTTP/1.1\r\nHost: m\r\nContent-Length: 0\r\n\r\n",
            405,
        ),
        ("GARBAGE\r\n\r\n", 400),
    ] {
        assert_eq!(fetch(metrics, request).0, status, "{request:?}");
    }
    let (status, head, body) = fetch(metrics, "HEAD /metrics HTTP/1.1\r\nHost: m\r\n\r\n");
    assert_eq!(status, 200);
    assert!(body.is_empty());
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(length > 1000, "{head}");
    let (status, _, body) = fetch(metrics, "GET /metrics?x=1 HTTP/1.0\r\n\r\n");
    assert_eq!(status, 200);
    assert!(body.contains("\nstaticd_build_info{version=\""));
}

/// A download its client takes at full speed has its unsent queue raised
/// (`--unsent-budget`), and the share goes back to the budget once the response has left
/// the kernel. With `--unsent-budget 0`, or on io_uring (which keeps 128 KiB), none is.
fn a_fast_download_raises_its_queue_and_gives_the_share_back(v: Variant) {
    const LARGE: usize = 20 << 20;
    let root = site();
    root.file("large.bin", pattern(LARGE));
    let epoll = v.transport == Transport::Epoll;
    for (args, raised) in [(&[][..], epoll), (&["--unsent-budget", "0"][..], false)] {
        let (server, metrics) = start(v, &root, args);
        let budget = scrape(metrics).get("staticd_unsent_budget_bytes");
        assert_eq!(
            budget > 0.0,
            raised,
            "budget {budget} with {args:?} on {v:?}"
        );
        let mut conn = server.connect();
        for _ in 0..2 {
            conn.send(request("GET", "/large.bin", &[]));
            let head = conn.read_head();
            assert_eq!(head.status, 200);
            // In pieces with a pause between: a client that keeps up at every instant never
            // fills its queue, and a queue that never fills needs no raise. This one still
            // takes hundreds of MB/s, far above the 4 MiB/s a raise asks.
            let mut body = Vec::with_capacity(LARGE);
            while body.len() < LARGE {
                body.extend(conn.take_exact((1 << 20).min(LARGE - body.len())));
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(body == pattern(LARGE), "the body differs from the file");
        }
        let after = scrape_until(metrics, "the budget given back", |s| {
            s.get("staticd_unsent_budget_held_bytes") == 0.0
        });
        let raises = after.get("staticd_unsent_raises_total");
        if raised {
            // Each response is measured afresh: one raise each (a client measured slow
            // in between, on a loaded machine, may be raised again).
            assert!(raises >= 2.0, "{raises} raises for two fast downloads");
        } else {
            assert_eq!(raises, 0.0, "raised with {args:?} on {v:?}");
        }
    }
}

/// The same over HTTP/2 (h2c): the connection's queue is raised while it writes its turns
/// of frames, and the share goes back once it has nothing more to write and its queue has
/// drained. io_uring (which keeps 128 KiB) raises none.
#[cfg(feature = "http2")]
fn a_fast_h2_download_raises_its_queue_and_gives_the_share_back(v: Variant) {
    use common::h2frames::{flag, headers, hpack, kind, setting, window_update, H2Conn, Next};
    const LARGE: usize = 20 << 20;
    let root = site();
    root.file("large.bin", pattern(LARGE));
    let (server, metrics) = start(v, &root, &[]);
    let open = [(setting::INITIAL_WINDOW_SIZE, 0x7fff_ffff)];
    let (mut conn, _) = H2Conn::handshake(server.addr(), &open);
    conn.send(&window_update(0, 0x7fff_ffff - 65_535)).unwrap();
    for stream in [1, 3] {
        let block = hpack::request("GET", "/large.bin");
        let end = flag::END_STREAM | flag::END_HEADERS;
        conn.send(&headers(stream, &block, end)).unwrap();
        let mut body = Vec::with_capacity(LARGE);
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            let frame = match conn.next(deadline) {
                Next::Frame(f) => f,
                other => panic!("stream {stream}: {other:?} after {} bytes", body.len()),
            };
            if !(frame.is(kind::DATA) && frame.stream == stream) {
                continue;
            }
            body.extend_from_slice(&frame.payload);
            // A pause now and then, as in the HTTP/1.1 test: a queue that never fills needs
            // no raise.
            if body.len() % (1 << 20) < frame.payload.len() {
                std::thread::sleep(Duration::from_millis(1));
            }
            if frame.has(flag::END_STREAM) {
                break;
            }
        }
        assert!(
            body == pattern(LARGE),
            "stream {stream}'s body differs from the file"
        );
    }
    let after = scrape_until(metrics, "the budget given back", |s| {
        s.get("staticd_unsent_budget_held_bytes") == 0.0
    });
    let raises = after.get("staticd_unsent_raises_total");
    if v.transport == Transport::Epoll {
        // Measured afresh after the connection had nothing to write: one raise each.
        assert!(raises >= 2.0, "{raises} raises for two fast downloads");
    } else {
        assert_eq!(raises, 0.0, "raised on {v:?}");
    }
}

/// At --max-connections, an accepted connection waits for a place while every
/// connection is busy: counted once, and served when a place frees. An idle one is
/// closed for it instead: counted as shed.
fn connections_held_at_the_limit_are_counted(v: Variant) {
    let root = site();
    let (server, metrics) = start(v, &root, &["--max-connections", "1"]);
    let mut first = server.connect();
    assert_eq!(
        first.roundtrip(request("GET", "/cached.txt", &[])).status,
        200
    );
    // Busy with its next request (half a head), so not closed to make room,
    // once the server has read it (before, it would see the connection idle).
    first.send("GET /cached.txt HTTP/1.1\r\nHo");
    first.wait_read_by_server();
    let mut second = server.connect();
    second.send(request("GET", "/cached.txt", &[]));
    let held = scrape_until(metrics, "the second connection held", |s| {
        s.get("staticd_connections_at_limit_total") == 1.0
    });
    assert_eq!(held.get("staticd_connections_max"), 1.0);
    assert_eq!(held.get("staticd_connections_open"), 1.0);
    assert_eq!(held.get("staticd_connections_accepted_total"), 1.0);
    drop(first);
    assert_eq!(second.read_response().status, 200);
    let served = scrape(metrics);
    assert_eq!(served.get("staticd_connections_at_limit_total"), 1.0);
    assert_eq!(served.get("staticd_connections_accepted_total"), 2.0);
    assert_eq!(served.get("staticd_connections_shed_total"), 0.0);
    // `second` is idle now: a third client gets its place at once.
    let mut third = server.connect();
    assert_eq!(
        third.roundtrip(request("GET", "/cached.txt", &[])).status,
        200
    );
    assert!(second.wait_closed(Instant::now() + Duration::from_secs(5)));
    let shed = scrape(metrics);
    assert_eq!(shed.get("staticd_connections_shed_total"), 1.0);
    assert_eq!(shed.get("staticd_connections_at_limit_total"), 1.0);
}

/// TLS handshakes: a full one, a resumed one (TLS 1.3 ticket), and one that fails; the
/// requests count as https.
#[cfg(feature = "tls")]
fn counts_tls_handshakes(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .tls_files(&Pki::shared().localhost().1)
        .args(["--threads", "1", "--metrics", "127.0.0.1:0"])
        .start();
    let line = server
        .stderr()
        .wait_line(|l| l.starts_with("staticd: metrics on "));
    let metrics: SocketAddr = line
        .trim_start_matches("staticd: metrics on http://")
        .trim_end_matches("/metrics")
        .parse()
        .unwrap();
    let handshakes = |s: &Samples, result: &str| {
        s.get(&format!(
            "staticd_tls_handshakes_total{{result=\"{result}\"}}"
        ))
    };
    let client = TlsClient::localhost();
    let connector = Connector {
        tls: Some(client),
        ..server.connector()
    };
    let mut expected = Expected::default();
    let before = scrape(metrics);
    for kind in [rustls::HandshakeKind::Full, rustls::HandshakeKind::Resumed] {
        let mut conn = connector.connect();
        let resp = conn.roundtrip(request("GET", "/cached.txt", &[]));
        assert_eq!(conn.tls().unwrap().handshake_kind(), Some(kind));
        expected.answered(&resp, "GET", "http/1.1", "https");
    }
    // A handshake record that is not one.
    let mut bogus = server.connector().tcp();
    bogus
        .write_all(b"\x16\x03\x01\x00\x04\x01\xff\xff\xff")
        .unwrap();
    scrape_until(metrics, "the bad handshake counted", |s| {
        handshakes(s, "failed") - handshakes(&before, "failed") == 1.0
    });
    expected.add("staticd_tls_handshakes_total{result=\"full\"}", 1.0);
    expected.add("staticd_tls_handshakes_total{result=\"resumed\"}", 1.0);
    expected.add("staticd_tls_handshakes_total{result=\"failed\"}", 1.0);
    expected.add("staticd_connections_accepted_total", 3.0);
    // The first request looked the file up on disk; the second, in the cache if
    // within the entry's second.
    expected.add("lookups", 2.0);
    settle(metrics, &before, expected, true);
}

/// `promtool check metrics` finds no problem in the page (after traffic of every kind
/// counted above), and `promtool check config` accepts the scrape configuration docs/production.md shows.
fn promtool_accepts_the_page_and_the_scrape_config(v: Variant) {
    let Some(promtool) = tool("promtool", "prometheus") else {
        return;
    };
    let root = site();
    let (server, metrics) = start(v, &root, &["--cgi"]);
    for path in ["/cached.txt", "/missing", "/hello.cgi"] {
        server.connect().roundtrip(request("GET", path, &[]));
    }
    let text = page(metrics);
    let run = run_bounded(
        Command::new(&promtool).args(["check", "metrics"]),
        text.as_bytes(),
        IO_TIMEOUT,
    );
    run.assert_success("promtool check metrics");
    assert_eq!(
        run.stdout.trim(),
        "",
        "{}",
        run.describe("promtool check metrics")
    );
    assert_eq!(
        run.stderr.trim(),
        "",
        "{}",
        run.describe("promtool check metrics")
    );

    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/prometheus/prometheus.yml");
    let run = run_bounded(
        Command::new(&promtool)
            .arg("check")
            .arg("config")
            .arg(&config),
        b"",
        IO_TIMEOUT,
    );
    run.assert_success("promtool check config");
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/production.md");
    let doc = std::fs::read_to_string(doc).unwrap();
    let example = std::fs::read_to_string(&config).unwrap();
    let scrape_configs = &example[example.find("scrape_configs:").unwrap()..];
    // The example the production doc shows is this file's.
    assert!(
        doc.contains(scrape_configs.trim_end()),
        "docs/production.md shows examples/prometheus/prometheus.yml's scrape_configs as it is"
    );
}

/// `--metrics` is for standalone mode; a bad address is a usage error; a port taken is a
/// start-up failure that names it.
#[test]
fn metrics_flag_errors() {
    let outcome = run_to_exit(&["--inetd", "--metrics", "127.0.0.1:9180"]);
    assert_usage_error(&outcome, &["--metrics", "--inetd"]);
    for bad in ["9180", "localhost", "127.0.0.1", ""] {
        let outcome = run_to_exit(&["--metrics", bad]);
        assert_usage_error(&outcome, &["--metrics"]);
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let root = site();
    let root = root.path().to_str().unwrap();
    let args = [
        "--root",
        root,
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--metrics",
        &addr,
    ];
    let outcome = run_to_exit(&args);
    assert_startup_failure(&outcome, 1, &["--metrics", &addr, "address already in use"]);
}

/// The real scraper: Prometheus, given the example's scrape configuration pointed at a
/// running staticd, scrapes it (target up) and stores its samples.
fn prometheus_scrapes_staticd(v: Variant) {
    let Some(prometheus) = tool("prometheus", "prometheus") else {
        return;
    };
    let root = site();
    let (_server, metrics) = start(v, &root, &["--max-connections", "77"]);
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/prometheus/prometheus.yml"),
    )
    .unwrap();
    let targets = "          - \"web1.internal:9180\"\n          - \"web2.internal:9180\"\n";
    assert!(example.contains(targets));
    let config = example
        .replace("scrape_interval: 15s", "scrape_interval: 1s")
        .replace(targets, &format!("          - \"{metrics}\"\n"));
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    // A port that was free a moment ago: Prometheus cannot be told to pick one.
    let web = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut cmd = Command::new(prometheus);
    cmd.arg(format!(
        "--config.file={}",
        dir.path().join("prometheus.yml").display()
    ))
    .arg(format!(
        "--storage.tsdb.path={}",
        dir.path().join("data").display()
    ))
    .arg(format!("--web.listen-address={web}"))
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped());
    let mut child = ChildGuard::new(cmd.spawn().expect("start prometheus"));
    let log = Lines::default();
    log.drain(child.take_stderr().unwrap());

    // The value of `q`'s first sample, as Prometheus's HTTP API gives it.
    let query = |q: &str| -> Option<String> {
        let mut stream = TcpStream::connect(web).ok()?;
        stream.set_read_timeout(Some(IO_TIMEOUT)).ok()?;
        let request =
            format!("GET /api/v1/query?query={q} HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).ok()?;
        let mut raw = String::new();
        stream.read_to_string(&mut raw).ok()?;
        let json: serde_json::Value = serde_json::from_str(raw.split_once("\r\n\r\n")?.1).ok()?;
        Some(json["data"]["result"][0]["value"][1].as_str()?.to_string())
    };
    // Start-up, the first scrape after up to one interval, and its commit.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = query("up%7Bjob%3D%22staticd%22%7D");
        let max = query("staticd_connections_max");
        if up.as_deref() == Some("1") && max.as_deref() == Some("77") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape staticd within 30 s (up: {up:?}, max: {max:?}); its log: {:#?}",
            log.snapshot()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
