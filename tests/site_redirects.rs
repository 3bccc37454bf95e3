//! `_redirects` (the Netlify / Cloudflare Pages format) in the root of each site: one
//! rule per line, `from to [status][!]`; redirects, rewrites (200), 404 pages, the SPA
//! fallback, shadowing by existing files, and what is refused. Every test runs in both
//! modes.

#[macro_use]
mod common;

use common::*;

/// Each rule is tested below by the request named in its comment. The line numbers
/// matter to the tests of load-time messages: keep [`PROXY_LINE`] and
/// [`UNKNOWN_STATUS_LINE`] in step.
const REDIRECTS: &str = "\
# Rules are tried top to bottom; the first that matches wins.
/old /new
/temp /new 302
/see /new 303
/tmp7 /new 307
/perm8 /new 308
/news/:year/:slug /blog/:year/:slug
/docs/* /manual/:splat
/ext https://example.org/x 302
/first /one
/first /two
/pretty /real.html 200
/gone /notfound.html 404
/exists.txt /new 301
/forced.txt /new 301!
/shadow.html /real.html 200
/forced200.html /real.html 200!
/api/* https://api.example.com/:splat 200
/a /b 399
/after /new 302
/escape /../../../etc/passwd 200
/raw/* /:splat 200
/sym http://rule.test/ 302
/go/* /:splat 302
/r/:x /to/:x 302
";

/// The line of [`REDIRECTS`] that tries to proxy.
const PROXY_LINE: usize = 18;
/// The line of [`REDIRECTS`] with status 399.
const UNKNOWN_STATUS_LINE: usize = 19;

const REAL: &str = "<p>the real page</p>\n";
const NOT_FOUND: &str = "<p>no such page</p>\n";

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("_redirects", REDIRECTS);
    root.file("real.html", REAL);
    root.file("notfound.html", NOT_FOUND);
    root.file("exists.txt", "I exist\n");
    root.file("forced.txt", "forced away\n");
    root.file("shadow.html", "<p>the shadowing file</p>\n");
    root.file("forced200.html", "<p>never seen</p>\n");
    // A fnord redirect: a dangling symlink whose target is a URL.
    root.symlink("sym", "http://sym.test/");
    root
}

fn get(server: &Server, target: &str) -> Response {
    server.exchange(request("GET", target, &[]))
}

fn assert_redirect(resp: &Response, status: u16, location: &str) {
    assert_eq!(resp.status, status, "{resp:#?}");
    assert_eq!(resp.header_count("location"), 1, "{resp:#?}");
    assert_eq!(resp.header("location"), Some(location), "{resp:#?}");
    assert_common_headers(resp);
}

fn assert_page(resp: &Response, status: u16, body: &str) {
    assert_eq!(resp.status, status, "{resp:#?}");
    assert_eq!(resp.body_str(), body, "{resp:#?}");
    assert_eq!(resp.header("location"), None, "{resp:#?}");
    let content_type = resp.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("text/html"), "{resp:#?}");
}

fn the_default_status_is_301_and_the_query_goes_along(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_redirect(&get(&server, "/old"), 301, "/new");
    assert_redirect(&get(&server, "/old?x=1"), 301, "/new?x=1");
    assert_redirect(&get(&server, "/old?x=1&y=%20"), 301, "/new?x=1&y=%20");
}

fn each_redirect_status_is_sent(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for (from, status) in [
        ("/temp", 302),
        ("/see", 303),
        ("/tmp7", 307),
        ("/perm8", 308),
    ] {
        assert_redirect(&get(&server, from), status, "/new");
        let query = format!("{from}?q=2");
        assert_redirect(&get(&server, &query), status, "/new?q=2");
    }
}

fn placeholders_and_splats_are_substituted(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_redirect(&get(&server, "/news/2024/hello"), 301, "/blog/2024/hello");
    assert_redirect(&get(&server, "/docs/a/b.html"), 301, "/manual/a/b.html");
    assert_redirect(&get(&server, "/docs/x?q=1"), 301, "/manual/x?q=1");
    // A placeholder is one segment: `/news/2024` alone matches nothing.
    assert_eq!(get(&server, "/news/2024").status, 404);
}

fn an_absolute_url_target_redirects_there(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_redirect(&get(&server, "/ext"), 302, "https://example.org/x");
    assert_redirect(&get(&server, "/ext?x=1"), 302, "https://example.org/x?x=1");
}

fn the_first_matching_rule_wins(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_redirect(&get(&server, "/first"), 301, "/one");
}

fn a_200_rule_serves_the_target_under_the_requested_url(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = get(&server, "/pretty");
    assert_page(&resp, 200, REAL);
    assert_eq!(resp.content_length(), Some(REAL.len() as u64));
    let head = server.exchange(request("HEAD", "/pretty", &[]));
    assert_eq!(head.status, 200, "{head:#?}");
    assert!(head.body.is_empty());
    assert_eq!(head.content_length(), Some(REAL.len() as u64), "{head:#?}");
}

fn a_404_rule_serves_the_target_with_404(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_page(&get(&server, "/gone"), 404, NOT_FOUND);
}

fn an_existing_file_shadows_an_unforced_rule(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = get(&server, "/exists.txt");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "I exist\n");
    assert_page(
        &get(&server, "/shadow.html"),
        200,
        "<p>the shadowing file</p>\n",
    );
}

fn a_forced_rule_wins_over_an_existing_file(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_redirect(&get(&server, "/forced.txt"), 301, "/new");
    assert_page(&get(&server, "/forced200.html"), 200, REAL);
}

fn spa_fallback_serves_index_for_every_route(v: Variant) {
    let root = Docroot::new();
    root.file("_redirects", "/* /index.html 200\n");
    root.file("index.html", "<div id=app></div>\n");
    root.file("app.js", "console.log('app');\n");
    root.file("assets/logo.svg", "<svg/>\n");
    let server = Server::start(v, &root);
    let resp = get(&server, "/app.js");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "console.log('app');\n");
    let content_type = resp.header("content-type").unwrap_or_default();
    assert!(!content_type.starts_with("text/html"), "{resp:#?}");
    let resp = get(&server, "/assets/logo.svg");
    assert_eq!(resp.body_str(), "<svg/>\n", "{resp:#?}");
    for route in [
        "/",
        "/some/route",
        "/a/b/c",
        "/some/route?tab=2",
        "/missing.js",
    ] {
        assert_page(&get(&server, route), 200, "<div id=app></div>\n");
    }
}

/// The README's own pair of rules: a catch-all rewrite and assets cached for a year. A
/// missing asset gets the page (what the rule says) but never the assets' lifetime: a
/// rewritten response takes the `_headers` of the file it serves. Loading the files
/// says so once.
fn spa_fallback_never_caches_the_page_as_an_immutable_asset(v: Variant) {
    const IMMUTABLE: &str = "public, max-age=31536000, immutable";
    let root = Docroot::new();
    root.file("_redirects", "/* /index.html 200\n");
    root.file(
        "_headers",
        format!("/assets/*\n  Cache-Control: {IMMUTABLE}\n/*.html\n  Cache-Control: no-cache\n"),
    );
    root.file("index.html", "<div id=app></div>\n");
    root.file("assets/real.js", "real();\n");
    let server = Server::start(v, &root);
    let real = get(&server, "/assets/real.js");
    assert_eq!(real.header("cache-control"), Some(IMMUTABLE), "{real:#?}");
    let missing = get(&server, "/assets/app.js");
    assert_page(&missing, 200, "<div id=app></div>\n");
    assert_eq!(
        missing.header("cache-control"),
        Some("no-cache"),
        "{missing:#?}"
    );
    let warned = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("_redirects:1:") && l.contains("immutable"))
            .count()
    };
    let lines = server
        .stderr()
        .wait_for(IO_TIMEOUT, |l| warned(l) >= 1)
        .unwrap_or_else(|| panic!("no warning: {:#?}", server.stderr().snapshot()));
    // Once per load: in inetd mode each connection is a process of its own.
    if v.mode == Mode::Standalone {
        get(&server, "/assets/other.js");
        assert_eq!(warned(&lines), 1, "{lines:#?}");
        assert_eq!(warned(&server.stderr().snapshot()), 1);
    }
}

fn a_fnord_symlink_wins_over_a_rule(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_redirect(&get(&server, "/sym"), 301, "http://sym.test/");
    assert_redirect(&get(&server, "/sym/x"), 301, "http://sym.test/x");
}

fn a_rewrite_never_leaves_the_root(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = get(&server, "/escape");
    assert!([400, 404].contains(&resp.status), "{resp:#?}");
    assert!(!resp.body_str().contains("root:"), "{resp:#?}");
    for target in [
        "/raw/..%2F..%2F..%2Fetc%2Fpasswd",
        "/raw/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/raw/../../../etc/passwd",
    ] {
        let resp = get(&server, target);
        assert!(
            [400, 403, 404].contains(&resp.status),
            "{target}: {resp:#?}"
        );
        assert!(!resp.body_str().contains("root:"), "{target}: {resp:#?}");
    }
    // The splat rewrite does serve what is inside the root.
    assert_page(&get(&server, "/raw/real.html"), 200, REAL);
}

fn a_proxy_line_is_reported_and_ignored(v: Variant) {
    let root = site();
    let file = root.join("_redirects");
    let server = Server::start(v, &root);
    let resp = get(&server, "/api/users");
    assert_eq!(resp.status, 404, "{resp:#?}");
    assert_eq!(resp.header("location"), None, "{resp:#?}");
    wait_file_line_message(server.stderr(), &file, PROXY_LINE);
}

fn an_unknown_status_is_reported_and_the_rest_applies(v: Variant) {
    let root = site();
    let file = root.join("_redirects");
    let server = Server::start(v, &root);
    let resp = get(&server, "/a");
    assert_eq!(resp.status, 404, "{resp:#?}");
    assert_eq!(resp.header("location"), None, "{resp:#?}");
    assert_redirect(&get(&server, "/after"), 302, "/new");
    wait_file_line_message(server.stderr(), &file, UNKNOWN_STATUS_LINE);
    // The good lines around it are not reported (the one before it is the proxy line).
    for line in [UNKNOWN_STATUS_LINE - 2, UNKNOWN_STATUS_LINE + 1] {
        let prefix = file_line_prefix(&file, line);
        let lines = server.stderr().snapshot();
        assert!(!lines.iter().any(|l| l.starts_with(&prefix)), "{lines:#?}");
    }
}

fn rules_past_1000_are_ignored_with_one_message(v: Variant) {
    let root = Docroot::new();
    let rules: String = (0..1005).map(|i| format!("/r{i} /t{i} 302\n")).collect();
    let file = root.file("_redirects", rules);
    let server = Server::start(v, &root);
    // One connection, so one process in inetd mode: each reads the file once.
    let mut client = server.client();
    let location = |resp: &HResponse| resp.header("location").map(str::to_string);
    let first = client.get("/r0");
    assert_eq!((first.status, location(&first)), (302, Some("/t0".into())));
    let last = client.get("/r999");
    assert_eq!((last.status, location(&last)), (302, Some("/t999".into())));
    for past in ["/r1000", "/r1004"] {
        let resp = client.get(past);
        assert_eq!(resp.status, 404, "{past}: {resp:#?}");
    }
    let about = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains(&file.display().to_string()))
            .count()
    };
    let lines = server
        .stderr()
        .wait_for(IO_TIMEOUT, |lines| about(lines) >= 1)
        .unwrap_or_else(|| panic!("no message: {:#?}", server.stderr().snapshot()));
    assert_eq!(about(&lines), 1, "{lines:#?}");
    // More requests on the same connection do not repeat it.
    client.get("/r1003");
    assert_eq!(lines_about(server.stderr(), &file).len(), 1);
}

fn each_vhost_reads_its_own_file(v: Variant) {
    let root = Docroot::new();
    root.file("a.test/_redirects", "/go /from-a 302\n");
    root.file("b.test/_redirects", "/go /from-b 302\n");
    root.file("c.test/index.html", "c\n");
    // The top of the root is no site under --vhosts.
    root.file("_redirects", "/go /from-root 302\n");
    let server = Server::builder(v, root.path()).arg("--vhosts").start();
    let with_host = |host: &str, target: &str| {
        server.exchange(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"))
    };
    assert_redirect(&with_host("a.test", "/go"), 302, "/from-a");
    assert_redirect(&with_host("b.test", "/go"), 302, "/from-b");
    let resp = with_host("c.test", "/go");
    assert_eq!(resp.status, 404, "{resp:#?}");
    assert_eq!(resp.header("location"), None, "{resp:#?}");
    let resp = with_host("a.test", "/_redirects");
    assert_eq!(resp.status, 404, "{resp:#?}");
    assert!(!resp.body_str().contains("/from-a"), "{resp:#?}");
}

fn an_edit_applies_without_a_restart(v: Variant) {
    let root = Docroot::new();
    let file = root.file("_redirects", "/go /first 302\n");
    let server = Server::start(v, &root);
    assert_redirect(&get(&server, "/go"), 302, "/first");
    let edited = edit(&file, "/go /second 307\n/new-rule /x 302\n");
    assert_reloaded(edited, || {
        let (go, added) = (get(&server, "/go"), get(&server, "/new-rule"));
        let new = (go.status, go.header("location")) == (307, Some("/second"))
            && (added.status, added.header("location")) == (302, Some("/x"));
        new.then_some(())
            .ok_or_else(|| format!("{go:#?} {added:#?}"))
    });
}

fn a_capture_cannot_make_an_open_redirect(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for target in [
        "/go//evil.test",
        "/go/%2F%2Fevil.test",
        "/go/%2F/evil.test",
        "/go/http://evil.test/",
        "/go/https:%2F%2Fevil.test",
        "/go/%5C%5Cevil.test",
        "/go/\\evil.test",
    ] {
        let lines = raw_head_lines(&server, target);
        assert!(
            lines[0].starts_with("HTTP/1.1 302 "),
            "{target}: {lines:#?}"
        );
        let location = lines
            .iter()
            .find_map(|l| l.strip_prefix("Location: "))
            .unwrap_or_else(|| panic!("{target}: no Location in {lines:#?}"));
        // Only a path on this site: one leading slash, no scheme, no backslash that a
        // browser would read as a slash.
        assert!(location.starts_with('/'), "{target}: {location:?}");
        assert!(!location.starts_with("//"), "{target}: {location:?}");
        assert!(!location.contains('\\'), "{target}: {location:?}");
    }
}

fn a_capture_cannot_add_header_lines(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for target in [
        "/r/a%0D%0ASet-Cookie:%20x=1",
        "/r/a%0ASet-Cookie:x=1",
        "/go/%0D%0AX-Evil:1",
    ] {
        let lines = raw_head_lines(&server, target);
        let lower: Vec<String> = lines.iter().map(|l| l.to_ascii_lowercase()).collect();
        assert!(
            !lower
                .iter()
                .any(|l| l.starts_with("set-cookie") || l.starts_with("x-evil")),
            "{target}: {lines:#?}"
        );
        let locations = lower.iter().filter(|l| l.starts_with("location:")).count();
        assert_eq!(locations, 1, "{target}: {lines:#?}");
    }
}

fn a_rewrite_to_a_missing_target_is_404(v: Variant) {
    let root = Docroot::new();
    root.file(
        "_redirects",
        "/broken /nothing.html 200\n/* /index.html 200\n",
    );
    let server = Server::start(v, &root);
    // The SPA fallback without its index.html: 404, not a loop.
    for target in ["/broken", "/some/route", "/"] {
        let resp = get(&server, target);
        assert_eq!(resp.status, 404, "{target}: {resp:#?}");
    }
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    the_default_status_is_301_and_the_query_goes_along,
    each_redirect_status_is_sent,
    placeholders_and_splats_are_substituted,
    an_absolute_url_target_redirects_there,
    the_first_matching_rule_wins,
    a_200_rule_serves_the_target_under_the_requested_url,
    a_404_rule_serves_the_target_with_404,
    an_existing_file_shadows_an_unforced_rule,
    a_forced_rule_wins_over_an_existing_file,
    spa_fallback_serves_index_for_every_route,
    spa_fallback_never_caches_the_page_as_an_immutable_asset,
    a_fnord_symlink_wins_over_a_rule,
    a_rewrite_never_leaves_the_root,
    a_proxy_line_is_reported_and_ignored,
    an_unknown_status_is_reported_and_the_rest_applies,
    rules_past_1000_are_ignored_with_one_message,
    each_vhost_reads_its_own_file,
    an_edit_applies_without_a_restart,
    a_capture_cannot_make_an_open_redirect,
    a_capture_cannot_add_header_lines,
    a_rewrite_to_a_missing_target_is_404,
);
