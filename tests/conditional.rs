//! Conditional requests (RFC 9110 13), in both modes. The file's mtime is the RFC's
//! example date, Sun, 06 Nov 1994 08:49:37 GMT, so the three date formats of the RFC
//! examples name exactly the Last-Modified time.

#[macro_use]
mod common;

use common::*;

const BODY: &str = "conditional body\n";
const IMF_FIXDATE: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const RFC850: &str = "Sunday, 06-Nov-94 08:49:37 GMT";
const ASCTIME: &str = "Sun Nov  6 08:49:37 1994";
const DAY_BEFORE_IMF: &str = "Sat, 05 Nov 1994 08:49:37 GMT";
const DAY_BEFORE_RFC850: &str = "Saturday, 05-Nov-94 08:49:37 GMT";
const DAY_BEFORE_ASCTIME: &str = "Sat Nov  5 08:49:37 1994";

fn start(v: Variant) -> (Docroot, Server, String) {
    let root = Docroot::new();
    root.file("c.txt", BODY);
    let server = Server::start(v, &root);
    let first = server.get("/c.txt");
    assert_eq!(
        first.header("last-modified"),
        Some(IMF_FIXDATE),
        "test setup: mtime"
    );
    let etag = first.header("etag").expect("ETag").to_string();
    (root, server, etag)
}

fn get_with(server: &Server, headers: &[(&str, &str)]) -> HResponse {
    server.request("GET", "/c.txt", headers)
}

fn assert_full(resp: &HResponse) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), BODY);
}

/// Sends the conditional GET over raw TCP and checks the 304 exactly: no body bytes (a
/// pipelined request follows), validators present.
fn assert_not_modified(server: &Server, etag: &str, headers: &[&str]) {
    let mut conn = server.connect();
    conn.send(request("GET", "/c.txt", headers) + &request("GET", "/c.txt", &[]));
    let resp = conn.read_response_to("HEAD");
    assert_eq!(resp.status, 304, "{headers:?} -> {resp:#?}");
    assert_eq!(resp.header("etag"), Some(etag));
    assert_eq!(resp.header("last-modified"), Some(IMF_FIXDATE));
    assert_common_headers(&resp);
    let next = conn.read_response();
    assert_eq!(next.status, 200, "a 304 must not carry a body");
    assert_eq!(next.body_str(), BODY);
}

fn if_match_other_etag_gets_412(v: Variant) {
    let (_root, server, _) = start(v);
    assert_error_h(&get_with(&server, &[("if-match", "\"other\"")]), 412);
}

fn if_match_current_etag_gets_200(v: Variant) {
    let (_root, server, etag) = start(v);
    assert_full(&get_with(&server, &[("if-match", &etag)]));
}

fn if_match_star_gets_200(v: Variant) {
    let (_root, server, _) = start(v);
    assert_full(&get_with(&server, &[("if-match", "*")]));
}

fn if_match_uses_strong_comparison(v: Variant) {
    let (_root, server, etag) = start(v);
    let weak = format!("W/{etag}");
    assert_error_h(&get_with(&server, &[("if-match", &weak)]), 412);
}

fn if_unmodified_since_before_mtime_gets_412(v: Variant) {
    let (_root, server, _) = start(v);
    let resp = get_with(&server, &[("if-unmodified-since", DAY_BEFORE_IMF)]);
    assert_error_h(&resp, 412);
}

fn if_unmodified_since_at_mtime_gets_200(v: Variant) {
    let (_root, server, _) = start(v);
    assert_full(&get_with(&server, &[("if-unmodified-since", IMF_FIXDATE)]));
}

fn if_match_overrides_if_unmodified_since(v: Variant) {
    // RFC 9110 13.2.2 step 2: If-Unmodified-Since is only evaluated without If-Match.
    let (_root, server, etag) = start(v);
    let resp = get_with(
        &server,
        &[("if-match", &etag), ("if-unmodified-since", DAY_BEFORE_IMF)],
    );
    assert_full(&resp);
}

fn if_match_failure_wins_over_if_none_match(v: Variant) {
    let (_root, server, etag) = start(v);
    let resp = get_with(
        &server,
        &[("if-match", "\"other\""), ("if-none-match", &etag)],
    );
    assert_error_h(&resp, 412);
}

fn if_none_match_current_etag_gets_304(v: Variant) {
    let (_root, server, etag) = start(v);
    assert_not_modified(&server, &etag, &[&format!("If-None-Match: {etag}")]);
}

fn if_none_match_uses_weak_comparison(v: Variant) {
    let (_root, server, etag) = start(v);
    assert_not_modified(&server, &etag, &[&format!("If-None-Match: W/{etag}")]);
}

