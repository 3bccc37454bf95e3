//! Virtual hosts (`--vhosts`): which directory under the root a Host header picks, and
//! which Host values are refused. Every test runs in both modes.

#[macro_use]
mod common;

use common::*;

/// The two-site tree of the contract: `www.foo.test`, `bar.test` with a port-specific
/// `bar.test:8080`, and `default`.
fn sites() -> Docroot {
    let root = Docroot::new();
    root.file("www.foo.test/index.html", "foo index\n");
    root.file("www.foo.test/page.txt", "foo page\n");
    root.file("bar.test/index.html", "bar index\n");
    root.file("bar.test:8080/index.html", "bar 8080 index\n");
    root.file("default/index.html", "default index\n");
    root
}

fn vhost_server(v: Variant, root: &Docroot) -> Server {
    Server::builder(v, root.path()).arg("--vhosts").start()
}

/// `GET target HTTP/1.1` with exactly the given Host value, on a fresh connection (over
/// HTTP/2 in the HTTP/2 cells, the Host as `:authority`).
fn get_with_host(server: &Server, host: &str, target: &str) -> Response {
    server.exchange(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"))
}

/// [`get_with_host`] always over HTTP/1.1: for Host values that hyper cannot put in an
/// HTTP/2 `:authority` (`a/b`, `a\b`).
fn get_with_host_http1(server: &Server, host: &str, target: &str) -> Response {
    server
        .connect()
        .roundtrip(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"))
}

fn assert_body(resp: &Response, expected: &str) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), expected, "{resp:#?}");
}

fn host_header_selects_its_site(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    assert_body(&get_with_host(&server, "www.foo.test", "/"), "foo index\n");
    assert_body(
        &get_with_host(&server, "www.foo.test", "/page.txt"),
        "foo page\n",
    );
    assert_body(&get_with_host(&server, "bar.test", "/"), "bar index\n");
}

fn site_files_are_not_visible_from_another_site(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    let resp = get_with_host(&server, "bar.test", "/page.txt");
    assert_error(&resp, 404);
}

fn port_specific_directory_wins(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    assert_body(
        &get_with_host(&server, "bar.test:8080", "/"),
        "bar 8080 index\n",
    );
}

fn host_with_other_port_falls_back_to_the_plain_name(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    assert_body(&get_with_host(&server, "bar.test:9999", "/"), "bar index\n");
}

fn unknown_host_gets_default(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    assert_body(
        &get_with_host(&server, "nowhere.test", "/"),
        "default index\n",
    );
}

fn unknown_host_without_default_is_404(v: Variant) {
    let root = Docroot::new();
    root.file("www.foo.test/index.html", "foo index\n");
    let server = vhost_server(v, &root);
    assert_error(&get_with_host(&server, "nowhere.test", "/"), 404);
    // The known site still works.
    assert_body(&get_with_host(&server, "www.foo.test", "/"), "foo index\n");
}

fn http_1_0_without_host_gets_default(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    let resp = server.connect().roundtrip("GET / HTTP/1.0\r\n\r\n");
    assert_body(&resp, "default index\n");
}

fn bad_host_values_get_400(v: Variant) {
    let root = sites();
    // Would be reachable as directories if the Host were used as a path.
    root.file(".x/index.html", "hidden site\n");
    let server = vhost_server(v, &root);
    let long = "a".repeat(256);
    for host in ["..", ".x", "a/b", "a\\b", ".", long.as_str()] {
        let resp = if host.contains(['/', '\\']) {
            get_with_host_http1(&server, host, "/")
        } else {
            get_with_host(&server, host, "/")
        };
        assert_eq!(resp.status, 400, "Host: {host:?} -> {resp:#?}");
        assert_error(&resp, 400);
    }
}

fn host_of_255_bytes_is_accepted(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    let resp = get_with_host(&server, &"a".repeat(255), "/");
    assert_body(&resp, "default index\n");
}

fn host_is_matched_case_insensitively(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    assert_body(&get_with_host(&server, "WWW.Foo.TEST", "/"), "foo index\n");
    assert_body(
        &get_with_host(&server, "BAR.test:8080", "/"),
        "bar 8080 index\n",
    );
}

fn absolute_form_target_authority_wins_over_host(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    let resp = get_with_host(&server, "www.foo.test", "http://bar.test/");
    assert_body(&resp, "bar index\n");
}

fn absolute_form_target_with_port_uses_port_directory(v: Variant) {
    let root = sites();
    let server = vhost_server(v, &root);
    let resp = get_with_host(&server, "www.foo.test", "http://bar.test:8080/index.html");
    assert_body(&resp, "bar 8080 index\n");
}

fn without_vhosts_the_root_is_served_whatever_the_host(v: Variant) {
    let root = sites();
    root.file("index.html", "root index\n");
    let server = Server::start(v, &root);
    assert_body(&get_with_host(&server, "www.foo.test", "/"), "root index\n");
    assert_body(
        &get_with_host(&server, "bar.test:8080", "/"),
        "root index\n",
    );
    // The site directories are ordinary directories then.
    assert_body(
        &get_with_host(&server, "bar.test", "/www.foo.test/page.txt"),
        "foo page\n",
    );
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    host_header_selects_its_site,
    site_files_are_not_visible_from_another_site,
    port_specific_directory_wins,
    host_with_other_port_falls_back_to_the_plain_name,
    unknown_host_gets_default,
    unknown_host_without_default_is_404,
    http_1_0_without_host_gets_default,
    bad_host_values_get_400,
    host_of_255_bytes_is_accepted,
    host_is_matched_case_insensitively,
    absolute_form_target_authority_wins_over_host,
    absolute_form_target_with_port_uses_port_directory,
    without_vhosts_the_root_is_served_whatever_the_host,
);
