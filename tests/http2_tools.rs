//! HTTP/2 against real outside clients, on the demo site (`www/`): curl over HTTP/1.1
//! and over HTTP/2 (`--http2` on https, ALPN; `--http2-prior-knowledge` on http, h2c)
//! must get the same statuses, bodies and header fields (Date and HTTP/1.1's connection
//! fields aside); nghttp fetches a page and h2load makes 1000 requests without a failure.
//! Every test runs with staticd standalone and with `staticd --inetd` under tcpserver
//! (ucspi-tcp), and skips itself when a tool is missing (curl; nghttp and h2load are in
//! Debian's nghttp2-client), a failure under STATICD_TEST_REQUIRE_TOOLS=1, as in `.ci/run`.

#![cfg(feature = "http2")]

mod common;

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;

/// Bound for one run of curl, nghttp or h2load.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// How staticd runs for a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Serving {
    Standalone,
    /// `tcpserver -RHl0 127.0.0.1 PORT staticd --inetd ...`, a process per connection.
    Tcpserver,
}

/// Runs each listed `fn(Serving, Transport)` as `NAME::{standalone,tcpserver}_{h2c,h2}`.
macro_rules! servings {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use super::{Serving, Transport};
                #[test]
                fn standalone_h2c() {
                    super::$name(Serving::Standalone, Transport::Cleartext)
                }
                #[test]
                fn tcpserver_h2c() {
                    super::$name(Serving::Tcpserver, Transport::Cleartext)
                }
                #[cfg(feature = "tls")]
                #[test]
                fn standalone_h2() {
                    super::$name(Serving::Standalone, Transport::Tls)
                }
                #[cfg(feature = "tls")]
                #[test]
                fn tcpserver_h2() {
                    super::$name(Serving::Tcpserver, Transport::Tls)
                }
            }
        )*
    };
}

/// Cleartext (HTTP/2 is h2c with prior knowledge) or TLS (HTTP/2 by ALPN `h2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Cleartext,
    Tls,
}

fn www() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("www")
}

/// staticd serving `www/` with `--listing` and the common log format, in one of the ways.
struct Site {
    addr: SocketAddr,
    transport: Transport,
    stderr: Lines,
    _server: Option<Server>,
    _tcpserver: Option<ChildGuard>,
}

impl Site {
    /// None (after `skip`) when tcpserver is missing.
    fn start(serving: Serving, transport: Transport) -> Option<Site> {
        Site::start_logging(serving, transport, "common")
    }

    fn start_logging(serving: Serving, transport: Transport, log_format: &str) -> Option<Site> {
        let args = ["--listing"];
        let tls = (transport == Transport::Tls).then(|| Pki::shared().localhost().1.clone());
        match serving {
            Serving::Standalone => {
                let mut builder = Server::builder(Mode::Standalone, &www())
                    .log_format(log_format)
                    .args(args);
                builder = match &tls {
                    Some(files) => builder.tls_files(files),
                    None => builder.plain(),
                };
                let server = builder.start();
                Some(Site {
                    addr: server.addr(),
                    transport,
                    stderr: server.stderr().clone(),
                    _server: Some(server),
                    _tcpserver: None,
                })
            }
            Serving::Tcpserver => {
                let program = tool("tcpserver", "ucspi-tcp")?;
                let mut staticd_args: Vec<String> = vec![
                    "--inetd".into(),
                    "--log-format".into(),
                    log_format.into(),
                    "--root".into(),
                    www().display().to_string(),
                ];
                staticd_args.extend(args.iter().map(|a| a.to_string()));
                if let Some(files) = &tls {
                    staticd_args.extend(
                        files
                            .args()
                            .into_iter()
                            .map(|a| a.to_string_lossy().into_owned()),
                    );
                }
                let (process, stderr, addr) = start_tcpserver(&program, &staticd_args);
                Some(Site {
                    addr,
                    transport,
                    stderr,
                    _server: None,
                    _tcpserver: Some(process),
                })
            }
        }
    }

    fn url(&self, path: &str) -> String {
        let scheme = match self.transport {
            Transport::Cleartext => "http",
            Transport::Tls => "https",
        };
        format!("{scheme}://{}{path}", self.addr)
    }
}

/// Runs `cmd` with nothing on stdin; past [`TOOL_TIMEOUT`] it is killed and the test fails.
fn run_tool(cmd: &mut Command) -> Run {
    run_bounded(cmd, &[], TOOL_TIMEOUT)
}

