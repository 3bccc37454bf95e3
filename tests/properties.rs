//! Properties of staticd on generated inputs (proptest), in three layers:
//!
//! * pure functions: path normalisation against an independent model, the
//!   request parser on arbitrary bytes, Range evaluation against a model of
//!   which bytes were asked for;
//! * the decision code in-process (`respond::respond` on a real `Site`):
//!   generated targets never reach a file outside the root, and the bytes of
//!   a Range answer are the file's bytes at the offsets it names;
//! * the real binary in both modes: random single ranges of a random file.
//!
//! Case counts are bounded so the whole file runs in a few seconds.

#[macro_use]
mod common;
// Shares the fuzz targets' invariants; not every check is used here.
#[allow(dead_code)]
#[path = "../fuzz/src/checks.rs"]
mod checks;

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};

use staticd::config::Features;
use staticd::http::parse::{self, Parsed};
use staticd::http::range::{self, ByteRange, RangeOutcome};
use staticd::http::response::{encode, Chunk, Http1};
use staticd::respond::{self, Answer};
use staticd::site::path::{PathError, SitePath};
use staticd::site::Site;

// --- path normalisation ------------------------------------------------------------------

/// Path segments a hostile client would try, and some plain names.
fn segment() -> impl Strategy<Value = String> {
    let tricky = prop::sample::select(vec![
        "..",
        ".",
        "",
        "%2e%2e",
        "%2E%2e",
        ".%2e",
        "%2e.",
        "%252e%252e",
        "%2f",
        "%2F",
        "..%2f..",
        "%2e%2e%2f%2e%2e",
        "%c0%ae%c0%ae",
        "%c0%af",
        "\\",
        "..\\..",
        "%5c..",
        ".well-known",
        ".hidden",
        "%2ehidden",
        "%00",
        "a%00",
        "%",
        "%zz",
        "%4",
        "out",
        "link",
        "abs",
        "sub",
        "secret.txt",
    ]);
    prop_oneof![
        3 => tricky.prop_map(String::from),
        1 => "[a-z0-9]{1,4}",
        1 => "[a-z%2eE./\\\\]{1,6}",
    ]
}

/// Request-targets built from those segments, in origin or absolute form,
/// with or without a trailing slash and a query.
fn target() -> impl Strategy<Value = String> {
    let prefix = prop::sample::select(vec!["/", "//", "http://x/", "HTTP://Host:80/", "/./"]);
    let query = prop::option::of(prop::sample::select(vec!["x=1", "a=/../..", "%2e%2e"]));
    (
        prefix,
        prop::collection::vec(segment(), 0..8),
        any::<bool>(),
        query,
    )
        .prop_map(|(prefix, segments, slash, query)| {
            let mut t = format!("{prefix}{}", segments.join("/"));
            if slash {
                t.push('/');
            }
            if let Some(q) = query {
                t.push('?');
                t.push_str(q);
            }
            t
        })
}

