//! Varnish (Debian's `varnish`) in front of a standalone staticd, configured by
//! examples/varnish/staticd.vcl with only the backend port (and, where a test
//! says so, the large-file size) changed: what a cache makes of staticd's
//! answers. Hits, revalidation with 304, a changed file, ranges, one object per
//! content coding, 404s and redirects, what is passed, and grace.
//!
//! Every request goes to Varnish on a fresh connection; staticd's access log
//! (`common`) shows what reached the backend.
#![cfg(feature = "compress")]

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// The example this file tests, as shipped.
const EXAMPLE_VCL: &str = include_str!("../examples/varnish/staticd.vcl");

/// The example with its backend on `backend`, and each `(from, to)` of `edits`
/// made (each `from` must occur in it exactly once).
fn vcl_for(backend: SocketAddr, edits: &[(&str, &str)]) -> String {
    assert_eq!(backend.ip().to_string(), "127.0.0.1", "the example's host");
    let port = format!(r#".port = "{}";"#, backend.port());
    let mut vcl = EXAMPLE_VCL.to_string();
    for (from, to) in [(r#".port = "8080";"#, port.as_str())].iter().chain(edits) {
        assert_eq!(
            vcl.matches(from).count(),
            1,
            "examples/varnish/staticd.vcl should contain {from:?} once"
        );
        vcl = vcl.replace(from, to);
    }
    vcl
}

/// `varnishd -F` on a free loopback port, in its own process group, which is
/// stopped (SIGTERM, then SIGKILL) on drop: the manager and its cache child.
struct Varnish {
    child: Child,
    addr: SocketAddr,
    output: Lines,
    _dir: tempfile::TempDir,
}

/// Debian installs varnishd in /usr/sbin, which a non-root PATH may lack.
fn varnishd() -> Option<PathBuf> {
    let sbin = Path::new("/usr/sbin/varnishd");
    if sbin.is_file() {
        return Some(sbin.to_path_buf());
    }
    tool("varnishd", "varnish")
}

impl Varnish {
    fn start(program: &Path, vcl: &str, params: &[&str]) -> Varnish {
        let mut exits = Vec::new();
        // A free port can be taken by another test before varnishd binds it:
        // then varnishd exits, and another port is tried. A slow start is
        // waited for, not retried: a new try compiles the VCL again, and
        // under load each of three tries ran out of time that way.
        for _ in 0..3 {
            match Varnish::try_start(program, vcl, params) {
                Ok(varnish) => return varnish,
                Err(why) => exits.push(why),
            }
        }
        panic!("varnishd did not start: {exits:#?}");
    }

    /// varnishd, once it serves; Err (with its output) if it exits first.
    fn try_start(program: &Path, vcl: &str, params: &[&str]) -> Result<Varnish, String> {
        let dir = tempfile::tempdir().expect("temp dir for varnishd");
        let vcl_file = dir.path().join("staticd.vcl");
        fs::write(&vcl_file, vcl).unwrap();
        // varnishd's unprivileged users must read the file and reach the
        // working directory, which varnishd makes itself.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(&vcl_file, fs::Permissions::from_mode(0o644)).unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut cmd = Command::new(program);
        cmd.arg("-F")
            .args(["-a", &addr.to_string()])
            .arg("-f")
            .arg(&vcl_file)
            .arg("-n")
            .arg(dir.path().join("work"))
            .args(["-s", "malloc,32m"])
            // Few threads and a small shared log: several of these run at
            // once, next to the rest of the suite.
            .args(["-p", "thread_pools=1", "-p", "thread_pool_min=10"])
            .args(["-p", "vsl_space=1M"]);
        for param in params {
            cmd.args(["-p", param]);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().expect("spawn varnishd");
        let output = Lines::default();
        let drains = [
            output.drain(child.stdout.take().unwrap()),
            output.drain(child.stderr.take().unwrap()),
        ];
        let mut varnish = Varnish {
            child,
            addr,
            output,
            _dir: dir,
        };
        match varnish.wait_until_serving() {
            Ok(()) => Ok(varnish),
            Err(status) => {
                // Its last words (why it exited) reach the drains by the
                // end of its output.
                let deadline = Instant::now() + IO_TIMEOUT;
                while drains.iter().any(|d| !d.is_finished()) && Instant::now() < deadline {
                    thread::sleep(Duration::from_millis(10));
                }
                Err(format!(
                    "exited ({}): {:#?}",
                    describe(status),
                    varnish.output.snapshot()
                ))
            }
        }
    }

    /// Waits until the cache child has started and the address takes
    /// connections (the manager compiles the VCL first, with gcc: seconds
    /// when both cores are busy). Err with the exit status if varnishd exits
    /// first; a panic only if it does neither within [`START_TIMEOUT`].
    fn wait_until_serving(&mut self) -> Result<(), ExitStatus> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let started = self.output.wait_for(Duration::from_millis(100), |lines| {
                lines.iter().any(|l| l.contains("said Child starts"))
            });
            if started.is_some() && TcpStream::connect(self.addr).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(status);
            }
            assert!(
                Instant::now() < deadline,
                "varnishd neither served on {} nor exited within {START_TIMEOUT:?}: {:#?}",
                self.addr,
                self.output.snapshot()
            );
        }
    }
}

