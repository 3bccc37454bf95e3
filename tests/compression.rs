//! Compression on the fly: files that qualify and have no precompressed sibling go out
//! in the client's preferred coding (zstd, br, gzip), compressed once and cached, with
//! their own ETag, `Vary: Accept-Encoding`, ranges and conditionals. Never for nothing:
//! a HEAD or a Range request gets a compressed variant only from the cache, and a file
//! over 32 KiB is compressed in the background (standalone) while its request gets the
//! file as it is. Every test runs in both modes; each body is decoded with the codec
//! crates and compared to the file.
#![cfg(feature = "compress")]

#[macro_use]
mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::*;

/// Minified-looking JavaScript of about 10 KB, which every coding shrinks.
fn script() -> Vec<u8> {
    let mut js = String::new();
    for i in 0..200 {
        js.push_str(&format!(
            "function f{i}(a,b){{return a*{i}+b.length||console.log(\"f{i}\",a,b)}}\n"
        ));
    }
    js.into_bytes()
}

/// Bytes that no coding makes smaller (a linear congruential generator's high bytes).
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

/// Random lowercase letters: text whose compressed form stays large (over half).
fn letters(len: usize) -> Vec<u8> {
    noise(len).iter().map(|b| b'a' + b % 26).collect()
}

fn js_site() -> Docroot {
    let root = Docroot::new();
    root.file("app.js", script());
    root
}

fn decode(coding: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .expect("gzip body decodes");
        }
        "br" => {
            brotli::Decompressor::new(body, 4096)
                .read_to_end(&mut out)
                .expect("br body decodes");
        }
        "zstd" => out = zstd::decode_all(body).expect("zstd body decodes"),
        other => panic!("unexpected coding {other}"),
    }
    out
}

fn get_encoded(server: &Server, path: &str, accept_encoding: &str) -> HResponse {
    server.request("GET", path, &[("accept-encoding", accept_encoding)])
}

fn varies_on_accept_encoding(resp: &HResponse) -> bool {
    resp.header_all("vary")
        .iter()
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("accept-encoding"))
}

/// A 200 in `coding` whose body decodes to `original`.
fn assert_compressed(resp: &HResponse, coding: &str, original: &[u8]) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-encoding"), Some(coding), "{resp:#?}");
    assert_eq!(
        resp.header("content-length"),
        Some(resp.body.len().to_string().as_str())
    );
    assert!(resp.body.len() < original.len(), "smaller than the file");
    assert!(
        decode(coding, &resp.body) == original,
        "decodes to the file"
    );
    assert!(varies_on_accept_encoding(resp), "{resp:#?}");
}

/// A 200 with the file as it is; `vary`: whether it says it varies by coding.
fn assert_as_is(resp: &HResponse, original: &[u8], vary: bool) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-encoding"), None, "{resp:#?}");
    assert!(resp.body == original, "the file as it is: {resp:#?}");
    assert_eq!(varies_on_accept_encoding(resp), vary, "{resp:#?}");
}

/// Whether a response says a cache must ask again before using it: the file as it is,
/// standing in for a compressed variant not made yet.
fn stands_in(resp: &HResponse) -> bool {
    resp.header_all("cache-control")
        .iter()
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("no-cache"))
}