/// What `SitePath::from_target` should say, computed independently: decode
/// once, walk the components with a stack, refuse underflow, NUL and bad
/// escapes, hide dot-names other than a leading `.well-known`.
fn model(target: &str) -> Result<Vec<u8>, PathError> {
    let path_and_query = if target.starts_with('/') {
        target.to_string()
    } else {
        let lower = target.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"))
            .ok_or(PathError::BadRequest)?;
        let offset = target.len() - rest.len();
        match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => target[offset + i..].to_string(),
            Some(_) => return Err(PathError::BadRequest),
            None => "/".to_string(),
        }
    };
    let path = path_and_query.split('?').next().unwrap_or("");
    let mut decoded = Vec::new();
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(PathError::BadRequest)?;
            let hex = std::str::from_utf8(hex).map_err(|_| PathError::BadRequest)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(PathError::BadRequest);
            }
            decoded.push(u8::from_str_radix(hex, 16).map_err(|_| PathError::BadRequest)?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    if decoded.contains(&0) {
        return Err(PathError::BadRequest);
    }
    let mut stack: Vec<&[u8]> = Vec::new();
    for c in decoded.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                stack.pop().ok_or(PathError::BadRequest)?;
            }
            c => stack.push(c),
        }
    }
    for (i, c) in stack.iter().enumerate() {
        if c.starts_with(b".") && !(i == 0 && *c == b".well-known") {
            return Err(PathError::Hidden);
        }
    }
    Ok(stack.join(&b'/'))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Resolution never yields a path outside the root: no `..` component, no
    /// leading `/`, no NUL; and it agrees with the model.
    #[test]
    fn site_path_stays_under_the_root(target in target()) {
        let got = SitePath::from_target(&target);
        if let Ok(p) = &got {
            checks::check_site_path(p);
        }
        prop_assert_eq!(got.map(|p| p.rel.into_owned()), model(&target), "target {:?}", target);
    }

    /// Arbitrary bytes never make the parser panic, and whatever parses
    /// keeps the parser's invariants (see fuzz/src/checks.rs).
    #[test]
    fn parse_survives_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..1024)) {
        checks::parse_request(&data);
    }

    /// Request-shaped input: a plausible request line, header lines built
    /// from hostile pieces, then a body.
    #[test]
    fn parse_survives_request_shaped_input(
        method in prop::sample::select(vec!["GET", "HEAD", "POST", "OPTIONS", "G\tET", ""]),
        target in "[ -~&&[^ ]]{0,40}",
        version in prop::sample::select(vec!["HTTP/1.1", "HTTP/1.0", "HTTP/1.2", "HTTP/2.0", "HTTP/1", "http/1.1"]),
        lines in prop::collection::vec(header_line(), 0..8),
        eol in prop::sample::select(vec!["\r\n", "\n"]),
        body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut raw = format!("{method} {target} {version}{eol}").into_bytes();
        for line in &lines {
            raw.extend_from_slice(line.as_bytes());
            raw.extend_from_slice(eol.as_bytes());
        }
        raw.extend_from_slice(eol.as_bytes());
        raw.extend_from_slice(&body);
        checks::parse_request(&raw);
    }
}

fn header_line() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec![
        "Host",
        "host",
        "Content-Length",
        "Transfer-Encoding",
        "Connection",
        "Range",
        "If-Range",
        "Expect",
        "X-Any",
        " Host",
        "Host ",
        "",
    ]);
    let value = prop::sample::select(vec![
        "a",
        "0",
        "5",
        "-1",
        "+5",
        "5, 5",
        "18446744073709551616",
        "chunked",
        "gzip, chunked",
        "chunked, gzip",
        "close",
        "keep-alive",
        "100-continue",
        "bytes=0-0",
        "\"x\"",
        "",
        " folded",
    ]);
    (name, value).prop_map(|(n, v)| format!("{n}: {v}"))
}

// --- ranges --------------------------------------------------------------------------------

/// One byte-range-spec as text, with numbers chosen around `len`.
fn spec(len: u64) -> impl Strategy<Value = String> {
    let near = move || prop_oneof![0..=len.saturating_add(4), Just(u64::MAX)];
    prop_oneof![
        (near(), near()).prop_map(|(a, b)| format!("{a}-{b}")),
        near().prop_map(|a| format!("{a}-")),
        near().prop_map(|n| format!("-{n}")),
        (near(), near()).prop_map(|(a, b)| format!(" {a} - {b} ")),
    ]
}

fn lengths() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..64u64,
        0..5000u64,
        Just(u64::MAX),
        (1u64 << 32)..(1u64 << 40)
    ]
}

fn range_header() -> impl Strategy<Value = (u64, String)> {
    lengths().prop_flat_map(|len| {
        let count = prop_oneof![4 => 1..5usize, 1 => 1..20usize];
        count
            .prop_flat_map(move |n| prop::collection::vec(spec(len), n))
            .prop_map(move |specs| (len, format!("bytes={}", specs.join(","))))
    })
}