impl Drop for Varnish {
    fn drop(&mut self) {
        let group = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        // Whatever is left of the group (a cache child the manager did not
        // get to stop) goes too.
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let _ = self.child.wait();
    }
}

/// staticd behind Varnish.
struct Stack {
    root: Docroot,
    staticd: Server,
    varnish: Varnish,
}

/// What a stack is started with besides its site.
#[derive(Clone, Copy)]
struct Options<'a> {
    staticd_args: &'a [&'a str],
    varnish_params: &'a [&'a str],
    /// Changes to the example VCL (see [`vcl_for`]).
    vcl_edits: &'a [(&'a str, &'a str)],
}

const DEFAULTS: Options<'static> = Options {
    staticd_args: &[],
    varnish_params: &[],
    vcl_edits: &[],
};

/// Starts staticd on `root` and Varnish in front of it; None (after `skip`)
/// without varnishd.
fn stack(root: Docroot, options: Options) -> Option<Stack> {
    let program = varnishd()?;
    // Cleartext, whatever the harness's environment says: Varnish speaks
    // plain HTTP/1.1 to its backends.
    let staticd = Server::builder(Mode::Standalone, root.path())
        .plain()
        .log_format("common")
        .args(options.staticd_args)
        .start();
    let vcl = vcl_for(staticd.addr(), options.vcl_edits);
    let varnish = Varnish::start(&program, &vcl, options.varnish_params);
    Some(Stack {
        root,
        staticd,
        varnish,
    })
}

impl Stack {
    /// One request to Varnish on a fresh connection.
    fn send(&self, method: &str, path: &str, headers: &[&str]) -> Response {
        let stream = TcpStream::connect(self.varnish.addr).expect("connect to varnishd");
        let mut conn = Conn::new(stream);
        let resp = conn.roundtrip(request(method, path, headers));
        assert!(
            resp.status != 503,
            "Varnish could not fetch {path}: {resp:#?}\nvarnishd: {:#?}\nstaticd: {:#?}",
            self.varnish.output.snapshot(),
            self.staticd.stderr().snapshot()
        );
        resp
    }

    fn get(&self, path: &str, headers: &[&str]) -> Response {
        self.send("GET", path, headers)
    }

