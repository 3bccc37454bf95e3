//! The invariants the fuzz targets check, one public function per target.
//!
//! Each function takes the raw fuzz input, feeds it to staticd's pure code
//! and panics (a libFuzzer crash) when an invariant breaks. The same file is
//! compiled into `tests/fuzz_corpus.rs`, so a plain `cargo test` replays the
//! committed corpus (fuzz/corpus/<target>/) against exactly these checks.
//!
//! Inputs are bytes; text-taking functions get them through
//! `String::from_utf8_lossy`, so no input is wasted on a UTF-8 check.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use staticd::cgi::{self, CgiHead, HeaderBlock, Location};
use staticd::http::body::{BodySkipper, Skip};
use staticd::http::conditional::{self, LastModified, Validators};
use staticd::http::limits::{MAX_HEAD_BYTES, MAX_RANGES, MAX_TARGET_BYTES};
use staticd::http::parse::{self, BodyFraming, Parsed, Request};
use staticd::http::range::{self, ByteRange, RangeOutcome};
use staticd::rules::{self, HeaderRules, RedirectRules};
use staticd::site::negotiate;
use staticd::site::path::{self, SitePath};
use staticd::site::vhost;

/// `parse_request`: a request head, then whatever follows it on the wire.
///
/// * `head_len` never exceeds the input, nor the head limit;
/// * the head alone (without what follows) parses to the same length;
/// * the target is within its limit and holds no whitespace or controls;
/// * no header value staticd keeps holds CR, LF or NUL (they reach logs
///   and CGI environments);
/// * HTTP/1.1 requests have a Host field; an empty one names no host;
/// * a Host kept is a `uri-host [":" port]`: never empty, never with
///   whitespace, `/`, `\`, `@`, `?`, `#` or quotes;
/// * the target holds no fragment (`#`);
/// * the body skipper's verdict on the rest does not depend on how the rest
///   is split into reads (see [`body`]).
pub fn parse_request(data: &[u8]) {
    let Parsed::Complete { request, head_len } = parse::parse(data) else {
        return;
    };
    assert!(head_len <= data.len(), "head_len {head_len} > input");
    assert!(head_len <= MAX_HEAD_BYTES, "head_len {head_len} > limit");
    assert!(head_len > 0);
    match parse::parse(&data[..head_len]) {
        Parsed::Complete {
            head_len: again, ..
        } => {
            assert_eq!(again, head_len, "the head alone parses differently")
        }
        other => panic!("the head alone does not parse: {other:?}"),
    }
    let target = &request.target;
    assert!(!target.is_empty() && target.len() <= MAX_TARGET_BYTES);
    assert!(
        !target
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control()),
        "target {target:?}"
    );
    assert!(!target.contains('#'), "a fragment in {target:?}");
    assert!(request.minor_version <= 1);
    if request.minor_version == 1 && request.host.is_none() {
        let head = String::from_utf8_lossy(&data[..head_len]).to_ascii_lowercase();
        assert!(head.contains("\nhost:"), "HTTP/1.1 without Host accepted");
    }
    if let Some(host) = &request.host {
        assert!(!host.is_empty(), "an empty Host kept");
        assert!(
            !host.contains(|c: char| c.is_whitespace() || "/\\@?#\"<>".contains(c)),
            "invalid Host kept: {host:?}"
        );
    }
    for value in kept_values(&request) {
        assert!(
            !value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)),
            "CR, LF or NUL in a header value: {value:?}"
        );
    }
    if let BodyFraming::Length(0) = request.framing {
        panic!("Content-Length: 0 must mean no body to skip");
    }
    body(request.framing, &data[head_len..]);
}

fn kept_values<'a>(r: &'a Request<'a>) -> impl Iterator<Item = &'a Cow<'a, str>> {
    [
        &r.host,
        &r.range,
        &r.if_range,
        &r.if_match,
        &r.if_none_match,
        &r.if_modified_since,
        &r.if_unmodified_since,
        &r.user_agent,
        &r.referer,
        &r.accept,
        &r.accept_encoding,
    ]
    .into_iter()
    .flatten()
}

/// Skips a body framed as `framing` from `rest`, fed whole, in pieces and a
/// byte at a time: the outcome (where the body ends, or that the framing is
/// broken) must be the same, since the transports read in arbitrary pieces.
/// A fixed-length body ends exactly at its length; a chunked one ends with
/// a LF.
pub fn body(framing: BodyFraming, rest: &[u8]) {
    let Some(mut whole) = BodySkipper::new(framing) else {
        assert_eq!(framing, BodyFraming::None);
        return;
    };
    let outcome = whole.feed(rest);
    match (&outcome, framing) {
        (Skip::Done { consumed }, BodyFraming::Length(n)) => {
            assert_eq!(*consumed as u64, n, "fixed-length body ended early or late")
        }
        (Skip::NeedMore, BodyFraming::Length(n)) => {
            assert!((rest.len() as u64) < n, "fixed-length body never ended")
        }
        (Skip::Invalid, BodyFraming::Length(_)) => panic!("a fixed-length body is never invalid"),
        (Skip::Done { consumed }, _) => {
            assert!(*consumed >= 3 && *consumed <= rest.len(), "{consumed}");
            assert_eq!(rest[consumed - 1], b'\n', "chunked body ends mid-line");
        }
        _ => {}
    }
    let piece = 1 + rest.first().map_or(0, |&b| usize::from(b % 13));
    for size in [piece, 1] {
        if rest.len() > 4096 && size == 1 {
            break;
        }
        let Some(mut skipper) = BodySkipper::new(framing) else {
            unreachable!()
        };
        assert_eq!(
            outcome,
            feed_in_pieces(&mut skipper, rest, size),
            "pieces of {size}"
        );
    }
}

/// Feeds `input` in pieces of `size`, and reports the outcome as if it had
/// been fed at once.
fn feed_in_pieces(skipper: &mut BodySkipper, input: &[u8], size: usize) -> Skip {
    let mut offset = 0;
    for piece in input.chunks(size) {
        match skipper.feed(piece) {
            Skip::Done { consumed } => {
                assert!(consumed <= piece.len());
                return Skip::Done {
                    consumed: offset + consumed,
                };
            }
            Skip::Invalid => return Skip::Invalid,
            Skip::NeedMore => offset += piece.len(),
        }
    }
    if input.is_empty() {
        return skipper.feed(input);
    }
    Skip::NeedMore
}

/// `range`: three lines, `LEN\nRANGE\nIF-RANGE`. LEN is a decimal length
/// (anything else becomes a small length derived from its bytes).
///
/// * a Range header yields ranges only for a non-empty representation;
/// * every range lies within `[0, len)`, there are at most `MAX_RANGES`;
/// * no two ranges overlap or touch (they were coalesced), so the bytes
///   served never exceed the length;
/// * a header whose unit is not `bytes` is ignored;
/// * If-Range: a weak tag never holds; a strong tag holds exactly when it
///   equals the ETag; a date holds exactly when it equals Last-Modified.
pub fn range(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.splitn(3, '\n');
    let len_line = lines.next().unwrap_or("");
    let header = lines.next().unwrap_or("");
    let if_range = lines.next().unwrap_or("");
    let len = len_line.trim().parse::<u64>().unwrap_or_else(|_| {
        let hash = len_line
            .bytes()
            .fold(0u64, |n, b| n.wrapping_mul(31).wrapping_add(u64::from(b)));
        hash % 4099
    });
    check_ranges(header, len);
    check_if_range(if_range);
}

/// The range invariants for one header and length; shared with the
/// property tests.
pub fn check_ranges(header: &str, len: u64) -> RangeOutcome {
    let outcome = range::evaluate(header, len);
    let is_bytes = header
        .split_once('=')
        .is_some_and(|(unit, _)| unit.trim().eq_ignore_ascii_case("bytes"));
    if !is_bytes {
        assert_eq!(
            outcome,
            RangeOutcome::Whole,
            "{header:?} is not a byte range"
        );
    }
    if let RangeOutcome::Ranges(ranges) = &outcome {
        assert!(len > 0, "ranges of an empty representation");
        assert!(!ranges.is_empty() && ranges.len() <= MAX_RANGES);
        for r in ranges {
            assert!(r.start <= r.end && r.end < len, "{r:?} outside 0..{len}");
        }
        let mut sorted: Vec<ByteRange> = ranges.clone();
        sorted.sort_by_key(|r| r.start);
        for w in sorted.windows(2) {
            assert!(
                w[0].end + 1 < w[1].start,
                "{:?} and {:?} not coalesced",
                w[0],
                w[1]
            );
        }
        let total: u64 = ranges.iter().map(ByteRange::len).sum();
        assert!(total <= len, "{total} bytes of a {len}-byte representation");
    }
    outcome
}

