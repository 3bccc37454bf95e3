//! HTTP/1.x behaviour that any client can see: methods, versions, headers, persistence,
//! pipelining, request bodies, limits and timeouts. Every test runs in both modes.

#[macro_use]
mod common;

use std::thread;
use std::time::{Duration, SystemTime};

use common::*;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root.file("b.txt", "bravo bravo\n");
    root.file("c.html", "<p>c</p>\n");
    root.file("data.unknownext", [0u8, 1, 2, 3]);
    root.file("noext", "no extension");
    root.file("pic.png", b"\x89PNG\r\n\x1a\n");
    root
}

fn etag_is_strong(etag: &str) -> bool {
    etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"')
}

// --- methods -------------------------------------------------------------------------

fn get_returns_file_contents(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/a.txt");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"alpha\n");
}

fn ok_response_carries_contract_headers(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/a.txt");
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("content-type").map(str::to_ascii_lowercase),
        Some("text/plain; charset=utf-8".into())
    );
    assert_eq!(resp.header("content-length"), Some("6"));
    assert_eq!(
        resp.header("last-modified"),
        Some(http_date(rfc_example_time()).as_str())
    );
    let etag = resp.header("etag").expect("ETag");
    assert!(
        etag_is_strong(etag),
        "ETag must be strong and quoted: {etag}"
    );
    assert_eq!(resp.header("accept-ranges"), Some("bytes"));
    assert_eq!(resp.header("server"), Some("staticd"));
    let date = resp.header("date").expect("Date");
    let date = httpdate::parse_http_date(date).expect("Date is an HTTP-date");
    let skew = match date.duration_since(SystemTime::now()) {
        Ok(ahead) => ahead,
        Err(behind) => behind.duration(),
    };
    assert!(skew < Duration::from_secs(300), "Date is off by {skew:?}");
}

fn html_is_text_html_with_charset(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/c.html");
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("content-type").map(str::to_ascii_lowercase),
        Some("text/html; charset=utf-8".into())
    );
}

fn unknown_type_is_octet_stream(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for path in ["/data.unknownext", "/noext"] {
        let resp = server.get(path);
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(
            resp.header("content-type"),
            Some("application/octet-stream"),
            "{path}"
        );
    }
}

fn non_text_type_has_no_charset(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/pic.png");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("image/png"));
}

fn head_has_get_headers_and_no_body(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    // Pipelined: a body wrongly sent after the HEAD response would break the GET's parse.
    conn.send(request("HEAD", "/a.txt", &[]) + &request("GET", "/a.txt", &[]));
    let head = conn.read_response_to("HEAD");
    let get = conn.read_response();
    assert_eq!(head.status, 200);
    assert_eq!(get.body, b"alpha\n");
    let without_date = |r: &Response| {
        let mut h: Vec<_> = r
            .headers
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
            .collect();
        h.sort();
        h
    };
    assert_eq!(without_date(&head), without_date(&get));
}

fn options_gets_204_with_allow(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    for target in ["*", "/a.txt", "/missing"] {
        let resp = conn.roundtrip(request("OPTIONS", target, &[]));
        assert_eq!(resp.status, 204, "OPTIONS {target}");
        assert_eq!(resp.header("allow"), Some("GET, HEAD, OPTIONS"));
        assert_eq!(
            resp.header("content-length"),
            None,
            "RFC 9110 8.6: no Content-Length in a 204"
        );
        assert_common_headers(&resp);
    }
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
}

fn other_methods_get_405_with_allow(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let resp = conn.roundtrip(request(method, "/a.txt", &["Content-Length: 0"]));
        assert_error(&resp, 405);
        assert_eq!(resp.header("allow"), Some("GET, HEAD, OPTIONS"), "{method}");
    }
}

fn unknown_method_gets_405_with_allow(v: Variant) {
    // The contract answers every method but GET, HEAD and OPTIONS with 405.
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip(request("BREW", "/a.txt", &[]));
    assert_error(&resp, 405);
    assert_eq!(resp.header("allow"), Some("GET, HEAD, OPTIONS"));
}