// ---------------------------------------------------------------------------------------
// curl

/// Which HTTP curl is told to speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Http {
    One,
    Two,
}

/// One exchange as curl saw it.
#[derive(Debug)]
struct Fetched {
    /// `%{http_version}`: `1.1` or `2`.
    version: String,
    status: u16,
    /// Lower-cased names, in order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Fetched {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The fields both versions must agree on: all but Date and HTTP/1.1's
    /// connection-specific ones (RFC 9113 §8.2.2), sorted.
    fn comparable_fields(&self) -> Vec<(String, String)> {
        let mut fields: Vec<(String, String)> = self
            .headers
            .iter()
            .filter(|(n, _)| {
                ![
                    "date",
                    "connection",
                    "keep-alive",
                    "transfer-encoding",
                    "upgrade",
                    "proxy-connection",
                ]
                .contains(&n.as_str())
            })
            .cloned()
            .collect();
        fields.sort();
        fields
    }
}

/// `curl -sS [--http1.1 | --http2 | --http2-prior-knowledge] ARGS URL`, trusting the
/// test root for https.
fn curl_fetch(curl: &Path, site: &Site, http: Http, path: &str, args: &[&str]) -> Fetched {
    let dir = tempfile::tempdir().unwrap();
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let mut cmd = Command::new(curl);
    cmd.args(["-sS", "--max-time", "10", "-w", "%{http_version}"])
        .arg("-D")
        .arg(&head)
        .arg("-o")
        .arg(&body);
    cmd.arg(match (http, site.transport) {
        (Http::One, _) => "--http1.1",
        (Http::Two, Transport::Cleartext) => "--http2-prior-knowledge",
        (Http::Two, Transport::Tls) => "--http2",
    });
    if site.transport == Transport::Tls {
        cmd.arg("--cacert").arg(Pki::shared().root_file());
    }
    let url = site.url(path);
    cmd.args(args).arg(&url);
    let run = run_tool(&mut cmd);
    run.assert_success(&format!("curl {http:?} {args:?} {url}"));
    let head = fs::read_to_string(&head).unwrap();
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("curl {url}: status line {status_line:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    // With --head curl writes the head to -o as well: there is no body.
    let body = if args.contains(&"--head") {
        Vec::new()
    } else {
        fs::read(&body).unwrap_or_default()
    };
    Fetched {
        version: run.stdout.trim().to_string(),
        status,
        headers,
        body,
    }
}

impl Fetched {
    /// A multipart/byteranges boundary differs from one response to the next (a
    /// per-thread counter goes into it): replaced by `BOUNDARY` in the body and the field.
    fn without_boundary(mut self) -> Fetched {
        let Some(boundary) = self
            .header("content-type")
            .and_then(|t| t.split_once("boundary="))
            .map(|(_, b)| b.trim_matches('"').to_string())
        else {
            return self;
        };
        for (_, value) in &mut self.headers {
            *value = value.replace(&boundary, "BOUNDARY");
        }
        let body = String::from_utf8_lossy(&self.body).replace(&boundary, "BOUNDARY");
        self.body = body.into_bytes();
        self
    }
}

/// Fetches `path` with `args` over HTTP/1.1 and over HTTP/2, checks that each used the
/// version asked for, and that both got the same status, body and fields; returns the
/// HTTP/1.1 one.
fn same_over_both(curl: &Path, site: &Site, path: &str, args: &[&str]) -> Fetched {
    let one = curl_fetch(curl, site, Http::One, path, args).without_boundary();
    let two = curl_fetch(curl, site, Http::Two, path, args).without_boundary();
    let what = format!("{path} {args:?} over {:?}", site.transport);
    assert_eq!(one.version, "1.1", "{what}: curl --http1.1 used {one:#?}");
    assert_eq!(
        two.version, "2",
        "{what}: curl asked for HTTP/2 used {two:#?}"
    );
    assert_eq!(one.status, two.status, "{what}: status\n{one:#?}\n{two:#?}");
    assert!(
        one.body == two.body,
        "{what}: bodies differ\nHTTP/1.1: {:?}\nHTTP/2:   {:?}",
        String::from_utf8_lossy(&one.body),
        String::from_utf8_lossy(&two.body)
    );
    assert_eq!(
        one.comparable_fields(),
        two.comparable_fields(),
        "{what}: header fields differ"
    );
    one
}

/// Every file under `dir`, as URL paths (percent-encoded), sorted.
fn files_under(dir: &Path, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{prefix}{}", percent_encode(&name));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            out.extend(files_under(&entry.path(), &format!("{path}/")));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn percent_encode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn curl_gets_the_same_answers_over_http2_and_http1(serving: Serving, transport: Transport) {
    let Some(curl) = tool("curl", "curl") else {
        return;
    };
    let Some(site) = Site::start(serving, transport) else {
        return;
    };
    let files = files_under(&www(), "/");
    assert!(files.len() >= 8, "the demo site: {files:?}");
    for path in &files {
        if ["/_headers", "/_redirects"].contains(&path.as_str()) {
            // The site's configuration, never served.
            assert_eq!(same_over_both(&curl, &site, path, &[]).status, 404);
            continue;
        }
        let got = same_over_both(&curl, &site, path, &[]);
        assert_eq!(got.status, 200, "{path}: {got:#?}");
        let on_disk = fs::read(www().join(path_on_disk(path))).unwrap();
        assert!(got.body == on_disk, "{path}: the body is not the file");
        for field in ["etag", "last-modified", "content-length", "content-type"] {
            assert!(got.header(field).is_some(), "{path}: no {field}: {got:#?}");
        }
        let head = same_over_both(&curl, &site, path, &["--head"]);
        assert_eq!(head.status, 200, "HEAD {path}");
        assert!(head.body.is_empty(), "HEAD {path} has a body");
    }
    for dir in ["/", "/docs/"] {
        assert_eq!(same_over_both(&curl, &site, dir, &[]).status, 200, "{dir}");
    }
    // Directory listings, HTML and JSON.
    for dir in ["/files/", "/files/notes/"] {
        let html = same_over_both(&curl, &site, dir, &[]);
        assert_eq!(html.status, 200, "{dir}: {html:#?}");
        assert!(html.header("etag").is_some(), "{dir}: {html:#?}");
        let json = same_over_both(&curl, &site, dir, &["-H", "Accept: application/json"]);
        assert_eq!(json.status, 200, "{dir} as JSON");
        assert!(
            json.header("content-type")
                .is_some_and(|t| t.starts_with("application/json")),
            "{dir} as JSON: {json:#?}"
        );
    }
    // A directory without its slash, and an error.
    let redirect = same_over_both(&curl, &site, "/docs", &[]);
    assert_eq!(redirect.status, 301, "{redirect:#?}");
    assert!(redirect.header("location").is_some(), "{redirect:#?}");
    assert_eq!(
        same_over_both(&curl, &site, "/no-such-page.html", &[]).status,
        404
    );
    assert_eq!(
        same_over_both(
            &curl,
            &site,
            "/no-such-page.html",
            &["-H", "Accept: text/html"]
        )
        .status,
        404
    );
    // Ranges: one, several (multipart/byteranges), unsatisfiable.
    let one = same_over_both(&curl, &site, "/style.css", &["-r", "10-99"]);
    assert_eq!(one.status, 206, "{one:#?}");
    assert!(one.header("content-range").is_some(), "{one:#?}");
    assert_eq!(one.body.len(), 90);
    let several = same_over_both(&curl, &site, "/style.css", &["-r", "0-9,100-109,-5"]);
    assert_eq!(several.status, 206, "{several:#?}");
    assert!(
        several
            .header("content-type")
            .is_some_and(|t| t.starts_with("multipart/byteranges")),
        "{several:#?}"
    );
    let past = same_over_both(&curl, &site, "/style.css", &["-r", "999999-"]);
    assert_eq!(past.status, 416, "{past:#?}");
    // Conditional requests: 304 by ETag and by date, If-Range, 412.
    let full = curl_fetch(&curl, &site, Http::One, "/index.html", &[]);
    let etag = full.header("etag").expect("ETag").to_string();
    let modified = full
        .header("last-modified")
        .expect("Last-Modified")
        .to_string();
    let inm = format!("If-None-Match: {etag}");
    let ims = format!("If-Modified-Since: {modified}");
    let not_modified = same_over_both(&curl, &site, "/index.html", &["-H", &inm]);
    assert_eq!(not_modified.status, 304, "{not_modified:#?}");
    assert!(not_modified.body.is_empty());
    assert_eq!(
        same_over_both(&curl, &site, "/index.html", &["-H", &ims]).status,
        304
    );
    let if_range = format!("If-Range: {etag}");
    let ranged = same_over_both(&curl, &site, "/index.html", &["-r", "0-9", "-H", &if_range]);
    assert_eq!(ranged.status, 206, "{ranged:#?}");
    assert_eq!(
        same_over_both(&curl, &site, "/index.html", &["-H", "If-Match: \"other\""]).status,
        412
    );
    // The access log names the version each request came in.
    site.stderr
        .wait_for(IO_TIMEOUT, |lines| {
            lines.iter().any(|l| l.contains(" HTTP/2.0\" "))
                && lines.iter().any(|l| l.contains(" HTTP/1.1\" "))
        })
        .unwrap_or_else(|| {
            panic!(
                "no HTTP/2.0 and HTTP/1.1 lines in the access log: {:#?}",
                site.stderr.snapshot()
            )
        });
}

/// A URL path of [`files_under`] as a path under `www/`.
fn path_on_disk(path: &str) -> String {
    let bytes = path.trim_start_matches('/').as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

fn curl_verbose_shows_http2_in_use(serving: Serving, transport: Transport) {
    let Some(curl) = tool("curl", "curl") else {
        return;
    };
    let Some(site) = Site::start(serving, transport) else {
        return;
    };
    let mut cmd = Command::new(&curl);
    cmd.args(["-sv", "--max-time", "10", "-o", "/dev/null"]);
    match transport {
        Transport::Cleartext => {
            cmd.arg("--http2-prior-knowledge");
        }
        Transport::Tls => {
            cmd.arg("--http2")
                .arg("--cacert")
                .arg(Pki::shared().root_file());
        }
    }
    // Over TLS two URLs, the second a second stream on the same connection. curl 7.88.1
    // (Debian 12) cannot reuse an h2c prior-knowledge connection (curl issue 10634,
    // fixed in 8.0): a second URL there fails with "Error in the HTTP2 framing layer"
    // before it sends anything.
    cmd.arg(site.url("/index.html"));
    if transport == Transport::Tls {
        cmd.arg("-o").arg("/dev/null").arg(site.url("/style.css"));
    }
    let run = run_tool(&mut cmd);
    run.assert_success("curl -v");
    let trace = &run.stderr;
    let mut expected = vec![
        "> GET /index.html HTTP/2",
        "< HTTP/2 200",
        "< server: staticd",
    ];
    if transport == Transport::Tls {
        expected.extend(["ALPN: server accepted h2", "using HTTP/2"]);
    }
    for line in expected {
        assert!(trace.contains(line), "curl -v shows no {line:?}:\n{trace}");
    }
    assert!(
        !trace.contains("< HTTP/1.1"),
        "an HTTP/1.1 response:\n{trace}"
    );
    if transport == Transport::Tls {
        assert!(
            trace.contains("Re-using existing") || trace.contains("Reusing existing"),
            "curl did not reuse the HTTP/2 connection:\n{trace}"
        );
        assert_eq!(
            trace.matches("< HTTP/2 200").count(),
            2,
            "two responses over HTTP/2:\n{trace}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// nghttp and h2load (nghttp2-client)

fn nghttp_fetches_a_page(serving: Serving, transport: Transport) {
    let Some(nghttp) = tool("nghttp", "nghttp2-client") else {
        return;
    };
    let Some(site) = Site::start(serving, transport) else {
        return;
    };
    let run = run_tool(
        Command::new(nghttp)
            .args(["-nv", "-t", "10"])
            .arg(site.url("/index.html")),
    );
    run.assert_success("nghttp -nv");
    let out = &run.stdout;
    for expected in [
        "recv SETTINGS frame",
        "recv HEADERS frame <length=",
        ":status: 200",
        "content-type: text/html",
        "recv DATA frame",
        "END_STREAM",
        "send GOAWAY frame",
    ] {
        assert!(
            out.contains(expected),
            "nghttp shows no {expected:?}:\n{out}"
        );
    }
    // nghttp asks for `gzip, deflate`: the page goes out compressed on the
    // fly, with its own length.
    for expected in ["content-encoding: gzip", "vary: Accept-Encoding"] {
        assert!(
            out.contains(expected),
            "nghttp shows no {expected:?}:\n{out}"
        );
    }
    let size = fs::metadata(www().join("index.html")).unwrap().len();
    let length = out
        .split("content-length: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("nghttp shows no content-length:\n{out}"));
    assert!(length > 0 && length < size, "{length} of {size}:\n{out}");
    if transport == Transport::Tls {
        assert!(
            out.contains("The negotiated protocol: h2"),
            "nghttp did not negotiate h2:\n{out}"
        );
    }
}

fn h2load_makes_1000_requests_without_a_failure(serving: Serving, transport: Transport) {
    let Some(h2load) = tool("h2load", "nghttp2-client") else {
        return;
    };
    let Some(site) = Site::start_logging(serving, transport, "off") else {
        return;
    };
    let run = run_tool(
        Command::new(h2load)
            .args(["-n", "1000", "-c", "10", "-m", "10", "-T", "10", "-N", "10"])
            .arg(site.url("/index.html")),
    );
    run.assert_success("h2load");
    let out = &run.stdout;
    let protocol = match transport {
        Transport::Cleartext => "Application protocol: h2c",
        Transport::Tls => "Application protocol: h2",
    };
    for expected in [
        "requests: 1000 total, 1000 started, 1000 done, 1000 succeeded, 0 failed, 0 errored, 0 timeout",
        "status codes: 1000 2xx, 0 3xx, 0 4xx, 0 5xx",
        protocol,
    ] {
        assert!(out.contains(expected), "h2load shows no {expected:?}:\n{out}");
    }
}

servings!(
    curl_gets_the_same_answers_over_http2_and_http1,
    curl_verbose_shows_http2_in_use,
    nghttp_fetches_a_page,
    h2load_makes_1000_requests_without_a_failure,
);

/// h2load with windows wide open (`-w 30 -W 30`) and ten streams per connection of
/// a 3 MB file: the server's socket fills and empties again many times a second, and
/// every stream must still end whole (a write resumed after WouldBlock once sent TLS
/// records twice, and streams lost their END_STREAM).
fn h2load_takes_large_files_on_ten_streams_at_full_speed(variant: Variant) {
    h2load_large_files(variant, false);
}

fn h2load_large_files(variant: Variant, io_uring: bool) {
    let Some(h2load) = tool("h2load", "nghttp2-client") else {
        return;
    };
    let root = Docroot::new();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let big: Vec<u8> = (0..3 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    root.file("big.bin", &big);
    let mut builder = Server::builder(variant, root.path()).log_format("off");
    if io_uring {
        builder = builder.io_uring();
    }
    let server = builder.start();
    let run = run_tool(
        Command::new(h2load)
            .args(["-n", "200", "-c", "4", "-m", "10", "-w", "30", "-W", "30"])
            .arg(server.url("/big.bin")),
    );
    run.assert_success("h2load");
    let expected =
        "requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout";
    assert!(
        run.stdout.contains(expected),
        "h2load shows no {expected:?}:\n{}",
        run.stdout
    );
}

#[test]
fn h2load_large_files_standalone_h2c() {
    h2load_takes_large_files_on_ten_streams_at_full_speed(Variant::h2c(Mode::Standalone));
}

#[cfg(feature = "tls")]
#[test]
fn h2load_large_files_standalone_h2_tls() {
    h2load_takes_large_files_on_ten_streams_at_full_speed(Variant::h2_tls(Mode::Standalone));
}

#[test]
fn h2load_large_files_inetd_h2c() {
    h2load_takes_large_files_on_ten_streams_at_full_speed(Variant::h2c(Mode::Inetd));
}

#[cfg(feature = "tls")]
#[test]
fn h2load_large_files_inetd_h2_tls() {
    h2load_takes_large_files_on_ten_streams_at_full_speed(Variant::h2_tls(Mode::Inetd));
}

/// The same over `--io-uring` (its adapter holds written bytes until a flush).
#[cfg(feature = "uring")]
mod h2load_large_files {
    mod uring {
        use crate::common::{Mode, Variant};

        #[test]
        fn h2c() {
            crate::h2load_large_files(Variant::h2c(Mode::Standalone), true);
        }

        #[cfg(feature = "tls")]
        #[test]
        fn h2_tls() {
            crate::h2load_large_files(Variant::h2_tls(Mode::Standalone), true);
        }
    }
}