fn check_if_range(value: &str) {
    let epoch = SystemTime::UNIX_EPOCH;
    let v = Validators {
        etag: "\"5f1.0-2a\"".to_string(),
        last_modified: LastModified::new(epoch + Duration::from_secs(784_111_777)),
    };
    assert!(conditional::if_range_holds(None, &v));
    // The other conditionals only need not panic on the same text.
    let req = Request {
        if_match: Some(value.into()),
        if_none_match: Some(value.into()),
        if_modified_since: Some(value.into()),
        if_unmodified_since: Some(value.into()),
        ..Request::default()
    };
    let _ = conditional::evaluate(&req, &v);
    let holds = conditional::if_range_holds(Some(value), &v);
    if value.starts_with("W/") {
        assert!(!holds, "weak If-Range {value:?} held");
        return;
    }
    if value.starts_with('"') {
        assert_eq!(holds, value == v.etag, "If-Range {value:?}");
        let same = Validators {
            etag: value.to_string(),
            ..v.clone()
        };
        assert!(conditional::if_range_holds(Some(value), &same));
        return;
    }
    match httpdate::parse_http_date(value.trim()) {
        Ok(date) => {
            assert_eq!(
                holds,
                Some(date) == v.last_modified.map(|m| m.time),
                "If-Range date {value:?}"
            );
            // Every date httpdate parses can be written back (years to 9999).
            let at = Validators {
                last_modified: Some(LastModified::new(date).expect("a writable date")),
                ..v.clone()
            };
            assert!(conditional::if_range_holds(Some(value), &at));
            let later = Validators {
                last_modified: LastModified::new(date + Duration::from_secs(1)),
                ..v.clone()
            };
            assert!(!conditional::if_range_holds(Some(value), &later));
            // A representation without a date never matches one.
            let undated = Validators {
                last_modified: None,
                ..v
            };
            assert!(!conditional::if_range_holds(Some(value), &undated));
        }
        Err(_) => assert!(!holds, "If-Range {value:?} is neither tag nor date"),
    }
}

/// `path`: a request-target.
///
/// * a resolved path never holds a `..`, `.` or empty component, never
///   starts or ends with `/` and never holds NUL, so joined to the root it
///   cannot name anything outside it;
/// * no component is hidden (starts with `.`) except a leading
///   `.well-known`;
/// * `directory_url` is a local absolute path (never `//host`), with only
///   URI characters, and resolves back to the same path.
pub fn path(data: &[u8]) {
    let target = String::from_utf8_lossy(data);
    let _ = path::authority(&target);
    if let Ok(p) = SitePath::from_target(&target) {
        check_site_path(&p);
    }
}

/// The invariants of a resolved path; shared with the property tests.
pub fn check_site_path(p: &SitePath) {
    let rel = &p.rel;
    assert!(!rel.starts_with(b"/"), "leading slash in {rel:?}");
    assert!(!rel.ends_with(b"/"), "trailing slash in {rel:?}");
    assert!(!rel.contains(&0), "NUL in {rel:?}");
    if !rel.is_empty() {
        for (i, c) in rel.split(|&b| b == b'/').enumerate() {
            assert!(!c.is_empty(), "empty component in {rel:?}");
            assert!(c != b"." && c != b"..", "dot component in {rel:?}");
            let well_known = i == 0 && c == b".well-known";
            assert!(!c.starts_with(b".") || well_known, "hidden {rel:?}");
        }
    }
    let url = p.directory_url_without_query();
    assert!(url.starts_with('/') && url.ends_with('/'), "{url:?}");
    assert!(!url.starts_with("//"), "{url:?} names another host");
    assert!(
        url.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#'),
        "{url:?}"
    );
    let again = SitePath::from_target(&url).expect("directory_url resolves");
    assert_eq!(again.rel, p.rel, "{url:?} resolves elsewhere");
    assert!(again.trailing_slash && again.query.is_none());
    match &p.query {
        Some(q) => assert_eq!(p.directory_url(), format!("{url}?{q}")),
        None => assert_eq!(p.directory_url(), url),
    }
}

/// `vhost`: a Host header value.
///
/// * candidates end with `default`, at most three;
/// * each is a plain directory entry name: non-empty, at most 255 bytes, not
///   hidden, no `/`, `\`, NUL or control byte, lower case;
/// * a Host holding `/`, `\` or NUL is refused.
pub fn vhost(data: &[u8]) {
    let host = String::from_utf8_lossy(data);
    assert_eq!(vhost::candidates(None).unwrap(), ["default"]);
    // Err(BadHost) is a refusal: nothing more to check.
    if let Ok(names) = vhost::candidates(Some(&host)) {
        assert!(!names.is_empty() && names.len() <= 3);
        assert_eq!(names.last().map(String::as_str), Some("default"));
        for name in &names {
            assert!(!name.is_empty() && name.len() <= 255, "{name:?}");
            assert!(name != "." && name != ".." && !name.starts_with('.'));
            assert!(
                !name
                    .bytes()
                    .any(|b| b == b'/' || b == b'\\' || b.is_ascii_control()),
                "{name:?}"
            );
            assert_eq!(*name, name.to_ascii_lowercase());
        }
    }
    if host.trim().contains(['/', '\\', '\0']) {
        assert!(vhost::candidates(Some(&host)).is_err(), "{host:?} accepted");
    }
}

/// `negotiate`: the first line is Accept-Encoding, the rest Accept.
///
/// * codings are distinct, and each was named (or covered by `*`);
/// * a coding named with `q=0` alone, and no `*`, is never chosen;
/// * image formats are distinct and named explicitly;
/// * JSON is preferred only when named.
pub fn negotiate(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (accept_encoding, accept) = text.split_once('\n').unwrap_or((&text, ""));
    let ae = accept_encoding.to_ascii_lowercase();
    let codings = negotiate::acceptable_codings(Some(accept_encoding));
    assert!(codings.len() <= negotiate::CODINGS.len());
    for (i, c) in codings.iter().enumerate() {
        assert!(!codings[..i].contains(c), "{c:?} twice");
        let named = ae.contains(c.token) || (c.token == "gzip" && ae.contains("x-gzip"));
        assert!(named || ae.contains('*'), "{c:?} not asked for in {ae:?}");
    }
    if !ae.contains(',') && !ae.contains('*') && last_q_is_zero(&ae) {
        assert!(codings.is_empty(), "{ae:?} refuses, yet got {codings:?}");
    }
    let accept_lower = accept.to_ascii_lowercase();
    let images = negotiate::acceptable_images(Some(accept));
    for (i, f) in images.iter().enumerate() {
        assert!(!images[..i].contains(f));
        assert!(
            accept_lower.contains(f.mime),
            "{f:?} not named in {accept:?}"
        );
    }
    if negotiate::prefers_json(Some(accept)) {
        assert!(accept_lower.contains("application/json"));
    }
    assert!(negotiate::acceptable_codings(None).is_empty());
    assert!(negotiate::acceptable_images(None).is_empty());
    assert!(!negotiate::prefers_json(None));
    let _ = negotiate::is_replaceable_image(accept);
}

/// Whether a single `token;params` item's last `q` parameter is zero.
fn last_q_is_zero(item: &str) -> bool {
    let q = item
        .split(';')
        .skip(1)
        .filter_map(|p| p.split_once('='))
        .filter(|(k, _)| k.trim() == "q")
        .last();
    q.is_some_and(|(_, v)| {
        let v = v.trim();
        let frac = v
            .strip_prefix("0.")
            .unwrap_or(if v == "0" { "" } else { "x" });
        frac.len() <= 3 && frac.bytes().all(|b| b == b'0')
    })
}

/// `cgi_header`: a CGI script's output.
///
/// * a complete block ends with a LF within the input and within
///   `cgi::MAX_HEAD`, and parsing only that much gives the same head;
/// * `eof` turns Incomplete into Malformed and changes nothing else;
/// * the status is 200..=999; every value that reaches the response head is
///   free of CR, LF and other controls; passed-on names are tokens and never
///   a field the server owns; a local redirect is a local path;
/// * a document without Content-Type is a redirect or has no body.
pub fn cgi_header(data: &[u8]) {
    let open = cgi::parse_header_block(data, false);
    let closed = cgi::parse_header_block(data, true);
    match (&open, &closed) {
        (HeaderBlock::Incomplete, HeaderBlock::Malformed(_)) => {
            assert!(data.len() < cgi::MAX_HEAD)
        }
        (HeaderBlock::Incomplete, other) => panic!("eof turned Incomplete into {other:?}"),
        (a, b) => assert_eq!(a, b, "eof changed a finished verdict"),
    }
    if let HeaderBlock::Complete(head, body_start) = open {
        assert!(body_start <= data.len() && body_start <= cgi::MAX_HEAD);
        assert_eq!(data[body_start - 1], b'\n');
        assert_eq!(
            cgi::parse_header_block(&data[..body_start], false),
            HeaderBlock::Complete(clone_head(&head), body_start)
        );
        check_cgi_head(&head);
    }
}

fn clone_head(h: &CgiHead) -> CgiHead {
    CgiHead {
        status: h.status,
        reason: h.reason.clone(),
        location: h.location.as_ref().map(|l| match l {
            Location::Local(s) => Location::Local(s.clone()),
            Location::Client(s) => Location::Client(s.clone()),
        }),
        content_type: h.content_type.clone(),
        content_length: h.content_length,
        other: h.other.clone(),
    }
}

fn check_cgi_head(h: &CgiHead) {
    assert!((200..=999).contains(&h.status), "status {}", h.status);
    let safe = |s: &str| !s.bytes().any(|b| b != b'\t' && (b.is_ascii_control()));
    assert!(safe(&h.reason), "{:?}", h.reason);
    if let Some(ct) = &h.content_type {
        assert!(safe(ct), "{ct:?}");
    }
    match &h.location {
        Some(Location::Local(t)) => {
            assert!(t.starts_with('/') && !t.starts_with("//"), "{t:?}");
            assert!(safe(t));
        }
        Some(Location::Client(t)) => assert!(safe(t) && !t.is_empty(), "{t:?}"),
        // A document may lack Content-Type: it goes out untyped (RFC 3875 §6.3.1).
        None => {}
    }
    const OWNED: [&str; 13] = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "date",
        "server",
        "status",
        "location",
        "content-type",
        "content-length",
    ];
    for (name, value) in &h.other {
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)),
            "{name:?} is no token"
        );
        assert!(
            !OWNED.iter().any(|o| name.eq_ignore_ascii_case(o)),
            "{name:?} passed through"
        );
        assert!(safe(value), "{name}: {value:?}");
    }
}