fn absolute_form_target_is_served(v: Variant) {
    // RFC 9112 3.2.2: a server MUST accept the absolute form.
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip("GET http://test/a.txt HTTP/1.1\r\nHost: test\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"alpha\n");
}

// --- versions and Host ------------------------------------------------------------

fn assert_version_rejected(v: Variant, version: &str) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(format!("GET /a.txt {version}\r\nHost: test\r\n\r\n"));
    let resp = conn.read_response();
    assert_error(&resp, 505);
    assert!(resp.has_token("connection", "close"), "{resp:#?}");
    conn.assert_closed();
}

fn http_2_0_gets_505_and_close(v: Variant) {
    assert_version_rejected(v, "HTTP/2.0");
}

/// RFC 9110 §2.5: a higher minor version of a major version the server
/// implements is processed as the highest minor version it supports.
fn http_1_2_is_answered_as_http_1_1(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip("GET /a.txt HTTP/1.2\r\nHost: x\r\n\r\n");
    assert_eq!(resp.status, 200);
    // Persistent, as HTTP/1.1 is by default.
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
}

fn http_3_0_gets_505_and_close(v: Variant) {
    assert_version_rejected(v, "HTTP/3.0");
}

fn http_0_9_gets_505_and_close(v: Variant) {
    assert_version_rejected(v, "HTTP/0.9");
}

fn http_1_1_without_host_gets_400(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send("GET /a.txt HTTP/1.1\r\n\r\n");
    let resp = conn.read_response();
    assert_error(&resp, 400);
    assert!(resp.has_token("connection", "close"));
    conn.assert_closed();
}

fn duplicate_host_gets_400(v: Variant) {
    // RFC 9112 3.2: more than one Host field MUST get a 400.
    assert_bad_request(
        v,
        "GET /a.txt HTTP/1.1\r\nHost: test\r\nHost: other\r\n\r\n",
    );
}

/// RFC 9112 §3.2: a Host that is not `uri-host [":" port]` gets 400, in
/// HTTP/1.0 and 1.1, with and without --vhosts.
fn invalid_host_gets_400(v: Variant) {
    let root = site();
    let bad = [
        "a b",
        "a/b",
        "a\\b",
        "a@b",
        "a?b",
        "a#b",
        "a:b",
        "a:80:80",
        "[::1",
        "[::1]x",
        "[zz]",
        "a\"b",
        "%zz",
        "\u{e9}.example",
    ];
    for vhosts in [false, true] {
        let mut builder = Server::builder(v, root.path());
        if vhosts {
            root.file("default/a.txt", "default alpha\n");
            builder = builder.arg("--vhosts");
        }
        let server = builder.start();
        for host in bad {
            for version in ["1.0", "1.1"] {
                let raw = format!("GET /a.txt HTTP/{version}\r\nHost: {host}\r\n\r\n");
                let mut conn = server.connect();
                conn.send(&raw);
                let resp = conn.read_response();
                assert_eq!(resp.status, 400, "vhosts {vhosts}: {raw:?} -> {resp:#?}");
                assert!(resp.has_token("connection", "close"));
            }
        }
        // What is valid is still served.
        for host in [
            "test",
            "test:8080",
            "127.0.0.1",
            "[::1]:80",
            "a_b.example",
            "%41",
        ] {
            let raw = format!("GET /a.txt HTTP/1.1\r\nHost: {host}\r\n\r\n");
            let resp = server.connect().roundtrip(raw.as_str());
            assert_eq!(
                resp.status, 200,
                "vhosts {vhosts}: Host {host:?} -> {resp:#?}"
            );
        }
    }
}

/// RFC 9112 §3.2 lets a Host field be empty: it names no host, and the
/// request is served as one without (the default site with --vhosts).
fn empty_host_is_served_as_no_host(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for raw in [
        "GET /a.txt HTTP/1.1\r\nHost:\r\n\r\n",
        "GET /a.txt HTTP/1.0\r\nHost: \r\n\r\n",
    ] {
        let resp = server.connect().roundtrip(raw);
        assert_eq!(resp.status, 200, "{raw:?}");
        assert_eq!(resp.body, b"alpha\n");
    }
}

