//! Basic authentication, `--auth PREFIX=HTPASSWD` (cargo feature auth): paths under a
//! prefix need a user of an Apache htpasswd file. Every test runs in both modes.
//!
//! The hashes below were made once with Apache's and OpenSSL's tools, and pasted here so
//! the tests need neither:
//!
//! ```sh
//! htpasswd -nbB -C 4 alice wonderland                     # bcrypt $2y$ (cost 4: fast tests)
//! htpasswd -nbm bob builder                               # $apr1$
//! echo "carol:$(openssl passwd -5 -salt carolsalt c-pass)"   # SHA-256 crypt $5$
//! echo "dave:$(openssl passwd -6 -salt davesalt d-pass)"     # SHA-512 crypt $6$
//! htpasswd -nbs eve e-pass                                # {SHA}: refused
//! htpasswd -nbd frank f-pass                              # crypt(3) DES: refused
//! htpasswd -nbB -C 4 gina g-pass                          # added by the reload test
//! htpasswd -nbB -C 4 henry h-pass                         # the second file's user
//! printf %s alice:wonderland | base64                     # each Basic credential
//! ```

// Without the feature staticd has no --auth flag.
#![cfg(feature = "auth")]

#[macro_use]
mod common;

use std::path::{Path, PathBuf};

use common::*;

const ALICE: &str = "alice:$2y$04$jEih4bNT9UwQY6C/9jCo6.dw/NPM2P3prfOZX8vj5Us4DQQxeKQ8m";
const BOB: &str = "bob:$apr1$swZZAssr$69PguNuVV/IVgoBksf9OG.";
const CAROL: &str = "carol:$5$carolsalt$u7M7ji8VN0e2wbe/2vUnAWPE4h7TMSWufrWAf5V89V0";
const DAVE: &str = "dave:$6$davesalt$oH/yYgLPKe.ZfUGDfDjHGE8QUbMJcx8FRiDJ823VSkzVrpsuFg/zMmyGioVVO3tUJg7lWxctJFjOhR8tnJ0t80";
const EVE_SHA: &str = "eve:{SHA}jasw6WIpInc++8hObDQHgadiOvg=";
const FRANK_DES: &str = "frank:0AnoOQgyO7AOo";
const GINA: &str = "gina:$2y$04$D.VNGCJlg6Owep98DItnEe0fQWS2Jh8RejMO09c55TfoIYrVa97jG";
const HENRY: &str = "henry:$2y$04$tFtXF/IBLM1Vq15s8doO4e1uW7nhzuxjKfzOUWLpiE0sc2e/giiCy";

/// `Authorization` values: `Basic ` and base64 of `user:password`.
const ALICE_OK: &str = "Basic YWxpY2U6d29uZGVybGFuZA==";
const ALICE_WRONG: &str = "Basic YWxpY2U6d3Jvbmc=";
const BOB_OK: &str = "Basic Ym9iOmJ1aWxkZXI=";
const CAROL_OK: &str = "Basic Y2Fyb2w6Yy1wYXNz";
const DAVE_OK: &str = "Basic ZGF2ZTpkLXBhc3M=";
const EVE_OK: &str = "Basic ZXZlOmUtcGFzcw==";
const FRANK_OK: &str = "Basic ZnJhbms6Zi1wYXNz";
const GINA_OK: &str = "Basic Z2luYTpnLXBhc3M=";
const HENRY_OK: &str = "Basic aGVucnk6aC1wYXNz";
const NOBODY: &str = "Basic bm9ib2R5OndvbmRlcmxhbmQ=";

/// The users file: lines 5 ({SHA}) and 6 (DES) are refused.
fn users() -> String {
    [ALICE, BOB, CAROL, DAVE, EVE_SHA, FRANK_DES].join("\n") + "\n"
}

const SECRET: &str = "top secret\n";

/// A site with a `/private` area, and the htpasswd file outside it (never served).
struct Fixture {
    root: Docroot,
    etc: Docroot,
    htpasswd: PathBuf,
}

fn fixture() -> Fixture {
    let root = Docroot::new();
    root.file("private/secret.txt", SECRET);
    root.file("private/index.html", "<p>private index</p>\n");
    root.file("privateer.txt", "arr\n");
    root.file("public.txt", "public\n");
    root.file("public/x.txt", "x\n");
    let etc = Docroot::new();
    let htpasswd = etc.file("users.htpasswd", users());
    Fixture {
        root,
        etc,
        htpasswd,
    }
}

