//! A site's own error pages: `404.html` (and `403.html`, `405.html`, ...) in the root of
//! a site is served, with its status, for every such error of that site, to every
//! client; ranges and conditionals do not apply to it. Every test runs in both modes.

#[macro_use]
mod common;

use std::time::{Duration, Instant, SystemTime};

use common::*;

const PAGE_404: &str = "<!DOCTYPE html>\n<title>Lost</title>\n<p>Our own 404 page.</p>\n";
const PAGE_403: &str = "<!DOCTYPE html>\n<title>No</title>\n<p>Our own 403 page.</p>\n";
const PAGE_405: &str = "<!DOCTYPE html>\n<title>Nope</title>\n<p>Our own 405 page.</p>\n";

/// What Firefox sends for a page.
const BROWSER: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("404.html", PAGE_404);
    root.file("403.html", PAGE_403);
    root.file("405.html", PAGE_405);
    root.file("a.txt", "alpha\n");
    root.file("sub/b.txt", "beta\n");
    root
}

/// The site's page for `status`: that status, the page's bytes and length, text/html.
fn assert_site_page(resp: &HResponse, status: u16, page: &str) {
    assert_eq!(resp.status, status, "{resp:#?}");
    assert_eq!(resp.body_str(), page, "{resp:#?}");
    assert_eq!(
        resp.header("content-length"),
        Some(page.len().to_string().as_str()),
        "{resp:#?}"
    );
    let content_type = resp.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("text/html"), "{resp:#?}");
    assert!(resp.header("content-range").is_none(), "{resp:#?}");
}

fn a_404_gets_the_sites_page_whatever_the_client(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for target in [
        "/missing",
        "/sub/missing.txt",
        "/no/such/dir/",
        "/missing?q=1",
    ] {
        for accept in [None, Some(BROWSER), Some("*/*"), Some("text/plain")] {
            let headers: Vec<(&str, &str)> = accept.map(|a| ("accept", a)).into_iter().collect();
            let resp = server.request("GET", target, &headers);
            assert_site_page(&resp, 404, PAGE_404);
        }
    }
}

fn head_of_a_404_has_the_pages_headers_and_no_body(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.request("HEAD", "/missing", &[]);
    assert_eq!(resp.status, 404, "{resp:#?}");
    assert!(resp.body.is_empty(), "{resp:#?}");
    assert_eq!(
        resp.header("content-length"),
        Some(PAGE_404.len().to_string().as_str()),
        "{resp:#?}"
    );
    assert!(resp
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/html"));
    // Over HTTP/1.1 nothing follows the head on the connection.
    let mut conn = server.connect();
    let head = conn.roundtrip(request("HEAD", "/missing", &[]));
    assert_eq!(head.status, 404, "{head:#?}");
    let next = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(next.body, b"alpha\n", "{next:#?}");
}

fn ranges_and_conditionals_do_not_apply_to_the_page(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    // The page's own validators, as served at its own URL.
    let own = server.get("/404.html");
    let etag = own.header("etag").map(str::to_string);
    let future = http_date(SystemTime::now() + Duration::from_secs(86_400));
    let mut cases = vec![
        vec![("range", "bytes=0-3")],
        vec![("range", "bytes=5-")],
        vec![("if-modified-since", future.as_str())],
        vec![("if-none-match", "*")],
        vec![("if-range", future.as_str()), ("range", "bytes=0-3")],
    ];
    if let Some(etag) = etag.as_deref() {
        cases.push(vec![("if-none-match", etag)]);
        cases.push(vec![("if-range", etag), ("range", "bytes=0-3")]);
    }
    for headers in cases {
        let resp = server.request("GET", "/missing", &headers);
        assert_site_page(&resp, 404, PAGE_404);
    }
}

fn a_403_gets_the_sites_403_page(v: Variant) {
    let root = site();
    root.fifo("pipe");
    let server = Server::start(v, &root);
    assert_site_page(&server.get("/pipe"), 403, PAGE_403);
}

fn a_405_gets_the_sites_405_page(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.exchange(
        "POST /a.txt HTTP/1.1\r\nHost: test\r\nContent-Type: text/plain\r\n\
         Content-Length: 3\r\n\r\nx=1",
    );
    assert_eq!(resp.status, 405, "{resp:#?}");
    assert_eq!(resp.body_str(), PAGE_405, "{resp:#?}");
    assert_eq!(resp.content_length(), Some(PAGE_405.len() as u64));
    assert!(
        resp.header("allow").is_some(),
        "405 without Allow: {resp:#?}"
    );
    let resp = server.request("DELETE", "/a.txt", &[]);
    assert_site_page(&resp, 405, PAGE_405);
}

fn statuses_without_a_page_keep_the_built_in_one(v: Variant) {
    let root = Docroot::new();
    root.file("404.html", PAGE_404);
    root.file("a.txt", "alpha\n");
    root.fifo("pipe");
    let server = Server::start(v, &root);
    // No 403.html here: the built-in text.
    assert_error_h(&server.get("/pipe"), 403);
    assert_error_h(
        &server.request("GET", "/a.txt", &[("range", "bytes=99-")]),
        416,
    );
    let resp = server.get("/a.txt");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "alpha\n");
}

