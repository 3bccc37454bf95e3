//! HTTP/2 itself, through hyper's HTTP/2 client, in both modes: h2c with prior knowledge
//! in cleartext and, in the TLS cells, ALPN `h2` over TLS (the harness's client
//! offers `h2` and `http/1.1` and insists on `h2`). What HTTP/2 shares with HTTP/1.1 is
//! tested by the other files' `h2c` and `h2_tls` cells (tests/common/variant.rs); this file tests
//! what only HTTP/2 has: streams on one connection, the protocol in the log and CGI,
//! SETTINGS, `--no-http2` and `--h2-max-streams`, and the harness's switch itself.

#![cfg(feature = "http2")]

#[macro_use]
mod common;

use common::*;
use http_body_util::Full;
use hyper::body::Bytes;
use std::fs;
use std::os::unix::fs::PermissionsExt;

const LARGE: usize = 3 * 1024 * 1024 + 17;

/// The client preface of RFC 9113 §3.4, then an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

fn site() -> (Docroot, Vec<u8>) {
    let root = Docroot::new();
    root.file("small.txt", "hello, h2\n");
    let large = pattern(LARGE);
    root.file("large.bin", &large);
    (root, large)
}

fn server(v: Variant, root: &Docroot) -> Server {
    Server::builder(v, root.path()).log_format("common").start()
}

/// An HTTP/2 connection whatever the cell.
fn h2(server: &Server) -> Client {
    server.connector().client_proto(Proto::Http2)
}

fn build(method: &str, path: &str, headers: &[(&str, &str)]) -> hyper::Request<Full<Bytes>> {
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "test");
    for (name, value) in headers {
        b = b.header(*name, *value);
    }
    b.body(Full::new(Bytes::new())).unwrap()
}

fn get_small_and_large_files(v: Variant) {
    let (root, large) = site();
    let server = server(v, &root);
    let mut h2 = h2(&server);
    let small = h2.get("/small.txt");
    assert_eq!(small.status, 200);
    assert_eq!(small.version, hyper::Version::HTTP_2);
    assert_eq!(small.body, b"hello, h2\n");
    assert_eq!(small.header("content-length"), Some("10"));
    assert_no_connection_fields(&small);
    assert!(small.header("etag").is_some());
    let big = h2.get("/large.bin");
    assert_eq!(big.status, 200);
    assert_eq!(
        big.header("content-length"),
        Some(LARGE.to_string().as_str())
    );
    assert!(big.body == large, "large body differs");
    // The same answer as over HTTP/1.1, field for field but Date.
    let h1 = server.client_http1().get("/large.bin");
    assert_eq!(h1.version, hyper::Version::HTTP_11);
    let fields = |r: &HResponse| {
        let mut f: Vec<(String, String)> = r
            .headers
            .iter()
            .filter(|(n, _)| n.as_str() != "date")
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        f.sort();
        f
    };
    assert_eq!(fields(&h1), fields(&big));
}

fn head_has_the_fields_and_no_body(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    let mut h2 = h2(&server);
    let head = h2.request("HEAD", "/large.bin", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(LARGE.to_string().as_str())
    );
    assert!(head.body.is_empty());
    // The connection goes on: the HEAD sent no DATA a later stream could trip over.
    assert_eq!(h2.get("/small.txt").body, b"hello, h2\n");
}

fn range_is_206_with_content_range(v: Variant) {
    let (root, large) = site();
    let server = server(v, &root);
    let mut h2 = h2(&server);
    let part = h2.request("GET", "/large.bin", &[("range", "bytes=100-199")]);
    assert_eq!(part.status, 206);
    let expected = format!("bytes 100-199/{LARGE}");
    assert_eq!(part.header("content-range"), Some(expected.as_str()));
    assert_eq!(part.header("content-length"), Some("100"));
    assert!(part.body == large[100..200]);
}

fn if_none_match_is_304(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    let mut h2 = h2(&server);
    let first = h2.get("/small.txt");
    let etag = first.header("etag").expect("etag").to_string();
    let again = h2.request("GET", "/small.txt", &[("if-none-match", &etag)]);
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    assert_eq!(again.header("etag"), Some(etag.as_str()));
}

fn missing_file_is_404_with_the_error_page(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    let missing = h2(&server).get("/nope.txt");
    let h1 = server.client_http1().get("/nope.txt");
    assert_error_h(&missing, 404);
    assert_eq!(missing.body, h1.body);
    assert_eq!(missing.header("content-type"), h1.header("content-type"));
}

