//! HTTP/3 itself, through the harness's quinn + h3 client (tests/common/quic.rs). What
//! HTTP/3 shares with HTTP/1.1 is tested by the other files' `h3` cells
//! (tests/common/variant.rs); this file tests what is HTTP/3's own: Alt-Svc on HTTPS
//! over TCP, the same bodies and fields as HTTP/1.1 (HSTS too), the protocol in the log
//! and CGI, HEAD and errors as fields, many streams on one connection and the stream
//! limit, a request whose end comes after its head, malformed requests (connection
//! fields, a body that is not its Content-Length), a stop and the idle timeout, a file
//! that shrinks mid-response. Attacks and the
//! real clients (aioquic, ngtcp2, Chromium) are tests/http3_attacks.rs and
//! tests/http3_clients.rs.

#![cfg(feature = "http3")]

#[macro_use]
mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::*;
use http_body_util::Full;
use hyper::body::{Buf, Bytes};
use rustix::process::Signal;

const SMALL: &[u8] = b"hello, h3\n";
const MIB: usize = 1 << 20;

fn site() -> (Docroot, Vec<u8>) {
    let root = Docroot::new();
    root.file("small.txt", SMALL);
    let large = pattern(MIB);
    root.file("large.bin", &large);
    (root, large)
}

fn server(v: Variant, root: &Docroot) -> Server {
    Server::builder(v, root.path()).log_format("common").start()
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

/// A response's fields but Date (and Alt-Svc, which only HTTPS over TCP carries), sorted.
fn fields(r: &HResponse) -> Vec<(String, String)> {
    let mut f: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| !matches!(n.as_str(), "date" | "alt-svc"))
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    f.sort();
    f
}

// --- Alt-Svc on HTTPS over TCP ----------------------------------------------------------

/// HTTPS responses over TCP (HTTP/1.1 and HTTP/2) advertise HTTP/3 on the server's port:
/// the same number over UDP. Not over cleartext, not in inetd mode (no UDP socket), not
/// with `--no-http3`, which also binds no UDP socket.
fn alt_svc_names_the_http3_port_over_https(v: Variant) {
    let (root, _) = site();
    let server = Server::start(v, &root);
    let advertised = server.is_tls() && v.mode == Mode::Standalone;
    let expected = advertised.then(|| format!("h3=\":{}\"; ma=86400", server.addr().port()));
    let answers = [
        server.client_http1().get("/small.txt"),
        server.get("/small.txt"),
        server.get("/nope.txt"),
    ];
    for resp in &answers {
        assert_eq!(
            resp.header("alt-svc"),
            expected.as_deref(),
            "{:?} {}: {resp:#?}",
            resp.version,
            resp.status
        );
    }
    if advertised {
        // Where it points, HTTP/3 answers.
        let mut h3 = server.connector().client_proto(Proto::Http3);
        assert_eq!(h3.get("/small.txt").body, SMALL);
    }

    let off = Server::builder(v, root.path()).arg("--no-http3").start();
    for resp in [off.client_http1().get("/small.txt"), off.get("/small.txt")] {
        assert_eq!(resp.header("alt-svc"), None, "--no-http3: {resp:#?}");
    }
    let lines = off.stderr().snapshot();
    assert!(
        !lines.iter().any(|l| l.contains("HTTP/3")),
        "--no-http3: {lines:#?}"
    );
}

matrix!([h1, tls, h2c, h2_tls] both_modes: alt_svc_names_the_http3_port_over_https);

// --- the same answers as HTTP/1.1 -------------------------------------------------------

/// GETs over HTTP/3 get HTTP/1.1's bodies and fields (but Date): a small file, 1 MiB, a
/// range, a suffix range.
fn bodies_and_fields_are_http1s(v: Variant) {
    let (root, large) = site();
    let server = server(v, &root);
    let mut h3 = server.client();
    assert!(h3.is_h3());
    let mut h1 = server.client_http1();
    let cases: [(&str, &[(&str, &str)]); 4] = [
        ("/small.txt", &[]),
        ("/large.bin", &[]),
        ("/large.bin", &[("range", "bytes=1000-299999")]),
        ("/large.bin", &[("range", "bytes=-4097")]),
    ];
    for (path, headers) in cases {
        let over_h3 = h3.request("GET", path, headers);
        let over_h1 = h1.request("GET", path, headers);
        assert_eq!(over_h3.version, hyper::Version::HTTP_3);
        assert_eq!(over_h1.version, hyper::Version::HTTP_11);
        assert_eq!(over_h3.status, over_h1.status, "{path} {headers:?}");
        assert!(
            over_h3.body == over_h1.body,
            "{path} {headers:?}: {} bytes over HTTP/3, {} over HTTP/1.1",
            over_h3.body.len(),
            over_h1.body.len()
        );
        assert_eq!(fields(&over_h3), fields(&over_h1), "{path} {headers:?}");
        assert_no_connection_fields(&over_h3);
    }
    assert!(h3.get("/large.bin").body == large);
    let part = h3.request("GET", "/large.bin", &[("range", "bytes=1000-299999")]);
    assert_eq!(part.status, 206);
    assert!(part.body == large[1000..300_000]);
}

