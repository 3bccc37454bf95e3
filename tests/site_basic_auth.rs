//! `Basic-Auth` in a site's `_headers` (Netlify's password protection): the paths its
//! block's pattern matches need one of its `user:password` pairs, through the same
//! authentication as `--auth`; the line is never sent, and neither are the fields that
//! are instructions to Netlify's or Cloudflare's CDN. Every test runs in both modes and
//! over HTTP/1.1, TLS, HTTP/2 and HTTP/3.
//!
//! ```sh
//! printf %s alice:hunter2 | base64     # each Basic credential below
//! ```

// Without the feature no one can log in (every lock stays shut).
#![cfg(feature = "auth")]

#[macro_use]
mod common;

use common::*;

const HEADERS: &str = "\
/*
  X-Site: all
  Netlify-CDN-Cache-Control: public, s-maxage=60
  Netlify-Vary: query
  Cloudflare-CDN-Cache-Control: max-age=60
  Cache-Tag: site

/admin/*
  Basic-Auth: alice:hunter2 bob:s3cret:with:colons
  X-Admin: yes

/team/*
  basic-auth: carol:Tr0ub4dor

/guide/index.html
  Basic-Auth: dave:Pa55word
";

/// Every password of [`HEADERS`], and the field's name: none may ever reach a client.
const SECRETS: [&str; 5] = ["hunter2", "s3cret", "Tr0ub4dor", "Pa55word", "basic-auth"];

const ALICE: &str = "Basic YWxpY2U6aHVudGVyMg==";
const BOB: &str = "Basic Ym9iOnMzY3JldDp3aXRoOmNvbG9ucw==";
const CAROL: &str = "Basic Y2Fyb2w6VHIwdWI0ZG9y";
const DAVE: &str = "Basic ZGF2ZTpQYTU1d29yZA==";
/// alice with a wrong password, and with bob's.
const ALICE_WRONG: &str = "Basic YWxpY2U6d3Jvbmc=";
const ALICE_BOBS: &str = "Basic YWxpY2U6czNjcmV0OndpdGg6Y29sb25z";

const ADMIN_PAGE: &str = "<p>the admin page</p>\n";

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("_headers", HEADERS);
    root.file(
        "_redirects",
        "/leak /admin/x.html 200\n/leak2 /admin/x.html 200!\n/go /public.txt 301\n",
    );
    root.file("index.html", "home\n");
    root.file("public.txt", "public\n");
    root.file("leak2", "shadowed by the forced rule\n");
    root.file("admin/x.html", ADMIN_PAGE);
    root.file("admin/index.html", "<p>admin index</p>\n");
    root.file("admin/files/a.txt", "a file in a listed directory\n");
    root.file("team/t.txt", "team\n");
    root.file("pub/b.txt", "a public file in a listed directory\n");
    root.file("guide/index.html", "<p>the guide</p>\n");
    root
}

/// A 401 asking for Basic credentials in `realm`, showing nothing of the page.
fn assert_challenged(resp: &HResponse, realm: &str) {
    assert_eq!(resp.status, 401, "{resp:#?}");
    let challenge = format!("Basic realm=\"{realm}\", charset=\"UTF-8\"");
    assert_eq!(
        resp.header_all("www-authenticate"),
        [challenge],
        "{resp:#?}"
    );
    assert!(!resp.body_str().contains("admin"), "{resp:#?}");
}

/// `path` asks for credentials of `realm`: none and `wrong` are refused, `right` gets
/// `body`.
fn assert_locked(server: &Server, path: &str, realm: &str, [wrong, right]: [&str; 2], body: &str) {
    assert_challenged(&server.get_as(path, None), realm);
    assert_challenged(&server.get_as(path, Some(wrong)), realm);
    let resp = server.get_as(path, Some(right));
    assert_eq!(
        (resp.status, resp.body_str().as_str()),
        (200, body),
        "{resp:#?}"
    );
}

fn assert_admin_page(resp: &HResponse) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), ADMIN_PAGE, "{resp:#?}");
    assert_eq!(resp.header("x-admin"), Some("yes"), "{resp:#?}");
}

/// Neither a password nor the `Basic-Auth` name anywhere in the response.
fn assert_keeps_secrets(what: &str, resp: &HResponse) {
    let mut text = String::new();
    for (name, value) in &resp.headers {
        text.push_str(&format!(
            "{name}: {}\n",
            String::from_utf8_lossy(value.as_bytes())
        ));
    }
    text.push_str(&String::from_utf8_lossy(&resp.body));
    let text = text.to_ascii_lowercase();
    for secret in SECRETS {
        let secret = secret.to_ascii_lowercase();
        assert!(!text.contains(&secret), "{what}: {secret} in {resp:#?}");
    }
}

fn no_credentials_get_401_with_the_blocks_realm(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for path in [
        "/admin/",
        "/admin/x.html",
        "/admin/missing",
        "/admin/files/",
    ] {
        assert_challenged(&server.get_as(path, None), "/admin/*");
    }
    assert_challenged(&server.request("HEAD", "/admin/x.html", &[]), "/admin/*");
    assert_challenged(&server.get_as("/team/t.txt", None), "/team/*");
}

fn each_pair_of_the_block_gets_in(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for authorization in [ALICE, BOB] {
        assert_admin_page(&server.get_as("/admin/x.html", Some(authorization)));
        let index = server.get_as("/admin/", Some(authorization));
        assert_eq!(
            (index.status, index.body_str().as_str()),
            (200, "<p>admin index</p>\n")
        );
    }
    let team = server.get_as("/team/t.txt", Some(CAROL));
    assert_eq!((team.status, team.body_str().as_str()), (200, "team\n"));
}

fn wrong_credentials_get_401(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    // carol belongs to /team/*, not to /admin/*.
    for authorization in [
        ALICE_WRONG,
        ALICE_BOBS,
        CAROL,
        "Basic !!",
        "Bearer YWxpY2U6aHVudGVyMg==",
    ] {
        let resp = server.get_as("/admin/x.html", Some(authorization));
        assert_challenged(&resp, "/admin/*");
    }
    assert_challenged(&server.get_as("/team/t.txt", Some(ALICE)), "/team/*");
}

fn paths_no_block_protects_stay_open(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for (path, body) in [
        ("/public.txt", "public\n"),
        ("/", "home\n"),
        ("/pub/b.txt", "a public file in a listed directory\n"),
    ] {
        let resp = server.get_as(path, None);
        assert_eq!(
            (resp.status, resp.body_str().as_str()),
            (200, body),
            "{resp:#?}"
        );
        assert_eq!(resp.header("x-site"), Some("all"), "{resp:#?}");
    }
    // `/admin/*` does not match `/admin`: its answer is the way to `/admin/`, which asks.
    let resp = server.get_as("/admin", None);
    assert_eq!(resp.status, 301, "{resp:#?}");
    assert_challenged(&server.get_as("/admin/", None), "/admin/*");
}

fn a_rewrite_to_a_protected_path_is_refused(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for path in ["/leak", "/leak2"] {
        assert_locked(&server, path, "/admin/*", [ALICE_WRONG, ALICE], ADMIN_PAGE);
    }
}

/// A block that names an index file protects it through its directory's URL too.
fn an_index_file_is_protected_through_its_directory(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for path in ["/guide/", "/guide/index.html"] {
        let realm = "/guide/index.html";
        assert_locked(&server, path, realm, [ALICE, DAVE], "<p>the guide</p>\n");
    }
}

fn the_sites_401_page_is_the_body(v: Variant) {
    let root = site();
    let page = "<!DOCTYPE html>\n<title>Who?</title>\n<p>Log in first.</p>\n";
    root.file("401.html", page);
    let server = Server::start(v, &root);
    let resp = server.get_as("/admin/x.html", None);
    assert_challenged(&resp, "/admin/*");
    assert_eq!(resp.body_str(), page, "{resp:#?}");
}

fn the_log_names_the_user_and_no_message_a_password(v: Variant) {
    let root = site();
    root.file(
        "_headers",
        format!("{HEADERS}\n/broken/*\n  Basic-Auth: erin hunter2 :Tr0ub4dor\n"),
    );
    let server = Server::builder(v, root.path()).log_format("common").start();
    assert_admin_page(&server.get_as("/admin/x.html", Some(BOB)));
    assert_challenged(
        &server.get_as("/admin/x.html", Some(ALICE_WRONG)),
        "/admin/*",
    );
    let logged = |lines: &[String]| {
        let bob = lines.iter().any(|l| {
            l.contains(" - bob [") && l.contains("\"GET /admin/x.html ") && l.contains("\" 200 ")
        });
        let refused = lines
            .iter()
            .any(|l| l.contains(" - - [") && l.contains("\" 401 "));
        bob && refused
    };
    server
        .stderr()
        .wait_for(IO_TIMEOUT, logged)
        .unwrap_or_else(|| panic!("no such log lines: {:#?}", server.stderr().snapshot()));
    // The malformed pairs were reported, by file and line, without their text.
    let message = wait_file_line_message(server.stderr(), &root.join("_headers"), 19);
    assert!(
        message.contains("Basic-Auth: 3 entries are not user:password"),
        "{message}"
    );
    for line in server.stderr().snapshot() {
        for secret in ["hunter2", "s3cret", "Tr0ub4dor", "erin"] {
            assert!(!line.contains(secret), "{secret} in {line:?}");
        }
    }
}

/// The fields meant for Netlify's or Cloudflare's CDN are said once, with their line,
/// when the file is read, and never sent.
fn host_instructions_are_reported_and_never_sent(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get_as("/public.txt", None);
    assert_eq!(resp.status, 200, "{resp:#?}");
    for name in [
        "netlify-cdn-cache-control",
        "netlify-vary",
        "cloudflare-cdn-cache-control",
        "cache-tag",
    ] {
        assert!(resp.header(name).is_none(), "{name} in {resp:#?}");
    }
    assert_eq!(resp.header("x-site"), Some("all"), "{resp:#?}");
    let file = root.join("_headers");
    for line in 3..=6 {
        let message = wait_file_line_message(server.stderr(), &file, line);
        assert!(message.contains("never sent"), "{message}");
    }
}

/// Every kind of response, to every path, with and without credentials: none holds a
/// password or the field's name, in its head or its body.
fn no_response_holds_a_password(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path()).arg("--listing").start();
    let etag = server
        .get_as("/admin/x.html", Some(ALICE))
        .header("etag")
        .expect("an ETag")
        .to_string();
    let public_etag = server
        .get_as("/public.txt", None)
        .header("etag")
        .expect("an ETag")
        .to_string();
    let mut seen = std::collections::BTreeSet::new();
    let paths = [
        "/",
        "/public.txt",
        "/admin/",
        "/admin/x.html",
        "/admin/missing",
        "/admin",
        "/admin/files/",
        "/admin/files",
        "/pub/",
        "/team/t.txt",
        "/leak",
        "/leak2",
        "/go",
        "/missing",
        "/_headers",
        "/_redirects",
        "/guide/",
        "/guide",
    ];
    for path in paths {
        for authorization in [None, Some(ALICE), Some(ALICE_WRONG), Some(CAROL)] {
            let mut with: Vec<(&str, &str)> = authorization
                .map(|a| ("authorization", a))
                .into_iter()
                .collect();
            let what = format!("{path} as {authorization:?}");
            for method in ["GET", "HEAD", "OPTIONS", "POST"] {
                let resp = server.request(method, path, &with);
                seen.insert(resp.status);
                assert_keeps_secrets(&format!("{method} {what}"), &resp);
            }
            for (name, value) in [
                ("range", "bytes=0-3"),
                ("range", "bytes=0-1,4-5"),
                ("if-none-match", etag.as_str()),
                ("if-none-match", public_etag.as_str()),
                ("accept", "text/html"),
                ("accept", "application/json"),
            ] {
                with.push((name, value));
                let resp = server.request("GET", path, &with);
                seen.insert(resp.status);
                assert_keeps_secrets(&format!("GET {what} with {name}: {value}"), &resp);
                with.pop();
            }
        }
    }
    // The responses above were of every kind this test means to cover.
    for status in [200, 204, 206, 301, 304, 401, 404, 405] {
        assert!(seen.contains(&status), "no {status} among {seen:?}");
    }
}

/// `--auth /admin=FILE` and a `Basic-Auth` block over the same paths: the same
/// credentials must pass both, the area's first (tests/auth.rs's hashes).
fn with_auth_both_must_let_the_same_credentials_in(v: Variant) {
    const ALICE_HASH: &str = "alice:$2y$04$jEih4bNT9UwQY6C/9jCo6.dw/NPM2P3prfOZX8vj5Us4DQQxeKQ8m";
    const BOB_HASH: &str = "bob:$apr1$swZZAssr$69PguNuVV/IVgoBksf9OG.";
    const ALICE_WONDERLAND: &str = "Basic YWxpY2U6d29uZGVybGFuZA==";
    const BOB_BUILDER: &str = "Basic Ym9iOmJ1aWxkZXI=";
    const ZED: &str = "Basic emVkOnp6ei1vbmx5LWhlcmU=";
    let root = site();
    root.file(
        "_headers",
        "/admin/*\n  Basic-Auth: alice:wonderland zed:zzz-only-here\n",
    );
    let etc = Docroot::new();
    let users = etc.file("users.htpasswd", format!("{ALICE_HASH}\n{BOB_HASH}\n"));
    let server = Server::builder(v, root.path())
        .arg("--auth")
        .arg(format!("/admin={}", users.display()))
        .start();
    let resp = server.get_as("/admin/x.html", Some(ALICE_WONDERLAND));
    assert_eq!(
        (resp.status, resp.body_str().as_str()),
        (200, ADMIN_PAGE),
        "{resp:#?}"
    );
    // Only in the site's file: the area refuses; only in htpasswd: the lock does.
    assert_challenged(&server.get_as("/admin/x.html", Some(ZED)), "/admin");
    assert_challenged(
        &server.get_as("/admin/x.html", Some(BOB_BUILDER)),
        "/admin/*",
    );
    assert_challenged(&server.get_as("/admin/x.html", None), "/admin");
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    no_credentials_get_401_with_the_blocks_realm,
    each_pair_of_the_block_gets_in,
    wrong_credentials_get_401,
    paths_no_block_protects_stay_open,
    a_rewrite_to_a_protected_path_is_refused,
    an_index_file_is_protected_through_its_directory,
    the_sites_401_page_is_the_body,
    the_log_names_the_user_and_no_message_a_password,
    host_instructions_are_reported_and_never_sent,
    no_response_holds_a_password,
    with_auth_both_must_let_the_same_credentials_in,
);
