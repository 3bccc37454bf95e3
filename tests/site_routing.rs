//! Netlify's and Cloudflare Pages' routing, as Cloudflare documents it ("Serving
//! Pages"): pretty URLs (`/about` from `about.html`, on by default; `--pretty-urls
//! redirect` adds Cloudflare's redirects of `/about.html` and `/about/index.html`), the
//! nearest `404.html` (on by default), and `--spa`; with `_redirects` and `_headers`
//! applying to what is served. Every test runs in both modes and every protocol cell.

#[macro_use]
mod common;

use common::*;

const ABOUT: &str = "<p>about</p>\n";
const INDEX: &str = "<p>the app</p>\n";
const ROOT_404: &str = "<p>the root's 404</p>\n";
const BLOG_404: &str = "<p>the blog's 404</p>\n";

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("index.html", INDEX);
    root.file("about.html", ABOUT);
    root.file("docs/index.html", "<p>docs</p>\n");
    root.file("docs/intro.html", "<p>intro</p>\n");
    // Both a page and a directory: the directory is `/both/`, the page `/both.html`.
    root.file("both.html", "<p>both page</p>\n");
    root.file("both/index.html", "<p>both dir</p>\n");
    // A file without the extension wins over its .html twin.
    root.file("plain", "plain file\n");
    root.file("plain.html", "<p>never by /plain</p>\n");
    root
}

fn get(server: &Server, target: &str) -> Response {
    server.exchange(request("GET", target, &[]))
}

fn assert_page(resp: &Response, status: u16, body: &str) {
    assert_eq!(resp.status, status, "{resp:#?}");
    assert_eq!(resp.body_str(), body, "{resp:#?}");
    assert_eq!(resp.header("location"), None, "{resp:#?}");
}

fn assert_moved(resp: &Response, status: u16, location: &str) {
    assert_eq!(resp.status, status, "{resp:#?}");
    assert_eq!(resp.header("location"), Some(location), "{resp:#?}");
}

fn pretty_urls_serve_the_html_file(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_page(&get(&server, "/about"), 200, ABOUT);
    assert_page(&get(&server, "/about?x=1"), 200, ABOUT);
    assert_page(&get(&server, "/docs/intro"), 200, "<p>intro</p>\n");
    // HEAD: the page's length, no body.
    let head = server.exchange(request("HEAD", "/about", &[]));
    assert_eq!(head.status, 200, "{head:#?}");
    assert_eq!(head.content_length(), Some(ABOUT.len() as u64), "{head:#?}");
    // The page's one URL is without the slash; the query goes along.
    assert_moved(&get(&server, "/about/"), 308, "/about");
    assert_moved(&get(&server, "/about/?q=1&r=2"), 308, "/about?q=1&r=2");
    // By default the .html URL is served too (Netlify's way).
    assert_page(&get(&server, "/about.html"), 200, ABOUT);
    // Asked again (the open-file cache): the same.
    assert_page(&get(&server, "/about"), 200, ABOUT);
    assert_error(&get(&server, "/nothing"), 404);
    // A pretty URL only where nothing else has the name:
    assert_page(&get(&server, "/plain"), 200, "plain file\n");
    // A directory named `both`: `/both` is the directory's redirect, not both.html.
    assert_moved(&get(&server, "/both"), 301, "/both/");
    assert_page(&get(&server, "/both/"), 200, "<p>both dir</p>\n");
    assert_page(&get(&server, "/both.html"), 200, "<p>both page</p>\n");
    // A redirecting symlink (fnord's) named `old` wins over old.html.
    root.file("old.html", "<p>old page</p>\n");
    root.symlink("old", "http://elsewhere.test/");
    assert_moved(&get(&server, "/old"), 301, "http://elsewhere.test/");
}

fn pretty_urls_off(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .args(["--pretty-urls", "off"])
        .start();
    assert_error(&get(&server, "/about"), 404);
    assert_error(&get(&server, "/about/"), 404);
    assert_page(&get(&server, "/about.html"), 200, ABOUT);
    let by_variable = Server::builder(v, root.path())
        .env("STATICD_PRETTY_URLS", "off")
        .start();
    assert_error(&get(&by_variable, "/about"), 404);
}

fn pretty_urls_with_redirects_and_headers(v: Variant) {
    let root = site();
    root.file(
        "_headers",
        "/*\n  X-Site: yes\n/*.html\n  X-Page: html\n/about\n  X-Url: about\n",
    );
    // An unforced catch-all (the usual SPA rule) does not hide pretty URLs.
    root.file("_redirects", "/forced /docs/ 301!\n/* /index.html 200\n");
    let server = Server::start(v, &root);
    let about = get(&server, "/about");
    assert_page(&about, 200, ABOUT);
    // A rewrite: the `_headers` of the file served (/about.html), not of the URL.
    assert_eq!(about.header("x-page"), Some("html"), "{about:#?}");
    assert_eq!(about.header("x-url"), None, "{about:#?}");
    assert_eq!(about.header("x-site"), Some("yes"), "{about:#?}");
    assert_page(&get(&server, "/no/such/page"), 200, INDEX);
    // A redirect to a pretty URL carries the site's `_headers` like any redirect.
    let moved = get(&server, "/about/");
    assert_moved(&moved, 308, "/about");
    assert_eq!(moved.header("x-site"), Some("yes"), "{moved:#?}");
    assert_moved(&get(&server, "/forced"), 301, "/docs/");
}