    /// How many access-log lines staticd has written that contain `needle`
    /// (such as `"GET /a.txt HTTP/1.1" 200`).
    fn backend_count(&self, needle: &str) -> usize {
        self.staticd
            .stderr()
            .snapshot()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Waits until staticd has logged `n` lines containing `needle`.
    fn wait_backend(&self, needle: &str, n: usize) {
        let seen = self.staticd.stderr().wait_for(IO_TIMEOUT, |lines| {
            lines.iter().filter(|l| l.contains(needle)).count() >= n
        });
        assert!(
            seen.is_some(),
            "staticd did not log {n} × {needle:?} within {IO_TIMEOUT:?}: {:#?}",
            self.staticd.stderr().snapshot()
        );
    }

    /// A fetch of a new file through Varnish, waited for in staticd's log: a
    /// request that wrongly reached staticd before it has been logged by now.
    fn barrier(&self) {
        let name = format!("barrier-{}.txt", self.backend_count("/barrier-"));
        self.root.file(&name, "barrier\n");
        assert_eq!(self.get(&format!("/{name}"), &[]).status, 200);
        self.wait_backend(&format!("\"GET /{name} HTTP/1.1\" 200"), 1);
    }
}

/// `GET PATH HTTP/1.1" STATUS`, as the access log writes a request to staticd.
fn logged(method: &str, path: &str, status: u16) -> String {
    format!("\"{method} {path} HTTP/1.1\" {status}")
}

/// The Varnish transaction ids in X-Varnish: one on a miss, two (this
/// request's and the one that stored the object) on a hit.
fn varnish_ids(resp: &Response) -> usize {
    resp.header("x-varnish")
        .unwrap_or_else(|| panic!("no X-Varnish: {resp:#?}"))
        .split_whitespace()
        .count()
}

fn assert_hit(resp: &Response) {
    assert_eq!(varnish_ids(resp), 2, "X-Varnish of a hit: {resp:#?}");
    assert_eq!(resp.header("x-cache"), Some("hit"), "{resp:#?}");
}

fn assert_miss(resp: &Response) {
    assert_eq!(
        varnish_ids(resp),
        1,
        "X-Varnish of a miss or pass: {resp:#?}"
    );
    assert_eq!(resp.header("x-cache"), Some("miss"), "{resp:#?}");
}

fn age(resp: &Response) -> u64 {
    resp.header("age")
        .unwrap_or_else(|| panic!("no Age: {resp:#?}"))
        .parse()
        .expect("numeric Age")
}

/// `_headers` giving `path` a one-second lifetime, so a test sees it expire.
fn short_lifetime(root: &Docroot, path: &str) {
    root.file("_headers", format!("{path}\n  Cache-Control: max-age=1\n"));
}

/// Sleeps until `since` is more than a second (the short lifetime) ago.
fn sleep_past_lifetime(since: Instant) {
    let past = since + Duration::from_millis(1500);
    thread::sleep(past.saturating_duration_since(Instant::now()));
}

#[test]
fn repeated_request_is_a_cache_hit() {
    let root = Docroot::new();
    root.file("a.txt", "alpha alpha\n");
    let Some(stack) = stack(root, DEFAULTS) else {
        return;
    };
    let first = stack.get("/a.txt", &[]);
    assert_eq!(first.status, 200);
    assert_eq!(first.body, b"alpha alpha\n");
    assert_miss(&first);
    let fetched = Instant::now();

    let second = stack.get("/a.txt", &[]);
    assert_eq!(second.status, 200);
    assert_eq!(second.body, b"alpha alpha\n");
    assert_eq!(second.header("etag"), first.header("etag"));
    assert_eq!(
        second.header("last-modified"),
        first.header("last-modified")
    );
    assert_hit(&second);

    thread::sleep(
        (fetched + Duration::from_millis(1100)).saturating_duration_since(Instant::now()),
    );
    let later = stack.get("/a.txt", &[]);
    assert_hit(&later);
    assert!(
        age(&later) >= 1,
        "Age of an object cached a second ago: {later:#?}"
    );

    // A client's own validators are checked by Varnish against the cached
    // object: 304 without asking staticd.
    let etag = first.header("etag").expect("ETag");
    let last_modified = first.header("last-modified").expect("Last-Modified");
    for condition in [
        format!("If-None-Match: {etag}"),
        format!("If-Modified-Since: {last_modified}"),
    ] {
        let resp = stack.get("/a.txt", &[&condition]);
        assert_eq!(resp.status, 304, "{condition}: {resp:#?}");
        assert_eq!(resp.header("etag"), Some(etag), "{condition}");
        assert!(resp.body.is_empty());
        assert_hit(&resp);
    }
    let other = stack.get("/a.txt", &["If-None-Match: \"other\""]);
    assert_eq!(other.status, 200);
    assert_eq!(other.body, b"alpha alpha\n");

    stack.barrier();
    assert_eq!(stack.backend_count("/a.txt"), 1, "only the first fetch");
}

#[test]
fn head_is_answered_from_the_cache() {
    let root = Docroot::new();
    root.file("b.txt", "bravo bravo bravo\n");
    let Some(stack) = stack(root, DEFAULTS) else {
        return;
    };
    // A HEAD miss: Varnish fetches the object with GET and stores it.
    let head = stack.send("HEAD", "/b.txt", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(18), "{head:#?}");
    assert!(head.body.is_empty());
    assert!(head.header("etag").is_some(), "{head:#?}");
    assert_miss(&head);

    let get = stack.get("/b.txt", &[]);
    assert_eq!(get.body, b"bravo bravo bravo\n");
    assert_eq!(get.header("etag"), head.header("etag"));
    assert_hit(&get);
    let head_again = stack.send("HEAD", "/b.txt", &[]);
    assert_eq!(head_again.content_length(), Some(18));
    assert_hit(&head_again);

    stack.barrier();
    assert_eq!(stack.backend_count(&logged("GET", "/b.txt", 200)), 1);
    assert_eq!(stack.backend_count("\"HEAD /b.txt"), 0);
}

#[test]
fn expired_object_is_revalidated_with_304() {
    let root = Docroot::new();
    root.file("short.txt", "short-lived\n");
    short_lifetime(&root, "/short.txt");
    let Some(stack) = stack(root, DEFAULTS) else {
        return;
    };
    let first = stack.get("/short.txt", &[]);
    assert_eq!(first.status, 200);
    assert_eq!(first.header("cache-control"), Some("max-age=1"));
    assert_miss(&first);
    let fetched = Instant::now();

    // Past its lifetime the object is served once more (grace) while
    // Varnish asks staticd with its validators, and staticd says 304.
    sleep_past_lifetime(fetched);
    let stale = stack.get("/short.txt", &[]);
    assert_eq!(stale.status, 200);
    assert_eq!(stale.body, b"short-lived\n");
    stack.wait_backend(&logged("GET", "/short.txt", 304), 1);

    // The refreshed object, body and validators unchanged, comes from the cache.
    let refreshed = stack.get("/short.txt", &[]);
    assert_eq!(refreshed.status, 200);
    assert_eq!(refreshed.body, b"short-lived\n");
    assert_eq!(refreshed.header("etag"), first.header("etag"));
    assert_hit(&refreshed);
    stack.barrier();
    assert_eq!(stack.backend_count(&logged("GET", "/short.txt", 200)), 1);
}

#[test]
fn changed_file_gets_a_new_etag_and_is_fetched() {
    let root = Docroot::new();
    let file = root.file("short.txt", "version one\n");
    short_lifetime(&root, "/short.txt");
    let Some(stack) = stack(root, DEFAULTS) else {
        return;
    };
    let first = stack.get("/short.txt", &[]);
    assert_eq!(first.body, b"version one\n");
    let old_etag = first.header("etag").expect("ETag").to_string();

    edit(&file, "version two, longer\n");
    let mut last = None;
    let updated = eventually(Duration::from_secs(8), || {
        let resp = stack.get("/short.txt", &[]);
        let done = resp.body == b"version two, longer\n";
        last = Some(resp.clone());
        done.then_some(resp)
    })
    .unwrap_or_else(|| panic!("the edit never came through Varnish; last: {last:#?}"));
    let new_etag = updated.header("etag").expect("ETag");
    assert_ne!(new_etag, old_etag, "the edited file's ETag");
    // staticd answered Varnish's conditional request with the new file.
    stack.wait_backend(&logged("GET", "/short.txt", 200), 2);
    let after = stack.get("/short.txt", &[]);
    assert_eq!(after.body, b"version two, longer\n");
    assert_eq!(after.header("etag"), Some(new_etag));
}

#[test]
fn ranges_come_from_the_cached_object() {
    let root = Docroot::new();
    let content = pattern(10_000);
    root.file("r.bin", &content);
    let Some(stack) = stack(root, DEFAULTS) else {
        return;
    };
    // A miss: Varnish fetches the whole file, then cuts the range itself.
    let first = stack.get("/r.bin", &["Range: bytes=100-199"]);
    assert_eq!(first.status, 206, "{first:#?}");
    assert_eq!(first.header("content-range"), Some("bytes 100-199/10000"));
    assert_eq!(first.body, &content[100..200]);
    stack.wait_backend(&logged("GET", "/r.bin", 200), 1);

    let cases: [(&str, u16, Option<&str>, &[u8]); 5] = [
        (
            "bytes=-300",
            206,
            Some("bytes 9700-9999/10000"),
            &content[9700..],
        ),
        (
            "bytes=9990-",
            206,
            Some("bytes 9990-9999/10000"),
            &content[9990..],
        ),
        ("bytes=0-0", 206, Some("bytes 0-0/10000"), &content[..1]),
        (
            "bytes=5000-20000",
            206,
            Some("bytes 5000-9999/10000"),
            &content[5000..],
        ),
        // Not a byte range: ignored, as staticd ignores it (RFC 9110 §14.2).
        ("bytes=x-y", 200, None, &content),
    ];
    for (range, status, content_range, body) in cases {
        let resp = stack.get("/r.bin", &[&format!("Range: {range}")]);
        assert_eq!(resp.status, status, "{range}: {resp:#?}");
        assert_eq!(resp.header("content-range"), content_range, "{range}");
        assert!(resp.body == body, "{range}: wrong bytes");
        assert_hit(&resp);
    }

    let unsatisfiable = stack.get("/r.bin", &["Range: bytes=20000-"]);
    assert_eq!(unsatisfiable.status, 416, "{unsatisfiable:#?}");
    assert_eq!(unsatisfiable.header("content-range"), Some("bytes */10000"));

    // If-Range: the cached ETag gives the range, another one the whole file.
    let etag = first.header("etag").expect("ETag");
    let matching = stack.get(
        "/r.bin",
        &["Range: bytes=10-19", &format!("If-Range: {etag}")],
    );
    assert_eq!(matching.status, 206);
    assert_eq!(matching.body, &content[10..20]);
    let stale = stack.get("/r.bin", &["Range: bytes=10-19", "If-Range: \"other\""]);
    assert_eq!(stale.status, 200);
    assert!(stale.body == content);

    stack.barrier();
    assert_eq!(stack.backend_count("/r.bin"), 1, "only the first fetch");
}

#[test]
fn several_ranges_are_passed_to_staticd() {
    let root = Docroot::new();
    let content = pattern(10_000);
    root.file("r.bin", &content);
    let Some(stack) = stack(root, DEFAULTS) else {
        return;
    };
    // Varnish answers only single ranges itself; staticd sends the parts.
    let resp = stack.get("/r.bin", &["Range: bytes=0-9,5000-5009, 9995-"]);
    assert_eq!(resp.status, 206, "{resp:#?}");
    let boundary = boundary_of(resp.header("content-type").expect("Content-Type"));
    let parts = parse_multipart(&resp.body, &boundary);
    let expected = [(0, 9), (5000, 5009), (9995, 9999)];
    assert_eq!(parts.len(), expected.len(), "{parts:#?}");
    for (part, (low, high)) in parts.iter().zip(expected) {
        assert_eq!(
            part.header("content-range"),
            Some(format!("bytes {low}-{high}/10000").as_str())
        );
        assert_eq!(part.body, &content[low..=high]);
    }
    stack.wait_backend(&logged("GET", "/r.bin", 206), 1);
    // Passing them left the cache alone: a single range is still a miss,
    // then a hit.
    assert_miss(&stack.get("/r.bin", &["Range: bytes=1-2"]));
    assert_hit(&stack.get("/r.bin", &["Range: bytes=1-2"]));
}

/// Text of about 12 KB that every coding shrinks.
fn stylesheet() -> Vec<u8> {
    (0..300)
        .map(|i| {
            format!(
                ".c{i} {{ color: #{:06x}; margin: {}px }}\n",
                i * 7919,
                i % 40
            )
        })
        .collect::<String>()
        .into_bytes()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn brotli(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut writer = brotli::CompressorWriter::new(&mut out, 4096, 11, 22);
        writer.write_all(data).unwrap();
    }
    out
}

fn decode(coding: Option<&str>, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        None => out = body.to_vec(),
        Some("gzip") => {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .expect("gzip body decodes");
        }
        Some("br") => {
            brotli::Decompressor::new(body, 4096)
                .read_to_end(&mut out)
                .expect("br body decodes");
        }
        Some("zstd") => out = zstd::decode_all(body).expect("zstd body decodes"),
        Some(other) => panic!("unexpected coding {other}"),
    }
    out
}