/// The origin-form has no fragment (RFC 9112 §3.2.1): `#` in a target is a
/// 400, while `%23` still names a file with `#` in its name.
fn fragment_in_the_target_gets_400(v: Variant) {
    let root = site();
    root.file("a#b.txt", "hash\n");
    let server = Server::start(v, &root);
    for target in ["/a.txt#frag", "/a.txt#", "/#", "/a#b.txt"] {
        for version in ["1.0", "1.1"] {
            let raw = format!("GET {target} HTTP/{version}\r\nHost: test\r\n\r\n");
            let mut conn = server.connect();
            conn.send(&raw);
            assert_error(&conn.read_response(), 400);
            conn.assert_closed();
        }
    }
    let resp = server
        .connect()
        .roundtrip(request("GET", "/a%23b.txt", &[]));
    assert_eq!(resp.body, b"hash\n");
}

fn http_1_0_without_host_is_served(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip("GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"alpha\n");
}

// --- persistence ------------------------------------------------------------------

fn http_1_1_connection_is_persistent(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    for (path, body) in [("/a.txt", "alpha\n"), ("/b.txt", "bravo bravo\n")] {
        let resp = conn.roundtrip(request("GET", path, &[]));
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body_str(), body);
        assert!(!resp.has_token("connection", "close"), "{resp:#?}");
    }
    let mut client = server.client();
    assert_eq!(client.get("/a.txt").status, 200);
    assert_eq!(client.get("/b.txt").body, b"bravo bravo\n");
}

fn http_1_1_connection_close_is_honoured(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip(request("GET", "/a.txt", &["Connection: close"]));
    assert_eq!(resp.status, 200);
    assert!(resp.has_token("connection", "close"), "{resp:#?}");
    conn.assert_closed();
}

fn connection_tokens_are_case_insensitive(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip("GET /a.txt HTTP/1.1\r\nhost: test\r\nconnection: Close\r\n\r\n");
    assert_eq!(resp.status, 200);
    conn.assert_closed();
    let mut conn = server.connect();
    let resp = conn.roundtrip("GET /a.txt HTTP/1.0\r\nCONNECTION: Keep-Alive\r\n\r\n");
    assert!(resp.has_token("connection", "keep-alive"), "{resp:#?}");
    assert_eq!(conn.roundtrip(request("GET", "/b.txt", &[])).status, 200);
}

fn http_1_0_without_keep_alive_closes(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip("GET /a.txt HTTP/1.0\r\nHost: test\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert!(
        resp.has_token("connection", "close"),
        "closing responses carry Connection: close: {resp:#?}"
    );
    conn.assert_closed();
}

fn http_1_0_keep_alive_is_honoured(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    for _ in 0..2 {
        let resp =
            conn.roundtrip("GET /a.txt HTTP/1.0\r\nHost: test\r\nConnection: keep-alive\r\n\r\n");
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, b"alpha\n");
        assert!(resp.has_token("connection", "keep-alive"), "{resp:#?}");
    }
    let resp = conn.roundtrip("GET /b.txt HTTP/1.0\r\nHost: test\r\n\r\n");
    assert_eq!(resp.body, b"bravo bravo\n");
    conn.assert_closed();
}

fn pipelined_requests_are_answered_in_order(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(
        request("GET", "/a.txt", &[])
            + &request("HEAD", "/b.txt", &[])
            + &request("GET", "/missing", &[])
            + &request("GET", "/b.txt", &[])
            + &request("GET", "/c.html", &["Connection: close"]),
    );
    let a = conn.read_response();
    assert_eq!((a.status, a.body.as_slice()), (200, b"alpha\n".as_slice()));
    let b_head = conn.read_response_to("HEAD");
    assert_eq!(b_head.status, 200);
    assert_eq!(b_head.content_length(), Some(12));
    assert_error(&conn.read_response(), 404);
    let b = conn.read_response();
    assert_eq!(b.body, b"bravo bravo\n");
    let c = conn.read_response();
    assert_eq!(c.body, b"<p>c</p>\n");
    conn.assert_closed();
}

// --- request bodies ----------------------------------------------------------------

fn content_length_body_is_discarded(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    // The body looks like a request; it must not be answered as one.
    let smuggled = request("GET", "/c.html", &[]);
    conn.send(
        format!(
            "POST /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n{smuggled}",
            smuggled.len()
        ) + &request("GET", "/b.txt", &[]),
    );
    assert_error(&conn.read_response(), 405);
    assert_eq!(conn.read_response().body, b"bravo bravo\n");
}