fn cloudflare_redirects_to_pretty_urls(v: Variant) {
    let root = site();
    root.file("_headers", "/*\n  X-Site: yes\n");
    root.file("_redirects", "/app/* /index.html 200\n");
    let server = Server::builder(v, root.path())
        .args(["--pretty-urls", "redirect"])
        .start();
    let moved = get(&server, "/about.html");
    assert_moved(&moved, 308, "/about");
    assert_eq!(moved.header("x-site"), Some("yes"), "{moved:#?}");
    assert_moved(&get(&server, "/about.html?a=1"), 308, "/about?a=1");
    assert_moved(&get(&server, "/docs/index.html"), 308, "/docs/");
    assert_moved(&get(&server, "/docs/intro.html"), 308, "/docs/intro");
    assert_moved(&get(&server, "/index.html?x"), 308, "/?x");
    assert_page(&get(&server, "/about"), 200, ABOUT);
    assert_page(&get(&server, "/"), 200, INDEX);
    // Where the pretty URL would name something else, the .html URL stays.
    assert_page(&get(&server, "/both.html"), 200, "<p>both page</p>\n");
    assert_page(
        &get(&server, "/plain.html"),
        200,
        "<p>never by /plain</p>\n",
    );
    // A rewrite to /index.html serves it: the redirect is for URLs asked for.
    assert_page(&get(&server, "/app/route"), 200, INDEX);
}

fn a_404_gets_the_nearest_404_html(v: Variant) {
    let root = site();
    root.file("404.html", ROOT_404);
    root.file("blog/404.html", BLOG_404);
    root.file("blog/post.html", "<p>post</p>\n");
    let server = Server::start(v, &root);
    assert_page(&get(&server, "/blog/missing"), 404, BLOG_404);
    assert_page(&get(&server, "/blog/a/b/c/missing"), 404, BLOG_404);
    assert_page(&get(&server, "/blog/missing/"), 404, BLOG_404);
    assert_page(&get(&server, "/missing"), 404, ROOT_404);
    assert_page(&get(&server, "/docs/missing"), 404, ROOT_404);
    assert_page(&get(&server, "/blog/post"), 200, "<p>post</p>\n");
    // Asked again (the page is then in the open-file cache): the same.
    assert_page(&get(&server, "/blog/missing"), 404, BLOG_404);
    for off in [
        Server::builder(v, root.path()).arg("--no-nearest-404"),
        Server::builder(v, root.path()).env("STATICD_NO_NEAREST_404", "1"),
    ] {
        assert_page(&get(&off.start(), "/blog/missing"), 404, ROOT_404);
    }
}

fn each_vhost_has_its_nearest_404_html(v: Variant) {
    let root = Docroot::new();
    root.file("a.test/blog/404.html", BLOG_404);
    root.file("a.test/404.html", ROOT_404);
    root.file("b.test/index.html", INDEX);
    // Another site's page is never this one's.
    root.file("blog/404.html", "<p>the top's</p>\n");
    let server = Server::builder(v, root.path()).arg("--vhosts").start();
    let with_host = |host: &str| {
        server.exchange(format!(
            "GET /blog/missing HTTP/1.1\r\nHost: {host}\r\n\r\n"
        ))
    };
    assert_page(&with_host("a.test"), 404, BLOG_404);
    assert_error(&with_host("b.test"), 404);
}

fn spa_serves_the_root_index_for_what_names_nothing(v: Variant) {
    let root = site();
    root.file("404.html", ROOT_404);
    root.file("assets/app.js", "app();\n");
    root.file(
        "_headers",
        "/index.html\n  Cache-Control: no-cache\n/app/*\n  X-App: route\n",
    );
    root.file("_redirects", "/old /about 301\n");
    // A directory without an index is listed, and a script runs, as ever.
    root.file("files/a.txt", "a\n");
    let script = root.file(
        "s.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nran %s\\n' \"$PATH_INFO\"\n",
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let server = Server::builder(v, root.path())
        .args(["--spa", "--listing", "--cgi"])
        .start();
    let listing = get(&server, "/files/");
    assert_eq!(listing.status, 200, "{listing:#?}");
    assert!(listing.body_str().contains("a.txt"), "{listing:#?}");
    assert_page(&get(&server, "/s.cgi/extra"), 200, "ran /extra\n");
    let route = get(&server, "/app/settings");
    assert_page(&route, 200, INDEX);
    // The `_headers` of the page served, not of the route.
    assert_eq!(
        route.header("cache-control"),
        Some("no-cache"),
        "{route:#?}"
    );
    assert_eq!(route.header("x-app"), None, "{route:#?}");
    assert_page(&get(&server, "/app/settings/?tab=2"), 200, INDEX);
    // Files, pretty URLs and rules come first.
    assert_page(&get(&server, "/assets/app.js"), 200, "app();\n");
    assert_page(&get(&server, "/about"), 200, ABOUT);
    assert_moved(&get(&server, "/old"), 301, "/about");
    // Without --spa, a plain directory keeps its 404s.
    let plain = Server::start(v, &root);
    assert_page(&get(&plain, "/app/settings"), 404, ROOT_404);
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    pretty_urls_serve_the_html_file,
    pretty_urls_off,
    pretty_urls_with_redirects_and_headers,
    cloudflare_redirects_to_pretty_urls,
    a_404_gets_the_nearest_404_html,
    each_vhost_has_its_nearest_404_html,
    spa_serves_the_root_index_for_what_names_nothing,
);