fn auth_arg(prefix: &str, file: &Path) -> String {
    format!("{prefix}={}", file.display())
}

fn start(v: Variant, fx: &Fixture) -> Server {
    builder(v, fx).start()
}

fn builder(v: Variant, fx: &Fixture) -> Builder {
    Server::builder(v, fx.root.path())
        .arg("--auth")
        .arg(auth_arg("/private", &fx.htpasswd))
}

/// A 401 that asks for Basic credentials with a realm, and shows nothing of the file.
fn assert_challenged(resp: &HResponse) {
    assert_eq!(resp.status, 401, "{resp:#?}");
    let challenges = resp.header_all("www-authenticate");
    assert_eq!(challenges.len(), 1, "{resp:#?}");
    let challenge = challenges[0];
    let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
    assert!(scheme.eq_ignore_ascii_case("basic"), "{resp:#?}");
    assert!(params.contains("realm=\""), "no realm: {resp:#?}");
    assert!(!resp.body_str().contains(SECRET.trim()), "{resp:#?}");
}

fn assert_secret(resp: &HResponse) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), SECRET, "{resp:#?}");
}

fn no_credentials_get_401_with_a_basic_challenge(v: Variant) {
    let fx = fixture();
    let server = start(v, &fx);
    for path in [
        "/private",
        "/private/",
        "/private/secret.txt",
        "/private/nothing",
    ] {
        assert_challenged(&server.get_as(path, None));
    }
    assert_challenged(&server.request("HEAD", "/private/secret.txt", &[]));
}

fn wrong_credentials_get_401(v: Variant) {
    let fx = fixture();
    let server = start(v, &fx);
    for authorization in [
        ALICE_WRONG,
        NOBODY,
        "Basic !!!not base64!!!",
        "Basic ",
        "Bearer YWxpY2U6d29uZGVybGFuZA==",
        "YWxpY2U6d29uZGVybGFuZA==",
    ] {
        let resp = server.get_as("/private/secret.txt", Some(authorization));
        assert_challenged(&resp);
    }
}

fn every_supported_hash_lets_its_user_in(v: Variant) {
    let fx = fixture();
    let server = start(v, &fx);
    for authorization in [ALICE_OK, BOB_OK, CAROL_OK, DAVE_OK] {
        assert_secret(&server.get_as("/private/secret.txt", Some(authorization)));
    }
    // The scheme is case-insensitive (RFC 9110 11.1).
    let lower = ALICE_OK.replacen("Basic", "basic", 1);
    assert_secret(&server.get_as("/private/secret.txt", Some(&lower)));
    let resp = server.get_as("/private/", Some(BOB_OK));
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "<p>private index</p>\n");
}

/// The access log names the user whose credentials passed, where the
/// common log format has its field, and `-` for everyone else.
fn the_access_log_names_the_user(v: Variant) {
    let fx = fixture();
    let server = Server::builder(v, fx.root.path())
        .arg("--auth")
        .arg(auth_arg("/private", &fx.htpasswd))
        .log_format("common")
        .start();
    assert_secret(&server.get_as("/private/secret.txt", Some(ALICE_OK)));
    assert_challenged(&server.get_as("/private/secret.txt", None));
    let logged = |lines: &[String]| {
        let alice = lines.iter().any(|l| {
            l.contains(" - alice [")
                && l.contains("\"GET /private/secret.txt ")
                && l.contains("\" 200 ")
        });
        let nobody = lines
            .iter()
            .any(|l| l.contains(" - - [") && l.contains("\" 401 "));
        alice && nobody
    };
    server
        .stderr()
        .wait_for(IO_TIMEOUT, logged)
        .unwrap_or_else(|| panic!("no such log lines: {:#?}", server.stderr().snapshot()));
}

fn a_user_stays_in_on_a_kept_alive_connection(v: Variant) {
    let fx = fixture();
    let server = start(v, &fx);
    let mut client = server.client();
    let with = [("authorization", ALICE_OK)];
    for _ in 0..3 {
        let resp = client.request("GET", "/private/secret.txt", &with);
        assert_secret(&resp);
    }
    // Credentials belong to requests, not to the connection.
    let resp = client.request("GET", "/private/secret.txt", &[]);
    assert_challenged(&resp);
}