fn get_with_body_is_served_and_body_discarded(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(
        "GET /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 4\r\n\r\nabcd".to_string()
            + &request("GET", "/b.txt", &[]),
    );
    assert_eq!(conn.read_response().body, b"alpha\n");
    assert_eq!(conn.read_response().body, b"bravo bravo\n");
}

fn body_arriving_after_the_head_is_discarded(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send("POST /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\nhello");
    // The rest comes once the server has read this much (after a fixed pause, a
    // loaded server could read it all at once, and the test would test nothing).
    conn.wait_read_by_server();
    conn.send("world".to_string() + &request("GET", "/b.txt", &[]));
    assert_error(&conn.read_response(), 405);
    assert_eq!(conn.read_response().body, b"bravo bravo\n");
}

fn chunked_body_is_discarded(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(
        "POST /a.txt HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
         5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
            .to_string()
            + &request("GET", "/b.txt", &[]),
    );
    assert_error(&conn.read_response(), 405);
    assert_eq!(conn.read_response().body, b"bravo bravo\n");
}

fn chunked_body_with_extensions_and_trailers_is_discarded(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(
        "POST /a.txt HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
         A;name=value\r\n0123456789\r\n0\r\nX-Trailer: yes\r\n\r\n"
            .to_string()
            + &request("GET", "/b.txt", &[]),
    );
    assert_error(&conn.read_response(), 405);
    assert_eq!(conn.read_response().body, b"bravo bravo\n");
}

fn large_request_body_is_discarded(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let body = "x".repeat(256 * 1024);
    conn.send_lossy(
        format!(
            "POST /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ) + &request("GET", "/b.txt", &[]),
    );
    assert_error(&conn.read_response(), 405);
    assert_eq!(conn.read_response().body, b"bravo bravo\n");
}

// --- malformed input and limits ----------------------------------------------------

fn assert_bad_request(v: Variant, raw: &str) {
    assert_refused(v, raw, 400);
}

fn assert_refused(v: Variant, raw: &str, status: u16) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(raw);
    let resp = conn.read_response();
    assert_error(&resp, status);
    assert!(resp.has_token("connection", "close"), "{resp:#?}");
    conn.assert_closed();
}

fn malformed_request_line_gets_400_and_close(v: Variant) {
    assert_bad_request(v, "GARBAGE\r\n\r\n");
}

fn header_line_without_colon_gets_400(v: Variant) {
    assert_bad_request(
        v,
        "GET /a.txt HTTP/1.1\r\nHost: test\r\nNo colon here\r\n\r\n",
    );
}

fn whitespace_before_header_colon_gets_400(v: Variant) {
    // RFC 9112 5.1: a server MUST reject this with 400.
    assert_bad_request(v, "GET /a.txt HTTP/1.1\r\nHost : test\r\n\r\n");
}

fn non_numeric_content_length_gets_400(v: Variant) {
    assert_bad_request(
        v,
        "POST /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: abc\r\n\r\n",
    );
}