/// `headers_file`: a `_headers` file, then requests matched against it.
///
/// * parsing never panics; at most one message a line, in line order;
///   never more than `MAX_RULES` blocks;
/// * for a few requests (fixed ones, and ones made from the file's own
///   patterns so they match): every field name is a token and never one
///   staticd owns, nor `Basic-Auth` or a CDN's instruction; every value is
///   non-empty, free of CR, LF, NUL and other controls but tab, and equals
///   its single values joined with `, `;
/// * every `Basic-Auth` lock met has a realm fit for a quoted-string, and
///   pairs with a non-empty user without `:` and a non-empty password.
pub fn headers_file(data: &[u8]) {
    let rules = HeaderRules::parse(data, &mut increasing_lines());
    assert!(rules.len() <= rules::MAX_RULES);
    for (host, path) in probes(data) {
        let host = host.as_deref();
        for (name, value) in rules.matching(host, &path).iter() {
            assert!(
                staticd::http::is_token(name.as_bytes()),
                "field name {name:?}"
            );
            assert!(
                ![
                    "content-length",
                    "transfer-encoding",
                    "connection",
                    "date",
                    "server",
                    "basic-auth",
                    "netlify-cdn-cache-control",
                    "netlify-vary",
                    "cloudflare-cdn-cache-control",
                    "cache-tag",
                ]
                .iter()
                .any(|owned| owned.eq_ignore_ascii_case(name)),
                "a server-owned or host-instruction field {name}"
            );
            let joined = value.to_string();
            assert!(!joined.is_empty(), "{name} has an empty value");
            assert!(
                !joined.chars().any(|c| c.is_control() && c != '\t'),
                "control character in {name}: {joined:?}"
            );
            let each: Vec<String> = value.values().map(|v| v.to_string()).collect();
            assert_eq!(joined, each.join(", "));
        }
        for lock in rules.locks(host, &path).iter() {
            let realm = lock.realm();
            assert!(!realm.is_empty() && !realm.chars().any(char::is_control));
            assert!(
                !realm.replace("\\\\", "").replace("\\\"", "").contains('"'),
                "an unescaped quote in the realm {realm:?}"
            );
            for pair in lock.pairs() {
                assert!(!pair.user().is_empty() && !pair.user().contains(':'));
                assert!(!pair.password().is_empty());
            }
        }
    }
}

/// `redirects_file`: a `_redirects` file, then requests matched against it.
///
/// * parsing never panics; at most one message a line, in line order;
///   never more than `MAX_RULES` rules;
/// * a match has a known status; its target, with and without a query
///   passed on, is non-empty visible ASCII (no CR, LF, space or control);
/// * a redirect goes to an http(s) URL or a local path that does not start
///   with `//` (which would name another host); a rewrite or 404 target is
///   a local path without fragment that the request-path checks take
///   without panicking.
pub fn redirects_file(data: &[u8]) {
    let rules = RedirectRules::parse(data, &mut increasing_lines());
    assert!(rules.len() <= rules::MAX_RULES);
    for (_, path) in probes(data) {
        let Some(m) = rules.first_match(&path) else {
            continue;
        };
        assert!(matches!(
            m.status(),
            200 | 301 | 302 | 303 | 307 | 308 | 404
        ));
        for query in [None, Some(""), Some("a=1&b")] {
            let target = m.target(query);
            assert!(!target.is_empty());
            assert!(
                target.bytes().all(|b| b.is_ascii_graphic()),
                "target {target:?}"
            );
            let lower = target.to_ascii_lowercase();
            let absolute = lower.starts_with("http://") || lower.starts_with("https://");
            if m.is_redirect() {
                assert!(
                    absolute || (target.starts_with('/') && !target.starts_with("//")),
                    "redirect to {target:?}"
                );
            } else {
                assert!(
                    target.starts_with('/') && !target.contains('#'),
                    "{target:?}"
                );
                if let Ok(p) = SitePath::from_target(&target) {
                    check_site_path(&p);
                }
            }
        }
    }
}

/// A message callback that checks every line number is new and later than
/// the last.
fn increasing_lines() -> impl FnMut(usize, &str) {
    let mut last = 0;
    move |line, message| {
        assert!(
            line > last,
            "line {line} reported after line {last}: {message}"
        );
        assert!(!message.is_empty());
        last = line;
    }
}

/// Requests to try: a few fixed ones, and up to 16 made from the patterns
/// in the input (`*` and `:name` filled in), so that rules do match.
fn probes(data: &[u8]) -> Vec<(Option<String>, Vec<u8>)> {
    let mut out: Vec<(Option<String>, Vec<u8>)> = [
        "/",
        "/index.html",
        "/a/b/c.jpg",
        "/static/x y",
        "/news/2024/05/hi",
    ]
    .iter()
    .map(|p| (Some("example.com".to_string()), p.as_bytes().to_vec()))
    .collect();
    out.push((None, b"/a\r\n%".to_vec()));
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(4096) {
        let Some(pattern) = line.split([' ', '\t']).next() else {
            continue;
        };
        let filled = fill_pattern(pattern);
        let (host, path) = match filled.strip_prefix("https://") {
            Some(rest) => match rest.find('/') {
                Some(i) => (Some(rest[..i].to_string()), rest[i..].to_string()),
                None => (Some(rest.to_string()), "/".to_string()),
            },
            None => (None, filled),
        };
        if path.starts_with('/') {
            out.push((host, path.into_bytes()));
        }
        if out.len() >= 22 {
            break;
        }
    }
    out
}

/// `*` becomes `s/t`, `:name` becomes `v`.
fn fill_pattern(pattern: &str) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push_str("s/t"),
            ':' if chars.peek().is_some_and(char::is_ascii_alphabetic) => {
                while chars
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    chars.next();
                }
                out.push('v');
            }
            c => out.push(c),
        }
    }
    out
}

/// `tls_session`: bytes from a client on an HTTPS connection, through the
/// same TLS layer and `Session` both transports use.
///
/// * nothing panics, and every read ends (the input is finite);
/// * no plaintext reaches the session before a handshake completes, which
///   arbitrary bytes cannot do (they would need the server's keys): the
///   session only ever sees bytes when they were cleartext HTTP to begin
///   with, and then it answers 400 and closes;
/// * what the session holds never exceeds what was sent.
#[cfg(feature = "tls")]
pub fn tls_session(data: &[u8]) {
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use std::sync::OnceLock;

    use staticd::config::{Config, Features};
    use staticd::origin::Kind;
    use staticd::serve::wire::{Got, Wire};
    use staticd::session::{Session, Step};
    use staticd::site::Site;
    use staticd::tls::Acceptor;

    static SERVER: OnceLock<(Acceptor, Site, Config)> = OnceLock::new();
    let (acceptor, site, cfg) = SERVER.get_or_init(|| {
        let acceptor = Acceptor::from_pem(
            include_bytes!("../tls/cert.pem"),
            include_bytes!("../tls/key.pem"),
        )
        .expect("the committed test certificate loads");
        // An empty directory: what is asked for does not matter here.
        let root = std::env::temp_dir().join("staticd-fuzz-tls-root");
        std::fs::create_dir_all(&root).expect("temp dir");
        let site =
            Site::open(&root, &["index.html".to_string()], Features::default()).expect("site");
        let cfg = Config {
            log_format: staticd::config::LogFormat::Off,
            ..Config::default()
        };
        (acceptor, site, cfg)
    });
    let (server, mut client) = UnixStream::pair().expect("socketpair");
    // Small inputs fit the socket buffer; the rest of a huge one is cut.
    server.set_nonblocking(true).expect("nonblocking");
    client.set_nonblocking(true).expect("nonblocking");
    let sent: usize = client.write(data).unwrap_or_default();
    client
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    let mut wire = Wire::Tls(Box::new(acceptor.accept().expect("connection")));
    let mut session = Session::with_kind("127.0.0.1".into(), Kind::Https);
    let mut cleartext = false;
    // Each read takes at least one byte or ends: at most one read per byte.
    for _ in 0..=sent {
        let got = wire.read(server.as_fd(), session.input());
        match got {
            Ok(Got::Bytes) => {}
            Ok(Got::Cleartext) => {
                cleartext = true;
                session.https_required();
            }
            Ok(Got::Closed) | Err(_) => break,
        }
        assert!(
            cleartext || session.input().is_empty(),
            "plaintext without a handshake"
        );
        assert!(session.input().len() <= sent);
        if cleartext {
            break;
        }
    }
    if cleartext {
        // A cleartext request gets 400, or waits for the rest of its head.
        while let Step::Send(s) = session.step(cfg, site, false) {
            assert_eq!(s.response.code(), 400, "cleartext on a TLS port");
        }
    }
}