/// `--hsts` over HTTP/3 as over HTTPS on TCP: the connection's kind, not its protocol.
fn hsts_is_sent_over_http3(v: Variant) {
    let (root, _) = site();
    let server = Server::builder(v, root.path())
        .args(["--hsts", "600"])
        .start();
    let over_h3 = server.get("/small.txt");
    assert_eq!(over_h3.version, hyper::Version::HTTP_3);
    assert_eq!(
        over_h3.header("strict-transport-security"),
        Some("max-age=600"),
        "{over_h3:#?}"
    );
    let over_h1 = server.client_http1().get("/small.txt");
    assert_eq!(
        over_h1.header("strict-transport-security"),
        over_h3.header("strict-transport-security")
    );
}

fn the_access_log_says_http_3_0(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    assert_eq!(server.log_version(), "HTTP/3.0");
    assert_eq!(server.get("/small.txt").status, 200);
    assert_eq!(server.get("/large.bin").status, 200);
    let line = server
        .stderr()
        .wait_line(|l| l.contains("\"GET /small.txt HTTP/3.0\" 200 10"));
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    server
        .stderr()
        .wait_line(|l| l.ends_with(&format!("\"GET /large.bin HTTP/3.0\" 200 {MIB}")));
}

/// The harness's clients follow the cell: `Server::get`, `client` and `exchange` speak
/// HTTP/3; raw `Conn`s stay HTTP/1.1 over TLS over TCP.
fn harness_clients_follow_the_cell(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    assert!(server.is_h3() && server.is_multiplexed() && !server.is_h2());
    assert_eq!(server.get("/small.txt").version, hyper::Version::HTTP_3);
    let exchanged = server.exchange(request("GET", "/small.txt", &[]));
    assert_eq!(exchanged.version, "HTTP/3.0");
    assert!(exchanged.is_h3() && exchanged.is_multiplexed());
    assert_eq!(exchanged.body, SMALL);
    let raw = server
        .connect()
        .roundtrip(request("GET", "/small.txt", &[]));
    assert_eq!(raw.version, "HTTP/1.1");
    assert_eq!(raw.body, SMALL);
    // --no-http3: the harness knows, and speaks HTTP/1.1 over TLS.
    let off = Server::builder(v, root.path()).arg("--no-http3").start();
    assert!(!off.is_h3());
    assert_eq!(off.get("/small.txt").version, hyper::Version::HTTP_11);
}

fn head_has_the_fields_and_no_body(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    let mut h3 = server.client();
    let head = h3.request("HEAD", "/large.bin", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(MIB.to_string().as_str())
    );
    assert!(head.body.is_empty(), "{} bytes after HEAD", head.body.len());
    let get = h3.get("/large.bin");
    assert_eq!(fields(&head), fields(&get));
    // The connection goes on.
    assert_eq!(h3.get("/small.txt").body, SMALL);
    server.stderr().wait_line(|l| {
        l.ends_with("\"HEAD /large.bin HTTP/3.0\" 200 -")
            || l.ends_with("\"HEAD /large.bin HTTP/3.0\" 200 0")
    });
}

/// A 404 is the error page, text for a program and HTML for a browser, as over
/// HTTP/1.1.
fn missing_file_is_404_with_the_error_page(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    let mut h3 = server.client();
    let mut h1 = server.client_http1();
    let text = h3.get("/nope.txt");
    assert_error_h(&text, 404);
    assert_eq!(text.body, h1.get("/nope.txt").body);
    let browser = [("accept", "text/html,application/xhtml+xml,*/*;q=0.8")];
    let page = h3.request("GET", "/nope.txt", &browser);
    let page_h1 = h1.request("GET", "/nope.txt", &browser);
    assert_eq!(page.status, 404);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(page.body_str().starts_with("<!DOCTYPE html>"), "{page:#?}");
    assert_eq!(page.body, page_h1.body);
    assert_eq!(fields(&page), fields(&page_h1));
}