fn conflicting_content_lengths_get_400(v: Variant) {
    assert_bad_request(
        v,
        "POST /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    );
}

fn broken_chunked_framing_closes_the_connection(v: Variant) {
    // As nginx: a chunk size that does not parse is found before the request is
    // answered, so it gets 400 and close, whatever the method; nothing after the broken
    // body is served.
    for method in ["POST", "GET"] {
        assert_bad_request(
            v,
            &(request(method, "/a.txt", &["Transfer-Encoding: chunked"])
                + "zz\r\nhello\r\n0\r\n\r\n"
                + &request("GET", "/b.txt", &[])),
        );
    }
}

fn get_with_chunked_body_is_answered_and_the_body_discarded(v: Variant) {
    // nginx discards the body of a GET and answers it; the next request still parses.
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(
        request("GET", "/a.txt", &["Transfer-Encoding: chunked"])
            + "5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nX-T: 1\r\n\r\n"
            + &request("GET", "/b.txt", &[]),
    );
    let first = conn.read_response();
    assert_eq!(first.status, 200, "{first:#?}");
    assert_eq!(first.body, b"alpha\n");
    assert_eq!(conn.read_response().body, b"bravo bravo\n");
}

fn large_chunked_body_of_a_get_is_discarded_as_it_arrives(v: Variant) {
    // 4 MiB in 64 KiB chunks, sent while the answer is read: nothing is buffered whole,
    // and the request after it is answered.
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let chunk = format!("10000\r\n{}\r\n", "x".repeat(0x10000));
    let body = chunk.repeat(64) + "0\r\n\r\n";
    let writer = conn.send_in_background(
        request("GET", "/a.txt", &["Transfer-Encoding: chunked"])
            + &body
            + &request("GET", "/b.txt", &[]),
    );
    assert_eq!(conn.read_response().body, b"alpha\n");
    assert_eq!(conn.read_response().body, b"bravo bravo\n");
    writer.join().unwrap();
}

fn garbage_after_the_last_chunk_is_the_next_request(v: Variant) {
    // After `0` and the empty trailer the body is over: what follows is parsed as the
    // next request, and garbage there is refused with 400 and close.
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(
        request("GET", "/a.txt", &["Transfer-Encoding: chunked"])
            + "5\r\nhello\r\n0\r\n\r\nzz\r\n\r\n",
    );
    assert_eq!(conn.read_response().body, b"alpha\n");
    let resp = conn.read_response();
    assert_error(&resp, 400);
    assert!(resp.has_token("connection", "close"), "{resp:#?}");
    conn.assert_closed();
}

fn unknown_transfer_coding_gets_501(v: Variant) {
    // RFC 9112 6.1: a coding the server does not understand is 501; the
    // body's length is unknown, so the connection closes.
    assert_refused(
        v,
        "POST /a.txt HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: gzip\r\n\r\nhello",
        501,
    );
}

fn target_over_8192_bytes_gets_414_and_close(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let target = format!("/a.txt?{}", "x".repeat(9000 - 7));
    assert_eq!(target.len(), 9000);
    conn.send_lossy(request("GET", &target, &[]));
    let resp = conn.read_response();
    assert_error(&resp, 414);
    assert!(resp.has_token("connection", "close"));
    conn.assert_closed();
}

fn target_of_8192_bytes_is_accepted(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let target = format!("/a.txt?{}", "x".repeat(8192 - 7));
    assert_eq!(target.len(), 8192);
    let resp = conn.roundtrip(request("GET", &target, &[]));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"alpha\n");
}

fn head_over_16_kib_gets_431_and_close(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let big = format!("X-Big: {}", "x".repeat(20 * 1024));
    conn.send_lossy(request("GET", "/a.txt", &[&big]));
    let resp = conn.read_response();
    assert_error(&resp, 431);
    assert!(resp.has_token("connection", "close"));
    conn.assert_closed();
}

fn fields(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("X-Field-{i}: {i}")).collect()
}

fn over_100_header_fields_get_431_and_close(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    // Host plus 100 more: 101 fields.
    let extra = fields(100);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    conn.send_lossy(request("GET", "/a.txt", &extra));
    let resp = conn.read_response();
    assert_error(&resp, 431);
    assert!(resp.has_token("connection", "close"));
    conn.assert_closed();
}

fn exactly_100_header_fields_are_accepted(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let extra = fields(99);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let resp = conn.roundtrip(request("GET", "/a.txt", &extra));
    assert_eq!(resp.status, 200);
}

fn not_found_has_error_body(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    assert_error(&conn.roundtrip(request("GET", "/missing", &[])), 404);
    // A 404 does not end the connection.
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
}

fn etag_and_last_modified_change_when_file_changes(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let before = server.get("/a.txt");
    // The open-file cache trusts a lookup for up to one second (like
    // lighttpd's stat cache); a change is seen after that.
    std::thread::sleep(Duration::from_millis(1100));
    let path = root.file("a.txt", "a different, longer body\n");
    set_mtime(&path, rfc_example_time() + Duration::from_secs(86_400));
    let after = server.get("/a.txt");
    assert_eq!(after.body, b"a different, longer body\n");
    assert_ne!(before.header("etag"), after.header("etag"));
    assert_eq!(
        after.header("last-modified"),
        Some(http_date(rfc_example_time() + Duration::from_secs(86_400)).as_str())
    );
}

// --- timeouts and aborted clients ---------------------------------------------------

/// A client dropped for a read timeout gets nothing, or a 408 before the close.
fn assert_dropped_quietly_or_408(conn: &mut Conn) {
    let (bytes, _) = conn.read_to_end();
    if !bytes.is_empty() {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.starts_with("HTTP/1.1 408 ") || text.starts_with("HTTP/1.0 408 "),
            "a timed-out client may only get a 408; got {text:?}"
        );
    }
}

