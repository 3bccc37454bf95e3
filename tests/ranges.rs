//! Range requests (RFC 9110 14) and If-Range, in both modes.

#[macro_use]
mod common;

use common::*;

const LEN: usize = 1000;

/// A docroot with `r.txt`: 1000 bytes where every offset is distinguishable.
fn site() -> (Docroot, Vec<u8>) {
    let root = Docroot::new();
    let content = pattern(LEN);
    root.file("r.txt", &content);
    (root, content)
}

fn range(server: &Server, spec: &str) -> HResponse {
    server.request("GET", "/r.txt", &[("range", spec)])
}

fn assert_single_range(resp: &HResponse, content: &[u8], first: usize, last: usize) {
    assert_eq!(resp.status, 206, "{resp:#?}");
    assert_eq!(
        resp.header("content-range"),
        Some(format!("bytes {first}-{last}/{LEN}").as_str())
    );
    assert_eq!(
        resp.header("content-length"),
        Some((last - first + 1).to_string().as_str())
    );
    assert_eq!(
        resp.header("content-type").map(str::to_ascii_lowercase),
        Some("text/plain; charset=utf-8".into())
    );
    assert!(
        resp.body == content[first..=last],
        "wrong bytes for {first}-{last}"
    );
}

fn assert_whole_file(resp: &HResponse, content: &[u8]) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-range"), None);
    assert!(resp.body == content, "expected the whole file");
}

/// Checks a multipart/byteranges response part by part against `expected` (first, last).
fn assert_multipart(resp: &HResponse, content: &[u8], expected: &[(usize, usize)]) {
    assert_eq!(resp.status, 206, "{resp:#?}");
    assert_eq!(
        resp.header("content-range"),
        None,
        "Content-Range belongs in the parts"
    );
    assert_eq!(
        resp.header("content-length"),
        Some(resp.body.len().to_string().as_str())
    );
    let boundary = boundary_of(resp.header("content-type").expect("Content-Type"));
    let parts = parse_multipart(&resp.body, &boundary);
    assert_eq!(parts.len(), expected.len(), "number of parts");
    for (part, &(first, last)) in parts.iter().zip(expected) {
        assert_eq!(
            part.header("content-range"),
            Some(format!("bytes {first}-{last}/{LEN}").as_str())
        );
        assert_eq!(
            part.header("content-type").map(str::to_ascii_lowercase),
            Some("text/plain; charset=utf-8".into())
        );
        assert!(
            part.body == content[first..=last],
            "wrong bytes in part {first}-{last}"
        );
    }
}

fn closed_range_gets_206(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_single_range(&range(&server, "bytes=10-19"), &content, 10, 19);
}

fn open_ended_range_gets_206(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_single_range(&range(&server, "bytes=990-"), &content, 990, 999);
}

fn suffix_range_gets_206(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_single_range(&range(&server, "bytes=-10"), &content, 990, 999);
}

fn range_end_past_end_of_file_is_clamped(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_single_range(&range(&server, "bytes=995-5000"), &content, 995, 999);
}

fn suffix_longer_than_file_selects_whole_file(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_single_range(&range(&server, "bytes=-5000"), &content, 0, 999);
}

fn several_ranges_get_multipart_byteranges(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    let resp = range(&server, "bytes=0-9,20-29,-5");
    assert_multipart(&resp, &content, &[(0, 9), (20, 29), (995, 999)]);
}

fn multipart_is_exact_over_raw_tcp(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip(request("GET", "/r.txt", &["Range: bytes=1-2,500-509"]));
    assert_eq!(resp.status, 206);
    assert_eq!(resp.content_length(), Some(resp.body.len() as u64));
    let boundary = boundary_of(resp.header("content-type").unwrap());
    let parts = parse_multipart(&resp.body, &boundary);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].body, &content[1..=2]);
    assert_eq!(parts[1].body, &content[500..=509]);
    // Nothing after the closing delimiter but the next response.
    assert_eq!(conn.roundtrip(request("GET", "/r.txt", &[])).status, 200);
}

fn overlapping_ranges_are_coalesced(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_single_range(&range(&server, "bytes=0-9,5-14"), &content, 0, 14);
}

fn adjacent_ranges_are_coalesced(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_single_range(&range(&server, "bytes=0-9,10-19"), &content, 0, 19);
}

fn out_of_order_overlapping_ranges_are_coalesced(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_single_range(&range(&server, "bytes=10-19,0-12"), &content, 0, 19);
}

fn disjoint_ranges(n: usize) -> (String, Vec<(usize, usize)>) {
    let spans: Vec<(usize, usize)> = (0..n).map(|i| (i * 10, i * 10 + 1)).collect();
    let spec = spans
        .iter()
        .map(|(a, b)| format!("{a}-{b}"))
        .collect::<Vec<_>>()
        .join(",");
    (format!("bytes={spec}"), spans)
}

fn sixteen_ranges_get_multipart(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    let (spec, spans) = disjoint_ranges(16);
    assert_multipart(&range(&server, &spec), &content, &spans);
}

fn more_than_sixteen_ranges_get_whole_file(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    let (spec, _) = disjoint_ranges(17);
    assert_whole_file(&range(&server, &spec), &content);
}