/// The byte intervals a spec asks for, clamped to the representation:
/// `Err(())` for a malformed spec, `Ok(None)` for an unsatisfiable one.
#[allow(clippy::result_unit_err)]
fn model_spec(spec: &str, len: u64) -> Result<Option<ByteRange>, ()> {
    let (first, last) = spec.split_once('-').ok_or(())?;
    let (first, last) = (first.trim(), last.trim());
    let num = |s: &str| -> Result<u64, ()> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(());
        }
        s.parse().map_err(|_| ())
    };
    if first.is_empty() {
        let n = num(last)?;
        return Ok((n > 0 && len > 0).then(|| ByteRange {
            start: len.saturating_sub(n),
            end: len - 1,
        }));
    }
    let start = num(first)?;
    let end = if last.is_empty() {
        u64::MAX
    } else {
        let end = num(last)?;
        if end < start {
            return Err(());
        }
        end
    };
    Ok((start < len).then(|| ByteRange {
        start,
        end: end.min(len - 1),
    }))
}

/// Sorted, merged intervals (touching ones joined).
fn union(mut ranges: Vec<ByteRange>) -> Vec<ByteRange> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<ByteRange> = Vec::new();
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(1) => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// What `range::evaluate` should answer, per RFC 9110 §14 and the contract:
/// more than 16 ranges or any malformed spec -> whole; none satisfiable ->
/// 416; else the asked-for bytes, in the client's order when the ranges are
/// already disjoint and not touching, else sorted and merged.
fn model_ranges(header: &str, len: u64) -> RangeOutcome {
    let Some(specs) = header.strip_prefix("bytes=") else {
        return RangeOutcome::Whole;
    };
    let specs: Vec<&str> = specs
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if specs.is_empty() || specs.len() > 16 {
        return RangeOutcome::Whole;
    }
    let mut wanted = Vec::new();
    for s in specs {
        match model_spec(s, len) {
            Err(()) => return RangeOutcome::Whole,
            Ok(Some(r)) => wanted.push(r),
            Ok(None) => {}
        }
    }
    if wanted.is_empty() {
        return RangeOutcome::Unsatisfiable;
    }
    let merged = union(wanted.clone());
    if merged.len() == wanted.len() {
        RangeOutcome::Ranges(wanted)
    } else {
        RangeOutcome::Ranges(merged)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Every range lies in [0, len), none overlap or touch, and together
    /// they are exactly the bytes the client asked for, in the documented
    /// order.
    #[test]
    fn ranges_are_the_bytes_asked_for((len, header) in range_header()) {
        let got = checks::check_ranges(&header, len);
        prop_assert_eq!(got, model_ranges(&header, len), "{} of {}", header, len);
    }

    /// Repeating and overlapping ranges never asks for more than the file.
    #[test]
    fn repeated_ranges_never_exceed_the_length(len in 1..100_000u64, n in 1..=16usize, start in 0..100u64) {
        let header = format!("bytes={}", vec![format!("{start}-"); n].join(","));
        if let RangeOutcome::Ranges(r) = range::evaluate(&header, len) {
            prop_assert_eq!(r.len(), 1);
            prop_assert!(r[0].len() <= len);
        }
    }
}

// --- in-process: respond() on a real site -------------------------------------------------

/// A docroot inside a temp dir that also holds `secret.txt` (with a marker)
/// just outside it, and symlinks from the root to the outside.
struct Confined {
    outer: tempfile::TempDir,
    marker: String,
}

impl Confined {
    fn new() -> Confined {
        let outer = tempfile::tempdir().unwrap();
        let marker = format!("PROPSECRET-{}-{}", std::process::id(), line!());
        fs::write(outer.path().join("secret.txt"), &marker).unwrap();
        let root = outer.path().join("root");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("index.html"), "index\n").unwrap();
        fs::write(root.join("sub/a.txt"), "a\n").unwrap();
        fs::create_dir_all(root.join(".well-known")).unwrap();
        fs::write(root.join(".well-known/x"), "x\n").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, root.join(name)).unwrap();
        };
        link(Path::new(".."), "out");
        link(Path::new("../secret.txt"), "link");
        link(&outer.path().join("secret.txt"), "abs");
        link(Path::new("out/secret.txt"), "chain");
        // Host `x` (with --vhosts) is the root itself, links and all.
        link(Path::new("."), "x");
        link(Path::new(".."), "default");
        Confined { outer, marker }
    }

    fn root(&self) -> std::path::PathBuf {
        self.outer.path().join("root")
    }
}