/// GETs `path` in `coding` on fresh connections until it comes compressed (the
/// background threads are done with it; a minute at most); until then each response is
/// the file as it is.
fn compressed_when_ready(server: &Server, path: &str, coding: &str, original: &[u8]) -> HResponse {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let resp = get_encoded(server, path, coding);
        if resp.header("content-encoding").is_some() {
            assert_compressed(&resp, coding, original);
            assert!(!stands_in(&resp), "{resp:#?}");
            return resp;
        }
        assert_as_is(&resp, original, true);
        assert!(stands_in(&resp), "{resp:#?}");
        assert!(
            Instant::now() < deadline,
            "{path} not compressed in a minute"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn etag(resp: &HResponse) -> String {
    let etag = resp.header("etag").expect("ETag").to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong: {etag}"
    );
    etag
}

// --- choosing the coding -------------------------------------------------------------

fn each_coding_decodes_to_the_file(v: Variant) {
    let root = js_site();
    let server = Server::start(v, &root);
    for coding in ["br", "zstd", "gzip"] {
        let resp = get_encoded(&server, "/app.js", coding);
        assert_compressed(&resp, coding, &script());
        assert_eq!(
            resp.header("content-type"),
            Some("text/javascript; charset=utf-8"),
            "the file's own Content-Type"
        );
    }
}

fn preference_and_q_values_choose_the_coding(v: Variant) {
    let root = js_site();
    let server = Server::start(v, &root);
    for (accept, coding) in [
        ("gzip, deflate, br, zstd", "br"),
        ("gzip, zstd", "zstd"),
        ("br;q=0.5, gzip;q=0.9, zstd;q=0.1", "gzip"),
        ("gzip;q=0.2, zstd;q=0.3", "zstd"),
        ("*", "br"),
        ("br;q=0, *", "zstd"),
        ("x-gzip", "gzip"),
    ] {
        let resp = get_encoded(&server, "/app.js", accept);
        assert_eq!(
            resp.header("content-encoding"),
            Some(coding),
            "Accept-Encoding: {accept}"
        );
        assert_compressed(&resp, coding, &script());
    }
    for refused in ["gzip;q=0", "identity", "deflate"] {
        assert_as_is(&get_encoded(&server, "/app.js", refused), &script(), true);
    }
}

fn no_accept_encoding_gets_the_file_with_vary(v: Variant) {
    let root = js_site();
    let server = Server::start(v, &root);
    assert_as_is(&server.get("/app.js"), &script(), true);
}

// --- validators, ranges, HEAD --------------------------------------------------------

fn compressed_etags_are_distinct_and_survive_a_restart(v: Variant) {
    let root = js_site();
    let tags = |server: &Server| -> Vec<String> {
        ["identity", "br", "zstd", "gzip"]
            .iter()
            .map(|c| etag(&get_encoded(server, "/app.js", c)))
            .collect()
    };
    let first = tags(&Server::start(v, &root));
    for (i, a) in first.iter().enumerate() {
        for b in &first[i + 1..] {
            assert_ne!(a, b);
        }
    }
    let again = tags(&Server::start(v, &root));
    assert_eq!(first, again, "the same after a restart");
}

fn if_none_match_with_the_compressed_etag_gets_304(v: Variant) {
    let root = js_site();
    let server = Server::start(v, &root);
    let tag = etag(&get_encoded(&server, "/app.js", "br"));
    let resp = server.request(
        "GET",
        "/app.js",
        &[("accept-encoding", "br"), ("if-none-match", &tag)],
    );
    assert_eq!(resp.status, 304, "{resp:#?}");
    assert!(resp.body.is_empty());
    assert_eq!(resp.header("etag"), Some(tag.as_str()));
    assert!(varies_on_accept_encoding(&resp), "{resp:#?}");
    // The br variant's tag does not stand for the gzip one, nor the file as it is.
    let gzip = server.request(
        "GET",
        "/app.js",
        &[("accept-encoding", "gzip"), ("if-none-match", &tag)],
    );
    assert_compressed(&gzip, "gzip", &script());
    let plain = server.request("GET", "/app.js", &[("if-none-match", &tag)]);
    assert_as_is(&plain, &script(), true);
}

fn a_range_is_of_the_compressed_bytes(v: Variant) {
    let root = js_site();
    let server = Server::start(v, &root);
    // One connection: in inetd mode its process holds the cache the range is from.
    let mut client = server.client();
    let whole = client.request("GET", "/app.js", &[("accept-encoding", "zstd")]);
    assert_compressed(&whole, "zstd", &script());
    let tag = etag(&whole);
    let resp = client.request(
        "GET",
        "/app.js",
        &[
            ("accept-encoding", "zstd"),
            ("range", "bytes=10-99"),
            ("if-range", &tag),
        ],
    );
    assert_eq!(resp.status, 206, "{resp:#?}");
    assert_eq!(resp.header("content-encoding"), Some("zstd"));
    assert_eq!(
        resp.header("content-range"),
        Some(format!("bytes 10-99/{}", whole.body.len()).as_str())
    );
    assert!(resp.body == whole.body[10..100], "{resp:#?}");
    assert!(varies_on_accept_encoding(&resp));
}

fn head_reports_the_compressed_length(v: Variant) {
    let root = js_site();
    let server = Server::start(v, &root);
    // One connection: in inetd mode its process holds the cache.
    let mut client = server.client();
    let get = client.request("GET", "/app.js", &[("accept-encoding", "gzip")]);
    assert_compressed(&get, "gzip", &script());
    let head = client.request("HEAD", "/app.js", &[("accept-encoding", "gzip")]);
    assert_eq!(head.status, 200, "{head:#?}");
    assert!(head.body.is_empty());
    for field in ["content-length", "content-encoding", "etag", "vary"] {
        assert_eq!(head.header(field), get.header(field), "{field}");
    }
}

// --- never compressed for nothing ----------------------------------------------------

/// A HEAD sends nothing to compress: on a cold cache it describes the file as it is,
/// with the ETag a GET of the file as it is gets (another representation than the
/// compressed one, as Vary says, so a cache keeps them apart).
fn a_head_on_a_cold_cache_describes_the_file_as_it_is(v: Variant) {
    let root = js_site();
    let server = Server::start(v, &root);
    let mut client = server.client();
    let plain = client.request("GET", "/app.js", &[]);
    assert_as_is(&plain, &script(), true);
    let head = client.request("HEAD", "/app.js", &[("accept-encoding", "br")]);
    assert_eq!(head.status, 200, "{head:#?}");
    assert_eq!(head.header("content-encoding"), None, "{head:#?}");
    let len = script().len().to_string();
    assert_eq!(head.header("content-length"), Some(len.as_str()));
    assert_eq!(head.header("etag"), plain.header("etag"));
    assert!(varies_on_accept_encoding(&head), "{head:#?}");
    assert!(stands_in(&head), "{head:#?}");
    assert!(!stands_in(&plain), "{plain:#?}");
    // A GET compresses it; a HEAD then describes what a GET gets.
    let get = client.request("GET", "/app.js", &[("accept-encoding", "br")]);
    assert_compressed(&get, "br", &script());
    let head = client.request("HEAD", "/app.js", &[("accept-encoding", "br")]);
    for field in ["content-length", "content-encoding", "etag", "vary"] {
        assert_eq!(head.header(field), get.header(field), "{field}");
    }
}

/// A range of a variant not compressed yet is a range of the file as it is: compressing
/// the whole file for 11 bytes of it is what an attacker would ask for.
fn a_range_on_a_cold_cache_is_of_the_file_as_it_is(v: Variant) {
    let root = js_site();
    let server = Server::start(v, &root);
    let mut client = server.client();
    let range = [("accept-encoding", "br"), ("range", "bytes=0-10")];
    let part = client.request("GET", "/app.js", &range);
    assert_eq!(part.status, 206, "{part:#?}");
    assert_eq!(part.header("content-encoding"), None, "{part:#?}");
    let whole_range = format!("bytes 0-10/{}", script().len());
    assert_eq!(part.header("content-range"), Some(whole_range.as_str()));
    assert!(part.body == script()[..11], "{part:#?}");
    assert!(varies_on_accept_encoding(&part), "{part:#?}");
    assert!(stands_in(&part), "{part:#?}");
    // Once compressed, a range is of the compressed bytes.
    let get = client.request("GET", "/app.js", &[("accept-encoding", "br")]);
    assert_compressed(&get, "br", &script());
    let part = client.request("GET", "/app.js", &range);
    assert_eq!(part.status, 206, "{part:#?}");
    assert_eq!(part.header("content-encoding"), Some("br"), "{part:#?}");
    assert!(part.body == get.body[..11], "{part:#?}");
    assert!(!stands_in(&part), "{part:#?}");
}

/// Over 32 KiB, standalone: the first GET gets the file as it is (Vary, the file's own
/// ETag, and `no-cache` added to the site's Cache-Control, so that a cache asks again
/// rather than keep it for the site's lifetime) while the background threads compress
/// it, and later ones the compressed variant. In inetd mode, whose process serves one
/// connection, that connection's own request waits for it (up to 1 MiB).
fn a_large_file_goes_out_as_it_is_while_compressed_in_the_background(v: Variant) {
    let root = Docroot::new();
    let text = letters(300_000);
    root.file("letters.txt", &text);
    root.file("_headers", "/letters.txt\n  Cache-Control: max-age=3600\n");
    let server = Server::start(v, &root);
    let first = get_encoded(&server, "/letters.txt", "br");
    if v.mode == Mode::Inetd {
        assert_compressed(&first, "br", &text);
        assert_eq!(first.header("cache-control"), Some("max-age=3600"));
        return;
    }
    assert_as_is(&first, &text, true);
    assert_eq!(
        first.header("cache-control"),
        Some("max-age=3600, no-cache"),
        "{first:#?}"
    );
    let plain = server.get("/letters.txt");
    assert_eq!(etag(&first), etag(&plain));
    assert_eq!(plain.header("cache-control"), Some("max-age=3600"));
    let compressed = compressed_when_ready(&server, "/letters.txt", "br", &text);
    assert_ne!(etag(&compressed), etag(&plain));
    assert_eq!(compressed.header("cache-control"), Some("max-age=3600"));
}

/// inetd mode sends a file over 1 MiB as it is (without Vary): compressing it would cost
/// each connection's process about 0.1 s of CPU a MiB, for one request. Standalone
/// compresses it in the background.
fn over_a_mebibyte_inetd_sends_the_file_as_it_is(v: Variant) {
    let root = Docroot::new();
    let text = letters((1 << 20) + 1);
    root.file("big.txt", &text);
    let server = Server::start(v, &root);
    if v.mode == Mode::Inetd {
        let resp = get_encoded(&server, "/big.txt", "gzip");
        assert_as_is(&resp, &text, false);
        assert!(!stands_in(&resp), "{resp:#?}");
    } else {
        compressed_when_ready(&server, "/big.txt", "gzip", &text);
    }
}

fn a_large_compressed_body_arrives_whole(v: Variant) {
    let root = Docroot::new();
    let text = letters(300_000);
    root.file("letters.txt", &text);
    let server = Server::start(v, &root);
    for coding in ["br", "zstd", "gzip"] {
        // One connection: in inetd mode its process holds the cache the range is from.
        let mut client = server.client();
        let resp = match v.mode {
            Mode::Inetd => client.request("GET", "/letters.txt", &[("accept-encoding", coding)]),
            Mode::Standalone => compressed_when_ready(&server, "/letters.txt", coding, &text),
        };
        assert_compressed(&resp, coding, &text);
        assert!(resp.body.len() > 100_000, "{}", resp.body.len());
        let tail = client.request(
            "GET",
            "/letters.txt",
            &[("accept-encoding", coding), ("range", "bytes=-1000")],
        );
        assert_eq!(tail.status, 206, "{tail:#?}");
        assert!(tail.body == resp.body[resp.body.len() - 1000..]);
    }
}

// --- what is sent as it is -----------------------------------------------------------

fn small_and_large_files_are_sent_as_they_are(v: Variant) {
    let root = Docroot::new();
    let text = |n: usize| "a".repeat(n).into_bytes();
    root.file("255.txt", text(255));
    root.file("256.txt", text(256));
    root.file("4096.txt", text(4096));
    root.file("4097.txt", text(4097));
    let server = Server::builder(v, root.path())
        .args(["--compress-max", "4K"])
        .start();
    assert_as_is(&get_encoded(&server, "/255.txt", "gzip"), &text(255), false);
    assert_compressed(
        &get_encoded(&server, "/256.txt", "gzip"),
        "gzip",
        &text(256),
    );
    let at_limit = get_encoded(&server, "/4096.txt", "gzip");
    assert_compressed(&at_limit, "gzip", &text(4096));
    assert_as_is(
        &get_encoded(&server, "/4097.txt", "gzip"),
        &text(4097),
        false,
    );
}

fn types_that_do_not_compress_are_sent_as_they_are(v: Variant) {
    let root = Docroot::new();
    // Compressible bytes: only the type keeps them as they are.
    for name in ["x.png", "x.woff2", "x.woff", "x.bin"] {
        root.file(name, script());
    }
    let server = Server::start(v, &root);
    for name in ["/x.png", "/x.woff2", "/x.woff", "/x.bin"] {
        let resp = get_encoded(&server, name, "br, gzip, zstd");
        assert_as_is(&resp, &script(), false);
    }
}

fn other_compressible_types_are_compressed(v: Variant) {
    let root = Docroot::new();
    for name in ["x.css", "x.svg", "x.json", "x.html", "x.wasm"] {
        root.file(name, script());
    }
    let server = Server::start(v, &root);
    for name in ["/x.css", "/x.svg", "/x.json", "/x.html", "/x.wasm"] {
        assert_compressed(&get_encoded(&server, name, "br"), "br", &script());
    }
}

fn content_that_does_not_shrink_is_sent_as_it_is(v: Variant) {
    let root = Docroot::new();
    root.file("noise.txt", noise(5000));
    let server = Server::start(v, &root);
    for _ in 0..2 {
        // The second time from the cache's note that it did not pay.
        let resp = get_encoded(&server, "/noise.txt", "gzip");
        assert_as_is(&resp, &noise(5000), true);
    }
}

fn a_precompressed_sibling_wins(v: Variant) {
    let root = js_site();
    const GZIP: &[u8] = b"\x1f\x8bthe author's own gzip file";
    root.file("app.js.gz", GZIP);
    let server = Server::start(v, &root);
    // br is preferred, but only on the fly: the sibling is sent instead.
    let resp = get_encoded(&server, "/app.js", "br, gzip");
    assert_eq!(resp.header("content-encoding"), Some("gzip"), "{resp:#?}");
    assert!(resp.body == GZIP, "{resp:#?}");
    assert_as_is(&get_encoded(&server, "/app.js", "br"), &script(), true);
}

fn no_compress_sends_files_as_they_are(v: Variant) {
    let root = js_site();
    let server = Server::builder(v, root.path()).arg("--no-compress").start();
    assert_as_is(
        &get_encoded(&server, "/app.js", "br, gzip"),
        &script(),
        false,
    );
}

fn a_changed_file_is_compressed_again(v: Variant) {
    let root = js_site();
    let server = Server::start(v, &root);
    let before = get_encoded(&server, "/app.js", "br");
    assert_compressed(&before, "br", &script());
    let changed = [script().as_slice(), b"console.log('changed')\n"].concat();
    let path = root.file("app.js", &changed);
    set_mtime(&path, rfc_example_time() + Duration::from_secs(60));
    // The open-file cache trusts a lookup for a second.
    std::thread::sleep(Duration::from_millis(1100));
    let after = get_encoded(&server, "/app.js", "br");
    assert_compressed(&after, "br", &changed);
    assert_ne!(etag(&before), etag(&after));
}

#[test]
fn bad_flag_values_are_refused_at_start() {
    let root = Docroot::new();
    for args in [
        ["--compress-max", "4G"],
        ["--compress-max", "lots"],
        ["--compress-cache", "0"],
    ] {
        let out = std::process::Command::new(staticd_bin())
            .arg("--root")
            .arg(root.path())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(args[0]), "{args:?}: {stderr}");
    }
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    each_coding_decodes_to_the_file,
    preference_and_q_values_choose_the_coding,
    no_accept_encoding_gets_the_file_with_vary,
    compressed_etags_are_distinct_and_survive_a_restart,
    if_none_match_with_the_compressed_etag_gets_304,
    a_range_is_of_the_compressed_bytes,
    head_reports_the_compressed_length,
    a_head_on_a_cold_cache_describes_the_file_as_it_is,
    a_range_on_a_cold_cache_is_of_the_file_as_it_is,
    a_large_file_goes_out_as_it_is_while_compressed_in_the_background,
    over_a_mebibyte_inetd_sends_the_file_as_it_is,
    a_large_compressed_body_arrives_whole,
    small_and_large_files_are_sent_as_they_are,
    types_that_do_not_compress_are_sent_as_they_are,
    other_compressible_types_are_compressed,
    content_that_does_not_shrink_is_sent_as_it_is,
    a_precompressed_sibling_wins,
    no_compress_sends_files_as_they_are,
    a_changed_file_is_compressed_again,
);
