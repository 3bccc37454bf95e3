//! End-to-end checks with curl, in both modes.

#[macro_use]
mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::*;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root.file("b.txt", "bravo bravo\n");
    root
}

/// `curl -sv --max-time 10 --http1.1 ARGS`, trusting the test root CA for `https://` URLs
/// (a server of a TLS cell). HTTP/1.1 even over TLS, where curl would choose
/// h2 by ALPN: these checks read HTTP/1.1's trace; tests/http2_tools.rs has curl's h2.
fn curl(curl: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(curl);
    cmd.args(["-sv", "--max-time", "10", "--http1.1"]);
    if args.iter().any(|a| a.starts_with("https://")) {
        cmd.arg("--cacert").arg(Pki::shared().root_file());
    }
    let output = cmd.args(args).output().expect("run curl");
    assert!(
        output.status.success(),
        "curl {args:?} failed ({}): {}",
        describe(output.status),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn curl_gets_a_file_with_its_headers(v: Variant) {
    let Some(curl_bin) = tool("curl", "curl") else {
        return;
    };
    let root = site();
    let server = Server::start(v, &root);
    let output = curl(&curl_bin, &[&server.url("/a.txt")]);
    assert_eq!(output.stdout, b"alpha\n");
    let trace = String::from_utf8_lossy(&output.stderr).to_ascii_lowercase();
    for expected in [
        "< http/1.1 200",
        "< content-type: text/plain; charset=utf-8",
        "< content-length: 6",
        "< accept-ranges: bytes",
        "< server: staticd",
    ] {
        assert!(
            trace.contains(expected),
            "curl saw no {expected:?}:\n{trace}"
        );
    }
}

fn curl_reuses_one_connection_for_two_urls(v: Variant) {
    let Some(curl_bin) = tool("curl", "curl") else {
        return;
    };
    let root = site();
    let server = Server::start(v, &root);
    let output = curl(&curl_bin, &[&server.url("/a.txt"), &server.url("/b.txt")]);
    assert_eq!(output.stdout, b"alpha\nbravo bravo\n");
    let trace = String::from_utf8_lossy(&output.stderr);
    assert!(
        trace.contains("Re-using existing") || trace.contains("Reusing existing"),
        "curl did not reuse the connection:\n{trace}"
    );
}

fn curl_range_request_gets_the_bytes(v: Variant) {
    let Some(curl_bin) = tool("curl", "curl") else {
        return;
    };
    let root = site();
    let server = Server::start(v, &root);
    let output = curl(&curl_bin, &["-r", "2-4", &server.url("/a.txt")]);
    assert_eq!(output.stdout, b"pha");
    let trace = String::from_utf8_lossy(&output.stderr).to_ascii_lowercase();
    assert!(trace.contains("< http/1.1 206"), "{trace}");
    assert!(trace.contains("< content-range: bytes 2-4/6"), "{trace}");
}

matrix!([h1, tls] both_modes:
    curl_gets_a_file_with_its_headers,
    curl_reuses_one_connection_for_two_urls,
    curl_range_request_gets_the_bytes,
);