fn if_none_match_star_gets_304(v: Variant) {
    let (_root, server, etag) = start(v);
    assert_not_modified(&server, &etag, &["If-None-Match: *"]);
}

fn if_none_match_list_containing_etag_gets_304(v: Variant) {
    let (_root, server, etag) = start(v);
    assert_not_modified(
        &server,
        &etag,
        &[&format!("If-None-Match: \"x\", {etag}, \"y\"")],
    );
}

fn if_none_match_other_etag_gets_200(v: Variant) {
    let (_root, server, _) = start(v);
    assert_full(&get_with(&server, &[("if-none-match", "\"other\"")]));
}

fn head_if_none_match_gets_304(v: Variant) {
    let (_root, server, etag) = start(v);
    let resp = server.request("HEAD", "/c.txt", &[("if-none-match", &etag)]);
    assert_eq!(resp.status, 304);
    assert!(resp.body.is_empty());
}

fn if_none_match_wins_over_range(v: Variant) {
    let (_root, server, etag) = start(v);
    assert_not_modified(
        &server,
        &etag,
        &[&format!("If-None-Match: {etag}"), "Range: bytes=0-3"],
    );
}

fn if_modified_since_imf_fixdate_gets_304(v: Variant) {
    let (_root, server, etag) = start(v);
    assert_not_modified(
        &server,
        &etag,
        &[&format!("If-Modified-Since: {IMF_FIXDATE}")],
    );
}

fn if_modified_since_rfc850_date_gets_304(v: Variant) {
    // A two-digit year 94 is 1994 (RFC 9110 5.6.7), not 2094 and not garbage.
    let (_root, server, etag) = start(v);
    assert_not_modified(&server, &etag, &[&format!("If-Modified-Since: {RFC850}")]);
}

fn if_modified_since_asctime_date_gets_304(v: Variant) {
    let (_root, server, etag) = start(v);
    assert_not_modified(&server, &etag, &[&format!("If-Modified-Since: {ASCTIME}")]);
}

fn if_modified_since_before_mtime_gets_200_in_every_format(v: Variant) {
    // Together with the 304 tests this pins the parse: a 94 read as 2094 would give 304.
    let (_root, server, _) = start(v);
    for date in [DAY_BEFORE_IMF, DAY_BEFORE_RFC850, DAY_BEFORE_ASCTIME] {
        let resp = get_with(&server, &[("if-modified-since", date)]);
        assert_eq!(resp.status, 200, "If-Modified-Since: {date}");
        assert_eq!(resp.body_str(), BODY);
    }
}

fn garbage_if_modified_since_is_ignored(v: Variant) {
    let (_root, server, _) = start(v);
    assert_full(&get_with(
        &server,
        &[("if-modified-since", "yesterday-ish")],
    ));
}

fn if_none_match_wins_over_if_modified_since(v: Variant) {
    // RFC 9110 13.2.2 step 4: If-Modified-Since is only evaluated without If-None-Match.
    let (_root, server, _) = start(v);
    let resp = get_with(
        &server,
        &[
            ("if-none-match", "\"other\""),
            ("if-modified-since", IMF_FIXDATE),
        ],
    );
    assert_full(&resp);
}

fn matching_if_none_match_gives_304_despite_old_if_modified_since(v: Variant) {
    let (_root, server, etag) = start(v);
    assert_not_modified(
        &server,
        &etag,
        &[
            &format!("If-None-Match: {etag}"),
            &format!("If-Modified-Since: {DAY_BEFORE_IMF}"),
        ],
    );
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    if_match_other_etag_gets_412,
    if_match_current_etag_gets_200,
    if_match_star_gets_200,
    if_match_uses_strong_comparison,
    if_unmodified_since_before_mtime_gets_412,
    if_unmodified_since_at_mtime_gets_200,
    if_match_overrides_if_unmodified_since,
    if_match_failure_wins_over_if_none_match,
    if_none_match_current_etag_gets_304,
    if_none_match_uses_weak_comparison,
    if_none_match_star_gets_304,
    if_none_match_list_containing_etag_gets_304,
    if_none_match_other_etag_gets_200,
    head_if_none_match_gets_304,
    if_none_match_wins_over_range,
    if_modified_since_imf_fixdate_gets_304,
    if_modified_since_rfc850_date_gets_304,
    if_modified_since_asctime_date_gets_304,
    if_modified_since_before_mtime_gets_200_in_every_format,
    garbage_if_modified_since_is_ignored,
    if_none_match_wins_over_if_modified_since,
    matching_if_none_match_gives_304_despite_old_if_modified_since,
);