fn unsatisfiable_range_gets_416(v: Variant) {
    let (root, _) = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    for spec in ["bytes=1000-1005", "bytes=5000-", "bytes=1000-1005,2000-"] {
        let resp = conn.roundtrip(request("GET", "/r.txt", &[&format!("Range: {spec}")]));
        assert_error(&resp, 416);
        assert_eq!(
            resp.header("content-range"),
            Some(format!("bytes */{LEN}").as_str()),
            "{spec}"
        );
    }
}

fn unsatisfiable_ranges_among_satisfiable_are_dropped(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_single_range(&range(&server, "bytes=0-4,2000-3000"), &content, 0, 4);
}

fn malformed_range_is_ignored(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    for spec in [
        "bytes=abc",
        "bytes=5-2",
        "bytes=",
        "bytes=-",
        "bytes 0-5",
        "bytes=0x-5",
    ] {
        let resp = range(&server, spec);
        assert_eq!(resp.status, 200, "Range: {spec}");
        assert_whole_file(&resp, &content);
    }
}

fn unknown_range_unit_is_ignored(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    assert_whole_file(&range(&server, "items=0-5"), &content);
}

fn current_etag(server: &Server) -> String {
    server
        .get("/r.txt")
        .header("etag")
        .expect("ETag")
        .to_string()
}

fn if_range_with_current_etag_gets_206(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    let etag = current_etag(&server);
    let resp = server.request(
        "GET",
        "/r.txt",
        &[("range", "bytes=0-9"), ("if-range", &etag)],
    );
    assert_single_range(&resp, &content, 0, 9);
}

fn if_range_with_other_etag_gets_whole_file(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    let resp = server.request(
        "GET",
        "/r.txt",
        &[("range", "bytes=0-9"), ("if-range", "\"not-the-etag\"")],
    );
    assert_whole_file(&resp, &content);
}

fn if_range_with_weak_etag_gets_whole_file(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    let weak = format!("W/{}", current_etag(&server));
    let resp = server.request(
        "GET",
        "/r.txt",
        &[("range", "bytes=0-9"), ("if-range", &weak)],
    );
    assert_whole_file(&resp, &content);
}

fn if_range_with_last_modified_date_gets_206(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    let date = http_date(rfc_example_time());
    let resp = server.request(
        "GET",
        "/r.txt",
        &[("range", "bytes=0-9"), ("if-range", &date)],
    );
    assert_single_range(&resp, &content, 0, 9);
}

fn if_range_with_other_date_gets_whole_file(v: Variant) {
    let (root, content) = site();
    let server = Server::start(v, &root);
    let resp = server.request(
        "GET",
        "/r.txt",
        &[
            ("range", "bytes=0-9"),
            ("if-range", "Sat, 05 Nov 1994 08:49:37 GMT"),
        ],
    );
    assert_whole_file(&resp, &content);
}

/// With `--no-sendfile` a file too big to be held in memory is copied out block by block;
/// ranges and multipart parts that start and end inside blocks still get exactly their bytes.
fn ranges_of_a_large_file_with_no_sendfile_are_exact(v: Variant) {
    const BIG: usize = 300_000;
    let root = Docroot::new();
    let content = pattern(BIG);
    root.file("big.bin", &content);
    let server = Server::builder(v, root.path()).arg("--no-sendfile").start();
    let resp = server.request("GET", "/big.bin", &[("range", "bytes=70000-200123")]);
    assert_eq!(resp.status, 206, "{resp:#?}");
    assert!(resp.body == content[70_000..=200_123], "wrong bytes");
    let resp = server.request("GET", "/big.bin", &[("range", "bytes=5-9,131000-131099")]);
    assert_eq!(resp.status, 206, "{resp:#?}");
    let boundary = boundary_of(resp.header("content-type").expect("Content-Type"));
    let parts = parse_multipart(&resp.body, &boundary);
    assert_eq!(parts.len(), 2);
    assert!(parts[0].body == content[5..=9]);
    assert!(parts[1].body == content[131_000..=131_099]);
    let resp = server.request("GET", "/big.bin", &[]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert!(resp.body == content, "the whole file");
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    ranges_of_a_large_file_with_no_sendfile_are_exact,
    closed_range_gets_206,
    open_ended_range_gets_206,
    suffix_range_gets_206,
    range_end_past_end_of_file_is_clamped,
    suffix_longer_than_file_selects_whole_file,
    several_ranges_get_multipart_byteranges,
    multipart_is_exact_over_raw_tcp,
    overlapping_ranges_are_coalesced,
    adjacent_ranges_are_coalesced,
    out_of_order_overlapping_ranges_are_coalesced,
    sixteen_ranges_get_multipart,
    more_than_sixteen_ranges_get_whole_file,
    unsatisfiable_range_gets_416,
    unsatisfiable_ranges_among_satisfiable_are_dropped,
    malformed_range_is_ignored,
    unknown_range_unit_is_ignored,
    if_range_with_current_etag_gets_206,
    if_range_with_other_etag_gets_whole_file,
    if_range_with_weak_etag_gets_whole_file,
    if_range_with_last_modified_date_gets_206,
    if_range_with_other_date_gets_whole_file,
);