/// The whole response as it would go on the wire: the head encoded as
/// HTTP/1.1, followed by every body chunk read from its source.
fn wire_bytes(answer: Answer) -> Vec<u8> {
    let Answer::Send(resp) = answer else {
        panic!("no CGI here")
    };
    let conn = Http1 {
        minor_version: resp.minor_version,
        close: resp.close,
        hsts: None,
        alt_svc: None,
    };
    let mut out = Vec::new();
    encode(&resp.head, &conn, &mut out);
    for chunk in &resp.body {
        match (chunk.memory(), chunk) {
            (Some(bytes), _) => out.extend_from_slice(bytes),
            (None, Chunk::File { file, offset, len }) => {
                let mut buf = vec![0; *len as usize];
                file.read_exact_at(&mut buf, *offset).unwrap();
                out.extend_from_slice(&buf);
            }
            (None, _) => unreachable!("only files are not in memory"),
        }
    }
    out
}

/// The response to a raw request head, decided in-process; `None` when the
/// head does not parse (the server would answer 400 before any lookup).
fn answer(site: &Site, raw: &str) -> Option<Response> {
    let Parsed::Complete { request, .. } = parse::parse(raw.as_bytes()) else {
        return None;
    };
    let bytes = wire_bytes(respond::respond(site, &request, false));
    let method = raw.split(' ').next().unwrap();
    Some(parse_responses(&bytes, &[method]).remove(0))
}

/// Generated targets, with and without virtual hosts, never reach the file
/// outside the root, whatever symlinks stand in the way.
#[test]
fn responses_never_leave_the_root() {
    let confined = Confined::new();
    for vhosts in [false, true] {
        let features = Features {
            vhosts,
            ..Features::default()
        };
        let site = Site::open(&confined.root(), &["index.html"], features).unwrap();
        let mut runner = TestRunner::new(RunnerConfig {
            cases: 400,
            ..RunnerConfig::default()
        });
        let host = prop::sample::select(vec!["x", "..", "out", "abs", "sub", "%2e%2e"]);
        runner
            .run(&(target(), host), |(target, host)| {
                let raw = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n");
                let Some(resp) = answer(&site, &raw) else {
                    return Ok(());
                };
                prop_assert!(
                    !contains(&resp.body, confined.marker.as_bytes()),
                    "{} served the secret",
                    target
                );
                prop_assert!(resp.status != 500, "{} -> 500", target);
                Ok(())
            })
            .unwrap();
    }
}

static FILE_NO: AtomicUsize = AtomicUsize::new(0);

/// The bytes of a Range answer are the file's bytes at the offsets it
/// names: single ranges, multipart parts and whole-file fallbacks alike.
#[test]
fn range_answers_carry_the_files_bytes() {
    let root = Docroot::new();
    let site = Site::open(root.path(), &["index.html"], Features::default()).unwrap();
    let mut runner = TestRunner::new(RunnerConfig {
        cases: 300,
        ..RunnerConfig::default()
    });
    let len = prop_oneof![4 => 0..3000usize, 1 => 33_000..40_000usize];
    let case = len.prop_flat_map(|len| {
        let specs = prop::collection::vec(spec(len as u64), 1..6);
        (Just(len), any::<u64>(), specs)
    });
    runner
        .run(&case, |(len, seed, specs)| {
            // The open-file cache keeps a lookup for a second: a fresh name
            // per case, so each case sees its own file.
            let name = format!("f{}.bin", FILE_NO.fetch_add(1, Ordering::Relaxed));
            let content: Vec<u8> = (0..len as u64)
                .map(|i| (i.wrapping_mul(seed | 1) >> 7) as u8)
                .collect();
            root.file(&name, &content);
            let header = format!("bytes={}", specs.join(","));
            let raw = format!("GET /{name} HTTP/1.1\r\nHost: t\r\nRange: {header}\r\n\r\n");
            let resp = answer(&site, &raw).expect("a Range request parses");
            prop_assert_eq!(resp.content_length(), Some(resp.body.len() as u64));
            check_range_answer(&resp, &content, &header);
            Ok(())
        })
        .unwrap();
}