fn varies_on_accept_encoding(resp: &Response) -> bool {
    resp.header("vary").is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case("accept-encoding"))
    })
}

/// Each client gets a coding it accepts, decoding to the file, from one cache
/// object per coding: `pre.css` has `.br` and `.gz` siblings, `fly.css` is
/// compressed by staticd. Under Varnish's default http_gzip_support and with
/// it off.
fn encodings_are_cached_separately(varnish_params: &[&str]) {
    let original = stylesheet();
    let root = Docroot::new();
    root.file("pre.css", &original);
    root.file("pre.css.br", brotli(&original));
    root.file("pre.css.gz", gzip(&original));
    root.file("fly.css", &original);
    let Some(stack) = stack(
        root,
        Options {
            varnish_params,
            ..DEFAULTS
        },
    ) else {
        return;
    };
    // Accept-Encoding, then the coding pre.css and fly.css come in.
    let clients: [(&str, [Option<&str>; 2]); 9] = [
        ("br", [Some("br"), Some("br")]),
        ("gzip", [Some("gzip"), Some("gzip")]),
        ("zstd", [None, Some("zstd")]),
        ("", [None, None]),
        ("gzip, deflate, br, zstd", [Some("br"), Some("br")]),
        ("br;q=0, gzip", [Some("gzip"), Some("gzip")]),
        ("gzip;q=0.5, br;q=0", [Some("gzip"), Some("gzip")]),
        ("identity", [None, None]),
        ("deflate", [None, None]),
    ];
    for (file, path) in ["/pre.css", "/fly.css"].into_iter().enumerate() {
        for round in 0..2 {
            for (accept_encoding, codings) in clients {
                let expected = codings[file];
                let header = format!("Accept-Encoding: {accept_encoding}");
                let headers: &[&str] = if accept_encoding.is_empty() {
                    &[]
                } else {
                    &[&header]
                };
                let resp = stack.get(path, headers);
                let what = format!("{path} with Accept-Encoding {accept_encoding:?}");
                assert_eq!(resp.status, 200, "{what}: {resp:#?}");
                assert_eq!(
                    resp.header("content-encoding"),
                    expected,
                    "{what}: {resp:#?}"
                );
                assert!(
                    decode(expected, &resp.body) == original,
                    "{what}: the body does not decode to the file"
                );
                assert!(varies_on_accept_encoding(&resp), "{what}: {resp:#?}");
                if round == 1 {
                    assert_hit(&resp);
                }
            }
        }
        // One fetch per coding Varnish asked for: br, zstd, gzip, identity.
        stack.barrier();
        assert_eq!(stack.backend_count(&logged("GET", path, 200)), 4, "{path}");
    }
}