fn a_site_without_404_html_keeps_the_built_in_page(v: Variant) {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    // Not in the site's root: the error page of sub/ only (the nearest
    // 404.html, tests/site_routing.rs), not of the root.
    root.file("sub/404.html", PAGE_404);
    let server = Server::start(v, &root);
    assert_error_h(&server.get("/missing"), 404);
    assert_error_h(&server.get("/other/missing"), 404);
    let resp = server.request("GET", "/missing", &[("accept", BROWSER)]);
    assert_eq!(resp.status, 404, "{resp:#?}");
    assert!(resp.body_str().starts_with("<!DOCTYPE html>"), "{resp:#?}");
    assert!(!resp.body_str().contains("Our own"), "{resp:#?}");
}

/// A `404.html` added while staticd runs is the body of the 404s that follow, within the
/// second or two the root's files are trusted for, though a 404 answered before it came
/// found no page (and staticd noted that it had none).
fn a_404_html_added_later_is_served(v: Variant) {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    let server = Server::start(v, &root);
    assert_error_h(&server.get("/missing"), 404);
    root.file("404.html", PAGE_404);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let resp = server.get("/missing");
        if resp.body_str() == PAGE_404 {
            assert_site_page(&resp, 404, PAGE_404);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "404.html was never served: {resp:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn each_vhost_has_its_own_404_page(v: Variant) {
    let root = Docroot::new();
    root.file("a.test/404.html", "<p>a's 404</p>\n");
    root.file("a.test/index.html", "a\n");
    root.file("b.test/404.html", "<p>b's 404</p>\n");
    root.file("c.test/index.html", "c\n");
    // The top of the root is no site under --vhosts.
    root.file("404.html", "<p>the root's 404</p>\n");
    let server = Server::builder(v, root.path()).arg("--vhosts").start();
    let with_host =
        |host: &str| server.exchange(format!("GET /missing HTTP/1.1\r\nHost: {host}\r\n\r\n"));
    let a = with_host("a.test");
    assert_eq!((a.status, a.body_str().as_str()), (404, "<p>a's 404</p>\n"));
    let b = with_host("b.test");
    assert_eq!((b.status, b.body_str().as_str()), (404, "<p>b's 404</p>\n"));
    assert_error(&with_host("c.test"), 404);
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    a_404_gets_the_sites_page_whatever_the_client,
    head_of_a_404_has_the_pages_headers_and_no_body,
    ranges_and_conditionals_do_not_apply_to_the_page,
    a_403_gets_the_sites_403_page,
    a_405_gets_the_sites_405_page,
    statuses_without_a_page_keep_the_built_in_one,
    a_site_without_404_html_keeps_the_built_in_page,
    a_404_html_added_later_is_served,
    each_vhost_has_its_own_404_page,
);