fn options_and_unsupported_methods(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    let mut h3 = server.client();
    let options = h3.request("OPTIONS", "/small.txt", &[]);
    assert_eq!(options.status, 204, "{options:#?}");
    assert!(options.header("allow").is_some(), "{options:#?}");
    assert!(options.body.is_empty());
    let delete = h3.request("DELETE", "/small.txt", &[]);
    assert_error_h(&delete, 405);
    assert!(delete.header("allow").is_some(), "{delete:#?}");
    // A body the server does not want: answered, and the connection goes on.
    let post = h3.send(
        hyper::Request::builder()
            .method("POST")
            .uri("/small.txt")
            .header("host", "test")
            .body(Full::new(Bytes::from_static(b"x=1")))
            .unwrap(),
    );
    assert_error_h(&post, 405);
    assert_eq!(h3.get("/small.txt").body, SMALL);
}

/// 100 requests at once on one connection, as 100 concurrent streams (the server allows
/// 100 by default): every one answered whole, every one logged.
fn a_hundred_concurrent_streams_on_one_connection(v: Variant) {
    let (root, large) = site();
    let server = server(v, &root);
    let mut h3 = server.client();
    let paths: Vec<&str> = (0..100)
        .map(|i| {
            if i % 10 == 0 {
                "/large.bin"
            } else {
                "/small.txt"
            }
        })
        .collect();
    let answers = h3.send_all(paths.iter().map(|p| build("GET", p, &[])).collect());
    assert_eq!(answers.len(), 100);
    for (i, (path, a)) in paths.iter().zip(&answers).enumerate() {
        assert_eq!(a.status, 200, "stream {i} {path}");
        assert_eq!(a.version, hyper::Version::HTTP_3);
        match *path {
            "/large.bin" => assert!(a.body == large, "stream {i}: large body differs"),
            _ => assert_eq!(a.body, SMALL, "stream {i}"),
        }
    }
    let logged = server.stderr().wait_for(IO_TIMEOUT, |lines| {
        lines
            .iter()
            .filter(|l| l.contains(" HTTP/3.0\" 200 "))
            .count()
            >= 100
    });
    assert!(
        logged.is_some(),
        "not 100 log lines: {:#?}",
        server.stderr().snapshot()
    );
    // The connection is still good for more.
    assert_eq!(h3.get("/small.txt").body, SMALL);
}

/// `--h3-max-streams` bounds HTTP/3's concurrent streams: more requests than that
/// at once all get answered (the client opens a stream as the server grants one).
fn more_requests_than_the_stream_limit_all_get_answered(v: Variant) {
    let (root, _) = site();
    let server = Server::builder(v, root.path())
        .args(["--h3-max-streams", "3"])
        .start();
    let mut h3 = server.client();
    let answers = h3.send_all((0..20).map(|_| build("GET", "/small.txt", &[])).collect());
    assert!(
        answers.iter().all(|a| a.status == 200 && a.body == SMALL),
        "{answers:#?}"
    );
}