fn outside_the_prefix_no_credentials_are_needed(v: Variant) {
    let fx = fixture();
    let server = start(v, &fx);
    for (path, body) in [
        ("/privateer.txt", "arr\n"),
        ("/public.txt", "public\n"),
        ("/public/x.txt", "x\n"),
    ] {
        let resp = server.get_as(path, None);
        assert_eq!(resp.status, 200, "{path}: {resp:#?}");
        assert_eq!(resp.body_str(), body);
        assert!(resp.header("www-authenticate").is_none(), "{resp:#?}");
    }
}

fn other_spellings_of_a_protected_path_are_protected_too(v: Variant) {
    let fx = fixture();
    let server = start(v, &fx);
    for target in [
        "/%70rivate/secret.txt",
        "/private%2Fsecret.txt",
        "/public/../private/secret.txt",
        "/public/%2e%2e/private/secret.txt",
        "//private/secret.txt",
        "/./private/secret.txt",
        "/private/./secret.txt",
        "/private/secret.txt?x=1",
    ] {
        // Raw HTTP/1.1 in every run: hyper would not send some of these targets as
        // they are, and the point is how the path is read, not the protocol.
        let resp = server.connect().roundtrip(request("GET", target, &[]));
        assert_ne!(resp.status, 200, "{target}: {resp:#?}");
        assert!(
            !resp.body_str().contains(SECRET.trim()),
            "{target}: {resp:#?}"
        );
    }
}

fn refused_hash_kinds_are_reported_and_cannot_log_in(v: Variant) {
    let fx = fixture();
    let server = start(v, &fx);
    assert_challenged(&server.get_as("/private/secret.txt", Some(EVE_OK)));
    assert_challenged(&server.get_as("/private/secret.txt", Some(FRANK_OK)));
    for line in [5, 6] {
        wait_file_line_message(server.stderr(), &fx.htpasswd, line);
    }
    // The other users of the file still log in.
    assert_secret(&server.get_as("/private/secret.txt", Some(ALICE_OK)));
    let good = file_line_prefix(&fx.htpasswd, 1);
    let lines = server.stderr().snapshot();
    assert!(!lines.iter().any(|l| l.starts_with(&good)), "{lines:#?}");
}

fn without_tls_one_warning_at_start_up(v: Variant) {
    let fx = fixture();
    // With the access log, whose last line the warnings are counted up to.
    let server = builder(v, &fx).log_format("common").start();
    // One connection: one process in inetd mode.
    let mut client = server.client();
    assert_challenged(&client.get("/private/secret.txt"));
    client.get("/public.txt");
    let warned = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("--auth without TLS"))
            .count()
    };
    // The last request's access-log line comes after any warning the
    // server wrote at start-up or for the requests before it: once it is
    // read, every warning there is to count has been.
    server
        .stderr()
        .wait_line(|l| l.contains("GET /public.txt "));
    let lines = server.stderr().snapshot();
    if server.is_tls() {
        assert_eq!(warned(&lines), 0, "a warning over TLS: {lines:#?}");
        return;
    }
    assert_eq!(warned(&lines), 1, "{lines:#?}");
    let line = lines
        .iter()
        .find(|l| l.contains("--auth without TLS"))
        .unwrap();
    assert!(line.starts_with("staticd: "), "{line:?}");
}

fn an_added_user_is_let_in_without_a_restart(v: Variant) {
    let fx = fixture();
    let server = start(v, &fx);
    assert_challenged(&server.get_as("/private/secret.txt", Some(GINA_OK)));
    let edited = edit(&fx.htpasswd, &(users() + GINA + "\n"));
    assert_reloaded(edited, || {
        let resp = server.get_as("/private/secret.txt", Some(GINA_OK));
        (resp.status == 200 && resp.body_str() == SECRET)
            .then_some(())
            .ok_or_else(|| format!("{resp:#?}"))
    });
    assert_secret(&server.get_as("/private/secret.txt", Some(ALICE_OK)));
}

