//! Redirecting symlinks (always on): a symlink whose target starts with `http://`,
//! `https://` or `/` answers 301 to that target plus the rest of the request path;
//! `=URL` means exactly URL. Every test runs in both modes.

#[macro_use]
mod common;

use common::*;

/// `GET target HTTP/1.1` with the given Host, on a fresh connection (over HTTP/2 in
/// the HTTP/2 cells, the Host as `:authority`).
fn get_with_host(server: &Server, host: &str, target: &str) -> Response {
    server.exchange(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"))
}

fn get(server: &Server, target: &str) -> Response {
    server.exchange(request("GET", target, &[]))
}

fn assert_redirect(resp: &Response, location: &str) {
    assert_eq!(resp.status, 301, "{resp:#?}");
    assert_eq!(resp.header_count("location"), 1, "{resp:#?}");
    assert_eq!(resp.header("location"), Some(location), "{resp:#?}");
    assert_common_headers(resp);
}

fn vhost_symlink_redirects_to_the_other_site(v: Variant) {
    let root = Docroot::new();
    root.file("default/index.html", "default\n");
    root.symlink("www.qux.test", "http://www.baz.test/");
    let server = Server::builder(v, root.path()).arg("--vhosts").start();
    let resp = get_with_host(&server, "www.qux.test", "/blub.html");
    assert_redirect(&resp, "http://www.baz.test/blub.html");
}

fn vhost_symlink_redirect_keeps_the_query(v: Variant) {
    let root = Docroot::new();
    root.symlink("www.qux.test", "http://www.baz.test/");
    let server = Server::builder(v, root.path()).arg("--vhosts").start();
    let resp = get_with_host(&server, "www.qux.test", "/a/b.html?x=1&y=2");
    assert_redirect(&resp, "http://www.baz.test/a/b.html?x=1&y=2");
}

fn file_symlink_to_url_redirects_exactly_there(v: Variant) {
    let root = Docroot::new();
    root.symlink("old.html", "https://x.test/y");
    let server = Server::start(v, &root);
    assert_redirect(&get(&server, "/old.html"), "https://x.test/y");
}

fn directory_symlink_to_path_appends_rest_and_query(v: Variant) {
    let root = Docroot::new();
    root.symlink("olddir", "/new");
    let server = Server::start(v, &root);
    let resp = get(&server, "/olddir/a/b.txt?x=1");
    assert_redirect(&resp, "/new/a/b.txt?x=1");
}

fn symlink_in_a_subdirectory_redirects(v: Variant) {
    let root = Docroot::new();
    root.dir("docs");
    root.symlink("docs/moved", "http://docs.test/");
    let server = Server::start(v, &root);
    assert_redirect(
        &get(&server, "/docs/moved/page.html"),
        "http://docs.test/page.html",
    );
}

fn exact_target_ignores_rest_and_query(v: Variant) {
    let root = Docroot::new();
    root.symlink("only", "=http://exact.test/only");
    let server = Server::start(v, &root);
    assert_redirect(&get(&server, "/only"), "http://exact.test/only");
    assert_redirect(
        &get(&server, "/only/more/stuff?q=1"),
        "http://exact.test/only",
    );
}

fn target_with_space_cr_lf_is_percent_encoded(v: Variant) {
    let root = Docroot::new();
    root.symlink("evil", "http://a.test/x y\r\nSet-Cookie: injected=1");
    let server = Server::start(v, &root);
    let lines = raw_head_lines(&server, "/evil");
    assert!(lines[0].starts_with("HTTP/1.1 301 "), "{lines:#?}");
    let locations: Vec<&String> = lines
        .iter()
        .filter(|l| l.to_ascii_lowercase().starts_with("location:"))
        .collect();
    assert_eq!(locations.len(), 1, "exactly one Location line: {lines:#?}");
    assert!(
        !lines
            .iter()
            .any(|l| l.to_ascii_lowercase().starts_with("set-cookie")),
        "injected header: {lines:#?}"
    );
    let location = locations[0]["location:".len()..].trim();
    assert!(
        location.eq_ignore_ascii_case("http://a.test/x%20y%0D%0ASet-Cookie:%20injected=1"),
        "Location {location:?}"
    );
}

fn target_with_quotes_and_angle_brackets_is_percent_encoded(v: Variant) {
    let root = Docroot::new();
    root.symlink("odd", "/to/\"a\"<b>{c}");
    let server = Server::start(v, &root);
    let resp = get(&server, "/odd");
    assert_eq!(resp.status, 301, "{resp:#?}");
    let location = resp.header("location").unwrap();
    assert!(
        location.eq_ignore_ascii_case("/to/%22a%22%3Cb%3E%7Bc%7D"),
        "Location {location:?}"
    );
}

fn relative_symlink_inside_root_is_served_as_content(v: Variant) {
    let root = Docroot::new();
    root.file("real.txt", "real content\n");
    root.file("realdir/inner.txt", "inner\n");
    root.symlink("alias.txt", "real.txt");
    root.symlink("aliasdir", "realdir");
    let server = Server::start(v, &root);
    let resp = get(&server, "/alias.txt");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "real content\n");
    let resp = get(&server, "/aliasdir/inner.txt");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "inner\n");
}

fn symlink_to_other_scheme_is_not_a_redirect(v: Variant) {
    let root = Docroot::new();
    root.symlink("ftp", "ftp://files.test/x");
    let server = Server::start(v, &root);
    let resp = get(&server, "/ftp");
    assert_error(&resp, 404);
    assert_eq!(resp.header("location"), None);
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    vhost_symlink_redirects_to_the_other_site,
    vhost_symlink_redirect_keeps_the_query,
    file_symlink_to_url_redirects_exactly_there,
    directory_symlink_to_path_appends_rest_and_query,
    symlink_in_a_subdirectory_redirects,
    exact_target_ignores_rest_and_query,
    target_with_space_cr_lf_is_percent_encoded,
    target_with_quotes_and_angle_brackets_is_percent_encoded,
    relative_symlink_inside_root_is_served_as_content,
    symlink_to_other_scheme_is_not_a_redirect,
);