fn cgi_script_sees_http3(v: Variant) {
    let root = Docroot::new();
    let script = root.file(
        "env.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nexec /usr/bin/env\n",
    );
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let echo = root.file(
        "echo.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nexec cat\n",
    );
    fs::set_permissions(&echo, fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::builder(v, root.path()).arg("--cgi").start();
    let mut client = server.client();
    let resp = client.request("GET", "/env.cgi?q=1", &[("x-custom", "hi")]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    let env = resp.body_str();
    // As over HTTP/1.1 (tests/cgi.rs): the client's port (its UDP socket's here), and
    // without a port in `:authority` the port the client reached.
    let remote_port = format!("REMOTE_PORT={}", client.local_addr().port());
    let server_port = format!("SERVER_PORT={}", server.addr().port());
    for line in [
        "SERVER_PROTOCOL=HTTP/3.0",
        "REQUEST_METHOD=GET",
        "QUERY_STRING=q=1",
        "HTTP_HOST=test",
        "HTTP_X_CUSTOM=hi",
        "REMOTE_ADDR=127.0.0.1",
        "HTTPS=on",
        &remote_port,
        &server_port,
    ] {
        assert!(env.lines().any(|l| l == line), "no {line} in:\n{env}");
    }
    // A body larger than the head's packet reaches the script whole.
    let body = pattern(300_000);
    let posted = client.send(
        hyper::Request::builder()
            .method("POST")
            .uri("/echo.cgi")
            .header("host", "test")
            .header("content-length", body.len().to_string())
            .body(Full::new(Bytes::from(body.clone())))
            .unwrap(),
    );
    assert_eq!(posted.status, 200, "{posted:#?}");
    assert!(posted.body == body, "{} bytes echoed", posted.body.len());
}

// --- streams by hand ----------------------------------------------------------------------

/// Runs `work` on a new HTTP/3 connection to `server`, on a runtime of its own.
fn by_hand<T>(server: &Server, work: impl AsyncFnOnce(&mut H3Conn) -> Result<T, H3Error>) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tls = server.connector().tls.expect("a TLS server");
    let addr = server.addr();
    let stderr = server.stderr().clone();
    rt.block_on(async move {
        let mut conn = H3Conn::connect(addr, &tls)
            .await
            .expect("HTTP/3 connection");
        let out = tokio::time::timeout(IO_TIMEOUT, work(&mut conn))
            .await
            .unwrap_or_else(|_| panic!("nothing within {IO_TIMEOUT:?}"))
            .unwrap_or_else(|e| {
                panic!("{e} ({e:?}); the server's stderr: {:#?}", stderr.snapshot())
            });
        conn.close();
        tokio::task::yield_now().await;
        out
    })
}

/// [`by_hand`] for work whose error is an answer: its result as it is.
fn by_hand_result<T>(
    server: &Server,
    work: impl AsyncFnOnce(&mut H3Conn) -> Result<T, H3Error>,
) -> Result<T, H3Error> {
    by_hand(server, async move |conn| Ok(work(conn).await))
}

/// A request stream's head, the authority the server's address.
fn head(server: &Server, method: &str, path: &str) -> hyper::Request<()> {
    hyper::Request::builder()
        .method(method)
        .uri(format!("https://{}{path}", server.addr()))
        .body(())
        .unwrap()
}

/// Waits until what `conn` has written so far has gone out and the server has sent an
/// acknowledgement since: the server has the packets that carried it.
async fn acknowledged(conn: &quinn::Connection, (stream_frames, acks): (u64, u64)) {
    while conn.stats().frame_tx.stream <= stream_frames {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Counted from before the frame went out: the server's ACK may come
    // before this task looks again (waiting for one more would wait forever).
    while conn.stats().frame_rx.acks <= acks {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// What `acknowledged` counts from: take it before sending.
fn sent_and_acked(conn: &quinn::Connection) -> (u64, u64) {
    let stats = conn.stats();
    (stats.frame_tx.stream, stats.frame_rx.acks)
}

/// A client may end a request stream in a later packet than its head, or send the body
/// after it (HTTP/3 has no framing that says "no body" up front; a client waiting for an
/// answer before sending its body is lawful): a GET whose end comes in a packet of its
/// own gets its file; a POST to a file, its body announced but not sent, gets its 405
/// at once (nothing needs the body); the server goes on serving.
fn a_request_whose_end_comes_after_its_head_is_answered(v: Variant) {
    let (root, _) = site();
    let mut server = server(v, &root);
    let get = head(&server, "GET", "/small.txt");
    let (status, body) = by_hand(&server, async move |conn| {
        let frames = sent_and_acked(&conn.conn);
        let mut stream = conn.sender.send_request(get).await?;
        acknowledged(&conn.conn, frames).await;
        stream.finish().await?;
        let (parts, body) = h3_response_of(&mut stream).await?;
        Ok((parts.status.as_u16(), body))
    });
    assert_eq!(status, 200);
    assert_eq!(body, SMALL);

    let mut post = head(&server, "POST", "/small.txt");
    post.headers_mut().insert(
        "content-length",
        hyper::header::HeaderValue::from_static("3"),
    );
    let status = by_hand(&server, async move |conn| {
        let mut stream = conn.sender.send_request(post).await?;
        // No body yet: the answer comes first.
        let resp = stream.recv_response().await?;
        // The body after all; the server has stopped reading, which is fine.
        let _ = stream.send_data(Bytes::from_static(b"x=1")).await;
        let _ = stream.finish().await;
        Ok(resp.status().as_u16())
    });
    assert_eq!(status, 405);
    server.assert_survived("/small.txt");
}

/// Connection-specific fields make an HTTP/3 request malformed (RFC 9114 §4.2), as they
/// do an HTTP/2 one (nghttp2 resets such a stream): a 400 or a reset stream, never the
/// file. `TE: trailers` is the one such field allowed.
fn connection_specific_fields_make_a_request_malformed(v: Variant) {
    let (root, _) = site();
    let server = server(v, &root);
    for (name, value) in [
        ("connection", "keep-alive"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "h2c"),
        ("te", "gzip"),
    ] {
        let mut req = build("GET", "/small.txt", &[(name, value)]);
        req.headers_mut().remove("host");
        *req.uri_mut() = format!("https://{}/small.txt", server.addr())
            .parse()
            .unwrap();
        let answer = by_hand_result(&server, async move |conn| {
            h3_exchange(conn.sender.clone(), req).await
        });
        match answer {
            Ok((parts, body)) => assert_eq!(
                parts.status.as_u16(),
                400,
                "{name}: {value} was served: {:?}",
                String::from_utf8_lossy(&body)
            ),
            Err(e) => eprintln!("{name}: {value}: {e} (refused, as it may be)"),
        }
    }
    let trailers = server.request("GET", "/small.txt", &[("te", "trailers")]);
    assert_eq!(trailers.status, 200);
}

/// A body that is not as long as its Content-Length makes an HTTP/3 request malformed
/// (RFC 9114 §4.1.2), as nghttp2 treats an HTTP/2 one (HTTP/1.1 cannot say it: the
/// length frames the body): a 400 or a reset stream; a script never gets a body that
/// contradicts its CONTENT_LENGTH.
fn a_body_that_is_not_its_content_length_makes_a_request_malformed(v: Variant) {
    let root = Docroot::new();
    let echo = root.file(
        "echo.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nexec cat\n",
    );
    fs::set_permissions(&echo, fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::builder(v, root.path()).arg("--cgi").start();
    for (length, body) in [("10", &b"abc"[..]), ("2", &b"abcdef"[..])] {
        let req = hyper::Request::builder()
            .method("POST")
            .uri(format!("https://{}/echo.cgi", server.addr()))
            .header("content-length", length)
            .body(Full::new(Bytes::from_static(body)))
            .unwrap();
        let answer = by_hand_result(&server, async move |conn| {
            h3_exchange(conn.sender.clone(), req).await
        });
        match answer {
            Ok((parts, got)) => assert_eq!(
                parts.status.as_u16(),
                400,
                "Content-Length {length} with {} bytes: the script got {:?}",
                body.len(),
                String::from_utf8_lossy(&got)
            ),
            Err(e) => eprintln!("Content-Length {length}: {e} (refused, as it may be)"),
        }
    }
}

/// A file cut short while it is sent ends the HTTP/3 response with an error (the stream
/// reset), never padded or cleanly ended short; the server goes on serving.
fn a_file_that_shrinks_mid_response_ends_it_with_an_error(v: Variant) {
    const BIG: u64 = 32 << 20;
    let (root, _) = site();
    write_pattern_file(&root.join("big.bin"), BIG);
    let mut server = server(v, &root);
    let req = head(&server, "GET", "/big.bin");
    let path = root.join("big.bin");
    let (length, received, ended) = by_hand(&server, async move |conn| {
        let mut stream = conn.sender.send_request(req).await?;
        stream.finish().await?;
        let resp = stream.recv_response().await?;
        let length = resp.headers()["content-length"]
            .to_str()
            .unwrap()
            .to_string();
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let mut received = Vec::new();
        let ended = loop {
            match stream.recv_data().await {
                Ok(Some(mut chunk)) => {
                    while chunk.has_remaining() {
                        let n = chunk.chunk().len();
                        received.extend_from_slice(chunk.chunk());
                        chunk.advance(n);
                    }
                }
                Ok(None) => break "a clean end".to_string(),
                Err(e) => break format!("{e}"),
            }
        };
        Ok((length, received, ended))
    });
    assert_eq!(length, BIG.to_string());
    assert!(
        (received.len() as u64) < BIG,
        "got all {BIG} bytes of a file truncated to 1 MiB"
    );
    assert!(
        received == pattern(received.len()),
        "the body is not the file's bytes"
    );
    assert_ne!(
        ended, "a clean end",
        "a response cut short ended like a whole one"
    );
    server.assert_survived("/small.txt");
}

// --- connections: idle timeout, stop ------------------------------------------------------

fn idle_connection_is_closed_after_the_keepalive_timeout(v: Variant) {
    let (root, _) = site();
    let server = Server::builder(v, root.path())
        .args(["--keepalive-timeout", "1"])
        .start();
    let mut h3 = server.client();
    assert_eq!(h3.get("/small.txt").status, 200);
    assert!(
        h3.wait_closed(IO_TIMEOUT),
        "the idle HTTP/3 connection stayed open"
    );
}

/// SIGTERM with an HTTP/3 response in flight: it finishes whole, and the server exits 0.
fn sigterm_lets_an_http3_response_in_flight_finish(v: Variant) {
    const BIG: u64 = 16 << 20;
    let (root, _) = site();
    write_pattern_file(&root.join("big.bin"), BIG);
    let mut server = server(v, &root);
    let req = head(&server, "GET", "/big.bin");
    let pid = server.process().id();
    let received = by_hand(&server, async move |conn| {
        let mut stream = conn.sender.send_request(req).await?;
        stream.finish().await?;
        let resp = stream.recv_response().await?;
        assert_eq!(resp.status(), 200);
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            Signal::TERM,
        )
        .unwrap();
        let mut received = 0u64;
        while let Some(chunk) = stream.recv_data().await? {
            received += chunk.remaining() as u64;
        }
        Ok(received)
    });
    assert_eq!(received, BIG, "the in-flight response was cut short");
    let status = server
        .process()
        .wait_timeout(Duration::from_secs(20))
        .expect("staticd still running 20 s after SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", describe(status));
}

/// An idle HTTP/3 connection does not keep a stopping server alive past the grace: it is
/// told (GOAWAY) and closed, and the server exits 0.
fn sigterm_with_an_idle_http3_connection_exits_zero(v: Variant) {
    let (root, _) = site();
    let mut server = server(v, &root);
    let mut h3 = server.client();
    assert_eq!(h3.get("/small.txt").status, 200);
    server.process().signal(Signal::TERM);
    assert!(
        h3.wait_closed(Duration::from_secs(15)),
        "the idle HTTP/3 connection was not closed at the stop"
    );
    let status = server
        .process()
        .wait_timeout(Duration::from_secs(20))
        .expect("an idle HTTP/3 connection kept staticd alive past the 10 s grace");
    assert_eq!(status.code(), Some(0), "{}", describe(status));
}

/// A client whose address changes (a NAT rebinding, a phone between networks) keeps its
/// connection: each of the 4 workers has its own UDP socket, and the datagrams from the
/// new port reach the one that owns the connection by its connection ID, not by the
/// kernel's hash of the addresses (which would pick another socket 3 times in 4).
fn a_connection_survives_its_clients_port_changing(v: Variant) {
    let (root, _) = site();
    let server = Server::builder(v, root.path())
        .args(["--threads", "4"])
        .start();
    let requests: Vec<_> = (0..9).map(|_| head(&server, "GET", "/small.txt")).collect();
    let ports = by_hand(&server, async move |conn| {
        let mut ports = Vec::new();
        for (i, req) in requests.into_iter().enumerate() {
            if i > 0 {
                let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                conn.endpoint.rebind(socket).unwrap();
            }
            ports.push(conn.endpoint.local_addr().unwrap().port());
            let mut stream = conn.sender.send_request(req).await?;
            stream.finish().await?;
            let (parts, body) = h3_response_of(&mut stream).await?;
            assert_eq!(parts.status.as_u16(), 200, "from port {}", ports[i]);
            assert_eq!(body, SMALL);
        }
        Ok(ports)
    });
    let distinct: std::collections::HashSet<_> = ports.iter().collect();
    assert_eq!(distinct.len(), ports.len(), "{ports:?}");
}

matrix!([h3] standalone:
    a_connection_survives_its_clients_port_changing,
    bodies_and_fields_are_http1s,
    hsts_is_sent_over_http3,
    the_access_log_says_http_3_0,
    harness_clients_follow_the_cell,
    head_has_the_fields_and_no_body,
    missing_file_is_404_with_the_error_page,
    options_and_unsupported_methods,
    a_hundred_concurrent_streams_on_one_connection,
    more_requests_than_the_stream_limit_all_get_answered,
    cgi_script_sees_http3,
    a_request_whose_end_comes_after_its_head_is_answered,
    connection_specific_fields_make_a_request_malformed,
    a_body_that_is_not_its_content_length_makes_a_request_malformed,
    a_file_that_shrinks_mid_response_ends_it_with_an_error,
    idle_connection_is_closed_after_the_keepalive_timeout,
    sigterm_lets_an_http3_response_in_flight_finish,
    sigterm_with_an_idle_http3_connection_exits_zero,
);
