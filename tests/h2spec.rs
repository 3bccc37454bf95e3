//! h2spec, the HTTP/2 conformance suite (146 cases), against staticd over TLS (ALPN h2)
//! and h2c (prior knowledge), standalone and under inetd (`--inetd` behind the harness's
//! acceptor, a process per connection), and over io_uring when built with it.
//!
//! Over TLS every case must pass. In h2c one case is answered as HTTP/1.1 by design:
//! 3.5 #2 sends `INVALID CONNECTION PREFACE` on a cleartext port, where nothing says the
//! client speaks HTTP/2, so staticd answers it as the HTTP/1.1 request line it might be
//! (400 Bad Request), as it does any other garbage; over TLS, ALPN said h2 and the same
//! bytes get GOAWAY(PROTOCOL_ERROR). Every other case must pass in h2c too.
//!
//! h2spec is found at `../shared/bin/h2spec` (beside the repository in this workplace) or
//! on PATH; without it the test says `skipped:` (a failure under `.ci/run`).

#![cfg(feature = "http2")]

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::*;

/// h2spec runs 146 cases with a 2 s timeout each; a whole run takes well under this.
const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// The case h2c answers as HTTP/1.1 (see the module's comment).
const H2C_BY_DESIGN: &str = "Sends invalid connection preface";

fn h2spec() -> Option<PathBuf> {
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/bin/h2spec");
    if beside.is_file() {
        return Some(beside);
    }
    tool("h2spec", "none: build it as ../shared/tools/README.md says")
}

fn conformance(variant: Variant) {
    let Some(h2spec) = h2spec() else { return };
    let root = Docroot::new();
    root.file("index.html", "<p>h2spec</p>\n");
    let server = Server::start(variant, &root);
    let port = server.addr().port().to_string();
    let mut command = Command::new(h2spec);
    command.args(["-h", "127.0.0.1", "-p", &port, "-o", "2"]);
    if variant.is_tls() {
        command.args(["-t", "-k"]);
    }
    let run = run_bounded(&mut command, b"", RUN_TIMEOUT);
    let out = run.stdout.clone();
    let summary = out
        .lines()
        .rev()
        .find(|l| l.contains(" tests, "))
        .unwrap_or_else(|| panic!("h2spec printed no summary:\n{out}"));
    eprintln!("h2spec {variant:?}: {summary}");
    // The failures, as h2spec lists them again at the end.
    let failures: Vec<&str> = out
        .split("Failures:")
        .nth(1)
        .unwrap_or("")
        .lines()
        .filter(|l| l.trim_start().starts_with('×'))
        .map(str::trim)
        .collect();
    let expected: &[&str] = if variant.is_tls() {
        &[]
    } else {
        &[H2C_BY_DESIGN]
    };
    let unexpected: Vec<&&str> = failures
        .iter()
        .filter(|f| !expected.iter().any(|e| f.contains(e)))
        .collect();
    assert!(
        summary.starts_with("146 tests, "),
        "h2spec ran other than 146 cases: {summary}"
    );
    assert!(
        unexpected.is_empty(),
        "h2spec failures: {unexpected:#?}\n{summary}\n{out}"
    );
    let passed = 146 - failures.len();
    assert!(
        summary.contains(&format!(" {passed} passed")),
        "{summary} (failures listed: {failures:?})"
    );
}

#[test]
fn standalone_h2_tls() {
    conformance(Variant::h2_tls(Mode::Standalone));
}

#[test]
fn standalone_h2c() {
    conformance(Variant::h2c(Mode::Standalone));
}

#[test]
fn inetd_h2_tls() {
    conformance(Variant::h2_tls(Mode::Inetd));
}

#[test]
fn inetd_h2c() {
    conformance(Variant::h2c(Mode::Inetd));
}