mod encodings_are_cached_separately {
    #[test]
    fn gzip_support_on() {
        super::encodings_are_cached_separately(&[]);
    }

    #[test]
    fn gzip_support_off() {
        super::encodings_are_cached_separately(&["http_gzip_support=off"]);
    }
}

#[test]
fn ranges_of_a_compressed_variant() {
    let original = stylesheet();
    let root = Docroot::new();
    root.file("fly.css", &original);
    let Some(stack) = stack(root, DEFAULTS) else {
        return;
    };
    for coding in ["br", "gzip"] {
        let ae = format!("Accept-Encoding: {coding}");
        let whole = stack.get("/fly.css", &[&ae]);
        assert_eq!(whole.header("content-encoding"), Some(coding));
        let part = stack.get("/fly.css", &[&ae, "Range: bytes=10-59"]);
        assert_eq!(part.status, 206, "{part:#?}");
        assert_eq!(part.header("content-encoding"), Some(coding));
        assert_eq!(
            part.header("content-range"),
            Some(format!("bytes 10-59/{}", whole.body.len()).as_str())
        );
        assert_eq!(
            part.body,
            &whole.body[10..60],
            "{coding}: the encoded bytes"
        );
        assert_hit(&part);
    }
}

#[test]
fn not_found_and_redirects_are_cached_by_their_rules() {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root.file("dir/index.html", "<p>dir</p>\n");
    root.file(
        "_redirects",
        "/moved /a.txt 301\n/permanent /a.txt 308\n/temporary /a.txt 302\n",
    );
    let Some(stack) = stack(root, DEFAULTS) else {
        return;
    };
    // 404 is cached (briefly), one object per Accept: staticd's error page
    // differs for browsers, and says so with Vary: Accept.
    let plain = stack.get("/missing", &[]);
    assert_eq!(plain.status, 404);
    assert_miss(&plain);
    let plain_again = stack.get("/missing", &[]);
    assert_eq!(plain_again.status, 404);
    assert_eq!(plain_again.body, plain.body);
    assert_hit(&plain_again);
    let html = stack.get("/missing", &["Accept: text/html"]);
    assert_eq!(html.status, 404);
    assert!(
        html.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "{html:#?}"
    );
    assert_miss(&html);
    assert_hit(&stack.get("/missing", &["Accept: text/html"]));

    // Permanent redirects are cached, a temporary one is asked for each time.
    for (path, status, location) in [
        ("/dir?x=1", 301, "/dir/?x=1"),
        ("/moved", 301, "/a.txt"),
        ("/permanent", 308, "/a.txt"),
        ("/temporary", 302, "/a.txt"),
    ] {
        let first = stack.get(path, &[]);
        assert_eq!(first.status, status, "{path}: {first:#?}");
        assert_eq!(first.header("location"), Some(location), "{path}");
        assert_miss(&first);
        let second = stack.get(path, &[]);
        assert_eq!(second.status, status, "{path}");
        assert_eq!(second.header("location"), Some(location), "{path}");
        if status == 302 {
            assert_miss(&second);
        } else {
            assert_hit(&second);
        }
    }
    stack.barrier();
    assert_eq!(stack.backend_count(&logged("GET", "/missing", 404)), 2);
    assert_eq!(stack.backend_count(&logged("GET", "/permanent", 308)), 1);
    assert_eq!(stack.backend_count(&logged("GET", "/temporary", 302)), 2);
}