fn concurrent_streams_share_one_connection(v: Variant) {
    let (root, large) = site();
    let server = server(v, &root);
    let mut h2 = h2(&server);
    let paths: Vec<&str> = (0..12)
        .map(|i| {
            if i % 3 == 0 {
                "/large.bin"
            } else {
                "/small.txt"
            }
        })
        .collect();
    let answers = h2.send_all(paths.iter().map(|p| build("GET", p, &[])).collect());
    assert_eq!(answers.len(), 12);
    for (path, a) in paths.iter().zip(&answers) {
        assert_eq!(a.status, 200, "{path}");
        match *path {
            "/large.bin" => assert!(a.body == large),
            _ => assert_eq!(a.body, b"hello, h2\n"),
        }
    }
    let lines = server.stderr().wait_for(IO_TIMEOUT, |lines| {
        lines.iter().filter(|l| l.contains("HTTP/2.0")).count() >= 12
    });
    let lines = lines.expect("one access-log line per stream");
    let large_line = format!("\"GET /large.bin HTTP/2.0\" 200 {LARGE}");
    assert!(lines.iter().any(|l| l.contains(&large_line)), "{lines:#?}");
}

fn idle_connection_is_closed_after_the_keepalive_timeout(v: Variant) {
    let (root, _) = site();
    let server = Server::builder(v, root.path())
        .args(["--keepalive-timeout", "1", "--read-timeout", "30"])
        .start();
    let mut h2 = h2(&server);
    assert_eq!(h2.get("/small.txt").status, 200);
    assert!(
        h2.wait_closed(IO_TIMEOUT),
        "the idle h2 connection stayed open"
    );
    if v.mode == Mode::Inetd {
        let statuses = server.wait_inetd_exits(1);
        assert!(statuses[0].success(), "{}", describe(statuses[0]));
    }
}

fn http1_is_unchanged_on_the_same_port(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    let mut h2 = h2(&server);
    assert_eq!(h2.get("/small.txt").status, 200);
    let h1 = server.client_http1().get("/small.txt");
    assert_eq!(h1.version, hyper::Version::HTTP_11);
    assert_eq!(h1.status, 200);
    assert_eq!(h1.body, b"hello, h2\n");
    let raw = server
        .connect()
        .roundtrip(request("GET", "/small.txt", &[]));
    assert_eq!(raw.version, "HTTP/1.1");
    assert_eq!(raw.body, b"hello, h2\n");
}

/// The HTTP/2 cells switch the harness's own clients: `Server::get`, `Server::client`
/// and `Server::exchange` speak HTTP/2 then, HTTP/1.1 otherwise. Raw `Conn`s never do.
fn harness_clients_follow_the_cell(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    let expected = if v.is_h2() {
        hyper::Version::HTTP_2
    } else {
        hyper::Version::HTTP_11
    };
    assert_eq!(server.is_h2(), v.is_h2());
    assert_eq!(server.get("/small.txt").version, expected);
    assert_eq!(server.client().get("/small.txt").version, expected);
    let exchanged = server.exchange(request("GET", "/small.txt", &[]));
    assert_eq!(exchanged.version, format!("{expected:?}"));
    assert_eq!(exchanged.body, b"hello, h2\n");
    let version = server.log_version();
    server
        .stderr()
        .wait_line(|l| l.contains(&format!("\"GET /small.txt {version}\" 200 10")));
}