/// Checks a response to a Range request for `content` against what
/// `range::evaluate` decided.
fn check_range_answer(resp: &Response, content: &[u8], header: &str) {
    let len = content.len() as u64;
    match range::evaluate(header, len) {
        RangeOutcome::Whole => {
            assert_eq!(resp.status, 200, "{header}");
            assert!(resp.body == content, "whole body differs");
        }
        RangeOutcome::Unsatisfiable => {
            assert_eq!(resp.status, 416, "{header}");
            assert_eq!(
                resp.header("content-range"),
                Some(&*format!("bytes */{len}"))
            );
        }
        RangeOutcome::Ranges(ranges) if ranges.len() == 1 => {
            assert_eq!(resp.status, 206, "{header}");
            let r = ranges[0];
            assert_range_part(resp.header("content-range"), &resp.body, content, r);
        }
        RangeOutcome::Ranges(ranges) => {
            assert_eq!(resp.status, 206, "{header}");
            let boundary = boundary_of(resp.header("content-type").unwrap());
            let parts = parse_multipart(&resp.body, &boundary);
            assert_eq!(parts.len(), ranges.len(), "{header}");
            for (part, r) in parts.iter().zip(&ranges) {
                assert_range_part(part.header("content-range"), &part.body, content, *r);
            }
            // Multipart framing costs something, but never more than a
            // part head per range on top of the file's bytes.
            let payload: u64 = ranges.iter().map(ByteRange::len).sum();
            assert!(payload <= len);
            assert!((resp.body.len() as u64) <= payload + 200 * ranges.len() as u64);
        }
    }
}

fn assert_range_part(content_range: Option<&str>, body: &[u8], content: &[u8], r: ByteRange) {
    let expected = format!("bytes {}-{}/{}", r.start, r.end, content.len());
    assert_eq!(content_range, Some(expected.as_str()));
    assert!(
        body == &content[r.start as usize..=r.end as usize],
        "bytes of {expected} differ"
    );
}

// --- black box: the real server -----------------------------------------------------------

/// A random file served by the real binary: random single ranges, on one
/// keep-alive connection, carry exactly the file's bytes.
fn single_ranges_from_the_server(mode: Mode) {
    let root = Docroot::new();
    let mut runner = TestRunner::new(RunnerConfig {
        cases: 24,
        ..RunnerConfig::default()
    });
    let seed: u64 = runner.rng().next_u64();
    // Larger than the in-memory threshold, so the bytes come by sendfile.
    let len = 70_001 + (seed % 5000) as usize;
    let content: Vec<u8> = (0..len as u64)
        .map(|i| (i.wrapping_mul(seed | 1) >> 11) as u8)
        .collect();
    root.file("random.bin", &content);
    let server = Server::start(mode, &root);
    let conn = std::cell::RefCell::new(server.connect());
    let form = prop_oneof![
        (0..len as u64, 0..len as u64).prop_map(|(a, b)| (
            format!("{}-{}", a.min(b), a.max(b)),
            a.min(b),
            a.max(b)
        )),
        (0..len as u64).prop_map(move |a| (format!("{a}-"), a, len as u64 - 1)),
        (1..=len as u64).prop_map(move |n| (format!("-{n}"), len as u64 - n, len as u64 - 1)),
    ];
    runner
        .run(&form, |(spec, start, end)| {
            let raw = request("GET", "/random.bin", &[&format!("Range: bytes={spec}")]);
            let resp = conn.borrow_mut().roundtrip(raw);
            prop_assert_eq!(resp.status, 206, "bytes={}", spec);
            let expected = format!("bytes {start}-{end}/{len}");
            prop_assert_eq!(resp.header("content-range"), Some(expected.as_str()));
            prop_assert!(
                resp.body == content[start as usize..=end as usize],
                "bytes of {} differ",
                expected
            );
            Ok(())
        })
        .unwrap();
}

both_modes!(single_ranges_from_the_server);