#[test]
fn not_found_is_cached_briefly() {
    let root = Docroot::new();
    let Some(stack) = stack(
        root,
        Options {
            // The example keeps a 404 for 10 s; a second here.
            vcl_edits: &[("set beresp.ttl = 10s;", "set beresp.ttl = 1s;")],
            ..DEFAULTS
        },
    ) else {
        return;
    };
    assert_miss(&stack.get("/new.txt", &[]));
    assert_hit(&stack.get("/new.txt", &[]));
    // The file appears: once the 404 has expired, it is served.
    assert_served_once_created(&stack, "/new.txt", "new\n");
}

/// Creates the file at `path` (whose 404 Varnish holds for a second) and checks
/// that Varnish serves it soon: the 404 expired. (Not a year: within
/// [`IO_TIMEOUT`], which a loaded machine's requests through Varnish need.)
fn assert_served_once_created(stack: &Stack, path: &str, body: &str) {
    stack.root.file(path.trim_start_matches('/'), body);
    let served = eventually(IO_TIMEOUT, || {
        let resp = stack.get(path, &[]);
        (resp.status == 200).then_some(resp)
    })
    .unwrap_or_else(|| panic!("{path} was not served within {IO_TIMEOUT:?} of its 404"));
    assert_eq!(served.body, body.as_bytes());
}

