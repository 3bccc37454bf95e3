//! Error responses for people and for programs: a browser (whose Accept lists
//! text/html) gets a small HTML page, anything else the one-line text body, and
//! both say `Vary: Accept`. A request that could not be parsed gets the text.
//! Every test runs in both modes.

#[macro_use]
mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::*;

/// What Firefox sends for a page.
const BROWSER: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root.dir("dir");
    root
}

fn accept_html(server: &Server, method: &str, path: &str) -> HResponse {
    server.request(method, path, &[("accept", BROWSER)])
}

fn varies_with_accept(resp: &HResponse) -> bool {
    resp.header_all("vary")
        .iter()
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("accept"))
}

/// The HTML form: a whole page naming the status, with its length and `Vary`.
fn assert_html_error(resp: &HResponse, code: u16) {
    assert_eq!(resp.status, code, "{resp:#?}");
    assert_eq!(
        resp.header("content-type"),
        Some("text/html; charset=utf-8"),
        "{resp:#?}"
    );
    assert_eq!(
        resp.header("content-length"),
        Some(resp.body.len().to_string().as_str())
    );
    assert!(varies_with_accept(resp), "Vary: Accept in {resp:#?}");
    let page = resp.body_str();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(
        page.contains(&format!("<title>{code} {}</title>", resp.reason)),
        "{page}"
    );
    assert!(page.contains("<meta name=\"viewport\""), "{page}");
    assert!(page.contains("<style>"), "{page}");
    assert!(resp.header("date").is_some());
    assert_eq!(resp.header("server"), Some("staticd"));
}

/// The text form, which depends on Accept too.
fn assert_text_error(resp: &HResponse, code: u16) {
    assert_error_h(resp, code);
    assert!(varies_with_accept(resp), "Vary: Accept in {resp:#?}");
}

fn a_browser_gets_a_404_page(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = accept_html(&server, "GET", "/missing");
    assert_html_error(&resp, 404);
    assert!(resp.body_str().contains("<a href=\"/\">"), "a way back");
}

fn the_page_echoes_nothing_of_the_request(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = accept_html(&server, "GET", "/%3Cscript%3Ealert(1)%3C/script%3E");
    assert_html_error(&resp, 404);
    let page = resp.body_str();
    assert!(!page.contains("script"), "{page}");
    assert!(!page.contains("alert"), "{page}");
}

fn other_clients_get_the_text_line(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_text_error(&server.get("/missing"), 404);
    for accept in [
        "*/*",
        "text/*",
        "text/plain",
        "application/json",
        "text/html;q=0, */*",
    ] {
        let resp = server.request("GET", "/missing", &[("accept", accept)]);
        assert_text_error(&resp, 404);
    }
}

fn head_of_an_error_page_has_its_length_and_no_body(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let get = accept_html(&server, "GET", "/missing");
    let mut conn = server.connect();
    let accept = format!("Accept: {BROWSER}");
    let head = conn.roundtrip(request("HEAD", "/missing", &[&accept]));
    assert_eq!(head.status, 404, "{head:#?}");
    assert!(head.body.is_empty());
    assert_eq!(head.content_length(), Some(get.body.len() as u64));
    assert_eq!(head.header("content-type"), get.header("content-type"));
    assert!(head.has_token("vary", "accept"), "{head:#?}");
    // Nothing followed the head: the next response on the connection is intact.
    let next = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(next.status, 200, "{next:#?}");
    assert_eq!(next.body, b"alpha\n");
    // The text form's HEAD, too.
    let head = conn.roundtrip(request("HEAD", "/missing", &[]));
    assert_eq!(head.content_length(), Some("404 Not Found\n".len() as u64));
    assert!(head.body.is_empty());
}

/// Extra request header fields.
type Headers<'a> = &'a [(&'a str, &'a str)];

fn every_error_status_has_both_forms(v: Variant) {
    let root = site();
    root.fifo("pipe");
    let server = Server::start(v, &root);
    let cases: [(&str, &str, Headers, u16); 6] = [
        ("GET", "/missing", &[], 404),
        ("GET", "/%zz", &[], 400),
        ("GET", "/pipe", &[], 403),
        ("DELETE", "/a.txt", &[], 405),
        ("GET", "/a.txt", &[("if-match", "\"other\"")], 412),
        ("GET", "/a.txt", &[("range", "bytes=999-")], 416),
    ];
    for (method, path, extra, code) in cases {
        let mut headers = extra.to_vec();
        headers.push(("accept", BROWSER));
        assert_html_error(&server.request(method, path, &headers), code);
        headers.pop();
        headers.push(("accept", "*/*"));
        assert_text_error(&server.request(method, path, &headers), code);
    }
}

fn error_specific_headers_stay(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = accept_html(&server, "DELETE", "/a.txt");
    assert_html_error(&resp, 405);
    assert_eq!(resp.header("allow"), Some("GET, HEAD, OPTIONS"));
    let resp = server.request(
        "GET",
        "/a.txt",
        &[("accept", BROWSER), ("range", "bytes=999-")],
    );
    assert_html_error(&resp, 416);
    assert_eq!(resp.header("content-range"), Some("bytes */6"));
}

fn forbidden_file_gets_a_page(v: Variant) {
    let root = site();
    let locked = root.file("locked.txt", "locked\n");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    // As root the server could read anything; run it as nobody.
    let server = Server::builder(v, root.path()).unprivileged().start();
    assert_html_error(&accept_html(&server, "GET", "/locked.txt"), 403);
}

fn a_failing_script_gets_a_page(v: Variant) {
    let root = site();
    let script = root.file("bad.cgi", "#!/bin/sh\necho no header block\n");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::builder(v, root.path()).arg("--cgi").start();
    let resp = accept_html(&server, "GET", "/bad.cgi");
    assert_html_error(&resp, 502);
    assert!(!resp.body_str().contains("no header block"));
    assert_text_error(&server.get("/bad.cgi"), 502);
}

fn a_request_that_does_not_parse_gets_text_without_vary(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let accept = format!("Accept: {BROWSER}");
    for raw in [
        format!("GET / HTTP/1.1\r\nHost: test\r\n{accept}\r\nno colon here\r\n\r\n"),
        format!("GET / HTTP/3.0\r\nHost: test\r\n{accept}\r\n\r\n"),
    ] {
        let mut conn = server.connect();
        let resp = conn.roundtrip(raw.as_bytes());
        assert_error(&resp, resp.status);
        assert!((400..600).contains(&resp.status), "{resp:#?}");
        assert_eq!(resp.header_count("vary"), 0, "{resp:#?}");
    }
}

fn successes_and_redirects_do_not_change(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = accept_html(&server, "GET", "/a.txt");
    assert_eq!(resp.status, 200);
    assert!(!varies_with_accept(&resp), "{resp:#?}");
    let resp = accept_html(&server, "GET", "/dir");
    assert_eq!(resp.status, 301, "{resp:#?}");
    assert_eq!(resp.header("location"), Some("/dir/"));
    assert_eq!(resp.body_str(), "301 Moved Permanently\n");
    assert!(!varies_with_accept(&resp), "{resp:#?}");
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    a_browser_gets_a_404_page,
    the_page_echoes_nothing_of_the_request,
    other_clients_get_the_text_line,
    head_of_an_error_page_has_its_length_and_no_body,
    every_error_status_has_both_forms,
    error_specific_headers_stay,
    forbidden_file_gets_a_page,
    a_failing_script_gets_a_page,
    a_request_that_does_not_parse_gets_text_without_vary,
    successes_and_redirects_do_not_change,
);
