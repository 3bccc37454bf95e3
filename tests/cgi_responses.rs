//! A CGI script's response is a response like every other: over HTTPS with `--hsts`,
//! every outcome (the script's output, a local redirect, and the 502, 503 and 504 the
//! server gives for a script that failed, was refused or ran too long) carries
//! Strict-Transport-Security, in both modes, over HTTP/1.1 and h2; and a `Status:` line
//! without a reason phrase gets the standard one.

#[macro_use]
mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;

const HSTS: &str = "max-age=600";

/// Writes an executable `/bin/sh` script.
fn script(root: &Docroot, rel: &str, body: &str) {
    let path = root.file(rel, format!("#!/bin/sh\n{body}"));
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// The scripts of every outcome; `slow.cgi` touches `started` and then takes a while,
/// holding the one `--cgi-max` place.
fn site(started: &Path) -> Docroot {
    let root = Docroot::new();
    script(
        &root,
        "ok.cgi",
        "printf 'Content-Type: text/plain\\n\\nfrom the script\\n'\n",
    );
    script(&root, "bad.cgi", "echo no header block here\n");
    script(&root, "hang.cgi", "sleep 100\n");
    script(&root, "local.cgi", "printf 'Location: /static.txt\\n\\n'\n");
    script(
        &root,
        "slow.cgi",
        &format!(
            "touch '{}'\nsleep 0.5\nprintf 'Content-Type: text/plain\\n\\nslow\\n'\n",
            started.display()
        ),
    );
    root.file("static.txt", "static text\n");
    root
}

fn https_cgi_server(mode: Mode, root: &Docroot) -> Server {
    Server::builder(mode, root.path())
        .tls_files(&Pki::shared().localhost().1)
        .args(["--cgi", "--cgi-timeout", "1", "--cgi-max", "1"])
        .args(["--hsts", "600"])
        .start()
}

/// The outcomes one at a time, each on a connection of its own: (path, status).
const OUTCOMES: [(&str, u16); 4] = [
    ("/ok.cgi", 200),
    ("/local.cgi", 200),
    ("/bad.cgi", 502),
    ("/hang.cgi", 504),
];

fn every_cgi_outcome_carries_hsts_over_http1(mode: Mode) {
    let scratch = tempfile::tempdir().unwrap();
    let started = scratch.path().join("started");
    let root = site(&started);
    let server = https_cgi_server(mode, &root);
    for (path, status) in OUTCOMES {
        let resp = server.connect().roundtrip(request("GET", path, &[]));
        assert_eq!(resp.status, status, "{path}: {resp:#?}");
        assert_eq!(
            resp.header("strict-transport-security"),
            Some(HSTS),
            "{path}: {resp:#?}"
        );
        assert_eq!(resp.header_count("strict-transport-security"), 1, "{path}");
    }
    // 503: a second script while the first holds the one place. In inetd mode each
    // connection is a process of its own, with its own place: there, only HTTP/2's
    // concurrent streams can meet the bound (below).
    if mode == Mode::Standalone {
        let mut first = server.connect();
        first.send(request("GET", "/slow.cgi", &[]));
        wait_for_file(&started);
        let refused = server.connect().roundtrip(request("GET", "/ok.cgi", &[]));
        assert_eq!(refused.status, 503, "{refused:#?}");
        assert_eq!(refused.header("strict-transport-security"), Some(HSTS));
        let slow = first.read_response();
        assert_eq!(slow.status, 200, "{slow:#?}");
        assert_eq!(slow.header("strict-transport-security"), Some(HSTS));
    }
}

fn every_cgi_outcome_carries_hsts_over_h2(mode: Mode) {
    let scratch = tempfile::tempdir().unwrap();
    let started = scratch.path().join("started");
    let root = site(&started);
    let server = https_cgi_server(mode, &root);
    for (path, status) in OUTCOMES {
        let resp = server.connector().client_proto(Proto::Http2).get(path);
        assert!(resp.is_h2(), "{path}: {resp:#?}");
        assert_eq!(resp.status, status, "{path}: {resp:#?}");
        assert_eq!(
            resp.header_all("strict-transport-security"),
            [HSTS],
            "{path}: {resp:#?}"
        );
    }
    // Two scripts on concurrent streams of one connection: the second gets 503 while
    // the first holds the one place.
    let mut client = server.connector().client_proto(Proto::Http2);
    let slow = client.get("/slow.cgi");
    assert_eq!(slow.status, 200, "{slow:#?}");
    fs::remove_file(&started).unwrap();
    let both = client.send_all(vec![get_request("/slow.cgi"), get_request("/ok.cgi")]);
    let statuses: Vec<u16> = both.iter().map(|r| r.status).collect();
    assert!(statuses.contains(&503), "{statuses:?}");
    for resp in &both {
        assert_eq!(
            resp.header_all("strict-transport-security"),
            [HSTS],
            "{resp:#?}"
        );
    }
}

fn get_request(path: &str) -> hyper::Request<http_body_util::Full<hyper::body::Bytes>> {
    hyper::Request::get(path)
        .header("host", "localhost")
        .body(http_body_util::Full::default())
        .unwrap()
}

/// `Status: NNN` alone gets NNN's reason phrase from the registry, as any response
/// of the server's own does.
fn bare_status_gets_the_standard_reason(mode: Mode) {
    let root = Docroot::new();
    let cases = [
        (206, "Partial Content"),
        (412, "Precondition Failed"),
        (416, "Range Not Satisfiable"),
        (504, "Gateway Timeout"),
        (201, "Created"),
    ];
    for (code, _) in cases {
        script(
            &root,
            &format!("s{code}.cgi"),
            &format!("printf 'Status: {code}\\nContent-Type: text/plain\\n\\nx'\n"),
        );
    }
    let server = Server::builder(mode, root.path())
        .plain()
        .arg("--cgi")
        .start();
    for (code, reason) in cases {
        let resp = server
            .connect()
            .roundtrip(request("GET", &format!("/s{code}.cgi"), &[]));
        assert_eq!(
            (resp.status, resp.reason.as_str()),
            (code, reason),
            "{resp:#?}"
        );
    }
}

both_modes!(
    every_cgi_outcome_carries_hsts_over_http1,
    every_cgi_outcome_carries_hsts_over_h2,
    bare_status_gets_the_standard_reason,
);