#[test]
fn an_error_is_not_kept_for_a_lifetime_meant_for_files() {
    let root = Docroot::new();
    root.file(
        "_headers",
        "/assets/*\n  Cache-Control: public, max-age=31536000, immutable\n",
    );
    let Some(stack) = stack(
        root,
        Options {
            // The example keeps a 404 without a lifetime 10 s; a second here.
            vcl_edits: &[("set beresp.ttl = 10s;", "set beresp.ttl = 1s;")],
            ..DEFAULTS
        },
    ) else {
        return;
    };
    let missing = stack.get("/assets/app.js", &[]);
    assert_eq!(missing.status, 404);
    // The rule's lifetime is for the files: staticd keeps it off the 404.
    assert_eq!(missing.header("cache-control"), None);
    assert_hit(&stack.get("/assets/app.js", &[]));
    assert_served_once_created(&stack, "/assets/app.js", "deployed();\n");
}

#[test]
fn cgi_and_credentials_are_passed_and_cookies_ignored() {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root.file("c.txt", "charlie\n");
    root.file("cgi-bin/readme.txt", "scripts live here\n");
    let script = root.file(
        "tools/hello.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nhello %s\\n' \"$PATH_INFO\"\n",
    );
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let Some(stack) = stack(
        root,
        Options {
            staticd_args: &["--cgi"],
            ..DEFAULTS
        },
    ) else {
        return;
    };
    for _ in 0..2 {
        let resp = stack.get("/tools/hello.cgi/x", &[]);
        assert_eq!(resp.status, 200, "{resp:#?}");
        assert_eq!(resp.body_str(), "hello /x\n");
        assert_miss(&resp);
        // Any path under /cgi-bin/ is passed.
        assert_miss(&stack.get("/cgi-bin/readme.txt", &[]));
        let authorized = stack.get("/a.txt", &["Authorization: Basic dXNlcjpwYXNz"]);
        assert_eq!(authorized.body, b"alpha\n");
        assert_miss(&authorized);
    }
    stack.wait_backend(&logged("GET", "/tools/hello.cgi/x", 200), 2);
    stack.wait_backend(&logged("GET", "/cgi-bin/readme.txt", 200), 2);
    stack.wait_backend(&logged("GET", "/a.txt", 200), 2);

    // A Cookie does not stop caching: staticd never reads one.
    assert_miss(&stack.get("/c.txt", &["Cookie: session=1"]));
    assert_hit(&stack.get("/c.txt", &["Cookie: session=2"]));
}

