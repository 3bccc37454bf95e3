//! HTTP/3 against real outside clients: aioquic's (tests/tools/h3.py), ngtcp2's
//! example client (Debian's ngtcp2-client) and headless Chromium each fetch the
//! demo site (www/) over h3, and get what HTTP/1.1 gets. Each skips itself when
//! its client is missing (a failure under STATICD_TEST_REQUIRE_TOOLS=1, as in
//! `.ci/run`).

#![cfg(feature = "http3")]

#[macro_use]
mod common;
#[path = "common/h3tools.rs"]
mod h3tools;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use h3tools::*;

/// Demo-site paths fetched by every client: pages, a stylesheet, images, a
/// directory's index, and a 404 with the site's own page.
const PATHS: [&str; 6] = [
    "/",
    "/style.css",
    "/logo.svg",
    "/favicon.png",
    "/docs/",
    "/no-such-page",
];

fn demo_site() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("www")
}

fn https_server(root: &Path) -> Server {
    Server::builder(Variant::tls(Mode::Standalone), root)
        .log_format("common")
        .start()
}

/// Status and body of `path` over HTTP/1.1 (over TLS, TCP).
fn over_http1(server: &Server, path: &str) -> (u16, Vec<u8>) {
    let resp = server.client_http1().get(path);
    (resp.status, resp.body)
}

#[test]
fn aioquic_gets_the_demo_site_as_http1_does() {
    let Some(aioquic) = aioquic() else { return };
    let server = https_server(&demo_site());
    let port = server.addr().port();
    let out = tempfile::tempdir().unwrap();
    let ca = Pki::shared().root_file();
    let urls: Vec<String> = PATHS
        .iter()
        .map(|p| format!("https://localhost:{port}{p}"))
        .collect();
    let mut args = vec!["get", "--ca", ca.to_str().unwrap()];
    args.extend(["--out", out.path().to_str().unwrap()]);
    args.extend(urls.iter().map(String::as_str));
    let (json, run) = h3py(&aioquic, &args);
    for (n, path) in PATHS.iter().enumerate() {
        let got = &json["responses"][n];
        assert_eq!(got["done"], true, "{path}: {}", run.stdout);
        let (status, body) = over_http1(&server, path);
        assert_eq!(got["status"], status, "{path}: {}", run.stdout);
        let h3_body = fs::read(out.path().join(n.to_string())).unwrap();
        assert!(
            h3_body == body,
            "{path}: the h3 body differs from HTTP/1.1's"
        );
        assert_eq!(got["headers"]["server"][0], "staticd");
    }
    server
        .stderr()
        .wait_for(IO_TIMEOUT, |lines| {
            lines.iter().filter(|l| l.contains("HTTP/3.0\" ")).count() >= PATHS.len()
        })
        .expect("a log line per h3 request, saying HTTP/3.0");
}

#[test]
fn ngtcp2_client_gets_the_demo_site_as_http1_does() {
    let Some(client) = tool("gtlsclient", "ngtcp2-client") else {
        return;
    };
    let server = https_server(&demo_site());
    let port = server.addr().port().to_string();
    let out = tempfile::tempdir().unwrap();
    // ngtcp2's example client saves a body under its path's last segment:
    // the files, not the directories.
    let files = ["/style.css", "/logo.svg", "/favicon.png", "/index.html"];
    let mut cmd = Command::new(client);
    cmd.args(["-q", "--exit-on-all-streams-close"])
        .arg(format!("--download={}", out.path().display()))
        .args(["127.0.0.1", &port]);
    cmd.args(files.iter().map(|f| format!("https://127.0.0.1:{port}{f}")));
    let run = run_bounded(&mut cmd, b"", CLIENT_TIMEOUT);
    run.assert_success("gtlsclient");
    for file in files {
        let (status, body) = over_http1(&server, file);
        assert_eq!(status, 200, "{file}");
        let name = file.trim_start_matches('/');
        let got = fs::read(out.path().join(name))
            .unwrap_or_else(|e| panic!("{}", run.describe(&format!("{name}: {e}"))));
        assert!(got == body, "{file}: ngtcp2's body differs from HTTP/1.1's");
    }
    server
        .stderr()
        .wait_for(IO_TIMEOUT, |lines| {
            lines
                .iter()
                .filter(|l| l.contains("HTTP/3.0\" 200"))
                .count()
                >= files.len()
        })
        .expect("a log line per h3 request, saying HTTP/3.0");
}

/// A page with the demo site's stylesheet and logo that, once loaded, lists
/// every resource it fetched with its protocol (`performance.getEntries()`'s
/// `nextHopProtocol`) in its title.
const PROBE_PAGE: &str = r#"<!doctype html><title>pending</title>
<link rel="stylesheet" href="/style.css"><img src="/logo.svg" alt="">
<script>
addEventListener('load', () => {
  document.title = performance.getEntries()
    .filter(e => e.nextHopProtocol !== undefined)
    .map(e => e.name.replace(location.origin, '') + '=' + e.nextHopProtocol).join(' ');
});
</script>"#;

