//! `_headers` (the Netlify / Cloudflare Pages format) in the root of each site: blocks
//! of a URL pattern and indented `Name: value` lines, applied to every response for a
//! matching path. Every test runs in both modes.

#[macro_use]
mod common;

use common::*;

const HEADERS: &str = "\
# Site-wide headers; this comment and the blank lines are not rules.
/*
  X-Site: all
  Cache-Control: public, max-age=60

/fonts/*
  Access-Control-Allow-Origin: *
  X-Site: fonts

/blog/:slug
  X-Blog: post

/*.jpg
  X-Image: jpeg

/a.txt
  X-Literal: a

/plain.txt
  ! X-Site
  Content-Type: text/x-custom

/v.css
  Vary: Origin
";

/// A site with [`HEADERS`], a `_redirects` with one rule, and a file for each pattern.
fn site() -> Docroot {
    let root = Docroot::new();
    root.file("_headers", HEADERS);
    root.file("_redirects", "/old /a.txt\n");
    root.file("index.html", "home\n");
    root.file("a.txt", "alpha\n");
    root.file("a.txt2", "not a.txt\n");
    root.file("sub/a.txt", "another a.txt\n");
    root.file("fonts/a.woff2", b"wOF2\x00font bytes");
    root.file("blog/hello", "a post\n");
    root.file("blog/2024/hello", "a dated post\n");
    root.file("img/cat.jpg", b"\xff\xd8\xff a cat");
    root.file("img/cat.jpg.txt", "about the cat\n");
    root.file("plain.txt", "plain\n");
    root.file("v.css", "body { color: red; }\n");
    root.file("v.css.gz", b"\x1f\x8bgzip variant");
    root.file("docs/index.html", "docs\n");
    root.file("files/x.txt", "x\n");
    root
}

/// All the lines of header `name` (hyper keeps each field line as one value).
fn lines(resp: &HResponse, name: &str) -> Vec<String> {
    resp.header_all(name)
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn assert_one(resp: &HResponse, name: &str, value: &str) {
    assert_eq!(lines(resp, name), [value], "{name} in {resp:#?}");
}

fn assert_none(resp: &HResponse, name: &str) {
    assert!(resp.header(name).is_none(), "{name} in {resp:#?}");
}

/// `METHOD target HTTP/1.1` with exactly this Host, on a fresh connection.
fn with_host(server: &Server, method: &str, host: &str, target: &str) -> Response {
    server.exchange(format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"
    ))
}

fn every_matching_block_applies_and_values_are_joined(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/fonts/a.woff2");
    assert_eq!(resp.status, 200, "{resp:#?}");
    // `/*` and `/fonts/*` both set X-Site: one field line, in file order.
    assert_one(&resp, "x-site", "all, fonts");
    assert_one(&resp, "access-control-allow-origin", "*");
    assert_one(&resp, "cache-control", "public, max-age=60");
    let resp = server.get("/a.txt");
    assert_one(&resp, "x-site", "all");
    assert_none(&resp, "access-control-allow-origin");
    assert_eq!(resp.body_str(), "alpha\n");
}

fn a_placeholder_matches_one_segment(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/blog/hello");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_one(&resp, "x-blog", "post");
    let resp = server.get("/blog/2024/hello");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_none(&resp, "x-blog");
    assert_none(&server.get("/blog/"), "x-blog");
}

fn a_splat_may_stand_before_a_suffix(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/img/cat.jpg");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_one(&resp, "x-image", "jpeg");
    // The pattern is anchored at both ends.
    assert_none(&server.get("/img/cat.jpg.txt"), "x-image");
    assert_none(&server.get("/a.txt"), "x-image");
}

fn a_literal_pattern_matches_only_its_path(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_one(&server.get("/a.txt"), "x-literal", "a");
    for other in ["/a.txt2", "/sub/a.txt", "/A.txt"] {
        assert_none(&server.get(other), "x-literal");
    }
}

fn detach_removes_what_an_earlier_block_set(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/plain.txt");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_none(&resp, "x-site");
    // Only the detached header goes: the rest of `/*` still applies.
    assert_one(&resp, "cache-control", "public, max-age=60");
}

fn a_header_staticd_sets_is_replaced(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/plain.txt");
    assert_one(&resp, "content-type", "text/x-custom");
    assert_eq!(resp.body_str(), "plain\n");
}

fn vary_is_joined_with_staticds(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for accept_encoding in ["gzip", "identity"] {
        let resp = server.request("GET", "/v.css", &[("accept-encoding", accept_encoding)]);
        assert_eq!(resp.status, 200, "{resp:#?}");
        // staticd's own Vary (a precompressed sibling exists) and the file's.
        assert!(resp.has_token("vary", "accept-encoding"), "{resp:#?}");
        assert!(resp.has_token("vary", "origin"), "{resp:#?}");
    }
}

/// The ETag of `path`, from a plain GET.
fn etag_of(server: &Server, path: &str) -> String {
    let resp = server.get(path);
    resp.header("etag")
        .unwrap_or_else(|| panic!("no ETag on {path}: {resp:#?}"))
        .to_string()
}

/// Extra request header fields.
type Headers<'a> = &'a [(&'a str, &'a str)];

fn applies_to_every_kind_of_response(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path()).arg("--listing").start();
    let cases: [(&str, &str, Headers, u16); 8] = [
        ("GET", "/a.txt", &[], 200),
        ("GET", "/a.txt", &[("range", "bytes=0-1")], 206),
        ("HEAD", "/a.txt", &[], 200),
        ("GET", "/files/", &[], 200),
        ("GET", "/missing", &[], 404),
        ("GET", "/docs", &[], 301),
        ("GET", "/old", &[], 301),
        ("OPTIONS", "/a.txt", &[], 204),
    ];
    for (method, path, headers, status) in cases {
        let resp = server.request(method, path, headers);
        assert_eq!(
            resp.status, status,
            "{method} {path} {headers:?}: {resp:#?}"
        );
        assert_one(&resp, "x-site", "all");
        // A lifetime is for what exists: an error keeps none from the rules.
        if status >= 400 {
            assert_none(&resp, "cache-control");
        } else {
            assert_one(&resp, "cache-control", "public, max-age=60");
        }
    }
    let resp = server.request("GET", "/a.txt", &[("range", "bytes=0-1")]);
    assert_eq!(resp.body, b"al");
}

fn a_304_has_cache_control_but_no_content_type(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let etag = etag_of(&server, "/plain.txt");
    let resp = server.request("GET", "/plain.txt", &[("if-none-match", &etag)]);
    assert_eq!(resp.status, 304, "{resp:#?}");
    assert_one(&resp, "cache-control", "public, max-age=60");
    assert_none(&resp, "content-type");
    assert!(resp.body.is_empty());
}

fn applies_to_a_custom_404_page(v: Variant) {
    let root = site();
    root.file("404.html", "<p>custom not found</p>\n");
    let server = Server::start(v, &root);
    let resp = server.get("/nowhere/at/all");
    assert_eq!(resp.status, 404, "{resp:#?}");
    assert_eq!(resp.body_str(), "<p>custom not found</p>\n");
    assert_one(&resp, "x-site", "all");
}

/// The `_headers` of [`fields_staticd_decides_are_ignored_and_reported`]: every field
/// staticd must decide itself (lines 2 to 9), then one it may take.
const DECIDED_BY_STATICD: &str = "\
/*
  Content-Length: 1
  Content-Range: bytes 0-0/1
  Transfer-Encoding: chunked
  Connection: close
  Date: Mon, 01 Jan 2001 00:00:00 GMT
  ETag: \"fixed\"
  Last-Modified: Mon, 01 Jan 2001 00:00:00 GMT
  Content-Encoding: gzip
  X-Kept: yes
";

fn fields_staticd_decides_are_ignored_and_reported(v: Variant) {
    let root = Docroot::new();
    let file = root.file("_headers", DECIDED_BY_STATICD);
    root.file("a.txt", "alpha\n");
    let server = Server::start(v, &root);
    // Two requests on one connection: neither Connection nor Transfer-Encoding from the
    // file broke the framing of the first. (Raw HTTP/1.1 in every run: its framing is
    // the point.)
    let mut conn = server.connect();
    for _ in 0..2 {
        let resp = conn.roundtrip(request("GET", "/a.txt", &[]));
        assert_eq!(resp.status, 200, "{resp:#?}");
        assert_eq!(resp.body, b"alpha\n");
        assert_eq!(resp.content_length(), Some(6), "{resp:#?}");
        assert_eq!(resp.header_count("content-length"), 1, "{resp:#?}");
        assert_eq!(resp.header("content-range"), None, "{resp:#?}");
        assert_eq!(resp.header("transfer-encoding"), None, "{resp:#?}");
        assert_eq!(resp.header("content-encoding"), None, "{resp:#?}");
        assert!(!resp.has_token("connection", "close"), "{resp:#?}");
        assert_ne!(resp.header("etag"), Some("\"fixed\""), "{resp:#?}");
        assert_eq!(resp.header_count("etag"), 1, "{resp:#?}");
        assert_eq!(
            resp.header("last-modified"),
            Some(http_date(rfc_example_time()).as_str()),
            "{resp:#?}"
        );
        assert_ne!(
            resp.header("date"),
            Some("Mon, 01 Jan 2001 00:00:00 GMT"),
            "{resp:#?}"
        );
        assert_eq!(resp.header_count("date"), 1, "{resp:#?}");
        assert_eq!(resp.header("x-kept"), Some("yes"), "{resp:#?}");
    }
    for line in 2..=9 {
        wait_file_line_message(server.stderr(), &file, line);
    }
    let about_kept = file_line_prefix(&file, 10);
    assert!(
        !server
            .stderr()
            .snapshot()
            .iter()
            .any(|l| l.starts_with(&about_kept)),
        "a good line reported: {:#?}",
        server.stderr().snapshot()
    );
}

/// Malformed lines 2, 3 and 5 (a bad header name twice, a pattern with two splats).
const MALFORMED: &str = "\
/*
  Bad Name: x
  X(y): z
  X-Good: yes
/*/two/*
  X-Two: splats
/a.txt
  X-After: yes
";

fn malformed_lines_are_reported_and_the_rest_applies(v: Variant) {
    let root = Docroot::new();
    let file = root.file("_headers", MALFORMED);
    root.file("a.txt", "alpha\n");
    root.file("x/two/y", "y\n");
    let server = Server::start(v, &root);
    let resp = server.get("/a.txt");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_one(&resp, "x-good", "yes");
    assert_one(&resp, "x-after", "yes");
    assert_none(&resp, "x-two");
    let resp = server.get("/x/two/y");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_none(&resp, "x-two");
    for line in [2, 3, 5] {
        wait_file_line_message(server.stderr(), &file, line);
    }
}

fn cors_works_with_its_preflight(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let origin = ("origin", "http://other.test");
    let resp = server.request("GET", "/fonts/a.woff2", &[origin]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_one(&resp, "access-control-allow-origin", "*");
    let preflight = [origin, ("access-control-request-method", "GET")];
    let resp = server.request("OPTIONS", "/fonts/a.woff2", &preflight);
    assert_eq!(resp.status, 204, "{resp:#?}");
    assert_one(&resp, "access-control-allow-origin", "*");
    assert!(resp.header("allow").is_some(), "{resp:#?}");
    assert!(resp.body.is_empty());
    // Outside the block, no CORS field.
    let resp = server.request("OPTIONS", "/a.txt", &preflight);
    assert_eq!(resp.status, 204, "{resp:#?}");
    assert_none(&resp, "access-control-allow-origin");
}

fn the_rule_files_are_never_served(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for target in ["/_headers", "/_redirects", "/%5Fheaders", "/%5fredirects"] {
        for method in ["GET", "HEAD"] {
            let resp = server.exchange(request(method, target, &[]));
            assert_eq!(resp.status, 404, "{method} {target}: {resp:#?}");
            assert!(!resp.body_str().contains("X-Site"), "{resp:#?}");
            assert!(!resp.body_str().contains("/old"), "{resp:#?}");
        }
    }
}

fn the_rule_files_of_a_vhost_are_never_served(v: Variant) {
    let root = Docroot::new();
    root.file("a.test/_headers", HEADERS);
    root.file("a.test/_redirects", "/old /a.txt\n");
    root.file("a.test/a.txt", "alpha\n");
    let server = Server::builder(v, root.path()).arg("--vhosts").start();
    for target in ["/_headers", "/_redirects"] {
        let resp = with_host(&server, "GET", "a.test", target);
        assert_eq!(resp.status, 404, "{target}: {resp:#?}");
        assert!(!resp.body_str().contains("X-Site"), "{resp:#?}");
    }
    let resp = with_host(&server, "GET", "a.test", "/a.txt");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("x-site"), Some("all"), "{resp:#?}");
}

fn each_vhost_reads_its_own_file(v: Variant) {
    let root = Docroot::new();
    // With --vhosts the top of the root is no site: its `_headers` is not read.
    root.file("_headers", "/*\n  X-Root: yes\n");
    root.file("a.test/_headers", "/*\n  X-Site-A: yes\n");
    root.file("a.test/index.html", "a\n");
    root.file("b.test/_headers", "/*\n  X-Site-B: yes\n");
    root.file("b.test/index.html", "b\n");
    root.file("c.test/index.html", "c\n");
    let server = Server::builder(v, root.path()).arg("--vhosts").start();
    let a = with_host(&server, "GET", "a.test", "/");
    assert_eq!(a.body_str(), "a\n", "{a:#?}");
    assert_eq!(a.header("x-site-a"), Some("yes"), "{a:#?}");
    assert_eq!(a.header("x-site-b"), None, "{a:#?}");
    let b = with_host(&server, "GET", "b.test", "/");
    assert_eq!(b.header("x-site-b"), Some("yes"), "{b:#?}");
    assert_eq!(b.header("x-site-a"), None, "{b:#?}");
    let c = with_host(&server, "GET", "c.test", "/");
    assert_eq!(c.body_str(), "c\n", "{c:#?}");
    for resp in [&a, &b, &c] {
        assert_eq!(resp.header("x-root"), None, "{resp:#?}");
    }
    for name in ["x-site-a", "x-site-b"] {
        assert_eq!(c.header(name), None, "{c:#?}");
    }
}

fn an_edit_applies_without_a_restart(v: Variant) {
    let root = Docroot::new();
    let file = root.file("_headers", "/*\n  X-Version: 1\n");
    root.file("a.txt", "alpha\n");
    let server = Server::start(v, &root);
    assert_one(&server.get("/a.txt"), "x-version", "1");
    let edited = edit(&file, "/*\n  X-Version: 2\n  X-Added: yes\n");
    assert_reloaded(edited, || {
        let resp = server.get("/a.txt");
        let new = lines(&resp, "x-version") == ["2"] && lines(&resp, "x-added") == ["yes"];
        new.then_some(()).ok_or_else(|| format!("{resp:#?}"))
    });
}

fn a_site_without_the_file_is_unchanged(v: Variant) {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    let server = Server::start(v, &root);
    let resp = server.get("/a.txt");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_none(&resp, "cache-control");
    assert_one(&resp, "content-type", "text/plain; charset=utf-8");
    assert!(
        !server
            .stderr()
            .snapshot()
            .iter()
            .any(|l| l.contains("_headers")),
        "{:#?}",
        server.stderr().snapshot()
    );
}

fn a_listing_does_not_show_the_rule_files(v: Variant) {
    let root = Docroot::new();
    root.file("_headers", HEADERS);
    root.file("_redirects", "/old /a.txt\n");
    root.file("a.txt", "alpha\n");
    let server = Server::builder(v, root.path()).arg("--listing").start();
    let resp = server.get("/");
    assert_eq!(resp.status, 200, "{resp:#?}");
    let page = resp.body_str();
    assert!(page.contains("href=\"a.txt\""), "{page}");
    // They answer 404 as if absent, so a listing does not offer them either.
    assert!(!page.contains("_headers"), "{page}");
    assert!(!page.contains("_redirects"), "{page}");
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    every_matching_block_applies_and_values_are_joined,
    a_placeholder_matches_one_segment,
    a_splat_may_stand_before_a_suffix,
    a_literal_pattern_matches_only_its_path,
    detach_removes_what_an_earlier_block_set,
    a_header_staticd_sets_is_replaced,
    vary_is_joined_with_staticds,
    applies_to_every_kind_of_response,
    a_304_has_cache_control_but_no_content_type,
    applies_to_a_custom_404_page,
    fields_staticd_decides_are_ignored_and_reported,
    malformed_lines_are_reported_and_the_rest_applies,
    cors_works_with_its_preflight,
    the_rule_files_are_never_served,
    the_rule_files_of_a_vhost_are_never_served,
    each_vhost_reads_its_own_file,
    an_edit_applies_without_a_restart,
    a_site_without_the_file_is_unchanged,
    a_listing_does_not_show_the_rule_files,
);