fn silent_client_is_dropped_after_read_timeout(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .args(["--read-timeout", "1"])
        .start();
    let mut conn = server.connect();
    assert_dropped_quietly_or_408(&mut conn);
}

fn client_stalling_mid_request_is_dropped(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .args(["--read-timeout", "1"])
        .start();
    let mut conn = server.connect();
    conn.send("GET /a.txt HTTP/1.1\r\nHost: te");
    assert_dropped_quietly_or_408(&mut conn);
}

fn idle_keep_alive_connection_is_dropped(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .args(["--keepalive-timeout", "1", "--read-timeout", "30"])
        .start();
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    conn.assert_closed();
}

fn keep_alive_timeout_not_read_timeout_applies_between_requests(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .args(["--read-timeout", "1", "--keepalive-timeout", "30"])
        .start();
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    thread::sleep(Duration::from_millis(2500));
    assert_eq!(conn.roundtrip(request("GET", "/b.txt", &[])).status, 200);
}

fn client_closing_mid_response_does_not_hurt_server(v: Variant) {
    let root = site();
    write_pattern_file(&root.join("big.bin"), 32 << 20);
    let mut server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(request("GET", "/big.bin", &[]));
    assert_eq!(conn.read_head().status, 200);
    drop(conn);
    server.assert_survived("/a.txt");
}

// What a response is, through the harness's client: over HTTP/3 too.
matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    get_returns_file_contents,
    ok_response_carries_contract_headers,
    html_is_text_html_with_charset,
    unknown_type_is_octet_stream,
    non_text_type_has_no_charset,
    etag_and_last_modified_change_when_file_changes,
);

// HTTP/1.1's framing, versions, persistence and timeouts, on raw connections (HTTP/1.1
// over TCP) in every cell: no h3 cell, which would repeat the tls cell. HEAD, OPTIONS,
// 405 and 404 over HTTP/3 are in tests/http3.rs.
matrix!([h1, tls, h2c, h2_tls, uring] both_modes:
    head_has_get_headers_and_no_body,
    options_gets_204_with_allow,
    other_methods_get_405_with_allow,
    unknown_method_gets_405_with_allow,
    absolute_form_target_is_served,
    http_2_0_gets_505_and_close,
    http_1_2_is_answered_as_http_1_1,
    http_3_0_gets_505_and_close,
    http_0_9_gets_505_and_close,
    http_1_1_without_host_gets_400,
    duplicate_host_gets_400,
    invalid_host_gets_400,
    empty_host_is_served_as_no_host,
    fragment_in_the_target_gets_400,
    http_1_0_without_host_is_served,
    http_1_1_connection_is_persistent,
    http_1_1_connection_close_is_honoured,
    http_1_0_without_keep_alive_closes,
    connection_tokens_are_case_insensitive,
    http_1_0_keep_alive_is_honoured,
    pipelined_requests_are_answered_in_order,
    content_length_body_is_discarded,
    get_with_body_is_served_and_body_discarded,
    body_arriving_after_the_head_is_discarded,
    chunked_body_is_discarded,
    chunked_body_with_extensions_and_trailers_is_discarded,
    large_request_body_is_discarded,
    malformed_request_line_gets_400_and_close,
    header_line_without_colon_gets_400,
    whitespace_before_header_colon_gets_400,
    non_numeric_content_length_gets_400,
    conflicting_content_lengths_get_400,
    broken_chunked_framing_closes_the_connection,
    get_with_chunked_body_is_answered_and_the_body_discarded,
    large_chunked_body_of_a_get_is_discarded_as_it_arrives,
    garbage_after_the_last_chunk_is_the_next_request,
    unknown_transfer_coding_gets_501,
    target_over_8192_bytes_gets_414_and_close,
    target_of_8192_bytes_is_accepted,
    head_over_16_kib_gets_431_and_close,
    over_100_header_fields_get_431_and_close,
    exactly_100_header_fields_are_accepted,
    not_found_has_error_body,
    silent_client_is_dropped_after_read_timeout,
    client_stalling_mid_request_is_dropped,
    idle_keep_alive_connection_is_dropped,
    keep_alive_timeout_not_read_timeout_applies_between_requests,
    client_closing_mid_response_does_not_hurt_server,
);