#[test]
fn large_files_are_passed_so_ranges_reach_staticd() {
    let root = Docroot::new();
    let content = pattern(100_000);
    root.file("big.bin", &content);
    root.file("small.bin", &content[..1000]);
    let Some(stack) = stack(
        root,
        Options {
            // Files over 50,000 bytes are large, not over 64 MiB.
            vcl_edits: &[("> 67108864)", "> 50000)")],
            ..DEFAULTS
        },
    ) else {
        return;
    };
    // The first request fetches the file whole and finds it large: it is
    // passed from then on, and staticd answers the ranges.
    let first = stack.get("/big.bin", &["Range: bytes=1000-1999"]);
    assert_eq!(first.status, 206, "{first:#?}");
    assert_eq!(first.body, &content[1000..2000]);
    stack.wait_backend(&logged("GET", "/big.bin", 200), 1);
    let second = stack.get("/big.bin", &["Range: bytes=-100"]);
    assert_eq!(second.status, 206, "{second:#?}");
    assert_eq!(
        second.header("content-range"),
        Some("bytes 99900-99999/100000")
    );
    assert_eq!(second.body, &content[99_900..]);
    assert_miss(&second);
    stack.wait_backend(&logged("GET", "/big.bin", 206), 1);
    let whole = stack.get("/big.bin", &[]);
    assert!(whole.body == content);
    stack.wait_backend(&logged("GET", "/big.bin", 200), 2);

    // A smaller file is cached as usual.
    assert_miss(&stack.get("/small.bin", &["Range: bytes=0-9"]));
    assert_hit(&stack.get("/small.bin", &["Range: bytes=0-9"]));
}

#[test]
fn stale_object_is_served_while_staticd_is_down() {
    let root = Docroot::new();
    root.file("short.txt", "still here\n");
    short_lifetime(&root, "/short.txt");
    let Some(mut stack) = stack(root, DEFAULTS) else {
        return;
    };
    let first = stack.get("/short.txt", &[]);
    assert_eq!(first.body, b"still here\n");
    let fetched = Instant::now();
    let process = stack.staticd.process();
    process.signal(rustix::process::Signal::KILL);
    assert!(
        process.wait_timeout(IO_TIMEOUT).is_some(),
        "staticd did not stop"
    );
    sleep_past_lifetime(fetched);
    let stale = stack.get("/short.txt", &[]);
    assert_eq!(stale.status, 200, "{stale:#?}");
    assert_eq!(stale.body, b"still here\n");
    assert!(age(&stale) >= 1, "{stale:#?}");
}