/// The base64 SHA-256 of a certificate's public key, as Chromium's
/// --ignore-certificate-errors-spki-list takes it.
fn spki_hash(cert_pem: &Path) -> String {
    let script = format!(
        "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der \
         | openssl dgst -sha256 -binary | base64",
        cert_pem.display()
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn chromium(user_data: &Path, port: u16, spki: &str) -> Command {
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-quic",
    ])
    .arg(format!("--user-data-dir={}", user_data.display()))
    .arg(format!("--origin-to-force-quic-on=127.0.0.1:{port}"))
    .arg(format!("--ignore-certificate-errors-spki-list={spki}"));
    cmd
}

#[test]
fn chromium_loads_the_demo_site_over_h3() {
    if tool("chromium", "chromium").is_none() || tool("openssl", "openssl").is_none() {
        return;
    }
    // The demo site, and the probe page beside it.
    let root = Docroot::new();
    let copy = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", demo_site().display()))
        .arg(root.path())
        .status()
        .unwrap();
    assert!(copy.success());
    root.file("h3-probe.html", PROBE_PAGE);
    let server = https_server(root.path());
    let port = server.addr().port();
    let (_, files) = Pki::shared().localhost();
    let spki = spki_hash(&files.cert);
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = chromium(profile.path(), port, &spki);
    cmd.args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("https://127.0.0.1:{port}/h3-probe.html"));
    let run = run_bounded(&mut cmd, b"", CLIENT_TIMEOUT);
    run.assert_success("chromium --dump-dom");
    let title = run
        .stdout
        .split("<title>")
        .nth(1)
        .and_then(|t| t.split("</title>").next())
        .unwrap_or_default()
        .to_string();
    let entries: Vec<&str> = title.split_whitespace().collect();
    for wanted in ["/h3-probe.html", "/style.css", "/logo.svg"] {
        let protocol = entries
            .iter()
            .find_map(|e| e.strip_prefix(wanted).and_then(|p| p.strip_prefix('=')));
        assert_eq!(protocol, Some("h3"), "{wanted} in {title:?}");
    }
    assert!(
        entries.iter().all(|e| e.ends_with("=h3")),
        "every resource over h3: {title:?}"
    );
    // The front page itself, drawn as a person would see it (the image was
    // looked at when this test was written; here, that one was drawn), and
    // every request of its loading logged as HTTP/3.
    let shot = profile.path().join("front.png");
    let mut cmd = chromium(profile.path(), port, &spki);
    cmd.args(["--window-size=1280,900"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("https://127.0.0.1:{port}/"));
    run_bounded(&mut cmd, b"", CLIENT_TIMEOUT).assert_success("chromium --screenshot");
    let png = fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    let front = [
        "GET / ",
        "GET /style.css ",
        "GET /logo.svg ",
        "GET /favicon.png ",
    ];
    let lines = server
        .stderr()
        .wait_for(IO_TIMEOUT, |lines| {
            front.iter().all(|r| {
                lines
                    .iter()
                    .any(|l| l.contains(&format!("{r}HTTP/3.0\" 200")))
            })
        })
        .unwrap_or_else(|| {
            panic!(
                "the front page's requests over HTTP/3: {:#?}",
                server.stderr().snapshot()
            )
        });
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("HTTP/1.1\"") || l.contains("HTTP/2.0\"")),
        "Chromium used only HTTP/3: {lines:#?}"
    );
}

#[test]
fn sigterm_lets_an_h3_stream_in_flight_finish_and_exits_zero() {
    // Large enough to be still on its way when the stop comes.
    const BIG: u64 = 4 << 20;
    let Some(aioquic) = aioquic() else { return };
    let root = Docroot::new();
    write_pattern_file(&root.join("big.bin"), BIG);
    // A grace long enough for aioquic (pure Python) to take the file on a
    // machine busy with other tests: 10 s was not, once (3.75 of 4 MiB).
    let mut server = Server::builder(Variant::tls(Mode::Standalone), root.path())
        .log_format("common")
        .args(["--shutdown-grace", "60"])
        .start();
    let url = format!("https://localhost:{}/big.bin", server.addr().port());
    let ca = Pki::shared().root_file().display().to_string();
    // Outside the root: the client creates it when the response has begun.
    let scratch = Docroot::new();
    let started = scratch.join("started");
    let started_arg = started.display().to_string();
    let (json, status) = std::thread::scope(|s| {
        let download = s.spawn(|| {
            h3py(
                &aioquic,
                // The client's own deadline near the grace (60 s): aioquic on
                // a loaded machine took more than its default 10 s for 4 MiB.
                &[
                    "get",
                    "--ca",
                    &ca,
                    "--started",
                    &started_arg,
                    "--timeout",
                    "45",
                    &url,
                ],
            )
        });
        // The stop comes once the response is under way, not after a fixed
        // pause: on a loaded machine Python may take seconds to start.
        wait_for_file(&started);
        let logged = server.stderr().snapshot();
        assert!(
            !logged.iter().any(|l| l.contains("/big.bin")),
            "the download ended before the stop: the test proves nothing"
        );
        server.process().signal(rustix::process::Signal::TERM);
        let (json, _) = download.join().unwrap();
        let status = server
            .process()
            .wait_timeout(Duration::from_secs(70))
            .expect("staticd still running 70 s after SIGTERM");
        (json, status)
    });
    assert_eq!(json["responses"][0]["status"], 200, "{json}");
    assert_eq!(
        json["responses"][0]["length"], BIG,
        "the stream in flight was cut short"
    );
    assert_eq!(status.code(), Some(0), "{status:?}");
}