fn each_prefix_has_its_own_users(v: Variant) {
    let fx = fixture();
    fx.root.file("admin/panel.txt", "panel\n");
    let admins = fx.etc.file("admins.htpasswd", format!("{HENRY}\n"));
    let server = Server::builder(v, fx.root.path())
        .arg("--auth")
        .arg(auth_arg("/private", &fx.htpasswd))
        .arg("--auth")
        .arg(auth_arg("/admin", &admins))
        .start();
    assert_secret(&server.get_as("/private/secret.txt", Some(ALICE_OK)));
    assert_challenged(&server.get_as("/private/secret.txt", Some(HENRY_OK)));
    let resp = server.get_as("/admin/panel.txt", Some(HENRY_OK));
    assert_eq!((resp.status, resp.body_str().as_str()), (200, "panel\n"));
    assert_challenged(&server.get_as("/admin/panel.txt", Some(ALICE_OK)));
    assert_challenged(&server.get_as("/admin/panel.txt", None));
}

fn works_with_vhosts(v: Variant) {
    let root = Docroot::new();
    root.file("a.test/private/secret.txt", SECRET);
    root.file("a.test/open.txt", "open\n");
    root.file("default/private/secret.txt", SECRET);
    let etc = Docroot::new();
    let htpasswd = etc.file("users.htpasswd", users());
    let server = Server::builder(v, root.path())
        .arg("--vhosts")
        .arg("--auth")
        .arg(auth_arg("/private", &htpasswd))
        .start();
    for host in ["a.test", "other.test"] {
        let ask = |authorization: Option<&str>| {
            let extra = authorization
                .map(|a| format!("Authorization: {a}\r\n"))
                .unwrap_or_default();
            server.exchange(format!(
                "GET /private/secret.txt HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n"
            ))
        };
        let resp = ask(None);
        assert_eq!(resp.status, 401, "{host}: {resp:#?}");
        let challenge = resp.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.to_ascii_lowercase().starts_with("basic "),
            "{resp:#?}"
        );
        assert!(!resp.body_str().contains(SECRET.trim()), "{resp:#?}");
        assert_eq!(ask(Some(ALICE_WRONG)).status, 401, "{host}");
        let resp = ask(Some(DAVE_OK));
        assert_eq!(
            (resp.status, resp.body_str().as_str()),
            (200, SECRET),
            "{host}"
        );
    }
    let resp = server.exchange("GET /open.txt HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert_eq!((resp.status, resp.body_str().as_str()), (200, "open\n"));
}

fn a_rewrite_cannot_get_round_the_prefix(v: Variant) {
    let fx = fixture();
    fx.root.file(
        "_redirects",
        "/leak /private/secret.txt 200\n/leak2 /private/secret.txt 200!\n/* /public.txt 200\n",
    );
    let server = start(v, &fx);
    for path in ["/leak", "/leak2"] {
        assert_challenged(&server.get_as(path, None));
        assert_secret(&server.get_as(path, Some(ALICE_OK)));
    }
    // The fallback catches every other path, but not before the prefix asks for a user.
    for path in ["/private/missing", "/private/secret.txt"] {
        assert_challenged(&server.get_as(path, None));
    }
    let resp = server.get_as("/elsewhere", None);
    assert_eq!((resp.status, resp.body_str().as_str()), (200, "public\n"));
}

fn a_removed_user_is_shut_out_without_a_restart(v: Variant) {
    let fx = fixture();
    let server = start(v, &fx);
    // Logged in once, so whatever the server caches about alice is there.
    assert_secret(&server.get_as("/private/secret.txt", Some(ALICE_OK)));
    let without_alice = users().replacen(&format!("{ALICE}\n"), "", 1);
    let edited = edit(&fx.htpasswd, &without_alice);
    assert_reloaded(edited, || {
        let resp = server.get_as("/private/secret.txt", Some(ALICE_OK));
        (resp.status == 401)
            .then_some(())
            .ok_or_else(|| format!("{resp:#?}"))
    });
    assert_secret(&server.get_as("/private/secret.txt", Some(BOB_OK)));
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    no_credentials_get_401_with_a_basic_challenge,
    wrong_credentials_get_401,
    every_supported_hash_lets_its_user_in,
    the_access_log_names_the_user,
    a_user_stays_in_on_a_kept_alive_connection,
    outside_the_prefix_no_credentials_are_needed,
    other_spellings_of_a_protected_path_are_protected_too,
    refused_hash_kinds_are_reported_and_cannot_log_in,
    without_tls_one_warning_at_start_up,
    an_added_user_is_let_in_without_a_restart,
    each_prefix_has_its_own_users,
    works_with_vhosts,
    a_rewrite_cannot_get_round_the_prefix,
    a_removed_user_is_shut_out_without_a_restart,
);