fn cgi_script_sees_http2(v: Variant) {
    let root = Docroot::new();
    let script = root.file(
        "env.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nexec /usr/bin/env\n",
    );
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::builder(v, root.path()).arg("--cgi").start();
    let mut client = h2(&server);
    let resp = client.request("GET", "/env.cgi?q=1", &[("x-custom", "hi")]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    let env = resp.body_str();
    // As over HTTP/1.1 (tests/cgi.rs): the client's port, and without a port in the
    // Host (`:authority` here) the port the client connected to.
    let remote_port = format!("REMOTE_PORT={}", client.local_addr().port());
    let server_port = format!("SERVER_PORT={}", server.addr().port());
    let https = if server.is_tls() {
        "HTTPS=on"
    } else {
        "SERVER_NAME=test"
    };
    for line in [
        "SERVER_PROTOCOL=HTTP/2.0",
        "REQUEST_METHOD=GET",
        "QUERY_STRING=q=1",
        "HTTP_HOST=test",
        "HTTP_X_CUSTOM=hi",
        "REMOTE_ADDR=127.0.0.1",
        https,
        &remote_port,
        &server_port,
    ] {
        assert!(env.lines().any(|l| l == line), "no {line} in:\n{env}");
    }
}

// --- raw frames: SETTINGS, --h2-max-streams, --no-http2 ---------------------------------

/// A raw connection for HTTP/2 bytes: over TLS it offers only `h2` in ALPN.
fn raw_h2(server: &Server) -> Conn {
    let connector = server.connector();
    let tcp = connector.tcp();
    match &connector.tls {
        None => Conn::new(tcp),
        Some(tls) => {
            let mut offering = tls.offering_h2();
            let mut config = (*offering.config).clone();
            config.alpn_protocols = vec![b"h2".to_vec()];
            offering.config = std::sync::Arc::new(config);
            Conn::from_stream(Stream::tls(tcp, &offering))
        }
    }
}

/// Sends the preface and reads frames up to the server's first SETTINGS frame; returns
/// its parameters.
fn server_settings(conn: &mut Conn) -> Vec<(u16, u32)> {
    conn.send(PREFACE);
    loop {
        let header = conn.take_exact(9);
        let len =
            usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        let (kind, flags) = (header[3], header[4]);
        let payload = conn.take_exact(len);
        if kind == 4 && flags & 1 == 0 {
            return payload
                .chunks(6)
                .map(|p| {
                    (
                        u16::from_be_bytes([p[0], p[1]]),
                        u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
                    )
                })
                .collect();
        }
    }
}

const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 3;

fn settings_announce_the_stream_limit(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    let settings = server_settings(&mut raw_h2(&server));
    assert!(
        settings.contains(&(SETTINGS_MAX_CONCURRENT_STREAMS, 128)),
        "the default limit is 128 streams: {settings:?}"
    );
    let limited = Server::builder(v, root.path())
        .args(["--h2-max-streams", "3"])
        .start();
    let settings = server_settings(&mut raw_h2(&limited));
    assert!(
        settings.contains(&(SETTINGS_MAX_CONCURRENT_STREAMS, 3)),
        "--h2-max-streams 3: {settings:?}"
    );
    // More streams than that at once still all get answered: hyper waits for a slot,
    // once it has the server's SETTINGS (a first exchange makes sure: streams opened
    // before them may be refused, as RFC 9113 §5.1.2 allows).
    let mut h2 = h2(&limited);
    assert_eq!(h2.get("/small.txt").status, 200);
    let answers = h2.send_all((0..10).map(|_| build("GET", "/small.txt", &[])).collect());
    assert!(answers.iter().all(|a| a.status == 200), "{answers:#?}");
}

fn no_http2_speaks_http1_only(v: Variant) {
    let (root, _) = site();
    let server = Server::builder(v, root.path()).arg("--no-http2").start();
    if server.is_tls() {
        // ALPN: h2 is not offered back, so hyper's h2-insisting client gives up, and a
        // client offering h2 and http/1.1 gets http/1.1.
        let mut both = Conn::from_stream(Stream::tls(
            server.connector().tcp(),
            &server.connector().tls.unwrap().offering_h2(),
        ));
        both.handshake().expect("TLS handshake");
        assert_eq!(
            both.tls().unwrap().alpn_protocol(),
            Some(&b"http/1.1"[..]),
            "--no-http2 must not choose h2"
        );
        let resp = both.roundtrip(request("GET", "/small.txt", &[]));
        assert_eq!(resp.version, "HTTP/1.1");
        assert_eq!(resp.body, b"hello, h2\n");
    } else {
        // The preface is an HTTP/1.1 request line with version HTTP/2.0: 505.
        let mut conn = server.connect();
        conn.send(PREFACE);
        let resp = conn.read_head();
        assert_eq!(resp.status, 505, "{resp:#?}");
    }
    assert_eq!(server.client_http1().get("/small.txt").body, b"hello, h2\n");
    // The harness's clients know: HTTP/1.1 to this server even in an HTTP/2 cell.
    assert!(!server.is_h2());
    assert_eq!(server.get("/small.txt").version, hyper::Version::HTTP_11);
}

fn the_preface_alone_then_close_is_harmless(v: Variant) {
    let (root, _) = site();
    let mut server = server(v, &root);
    let mut conn = raw_h2(&server);
    conn.send(PREFACE);
    drop(conn);
    server.assert_survived("/small.txt");
}

matrix!([h1, tls, h2c, h2_tls] both_modes:
    get_small_and_large_files,
    head_has_the_fields_and_no_body,
    range_is_206_with_content_range,
    if_none_match_is_304,
    missing_file_is_404_with_the_error_page,
    concurrent_streams_share_one_connection,
    idle_connection_is_closed_after_the_keepalive_timeout,
    http1_is_unchanged_on_the_same_port,
    harness_clients_follow_the_cell,
    cgi_script_sees_http2,
    settings_announce_the_stream_limit,
    no_http2_speaks_http1_only,
    the_preface_alone_then_close_is_harmless,
);