/// `h2_connection`: the bytes a client sends after the HTTP/2 preface,
/// from memory through the server's whole HTTP/2 connection (the watch's
/// checks, nghttp2 through the one module of unsafe calls, src/nghttp2.rs,
/// each stream's request translated and decided, its answer framed into a
/// turn's plan and written).
///
/// * nothing panics;
/// * the connection ends once the client's bytes end: no hang (bounded
///   here at 5 s, a crash if exceeded);
/// * whatever the server writes starts with its SETTINGS frame;
/// * what it writes is bounded: a site of tiny files cannot make more than
///   a few KiB per frame the client sent.
#[cfg(feature = "http2")]
pub fn h2_connection(data: &[u8]) {
    use std::sync::{Arc, OnceLock};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use staticd::config::{Config, Features, Http2};
    use staticd::serve::h2::{serve_stream, PREFACE};
    use staticd::site::Site;

    static SERVER: OnceLock<(Arc<Config>, Arc<Site>)> = OnceLock::new();
    let (cfg, site) = SERVER.get_or_init(|| {
        let root = std::env::temp_dir().join("staticd-fuzz-h2-root");
        std::fs::create_dir_all(root.join("d")).expect("temp dir");
        std::fs::write(root.join("index.html"), "<p>hello</p>\n").expect("file");
        std::fs::write(root.join("a.txt"), "0123456789").expect("file");
        let site = Site::open(&root, &["index.html".to_string()], Features::default());
        let cfg = Config {
            log_format: staticd::config::LogFormat::Off,
            http2: Some(Http2::default()),
            ..Config::default()
        };
        (Arc::new(cfg), Arc::new(site.expect("site")))
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let out = runtime.block_on(async {
        let (client, server) = tokio::io::duplex(64 << 10);
        let served = tokio::spawn(serve_stream(server, Arc::clone(cfg), Arc::clone(site)));
        let (mut from, mut to) = tokio::io::split(client);
        let send = async {
            let _ = to.write_all(PREFACE).await;
            let _ = to.write_all(data).await;
            let _ = to.shutdown().await;
        };
        let receive = async {
            let mut out = Vec::new();
            let _ = from.read_to_end(&mut out).await;
            out
        };
        let both = async { tokio::join!(send, receive).1 };
        let out = tokio::time::timeout(Duration::from_secs(5), both)
            .await
            .expect("the connection ends once the client's bytes end");
        tokio::time::timeout(Duration::from_secs(5), served)
            .await
            .expect("the server's task ends")
            .expect("the server's task does not panic");
        out
    });
    if !out.is_empty() {
        assert!(out.len() >= 9, "a partial frame header");
        assert_eq!(out[3], 0x4, "the server speaks first with SETTINGS");
    }
    let frames = data.len() / 9 + 1;
    assert!(
        out.len() <= 4096 + frames * 4096,
        "{} bytes out for {} in",
        out.len(),
        data.len()
    );
}

/// `htpasswd`: an htpasswd file, then, after the first NUL, the value of an
/// Authorization field.
///
/// * reading the file never panics; it keeps at most 10,000 users, each
///   named by 1 to 255 bytes without `:` or control characters, and says
///   what it refused in single lines that name the file;
/// * decoded credentials have a user without `:` and no control
///   characters, within the token's bounds;
/// * checking them against a fixed table (one user per hash kind, cheap
///   settings) never panics and grants exactly the known user and password
///   pairs, under the area only;
/// * checking them against the file itself (when its hashes are cheap
///   enough to fuzz) grants only the user the credentials name, and only
///   one the file holds.
#[cfg(feature = "auth")]
pub fn htpasswd(data: &[u8]) {
    use staticd::auth::htpasswd::{Table, MAX_USERS, MAX_USER_BYTES};
    use staticd::auth::{basic, Auth, Check};

    let (file, header) = match data.iter().position(|&b| b == 0) {
        Some(nul) => (&data[..nul], Some(&data[nul + 1..])),
        None => (data, None),
    };
    let mut reports = Vec::new();
    let table = Table::parse(file, "pw", &mut |m| reports.push(m.to_string()));
    assert!(table.len() <= MAX_USERS);
    for e in table.entries() {
        assert!((1..=MAX_USER_BYTES).contains(&e.user.len()), "{:?}", e.user);
        assert!(!e.user.contains(|c: char| c == ':' || c.is_control()));
    }
    for m in &reports {
        assert!(m.starts_with("pw"), "a report without the file: {m:?}");
        assert!(!m.contains('\n'), "a report on several lines: {m:?}");
    }
    let credentials = header.and_then(basic::decode);
    if let Some(c) = &credentials {
        assert!(!c.user().contains(&b':'), "a user with ':'");
        let both = [c.user(), c.password()].concat();
        assert!(
            !both.iter().any(u8::is_ascii_control),
            "a control character"
        );
        assert!(both.len() < 1024);
    }

    const KNOWN: &str = "\
alice:$2y$04$NyCJjL9f28.T9MaSU4P/xuzh84p2ka/GPsteiJqQlV9a3HUuepmEi
bob:$apr1$WNU5/TRs$f.pwrh2Sr3wmOapxmfjiM/
dave:$5$rounds=1000$DWQbPs52b9HNQtym$OMOkfHeyfwV3wCFxNgAHFuaPHs7VLaEnE7a3yizsPdB
";
    const PAIRS: [(&[u8], &[u8]); 3] = [
        (b"alice", b"correct horse"),
        (b"bob", b"hunter2"),
        (b"dave", b"s3cret"),
    ];
    let known = Auth::from_memory(&[("/p", KNOWN.as_bytes())], &mut |m| {
        panic!("the fixed table is refused: {m}")
    })
    .expect("the fixed table loads");
    assert_eq!(known.check("/q", header), Check::Open);
    let expected = credentials
        .as_ref()
        .is_some_and(|c| PAIRS.contains(&(c.user(), c.password())));
    match known.check("/p/x", header) {
        Check::Granted { user } => {
            assert!(expected, "granted to {user:?} with the wrong password")
        }
        Check::Denied { realm } => {
            assert_eq!(realm, "/p");
            assert!(!expected, "a known user and password refused");
        }
        Check::Open => panic!("/p/x is under /p"),
    }

    // bcrypt at any cost and many SHA-crypt rounds take seconds: not here.
    let text = String::from_utf8_lossy(file);
    if text.contains("$2") || text.contains("rounds=") {
        return;
    }
    let Ok(auth) = Auth::from_memory(&[("/", file)], &mut |_| {}) else {
        panic!("an htpasswd file under / is refused");
    };
    if let Check::Granted { user } = auth.check("/x", header) {
        let c = credentials.expect("granted without credentials");
        assert_eq!(user.as_bytes(), c.user(), "granted to another user");
        assert!(table.find(c.user()).is_some_and(|e| e.hash.is_some()));
        assert!(user.len() <= MAX_USER_BYTES);
    }
}

/// `proxy_header`: the first bytes of a connection under `--proxy-protocol`,
/// through `proxy::header::parse`.
///
/// * a header's length is within the input and the version's bound (107
///   bytes for v1, `MAX_V2` for v2), and a v1 header ends with CRLF;
/// * the header alone parses the same: bytes after it are never looked at;
/// * every shorter prefix is `Incomplete`, and what it says is `needed`
///   never reaches past the header's end;
/// * a reader that takes exactly `needed` bytes at a time (as inetd mode
///   does on a pipe) ends on the same verdict, never having taken a byte
///   past the header;
/// * once a prefix is `Invalid`, the whole input is;
/// * a header's source and destination are of one address family.
pub fn proxy_header(data: &[u8]) {
    use staticd::proxy::header::{self, Parsed, MAX_LEN, MAX_V1, MAX_V2};
    let whole = header::parse(data);
    if let Parsed::Header { len, .. } | Parsed::Local { len } = whole {
        assert!(len <= data.len() && len <= MAX_LEN);
        if data.starts_with(b"PROXY ") {
            assert!(len <= MAX_V1 && data[..len].ends_with(b"\r\n"));
        } else {
            assert!((16..=MAX_V2).contains(&len));
        }
        assert_eq!(header::parse(&data[..len]), whole, "the header alone");
        for cut in 0..len {
            match header::parse(&data[..cut]) {
                Parsed::Incomplete { needed } => {
                    assert!(
                        needed >= 1 && cut + needed <= len,
                        "needed {needed} at {cut} of {len}"
                    )
                }
                other => panic!("a prefix of {cut} bytes of a {len}-byte header: {other:?}"),
            }
        }
    }
    if let Parsed::Header {
        source,
        destination,
        ..
    } = whole
    {
        assert_eq!(source.is_ipv4(), destination.is_ipv4());
    }
    if let Parsed::Incomplete { needed } = whole {
        assert!(needed >= 1 && data.len() + needed <= MAX_LEN);
    }
    // Invalid stays invalid as more bytes come.
    let checked = data.len().min(MAX_LEN + 1);
    for cut in 0..checked {
        if header::parse(&data[..cut]) == Parsed::Invalid {
            assert_eq!(whole, Parsed::Invalid, "invalid at {cut} bytes, then not");
            break;
        }
    }
    // Reading exactly what is needed.
    let mut taken = 0;
    loop {
        match header::parse(&data[..taken]) {
            Parsed::Incomplete { needed } if taken + needed <= data.len() => taken += needed,
            Parsed::Incomplete { .. } => {
                assert!(matches!(whole, Parsed::Incomplete { .. } | Parsed::Invalid));
                break;
            }
            done => {
                if let Parsed::Header { len, .. } | Parsed::Local { len } = done {
                    assert_eq!(len, taken, "read past the header");
                }
                assert_eq!(done, whole);
                break;
            }
        }
    }
}

/// `forwarded`: `PEER\nFORWARDED\nX-FORWARDED-FOR` through
/// `proxy::forwarded::origin`, with 10.0.0.0/8, 2001:db8::/32 and Unix-socket
/// peers trusted.
///
/// * an untrusted peer's headers are never believed;
/// * a client found is a valid IP address written inside one of the two
///   header values, free of anything but address characters;
/// * for X-Forwarded-For alone, of plain addresses and garbage, the client
///   is what a walk from the right gives: the first untrusted address;
///   past garbage, the last trusted one (or none); all trusted, the leftmost.
pub fn forwarded(data: &[u8]) {
    use staticd::config::{TrustedProxies, TrustedProxy};
    use staticd::proxy::forwarded::origin;
    use std::net::IpAddr;
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\n');
    let peer = parts.next().unwrap_or_default();
    let fwd = parts.next().filter(|s| !s.is_empty());
    let xff = parts.next();
    let trusted = TrustedProxies(
        ["10.0.0.0/8", "2001:db8::/32", "unix:"]
            .iter()
            .map(|s| s.parse::<TrustedProxy>().unwrap())
            .collect(),
    );
    let found = origin(&trusted, peer, fwd, xff);
    if !trusted.trusts_peer(peer) {
        assert_eq!(found, None, "an untrusted peer believed");
        return;
    }
    let Some(found) = found else {
        return;
    };
    let ip: IpAddr = found.address.parse().expect("the client is an IP address");
    assert!(found
        .address
        .bytes()
        .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.'));
    let inside = |outer: Option<&str>| {
        outer.is_some_and(|o| {
            let range = o.as_ptr() as usize..o.as_ptr() as usize + o.len();
            range.contains(&(found.address.as_ptr() as usize))
        })
    };
    assert!(
        inside(fwd) || inside(xff),
        "the client is not from the headers"
    );
    // The model, for X-Forwarded-For alone with entries it can judge.
    let Some(xff) = xff.filter(|_| fwd.is_none()) else {
        return;
    };
    let entries: Vec<Option<IpAddr>> = xff.split(',').map(|e| e.trim().parse().ok()).collect();
    let judged = xff
        .split(',')
        .all(|e| e.trim().parse::<IpAddr>().is_ok() || !e.contains([':', '[']));
    if !judged {
        return;
    }
    let mut last_trusted = None;
    let mut model = None;
    for entry in entries.iter().rev() {
        match entry {
            Some(ip) if trusted.contains(*ip) => last_trusted = Some(*ip),
            Some(ip) => {
                model = Some(*ip);
                break;
            }
            None => break,
        }
    }
    assert_eq!(Some(ip), model.or(last_trusted));
}

/// `qpack`: staticd's static-only QPACK (`h3session::qpack`). The first
/// byte picks what the rest is (mod 3): a field section (a HEADERS frame's
/// payload), the client's encoder stream, or its decoder stream.
///
/// * nothing panics;
/// * a section that decodes has names and values no longer than its
///   Huffman bound (8/5 of the section), and the fields, encoded again by
///   `qpack::Encoder`, decode to the same fields (names lowercased);
/// * a stream's verdict is the same whole, in 3-byte pieces or a byte at
///   a time; an encoder stream is accepted only as capacity-0 settings
///   (0x20), a decoder stream only as Stream Cancellations (0b01......),
///   each with at most an unfinished instruction at the end.
#[cfg(feature = "http3")]
pub fn qpack(data: &[u8]) {
    use staticd::h3session::qpack::{self, DecoderStream, Encoder, EncoderStream};

    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    match first % 3 {
        0 => {
            let mut fields = Vec::new();
            let decoded = qpack::decode(rest, |n: &[u8], v: &[u8]| {
                fields.push((n.to_vec(), v.to_vec()));
                Ok::<(), ()>(())
            });
            if decoded.is_err() {
                return;
            }
            let bound = rest.len() * 8 / 5 + 1;
            for (n, v) in &fields {
                assert!(n.len() <= bound && v.len() <= bound, "{rest:?}");
            }
            let mut again = Vec::new();
            Encoder::start(&mut again);
            for (n, v) in &fields {
                Encoder::field(&mut again, n, v);
            }
            let mut round = Vec::new();
            let decoded = qpack::decode(&again, |n: &[u8], v: &[u8]| {
                round.push((n.to_vec(), v.to_vec()));
                Ok::<(), ()>(())
            });
            assert_eq!(decoded, Ok(()), "re-encoded {rest:?}");
            // The encoder writes names lowercased, as HTTP/3 wants them.
            let lowered: Vec<_> = fields
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
                .collect();
            assert_eq!(round, lowered, "re-encoded {rest:?}");
        }
        1 => {
            let verdict = qpack_stream(
                rest,
                |b| EncoderStream::default().read(b),
                |s, b| s.read(b),
                EncoderStream::default,
            );
            if verdict {
                let settings = rest.iter().take_while(|&&b| b == 0x20).count();
                let tail = &rest[settings..];
                let unfinished = tail.len() < 8
                    && tail.first().is_none_or(|&b| b == 0x3f)
                    && tail.iter().skip(1).all(|b| b & 0x80 != 0);
                assert!(unfinished, "encoder stream accepted: {rest:?}");
            }
        }
        _ => {
            let verdict = qpack_stream(
                rest,
                |b| DecoderStream::default().read(b),
                |s, b| s.read(b),
                DecoderStream::default,
            );
            if verdict {
                qpack_check_cancellations(rest);
            }
        }
    }
}

/// Whether a QPACK stream reader accepts `bytes`, asserting it says the
/// same fed whole, in 3-byte pieces and a byte at a time.
#[cfg(feature = "http3")]
fn qpack_stream<S>(
    bytes: &[u8],
    whole: impl Fn(&[u8]) -> Result<(), staticd::h3session::qpack::Error>,
    read: impl Fn(&mut S, &[u8]) -> Result<(), staticd::h3session::qpack::Error>,
    new: impl Fn() -> S,
) -> bool {
    let verdict = whole(bytes).is_ok();
    for size in [3, 1] {
        let mut stream = new();
        let pieces = bytes
            .chunks(size)
            .try_for_each(|piece| read(&mut stream, piece));
        assert_eq!(pieces.is_ok(), verdict, "in {size}-byte pieces: {bytes:?}");
    }
    verdict
}

/// An accepted decoder stream: Stream Cancellations (0b01, a 6-bit prefixed
/// stream ID), the last one possibly unfinished.
#[cfg(feature = "http3")]
fn qpack_check_cancellations(mut bytes: &[u8]) {
    let all = bytes;
    while let Some(&first) = bytes.first() {
        assert_eq!(first & 0xc0, 0x40, "decoder stream accepted: {all:?}");
        let mut took = 1;
        if first & 0x3f == 0x3f {
            while bytes.get(took).is_some_and(|b| b & 0x80 != 0) {
                took += 1;
            }
            if took == bytes.len() {
                assert!(took < 8, "decoder stream accepted: {all:?}");
                return;
            }
            took += 1;
        }
        bytes = &bytes[took..];
    }
}

/// `h3_reader`: the client's HTTP/3 streams through staticd's own frame
/// readers (`h3session::frames`). The first byte picks the stream: bit 0
/// the control stream (else a request stream), bit 1 a field section
/// limit of 100 bytes (else 16 KiB); the rest is the stream's bytes.
///
/// * nothing panics, and every piece is read to its end;
/// * fed whole, in 7-byte pieces or a byte at a time: the same verdict,
///   and the same sections, body and control frames up to it;
/// * a request's body is never more than came, each section within the
///   limit; its first section is the head, any later one trailers.
#[cfg(feature = "http3")]
pub fn h3_reader(data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let max = if first & 2 == 0 { 16 << 10 } else { 100 };
    if first & 1 == 1 {
        let whole = h3_control(stream, stream.len().max(1));
        for size in [7, 1] {
            assert_eq!(h3_control(stream, size), whole, "in {size}-byte pieces");
        }
        return;
    }
    let whole = h3_request(stream, max, stream.len().max(1));
    for size in [7, 1] {
        assert_eq!(
            h3_request(stream, max, size),
            whole,
            "in {size}-byte pieces"
        );
    }
    let (sections, body, _) = whole;
    assert!(body.len() <= stream.len());
    for (i, (trailers, section)) in sections.iter().enumerate() {
        assert!(section.len() as u64 <= max);
        assert_eq!(*trailers, i > 0);
    }
    assert!(sections.len() <= 2);
}

/// A request stream through `RequestReader` in pieces of `size`: its
/// sections (trailers marked), its body, and its verdict (the end's too).
#[cfg(feature = "http3")]
#[allow(clippy::type_complexity)]
fn h3_request(
    stream: &[u8],
    max: u64,
    size: usize,
) -> (
    Vec<(bool, Vec<u8>)>,
    Vec<u8>,
    Result<(), staticd::h3session::frames::Violation>,
) {
    use staticd::h3session::frames::{Event, RequestReader};
    let mut reader = RequestReader::new(max, Vec::new());
    let (mut sections, mut body) = (Vec::new(), Vec::new());
    for piece in stream.chunks(size) {
        let mut at = 0;
        loop {
            let (next, event) = match reader.read(piece, at) {
                Ok(read) => read,
                Err(violation) => return (sections, body, Err(violation)),
            };
            assert!(next >= at && next <= piece.len());
            at = next;
            match event {
                Some(Event::Headers) => sections.push((false, reader.section().to_vec())),
                Some(Event::Trailers) => sections.push((true, reader.section().to_vec())),
                Some(Event::Data(range)) => body.extend_from_slice(&piece[range]),
                None => break,
            }
        }
        assert_eq!(at, piece.len());
    }
    let end = reader.end();
    (sections, body, end)
}

/// The control stream (after its type) through `ControlReader` in pieces
/// of `size`: what it said, and its verdict.
#[cfg(feature = "http3")]
fn h3_control(
    stream: &[u8],
    size: usize,
) -> (
    Vec<staticd::h3session::frames::Control>,
    Result<(), staticd::h3session::frames::Violation>,
) {
    let mut reader = staticd::h3session::frames::ControlReader::default();
    let mut said = Vec::new();
    for piece in stream.chunks(size) {
        if let Err(violation) = reader.read(piece, |c| said.push(c)) {
            return (said, Err(violation));
        }
    }
    (said, Ok(()))
}

/// `h3_connection`: a client's script against the server's whole HTTP/3
/// connection (`h3session::conn::Connection`, quinn-proto's QUIC under it)
/// over `h3session::loopback`'s in-memory pair: request streams with
/// arbitrary bytes or ready-made requests, finished, reset or stopped;
/// unidirectional streams of each type; the clock moved; a graceful stop.
/// The input is a list of actions ([`h3_script`] says how they are
/// written); the handshake is done once per input, before them.
///
/// After every action:
/// * nothing panics, and the exchange goes quiet (bounded rounds);
/// * what the server queues is bounded: no driver event (a site without
///   scripts makes none, and nothing here takes them), and what it sent is
///   within what it was asked for and heard (quinn's statistics);
/// * every response read starts with a HEADERS frame (the reader refuses
///   anything else) whose first field is `:status`, three digits from 100
///   to 599; one field section only (no trailers);
/// * a 200's body is a prefix of a.txt or big.bin, the file its
///   Content-Length names (all of it once the stream ended, unless it was
///   HEAD's), a single-range 206's a prefix of the range it names: no
///   bytes of anything else, and never of secret.txt beside the root;
/// * after the exchange, no deadline of the server's is already past (a
///   driver would spin on it).
///
/// After the last action, time moves from deadline to deadline: the
/// connection must be closed (or drained) by the longest chain of its own
/// timers (heads, bodies, responses, keep-alive, the last GOAWAY's wait),
/// well before QUIC's idle timeout would end it for it.
#[cfg(feature = "http3")]
pub fn h3_connection(data: &[u8]) {
    h3_script::run(data);
}

/// How an `h3_connection` input is written, and the harness that acts it
/// out. An input is a list of actions: an opcode byte (taken modulo
/// [`op::COUNT`]) and its arguments; `[len][bytes]` is a length byte and
/// that many bytes (fewer at the input's end); `[stream]` picks one of the
/// streams of that kind opened so far (modulo their number; the action is
/// skipped if there are none). [`Script`] writes inputs (the seeds'
/// generator in tests/fuzz_corpus.rs uses it).
#[cfg(feature = "http3")]
pub mod h3_script {
    use std::collections::HashMap;
    use std::sync::{Arc, OnceLock};
    use std::time::{Duration, Instant};

    use quinn_proto::{StreamId, VarInt};
    use staticd::h3session::loopback::{Loopback, Response};

    /// The actions, by opcode.
    pub mod op {
        /// `[len][bytes]`: a request stream opened with these bytes.
        pub const OPEN: u8 = 0;
        /// `[which][end]`: a request stream with [`super::REQUESTS`]`[which]`
        /// as its HEADERS frame, finished if `end` is odd.
        pub const REQUEST: u8 = 1;
        /// `[stream][len][bytes]`: more bytes on a request stream.
        pub const WRITE: u8 = 2;
        /// `[stream]`: a request stream finished (FIN).
        pub const FINISH: u8 = 3;
        /// `[stream][code]`: a request stream's sending side reset.
        pub const RESET: u8 = 4;
        /// `[stream][code]`: STOP_SENDING for a request stream's response.
        pub const STOP_SENDING: u8 = 5;
        /// `[kind][len][bytes]`: a unidirectional stream of type
        /// [`super::UNI_TYPES`]`[kind]`, then these bytes.
        pub const UNI: u8 = 6;
        /// `[stream][len][bytes]`: more bytes on a unidirectional stream.
        pub const UNI_WRITE: u8 = 7;
        /// `[stream][how]`: a unidirectional stream finished (`how` even)
        /// or reset (odd).
        pub const UNI_END: u8 = 8;
        /// `[how]`: the clock moved by [`super::duration`]`(how)`, then the
        /// exchange run.
        pub const ADVANCE: u8 = 9;
        /// `[how]`: the server asked to stop (`Connection::stop`), with
        /// [`super::duration`]`(how)` of grace.
        pub const STOP: u8 = 10;
        /// The exchange run: datagrams both ways until quiet.
        pub const RUN: u8 = 11;
        /// The client's datagrams delivered to the server only.
        pub const DELIVER: u8 = 12;
        /// `[code]`: the client closes the connection.
        pub const CLOSE: u8 = 13;
        pub const COUNT: u8 = 14;
    }

    /// The requests [`op::REQUEST`] sends: method, path, further fields.
    #[allow(clippy::type_complexity)]
    pub const REQUESTS: [(&str, &str, &[(&str, &str)]); 12] = [
        ("GET", "/a.txt", &[]),
        ("GET", "/big.bin", &[]),
        ("HEAD", "/a.txt", &[]),
        ("GET", "/missing.txt", &[]),
        ("GET", "/big.bin", &[("range", "bytes=65000-65999")]),
        ("POST", "/a.txt", &[("content-length", "5")]),
        ("GET", "/../secret.txt", &[]),
        ("GET", "/%2e%2e/secret.txt", &[]),
        ("GET", "/", &[]),
        ("GET", "/a.txt", &[("if-none-match", "*")]),
        ("GET", "/big.bin", &[("range", "bytes=0-0,-10")]),
        ("OPTIONS", "*", &[]),
    ];

    /// Unidirectional stream types [`op::UNI`] opens: control, push (a
    /// client may not), QPACK's encoder and decoder, a grease type
    /// (0x1f * N + 0x21) and one nobody defined.
    pub const UNI_TYPES: [u64; 6] = [0x00, 0x01, 0x02, 0x03, 0x1f * 7 + 0x21, 0x54];

    /// Opcode arguments for a time: 5 ms steps below 200, whole seconds
    /// (1 to 56) from 200 on.
    pub fn duration(how: u8) -> Duration {
        match how {
            0..200 => Duration::from_millis(5 * u64::from(how)),
            _ => Duration::from_secs(u64::from(how) - 199),
        }
    }

    /// Actions acted on per input, and streams opened: enough for every
    /// interleaving that matters, few enough to keep an input well under
    /// 50 ms (ten GETs of big.bin take about 30 under AddressSanitizer).
    const MAX_ACTIONS: usize = 64;
    const MAX_REQUESTS: usize = 10;
    const MAX_UNI: usize = 8;

    /// The server's timeouts: short, so that time ends a connection in
    /// few steps.
    const READ_TIMEOUT: Duration = Duration::from_secs(2);
    const SEND_TIMEOUT: Duration = Duration::from_secs(3);
    const KEEPALIVE: Duration = Duration::from_secs(5);
    /// h3session::conn's wait between its last GOAWAY and the close.
    const LAST_WORDS: Duration = Duration::from_secs(1);
    /// QUIC's idle timeout, both ends: far past every HTTP/3 timer, so
    /// that a connection that ends has been ended by HTTP/3 (the server
    /// itself sets it to the keep-alive timeout, which would hide a
    /// keep-alive that never closes).
    const QUIC_IDLE: Duration = Duration::from_secs(60);

    /// a.txt's and big.bin's bytes, and the one outside the root.
    const A: &[u8] = b"0123456789";
    /// More than one DATA frame's block (64 KiB), and than QUIC's first
    /// congestion window.
    const BIG_LEN: usize = 70_000;
    const SECRET: &[u8] = b"staticd-fuzz-h3-secret: never served";

    fn big() -> &'static [u8] {
        static BIG: OnceLock<Vec<u8>> = OnceLock::new();
        BIG.get_or_init(|| (0..BIG_LEN).map(|i| (i % 251) as u8).collect())
    }

    /// What every input's connection starts from: both QUIC configurations
    /// and what the server serves, made once per process.
    struct Fixture {
        server: quinn_proto::ServerConfig,
        client: quinn_proto::ClientConfig,
        served: Arc<staticd::pipeline::Served>,
        requests: Vec<Vec<u8>>,
    }

    fn fixture() -> &'static Fixture {
        static FIXTURE: OnceLock<Fixture> = OnceLock::new();
        FIXTURE.get_or_init(|| Fixture {
            server: server_config(),
            client: client_config(),
            served: served(),
            requests: REQUESTS
                .iter()
                .map(|r| headers_frame(r.0, r.1, r.2))
                .collect(),
        })
    }

    /// Writes `bytes` to `path` unless it holds them already: fuzzing
    /// processes share the directory, and rewriting a file another reads
    /// would cut its body short.
    fn put(path: &std::path::Path, bytes: &[u8]) {
        if std::fs::read(path).ok().as_deref() != Some(bytes) {
            std::fs::write(path, bytes).expect("the fuzz root");
        }
    }

    /// A root of a.txt and big.bin, secret.txt beside it; timeouts short.
    fn served() -> Arc<staticd::pipeline::Served> {
        use staticd::client_name::ClientName;
        use staticd::config::{Config, Features, LogFormat};
        use staticd::origin::{Kind, Origin, Protocol};

        let dir = std::env::temp_dir().join("staticd-fuzz-h3");
        let root = dir.join("root");
        std::fs::create_dir_all(&root).expect("temp dir");
        put(&root.join("a.txt"), A);
        put(&root.join("big.bin"), big());
        put(&dir.join("secret.txt"), SECRET);
        let index = ["index.html".to_string()];
        let site = staticd::site::Site::open(&root, &index, Features::default()).expect("site");
        let cfg = Config {
            log_format: LogFormat::Off,
            read_timeout: READ_TIMEOUT,
            send_timeout: SEND_TIMEOUT,
            keepalive_timeout: KEEPALIVE,
            ..Config::default()
        };
        Arc::new(staticd::pipeline::Served {
            cfg: Arc::new(cfg),
            site: Arc::new(site),
            origin: Origin::new(Kind::Https, ClientName::new("127.0.0.1"), Protocol::Fields),
        })
    }

    /// staticd's own QUIC TLS (`Acceptor::quic_config`) with the committed
    /// test certificate, and the stream limits serve::h3 sets.
    fn server_config() -> quinn_proto::ServerConfig {
        use quinn_proto::crypto::rustls::QuicServerConfig;
        let acceptor = staticd::tls::Acceptor::from_pem(
            include_bytes!("../tls/cert.pem"),
            include_bytes!("../tls/key.pem"),
        )
        .expect("the committed test certificate loads");
        let mut tls = acceptor.quic_config().expect("QUIC's TLS");
        // No session tickets: the client never resumes, and each input's
        // would stay in the server's session cache (a state that grows
        // from input to input, and a leak check after each).
        tls.send_tls13_tickets = 0;
        let crypto = QuicServerConfig::try_from(tls).expect("QUIC's TLS");
        let mut server = quinn_proto::ServerConfig::with_crypto(Arc::new(crypto));
        let mut transport = transport();
        transport.max_concurrent_bidi_streams(staticd::config::H3_MAX_STREAMS.into());
        transport.max_concurrent_uni_streams(8u32.into());
        server.transport_config(Arc::new(transport));
        server
    }

    /// A client that trusts the test CA, without resumption: an input
    /// never resumes an earlier one's session, so it runs the same
    /// whatever ran before it.
    fn client_config() -> quinn_proto::ClientConfig {
        use quinn_proto::crypto::rustls::QuicClientConfig;
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let ca = CertificateDer::from_pem_slice(include_bytes!("../tls/ca.pem")).expect("ca");
        let mut tls = staticd::h3session::loopback::client_tls(ca);
        tls.resumption = rustls::client::Resumption::disabled();
        let crypto = QuicClientConfig::try_from(tls).expect("QUIC's TLS");
        let mut client = quinn_proto::ClientConfig::new(Arc::new(crypto));
        client.transport_config(Arc::new(transport()));
        client
    }

    fn transport() -> quinn_proto::TransportConfig {
        let mut transport = quinn_proto::TransportConfig::default();
        let idle = quinn_proto::IdleTimeout::try_from(QUIC_IDLE).expect("idle timeout");
        transport.max_idle_timeout(Some(idle));
        transport
    }

    /// A request's HEADERS frame: static-table QPACK, as the loopback's
    /// requests are made.
    fn headers_frame(method: &str, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        use staticd::h3session::frames::{frame, FrameHeader};
        use staticd::h3session::qpack::Encoder;
        let mut section = staticd::h3session::loopback::section(method, path);
        for (name, value) in extra {
            Encoder::field(&mut section, name.as_bytes(), value.as_bytes());
        }
        let header = FrameHeader::new(frame::HEADERS, section.len() as u64);
        [header.bytes(), &section].concat()
    }

    /// The input, read a byte or a run of bytes at a time.
    struct Input<'a>(&'a [u8]);

    impl<'a> Input<'a> {
        fn byte(&mut self) -> Option<u8> {
            let (&b, rest) = self.0.split_first()?;
            self.0 = rest;
            Some(b)
        }

        /// `[len][bytes]`.
        fn bytes(&mut self) -> &'a [u8] {
            let len = usize::from(self.byte().unwrap_or(0)).min(self.0.len());
            let (taken, rest) = self.0.split_at(len);
            self.0 = rest;
            taken
        }

        /// `[stream]` among `streams`.
        fn pick(&mut self, streams: &[StreamId]) -> Option<StreamId> {
            let b = usize::from(self.byte()?);
            (!streams.is_empty()).then(|| streams[b % streams.len()])
        }
    }

    /// An HTTP/3 error code from an argument byte.
    fn code(b: Option<u8>) -> VarInt {
        VarInt::from_u32(0x100 + u32::from(b.unwrap_or(0) % 16))
    }

    /// One input's connection and what the client did on it.
    struct Harness {
        link: Loopback,
        requests: Vec<StreamId>,
        uni: Vec<StreamId>,
        /// How often the clock moved: each may make either end send
        /// probes.
        advances: u64,
        /// What was checked of each response (its shape then: body
        /// length, field sections, ended), so that an unchanged one is not
        /// checked again, and a body's bytes are compared once each.
        checked: HashMap<StreamId, (usize, usize, bool)>,
    }

    pub(super) fn run(data: &[u8]) {
        let fx = fixture();
        let link = Loopback::connect(
            fx.server.clone(),
            fx.client.clone(),
            Arc::clone(&fx.served),
            Instant::now(),
        );
        let mut h = Harness {
            link,
            requests: Vec::new(),
            uni: Vec::new(),
            advances: 0,
            checked: HashMap::new(),
        };
        let mut input = Input(data);
        for _ in 0..MAX_ACTIONS {
            let Some(opcode) = input.byte() else {
                break;
            };
            h.act(opcode % op::COUNT, &mut input, fx);
            h.check();
        }
        h.finish();
    }

    impl Harness {
        /// One action (see [`op`]); what QUIC refuses (a stream past the
        /// limit, a write to a stream already over) is skipped.
        fn act(&mut self, opcode: u8, input: &mut Input, fx: &Fixture) {
            match opcode {
                op::OPEN..=op::STOP_SENDING => self.on_request_stream(opcode, input, fx),
                op::UNI..=op::UNI_END => self.on_uni_stream(opcode, input),
                _ => self.on_connection(opcode, input),
            }
        }

        /// [`op::OPEN`] to [`op::STOP_SENDING`]: a request stream's.
        fn on_request_stream(&mut self, opcode: u8, input: &mut Input, fx: &Fixture) {
            if opcode == op::OPEN {
                let bytes = input.bytes();
                return self.open_request(bytes, false);
            }
            if opcode == op::REQUEST {
                let which = usize::from(input.byte().unwrap_or(0)) % REQUESTS.len();
                let end = input.byte().unwrap_or(1) % 2 == 1;
                return self.open_request(&fx.requests[which], end);
            }
            let id = input.pick(&self.requests);
            let (bytes, code) = match opcode {
                op::WRITE => (input.bytes(), code(None)),
                op::FINISH => (&[][..], code(None)),
                _ => (&[][..], code(input.byte())),
            };
            let Some(id) = id else {
                return;
            };
            let client = &mut self.link.client;
            let _ = match opcode {
                op::WRITE => client.send_stream(id).write(bytes).map(drop).map_err(drop),
                op::FINISH => client.send_stream(id).finish().map_err(drop),
                op::RESET => client.send_stream(id).reset(code).map_err(drop),
                _ => client.recv_stream(id).stop(code).map_err(drop),
            };
        }

        /// [`op::UNI`] to [`op::UNI_END`]: a unidirectional stream's.
        fn on_uni_stream(&mut self, opcode: u8, input: &mut Input) {
            if opcode == op::UNI {
                let kind = UNI_TYPES[usize::from(input.byte().unwrap_or(0)) % UNI_TYPES.len()];
                let bytes = input.bytes();
                return self.open_uni(kind, bytes);
            }
            let id = input.pick(&self.uni);
            let (bytes, how) = match opcode {
                op::UNI_WRITE => (input.bytes(), 0),
                _ => (&[][..], input.byte().unwrap_or(0)),
            };
            let Some(id) = id else {
                return;
            };
            let mut send = self.link.client.send_stream(id);
            let _ = match (opcode, how % 2) {
                (op::UNI_WRITE, _) => send.write(bytes).map(drop).map_err(drop),
                (_, 0) => send.finish().map_err(drop),
                _ => send.reset(code(Some(how / 2))).map_err(drop),
            };
        }

        /// [`op::ADVANCE`] to [`op::CLOSE`]: the clock's, the exchange's,
        /// the connection's.
        fn on_connection(&mut self, opcode: u8, input: &mut Input) {
            let now = self.link.now;
            match opcode {
                op::ADVANCE => {
                    self.advances += 1;
                    self.link.wait(duration(input.byte().unwrap_or(0)));
                    self.assert_nothing_due();
                }
                op::STOP => {
                    let grace = duration(input.byte().unwrap_or(0));
                    self.link.server().stop(now, now + grace);
                }
                op::RUN => {
                    self.link.run();
                    self.assert_nothing_due();
                }
                op::DELIVER => self.link.deliver_client_datagrams(),
                _ => {
                    let code = code(input.byte());
                    self.link.client.close(now, code, Default::default());
                }
            }
        }

        fn open_request(&mut self, bytes: &[u8], end: bool) {
            if self.requests.len() < MAX_REQUESTS {
                if let Some(id) = self.link.open_request(bytes, end) {
                    self.requests.push(id);
                }
            }
        }

        /// A unidirectional stream: its type as a varint, then `bytes`.
        fn open_uni(&mut self, kind: u64, bytes: &[u8]) {
            if self.uni.len() >= MAX_UNI {
                return;
            }
            let Some(id) = self.link.client.streams().open(quinn_proto::Dir::Uni) else {
                return;
            };
            let mut ty = [0; 8];
            let n = staticd::h3session::frames::put_varint(&mut ty, kind);
            let _ = self
                .link
                .client
                .send_stream(id)
                .write(&[&ty[..n], bytes].concat());
            self.uni.push(id);
        }

        /// The invariants that hold after every action (see
        /// [`super::h3_connection`]).
        fn check(&mut self) {
            if self.link.server().next_event().is_some() {
                panic!("a driver's event (a script's) from a site without scripts");
            }
            self.check_output();
            // SETTINGS and a GOAWAY (8 and at most 10 bytes): nothing more.
            let control = self.link.control.len();
            assert!(
                control <= 18,
                "staticd's control stream grew to {control} bytes"
            );
            let ids: Vec<StreamId> = self.requests.clone();
            for id in ids {
                let r = self.link.response(id);
                let shape = (r.body.len(), r.sections, r.ended);
                let before = self.checked.insert(id, shape);
                if before != Some(shape) {
                    let from = before.map_or(0, |b| b.0);
                    check_response(id, self.link.response(id), from);
                }
            }
        }

        /// What the server sent is within a budget: the handshake, each
        /// request stream's largest response, and a few packets (ACKs,
        /// probes, retransmissions) for each datagram it received and each
        /// move of the clock.
        fn check_output(&mut self) {
            let stats = self.link.server().quic().stats();
            let streams = self.requests.len() as u64;
            let events = stats.udp_rx.datagrams + self.advances;
            let budget = (64 << 10) + streams * (BIG_LEN as u64 + (8 << 10)) + events * 3000;
            assert!(
                stats.udp_tx.bytes <= budget,
                "the server sent {} bytes (budget {budget}) for {streams} streams, {} datagrams in, {} clock moves",
                stats.udp_tx.bytes,
                stats.udp_rx.datagrams,
                self.advances
            );
        }

        fn assert_nothing_due(&mut self) {
            let now = self.link.now;
            let next = self.link.server().deadline();
            assert!(
                self.link.nothing_due(),
                "a deadline of the server's already due, {:?} ago",
                next.map(|d| now - d).unwrap_or_default()
            );
        }

        /// Whether the server's connection is over: closed (its last
        /// packets on their way) or drained.
        fn over(&mut self) -> bool {
            let server = self.link.server();
            server.is_drained() || server.quic().is_closed()
        }

        /// After the last action: time moves from deadline to deadline
        /// until the connection is over, which it must be by the longest
        /// chain of its own timers: a head (read timeout), the wait for a
        /// body (read timeout), a response (send timeout), then the
        /// keep-alive timeout and the last GOAWAY's wait.
        fn finish(&mut self) {
            self.link.run();
            self.assert_nothing_due();
            self.check();
            let chain = 2 * READ_TIMEOUT + SEND_TIMEOUT + KEEPALIVE + LAST_WORDS;
            let end_by = self.link.now + chain + Duration::from_secs(1);
            for _ in 0..1000 {
                if self.over() {
                    break;
                }
                let server = self.link.server().deadline();
                let client = self.link.client.poll_timeout();
                let Some(next) = [server, client].into_iter().flatten().min() else {
                    break;
                };
                if next > end_by {
                    break;
                }
                self.link.now = self.link.now.max(next);
                self.advances += 1;
                self.link.run();
                self.assert_nothing_due();
                self.check();
            }
            let next = self.link.server().deadline();
            assert!(
                self.over(),
                "the connection outlived its timers: still open {:?} after the last action, its next deadline {:?} later",
                chain,
                next.map(|n| n.saturating_duration_since(self.link.now))
            );
            self.check_ends();
        }

        /// Once over: staticd's control stream is its type, SETTINGS and
        /// at most one GOAWAY, and no response carried the secret beside
        /// the root.
        fn check_ends(&self) {
            use staticd::h3session::frames::{Control, ControlReader};
            if let Some((&ty, frames)) = self.link.control.split_first() {
                assert_eq!(ty, 0x00, "staticd's control stream type");
                let mut said = Vec::new();
                let read = ControlReader::default().read(frames, |c| said.push(c));
                assert!(read.is_ok(), "staticd's control stream: {read:?}");
                assert!(matches!(said.first(), None | Some(Control::Settings(_))));
                let goaways = said.iter().filter(|c| matches!(c, Control::Goaway(_)));
                assert!(goaways.count() <= 1, "GOAWAY again: {said:?}");
            }
            // A 200's or a 206's body is its file's already; the rest are
            // small pages.
            let pages = self.link.responses().filter(|(_, r)| {
                r.sections > 0 && !matches!(r.fields[0].1.as_str(), "200" | "206")
            });
            for (id, r) in pages {
                let leaked = r.body.windows(SECRET.len()).any(|w| w == SECRET);
                assert!(!leaked, "{id}: secret.txt, from outside the root");
            }
        }
    }

    /// One response as the client read it so far (see
    /// [`super::h3_connection`]); its body's first `from` bytes were
    /// checked already.
    fn check_response(id: StreamId, r: &Response, from: usize) {
        if r.sections == 0 {
            assert!(r.body.is_empty(), "{id}: a body without a head");
            assert!(!r.ended, "{id}: a response ended without a head");
            return;
        }
        let (name, status) = &r.fields[0];
        assert_eq!(name, ":status", "{id}: the head starts with {name}");
        let digits = status.len() == 3 && status.bytes().all(|b| b.is_ascii_digit());
        let code: u16 = status.parse().unwrap_or(0);
        assert!(
            digits && (100..=599).contains(&code),
            "{id}: :status {status:?}"
        );
        assert_eq!(r.sections, 1, "{id}: more than one field section");
        match code {
            200 => check_file_body(id, r, from),
            206 => check_range_body(id, r, from),
            204 | 304 => assert!(r.body.is_empty(), "{id}: a {code} with a body"),
            _ => assert!(
                r.body.len() <= 64 << 10,
                "{id}: a {code} of {} bytes",
                r.body.len()
            ),
        }
    }

    /// A 200 is a.txt or big.bin, as its Content-Length says.
    fn check_file_body(id: StreamId, r: &Response, from: usize) {
        assert_eq!(
            r.field("content-encoding"),
            None,
            "{id}: compression is off"
        );
        let length = r
            .field("content-length")
            .and_then(|l| l.parse::<usize>().ok());
        let file = match length {
            Some(n) if n == A.len() => A,
            Some(BIG_LEN) => big(),
            other => panic!("{id}: a 200 of {other:?} bytes: no file in the root has that length"),
        };
        check_prefix(id, &r.body, from, file);
        if r.ended {
            // Whole, or nothing (HEAD's).
            assert!(
                r.body.is_empty() || r.body.len() == file.len(),
                "{id}: ended short"
            );
        }
    }

    /// `body` is a prefix of `of`, given that its first `from` bytes
    /// were: only the new ones are compared (libFuzzer's hook on memcmp
    /// costs as much per byte as the rest of an input).
    fn check_prefix(id: StreamId, body: &[u8], from: usize, of: &[u8]) {
        let from = from.min(body.len());
        let same = of.get(from..body.len()) == Some(&body[from..]);
        assert!(
            same,
            "{id}: a body that is not its file's, from byte {from} on"
        );
    }

    /// A single range of a.txt or big.bin, as its Content-Range says;
    /// several ranges (multipart) only bounded.
    fn check_range_body(id: StreamId, r: &Response, from: usize) {
        let Some(range) = r.field("content-range") else {
            let multipart = r
                .field("content-type")
                .is_some_and(|t| t.starts_with("multipart/"));
            assert!(multipart, "{id}: a 206 without Content-Range");
            assert!(
                r.body.len() <= 64 << 10,
                "{id}: a multipart 206 of {} bytes",
                r.body.len()
            );
            return;
        };
        let parsed = range.strip_prefix("bytes ").and_then(|rest| {
            let (span, total) = rest.split_once('/')?;
            let (first, last) = span.split_once('-')?;
            Some((
                first.parse::<usize>().ok()?,
                last.parse::<usize>().ok()?,
                total.parse::<usize>().ok()?,
            ))
        });
        let Some((first, last, total)) = parsed else {
            panic!("{id}: Content-Range {range:?}");
        };
        let file = match total {
            n if n == A.len() => A,
            BIG_LEN => big(),
            _ => panic!("{id}: a 206 of a {total}-byte file: no file in the root has that length"),
        };
        assert!(
            first <= last && last < file.len(),
            "{id}: Content-Range {range:?}"
        );
        let part = &file[first..=last];
        check_prefix(id, &r.body, from, part);
        if r.ended {
            assert!(
                r.body.is_empty() || r.body.len() == part.len(),
                "{id}: ended short"
            );
        }
    }

    /// Writes `h3_connection` inputs action by action (for seeds).
    #[derive(Default)]
    pub struct Script(pub Vec<u8>);

    impl Script {
        fn push(mut self, opcode: u8, args: &[u8]) -> Script {
            self.0.push(opcode);
            self.0.extend_from_slice(args);
            self
        }

        /// `[len][bytes]`, at most 255 of them (longer writes are
        /// several).
        fn with_bytes(self, opcode: u8, args: &[u8], bytes: &[u8]) -> Script {
            let len = u8::try_from(bytes.len()).expect("at most 255 bytes an action");
            self.push(opcode, args).push(len, bytes)
        }

        pub fn open(self, bytes: &[u8]) -> Script {
            self.with_bytes(op::OPEN, &[], bytes)
        }

        pub fn request(self, which: u8, end: bool) -> Script {
            self.push(op::REQUEST, &[which, u8::from(end)])
        }

        pub fn write(self, stream: u8, bytes: &[u8]) -> Script {
            self.with_bytes(op::WRITE, &[stream], bytes)
        }

        pub fn finish(self, stream: u8) -> Script {
            self.push(op::FINISH, &[stream])
        }

        pub fn reset(self, stream: u8, code: u8) -> Script {
            self.push(op::RESET, &[stream, code])
        }

        pub fn stop_sending(self, stream: u8, code: u8) -> Script {
            self.push(op::STOP_SENDING, &[stream, code])
        }

        pub fn uni(self, kind: u8, bytes: &[u8]) -> Script {
            self.with_bytes(op::UNI, &[kind], bytes)
        }

        pub fn uni_write(self, stream: u8, bytes: &[u8]) -> Script {
            self.with_bytes(op::UNI_WRITE, &[stream], bytes)
        }

        pub fn uni_end(self, stream: u8, reset: bool) -> Script {
            self.push(op::UNI_END, &[stream, u8::from(reset)])
        }

        pub fn advance(self, how: u8) -> Script {
            self.push(op::ADVANCE, &[how])
        }

        pub fn stop(self, how: u8) -> Script {
            self.push(op::STOP, &[how])
        }

        pub fn run(self) -> Script {
            self.push(op::RUN, &[])
        }

        pub fn deliver(self) -> Script {
            self.push(op::DELIVER, &[])
        }

        pub fn close(self, code: u8) -> Script {
            self.push(op::CLOSE, &[code])
        }
    }
}
