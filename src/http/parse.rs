//! Request heads as data: bytes in, a [`Request`] (or the reason it is
//! refused) out.
//!
//! Framing and persistence are decided here, once, for every transport.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use super::limits::{MAX_HEADERS, MAX_HEAD_BYTES, MAX_TARGET_BYTES};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Method {
    #[default]
    Get,
    Head,
    Options,
    Other(String),
}

impl Method {
    pub(crate) fn from_token(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "OPTIONS" => Method::Options,
            other => Method::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Options => "OPTIONS",
            Method::Other(s) => s,
        }
    }
}

/// How the request body, if any, is delimited on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BodyFraming {
    #[default]
    None,
    Length(u64),
    Chunked,
}

/// Which HTTP carried a request: HTTP/1.x (its minor version is the
/// request's own), an HTTP/2 stream or an HTTP/3 stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpVersion {
    #[default]
    Http1,
    Http2,
    Http3,
}

impl Request<'_> {
    /// The protocol as the access log and CGI's SERVER_PROTOCOL name it.
    pub fn protocol_name(&self) -> &'static str {
        match (self.version, self.minor_version) {
            (HttpVersion::Http2, _) => "HTTP/2.0",
            (HttpVersion::Http3, _) => "HTTP/3.0",
            (HttpVersion::Http1, 0) => "HTTP/1.0",
            (HttpVersion::Http1, _) => "HTTP/1.1",
        }
    }
}

/// The parts of a request head that staticd acts on. Values borrow from
/// the bytes received, so parsing a request allocates nothing; only a
/// repeated list-valued field (joined with commas) is copied.
#[derive(Clone, Debug, Default)]
pub struct Request<'a> {
    pub method: Method,
    /// The request-target exactly as sent.
    pub target: Cow<'a, str>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and for an HTTP/2 stream, whose
    /// semantics are HTTP/1.1's).
    pub minor_version: u8,
    /// Which HTTP carried it (the log says HTTP/2.0 or HTTP/3.0 for a
    /// stream).
    pub version: HttpVersion,
    pub host: Option<Cow<'a, str>>,
    /// Whether the client asked for (or defaults to) a persistent connection.
    pub keep_alive: bool,
    pub framing: BodyFraming,
    pub range: Option<Cow<'a, str>>,
    pub if_range: Option<Cow<'a, str>>,
    pub if_match: Option<Cow<'a, str>>,
    pub if_none_match: Option<Cow<'a, str>>,
    pub if_modified_since: Option<Cow<'a, str>>,
    pub if_unmodified_since: Option<Cow<'a, str>>,
    pub user_agent: Option<Cow<'a, str>>,
    pub referer: Option<Cow<'a, str>>,
    pub accept: Option<Cow<'a, str>>,
    pub accept_encoding: Option<Cow<'a, str>>,
    /// Credentials for `--auth` areas (RFC 9110 §11.6.2).
    pub authorization: Option<Cow<'a, str>>,
    /// `Forwarded` and `X-Forwarded-For`, each field line joined: read
    /// only when the connection comes from a `--trusted-proxy`.
    pub forwarded: Option<Cow<'a, str>>,
    pub x_forwarded_for: Option<Cow<'a, str>>,
    /// Every field, for what needs them all (a CGI script's HTTP_*
    /// variables).
    pub fields: HeaderFields<'a>,
}

/// Every header field of a request as it came, borrowed as the request's
/// values are, and made into (name, value) pairs only when asked (for a CGI
/// script: see `pairs`). Each protocol's fields stay in the form its
/// decoder gave them; none is turned into another's.
#[derive(Clone, Debug, Default)]
pub enum HeaderFields<'a> {
    #[default]
    None,
    /// An HTTP/1.1 head as received: httparse reads it again when asked.
    Http1(&'a [u8]),
    /// What an HTTP/2 or HTTP/3 stream's decoder gave: names and values in `text` at `spans` (see
    /// [`http::fields::Fields`](crate::http::fields::Fields)), pseudo-fields too.
    Decoded {
        text: &'a [u8],
        spans: &'a [(Range<u32>, Range<u32>)],
    },
    /// Pairs already made (a request kept past its buffer: a CGI job's).
    Owned(Arc<[(String, String)]>),
}

impl HeaderFields<'_> {
    /// Every field as a (name, value) pair, in the order received, without
    /// pseudo-fields; a value that is not UTF-8 is left out (what reads
    /// these wants text). An HTTP/2 or HTTP/3 stream's `:authority` comes
    /// first as `host` when it sent no `host` field, as HTTP/1.1's Host
    /// would (RFC 9113 §8.3.1).
    pub fn pairs(&self) -> Vec<(String, String)> {
        let pair = |n: &[u8], v: &[u8]| -> Option<(String, String)> {
            Some((
                std::str::from_utf8(n).ok()?.to_string(),
                std::str::from_utf8(v).ok()?.to_string(),
            ))
        };
        match self {
            HeaderFields::None => Vec::new(),
            HeaderFields::Owned(pairs) => pairs.to_vec(),
            HeaderFields::Http1(head) => {
                let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut req = httparse::Request::new(&mut storage);
                if req.parse(head).is_err() {
                    return Vec::new();
                }
                let fields = req.headers.iter();
                fields
                    .filter_map(|h| pair(h.name.as_bytes(), h.value))
                    .collect()
            }
            HeaderFields::Decoded { text, spans } => {
                let at = |r: &Range<u32>| &text[r.start as usize..r.end as usize];
                let fields = spans.iter().map(|(n, v)| (at(n), at(v)));
                let host = fields.clone().find(|(n, _)| *n == b"host");
                let authority = fields.clone().find(|(n, _)| *n == b":authority");
                let stand_in = match (host, authority) {
                    (None, Some((_, value))) => pair(b"host", value),
                    _ => None,
                };
                let named = fields.filter(|(n, _)| n.first() != Some(&b':'));
                stand_in
                    .into_iter()
                    .chain(named.filter_map(|(n, v)| pair(n, v)))
                    .collect()
            }
        }
    }
}

impl Request<'_> {
    /// The same request, owning its values (for a CGI job that outlives
    /// the buffer the head was read into).
    pub fn into_owned(self) -> Request<'static> {
        fn own(v: Option<Cow<'_, str>>) -> Option<Cow<'static, str>> {
            v.map(|c| Cow::Owned(c.into_owned()))
        }
        Request {
            method: self.method,
            target: Cow::Owned(self.target.into_owned()),
            minor_version: self.minor_version,
            version: self.version,
            host: own(self.host),
            keep_alive: self.keep_alive,
            framing: self.framing,
            range: own(self.range),
            if_range: own(self.if_range),
            if_match: own(self.if_match),
            if_none_match: own(self.if_none_match),
            if_modified_since: own(self.if_modified_since),
            if_unmodified_since: own(self.if_unmodified_since),
            user_agent: own(self.user_agent),
            referer: own(self.referer),
            accept: own(self.accept),
            accept_encoding: own(self.accept_encoding),
            authorization: own(self.authorization),
            forwarded: own(self.forwarded),
            x_forwarded_for: own(self.x_forwarded_for),
            fields: HeaderFields::Owned(self.fields.pairs().into()),
        }
    }
}

/// Why a request head was refused; each maps to one status in [`respond`](crate::respond).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    Malformed,
    /// A transfer coding other than chunked (RFC 9112 §6.1: 501).
    UnknownCoding,
    TargetTooLong,
    HeadTooLarge,
    UnsupportedVersion,
}

// A Parsed lives for one call on the stack; boxing the request would cost
// an allocation per request to save stack bytes nobody misses.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Parsed<'a> {
    /// More bytes are needed.
    Incomplete,
    /// A whole head; `head_len` bytes of the buffer belong to it.
    Complete {
        request: Request<'a>,
        head_len: usize,
    },
    Error(ParseError),
}

/// Parses the request head at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed<'_> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(head_len)) => {
            if head_len > MAX_HEAD_BYTES {
                return Parsed::Error(ParseError::HeadTooLarge);
            }
            match build_request(&req, &buf[..head_len]) {
                Ok(request) => Parsed::Complete { request, head_len },
                Err(e) => Parsed::Error(e),
            }
        }
        Ok(httparse::Status::Partial) => incomplete(buf),
        Err(httparse::Error::TooManyHeaders) => Parsed::Error(ParseError::HeadTooLarge),
        Err(httparse::Error::Version) => version_error(buf),
        Err(_) => Parsed::Error(ParseError::Malformed),
    }
}

/// A partial head is refused once it is already over a limit, so a client
/// cannot make the server buffer without bound.
fn incomplete(buf: &[u8]) -> Parsed<'static> {
    let first_line_done = buf.contains(&b'\n');
    if !first_line_done && buf.len() > MAX_TARGET_BYTES + REQUEST_LINE_SLACK {
        return Parsed::Error(ParseError::TargetTooLong);
    }
    if buf.len() > MAX_HEAD_BYTES {
        return Parsed::Error(ParseError::HeadTooLarge);
    }
    Parsed::Incomplete
}

/// Room for the method, the spaces and the version around a target.
const REQUEST_LINE_SLACK: usize = 32;

/// httparse knows only HTTP/1.0 and HTTP/1.1. A well-formed `HTTP/x.y` of
/// another major version is 505; a higher 1.x minor is read as 1.1, as
/// RFC 9110 §2.5 asks; anything else is malformed.
fn version_error(buf: &[u8]) -> Parsed<'static> {
    let line_end = match buf.iter().position(|&b| b == b'\n') {
        Some(i) => i,
        None => return Parsed::Incomplete,
    };
    let line = trim_cr(&buf[..line_end]);
    let version = match line.iter().rposition(|&b| b == b' ') {
        Some(i) => &line[i + 1..],
        None => return Parsed::Error(ParseError::Malformed),
    };
    match version {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            // HTTP/1.0 and 1.1 were refused for another reason (a space
            // in the target, say): that request is malformed.
            if *major == b'1' && *minor >= b'2' {
                let mut patched = buf.to_vec();
                let minor_at = line.len() - 1;
                patched[minor_at] = b'1';
                // Rare enough that copying the values out is no cost.
                match parse(&patched) {
                    Parsed::Complete { request, head_len } => Parsed::Complete {
                        request: request.into_owned(),
                        head_len,
                    },
                    Parsed::Incomplete => Parsed::Incomplete,
                    Parsed::Error(e) => Parsed::Error(e),
                }
            } else if *major == b'1' {
                Parsed::Error(ParseError::Malformed)
            } else {
                Parsed::Error(ParseError::UnsupportedVersion)
            }
        }
        _ => Parsed::Error(ParseError::Malformed),
    }
}

/// `uri-host [ ":" port ]` (RFC 9112 §3.2, RFC 3986 §3.2.2): an IP literal
/// in brackets, or a reg-name / IPv4 address of unreserved, pct-encoded and
/// sub-delims characters, then an optional port of digits.
pub(crate) fn valid_host(value: &str) -> bool {
    let (host, port) = match value.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((literal, after)) => {
                // IPv6address, or IPvFuture: "v" HEXDIG+ "." then more.
                let literal_ok = match literal.strip_prefix(['v', 'V']) {
                    Some(future) => future.split_once('.').is_some_and(|(v, rest)| {
                        !v.is_empty()
                            && v.bytes().all(|b| b.is_ascii_hexdigit())
                            && !rest.is_empty()
                            && rest.split(':').all(reg_name)
                    }),
                    None => literal.parse::<std::net::Ipv6Addr>().is_ok(),
                };
                if !literal_ok {
                    return false;
                }
                ("", after)
            }
            None => return false,
        },
        None => match value.find(':') {
            Some(i) => (&value[..i], &value[i..]),
            None => (value, ""),
        },
    };
    let port_ok = match port.strip_prefix(':') {
        Some(digits) => digits.bytes().all(|b| b.is_ascii_digit()),
        None => port.is_empty(),
    };
    port_ok && reg_name(host)
}

/// The bytes a reg-name takes as they are: unreserved and sub-delims. A
/// table, since every request's Host goes through it byte by byte.
const REG_NAME: [bool; 256] = {
    let mut table = [false; 256];
    let mut c = 0;
    while c < 256 {
        table[c] = (c as u8).is_ascii_alphanumeric();
        c += 1;
    }
    let others = b"-._~!$&'()*+,;=";
    let mut i = 0;
    while i < others.len() {
        table[others[i] as usize] = true;
        i += 1;
    }
    table
};

/// unreserved / pct-encoded / sub-delims, each `%` followed by two hex digits.
fn reg_name(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(i + 1) && hex(i + 2)) {
                    return false;
                }
                i += 3;
                continue;
            }
            c if REG_NAME[usize::from(c)] => {}
            _ => return false,
        }
        i += 1;
    }
    true
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn build_request<'a>(
    req: &httparse::Request<'_, 'a>,
    head: &'a [u8],
) -> Result<Request<'a>, ParseError> {
    let target = req.path.ok_or(ParseError::Malformed)?;
    if target.len() > MAX_TARGET_BYTES {
        return Err(ParseError::TargetTooLong);
    }
    // The origin-form has no fragment (RFC 9112 §3.2.1); a client sends
    // `#` in a path as %23.
    if target.contains('#') {
        return Err(ParseError::Malformed);
    }
    let minor_version = req.version.ok_or(ParseError::Malformed)?;
    let mut out = Request {
        method: Method::from_token(req.method.ok_or(ParseError::Malformed)?),
        target: Cow::Borrowed(target),
        minor_version,
        fields: HeaderFields::Http1(head),
        ..Request::default()
    };
    let mut connection = ConnectionTokens::default();
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut expect_continue = false;
    let mut chunked_count = 0;
    let mut unknown_coding = false;
    let mut host_seen = false;
    for h in req.headers.iter() {
        let value: &'a str = std::str::from_utf8(h.value).map_err(|_| ParseError::Malformed)?;
        let name = h.name;
        if name.eq_ignore_ascii_case("host") {
            if host_seen {
                return Err(ParseError::Malformed);
            }
            host_seen = true;
            let host = value.trim();
            // RFC 9112 §3.2: an invalid Host value is a 400; an empty one
            // is allowed and names no host.
            if !host.is_empty() {
                if !valid_host(host) {
                    return Err(ParseError::Malformed);
                }
                out.host = Some(Cow::Borrowed(host));
            }
        } else if name.eq_ignore_ascii_case("connection") {
            connection.add(value);
        } else if name.eq_ignore_ascii_case("content-length") {
            let n = parse_content_length(value)?;
            if content_length.is_some_and(|prev| prev != n) {
                return Err(ParseError::Malformed);
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            // Only the final coding decides the framing (RFC 9112 §6.3).
            chunked = value
                .rsplit(',')
                .find(|c| !c.trim().is_empty())
                .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
            chunked_count += value
                .split(',')
                .filter(|c| c.trim().eq_ignore_ascii_case("chunked"))
                .count();
            unknown_coding |= value
                .split(',')
                .map(str::trim)
                .any(|c| !c.is_empty() && !c.eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("expect") {
            expect_continue = value.trim().eq_ignore_ascii_case("100-continue");
        } else if name.eq_ignore_ascii_case("range") {
            append(&mut out.range, value);
        } else if name.eq_ignore_ascii_case("if-range") {
            out.if_range = Some(Cow::Borrowed(value.trim()));
        } else if name.eq_ignore_ascii_case("if-match") {
            append(&mut out.if_match, value);
        } else if name.eq_ignore_ascii_case("if-none-match") {
            append(&mut out.if_none_match, value);
        } else if name.eq_ignore_ascii_case("if-modified-since") {
            out.if_modified_since = Some(Cow::Borrowed(value.trim()));
        } else if name.eq_ignore_ascii_case("if-unmodified-since") {
            out.if_unmodified_since = Some(Cow::Borrowed(value.trim()));
        } else if name.eq_ignore_ascii_case("accept") {
            append(&mut out.accept, value);
        } else if name.eq_ignore_ascii_case("accept-encoding") {
            append(&mut out.accept_encoding, value);
        } else if name.eq_ignore_ascii_case("user-agent") {
            out.user_agent = Some(Cow::Borrowed(value));
        } else if name.eq_ignore_ascii_case("referer") {
            out.referer = Some(Cow::Borrowed(value));
        } else if name.eq_ignore_ascii_case("authorization") {
            out.authorization = Some(Cow::Borrowed(value.trim()));
        } else if name.eq_ignore_ascii_case("forwarded") {
            append(&mut out.forwarded, value);
        } else if name.eq_ignore_ascii_case("x-forwarded-for") {
            append(&mut out.x_forwarded_for, value);
        }
    }
    if minor_version >= 1 && !host_seen {
        return Err(ParseError::Malformed);
    }
    // Chunked applied twice is a framing no sender may produce (RFC 9112 §7).
    if chunked_count > 1 {
        return Err(ParseError::Malformed);
    }
    out.framing = match (transfer_encoding, content_length) {
        // Both, or chunked not last, or chunked on HTTP/1.0: the body's end
        // cannot be trusted, so the request is refused (RFC 9112 §6.1, §6.3).
        (true, Some(_)) => return Err(ParseError::Malformed),
        // A coding the server cannot undo (RFC 9112 §6.1: 501), unless
        // chunked comes before the end, which stays the 400 above. The
        // connection closes as for any refused head: the body's end is
        // unknown.
        (true, None) if unknown_coding && minor_version >= 1 && (chunked || chunked_count == 0) => {
            return Err(ParseError::UnknownCoding)
        }
        (true, None) if !chunked || minor_version == 0 => return Err(ParseError::Malformed),
        (true, None) => BodyFraming::Chunked,
        (false, Some(0)) | (false, None) => BodyFraming::None,
        (false, Some(n)) => BodyFraming::Length(n),
    };
    out.keep_alive = if minor_version >= 1 {
        !connection.close
    } else {
        connection.keep_alive && !connection.close
    };
    // A client waiting for 100 Continue may never send the body that would
    // have to be skipped before the next request, so this one is the last.
    if expect_continue && out.framing != BodyFraming::None {
        out.keep_alive = false;
    }
    Ok(out)
}

fn parse_content_length(value: &str) -> Result<u64, ParseError> {
    let v = value.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::Malformed);
    }
    v.parse().map_err(|_| ParseError::Malformed)
}

/// Repeated list-valued fields are one comma-separated list (RFC 9110 §5.3).
pub(crate) fn append<'a>(slot: &mut Option<Cow<'a, str>>, value: &'a str) {
    match slot {
        Some(existing) => {
            let joined = existing.to_mut();
            joined.push_str(", ");
            joined.push_str(value.trim());
        }
        None => *slot = Some(Cow::Borrowed(value.trim())),
    }
}

#[derive(Default)]
struct ConnectionTokens {
    close: bool,
    keep_alive: bool,
}

impl ConnectionTokens {
    fn add(&mut self, value: &str) {
        for token in value.split(',').map(str::trim) {
            if token.eq_ignore_ascii_case("close") {
                self.close = true;
            } else if token.eq_ignore_ascii_case("keep-alive") {
                self.keep_alive = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> Request<'_> {
        match parse(raw.as_bytes()) {
            Parsed::Complete { request, head_len } => {
                assert_eq!(head_len, raw.len());
                request
            }
            other => panic!("expected a request from {raw:?}, got {other:?}"),
        }
    }

    #[test]
    fn every_field_is_kept_for_what_needs_them_all() {
        let raw = "POST /cgi/a?b HTTP/1.1\r\nHost: x.test\r\nX-One: 1\r\nx-one: 2\r\n\r\n";
        let req = ok(raw);
        let pairs = |r: &Request| r.fields.pairs();
        let want = [("Host", "x.test"), ("X-One", "1"), ("x-one", "2")]
            .map(|(n, v)| (n.to_string(), v.to_string()));
        assert_eq!(pairs(&req), want);
        // Kept past the buffer, as a CGI job keeps its request.
        let owned = req.clone().into_owned();
        assert!(matches!(owned.fields, HeaderFields::Owned(_)));
        assert_eq!(pairs(&owned), want);
    }

    fn err(raw: &str) -> ParseError {
        match parse(raw.as_bytes()) {
            Parsed::Error(e) => e,
            other => panic!("expected an error from {raw:?}, got {other:?}"),
        }
    }

    #[test]
    fn http11_is_persistent_unless_close() {
        assert!(ok("GET / HTTP/1.1\r\nHost: a\r\n\r\n").keep_alive);
        assert!(!ok("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keep_alive);
    }

    #[test]
    fn http10_is_persistent_only_when_asked() {
        assert!(!ok("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(ok("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
    }

    #[test]
    fn host_values() {
        for good in [
            "a",
            "a:80",
            "a:",
            "example.org",
            "EXAMPLE.org:8080",
            "127.0.0.1",
            "[::1]",
            "[::1]:8080",
            "[::ffff:1.2.3.4]",
            "[v1.x]",
            "a_b",
            "a~b",
            "%41b",
            "xn--bcher-kva.example",
        ] {
            let raw = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
            assert_eq!(ok(&raw).host.as_deref(), Some(good), "{good:?}");
        }
        for bad in [
            "a b",
            "a/b",
            "a\\b",
            "a:b",
            "a:80:80",
            "[::1",
            "[::1]x",
            "[]",
            "[g::1]",
            "[1.2.3.4]",
            "[v.x]",
            "[v1.]",
            "a@b",
            "%4",
            "%zz",
            "a\"b",
            "a<b",
            "a?b",
            "a#b",
            "[::1]:x",
            ":80x",
        ] {
            for version in ["1.0", "1.1"] {
                let raw = format!("GET / HTTP/{version}\r\nHost: {bad}\r\n\r\n");
                assert_eq!(err(&raw), ParseError::Malformed, "{raw:?}");
            }
        }
    }

    #[test]
    fn an_empty_host_names_no_host() {
        assert_eq!(ok("GET / HTTP/1.1\r\nHost:\r\n\r\n").host, None);
        assert_eq!(ok("GET / HTTP/1.1\r\nHost:  \r\n\r\n").host, None);
        assert_eq!(
            err("GET / HTTP/1.1\r\nHost:\r\nHost: a\r\n\r\n"),
            ParseError::Malformed
        );
    }

    #[test]
    fn fragments_are_refused_and_encoded_hashes_kept() {
        assert_eq!(
            err("GET /index.html#frag HTTP/1.1\r\nHost: a\r\n\r\n"),
            ParseError::Malformed
        );
        assert_eq!(err("GET /# HTTP/1.0\r\n\r\n"), ParseError::Malformed);
        assert_eq!(
            ok("GET /a%23b HTTP/1.1\r\nHost: a\r\n\r\n").target,
            "/a%23b"
        );
    }

    #[test]
    fn unknown_transfer_codings_are_not_implemented() {
        for te in ["gzip", "gzip, chunked", "identity", "x", "br, gzip"] {
            let raw = format!("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {te}\r\n\r\n");
            assert_eq!(err(&raw), ParseError::UnknownCoding, "{te}");
        }
        // Conflicts stay 400, whatever the codings: chunked not last,
        // a Content-Length too, chunked on HTTP/1.0.
        assert_eq!(
            err("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
            ParseError::Malformed
        );
        assert_eq!(
            err("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n"),
            ParseError::Malformed
        );
        assert_eq!(
            err("POST / HTTP/1.0\r\nTransfer-Encoding: gzip\r\n\r\n"),
            ParseError::Malformed
        );
    }

    #[test]
    fn http11_without_host_is_malformed() {
        assert_eq!(err("GET / HTTP/1.1\r\n\r\n"), ParseError::Malformed);
    }

    #[test]
    fn versions() {
        assert_eq!(
            err("GET / HTTP/2.0\r\n\r\n"),
            ParseError::UnsupportedVersion
        );
        assert_eq!(
            err("GET / HTTP/0.9\r\n\r\n"),
            ParseError::UnsupportedVersion
        );
        assert_eq!(ok("GET / HTTP/1.2\r\nHost: a\r\n\r\n").minor_version, 1);
        assert_eq!(err("GET / FTP/1.0\r\n\r\n"), ParseError::Malformed);
        // Refused by httparse for another reason: no endless re-parse.
        assert_eq!(
            err("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n"),
            ParseError::Malformed
        );
        assert_eq!(
            err("GET /a b HTTP/1.2\r\nHost: a\r\n\r\n"),
            ParseError::Malformed
        );
        assert_eq!(
            err("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"),
            ParseError::Malformed
        );
    }

    #[test]
    fn framing() {
        let r = ok("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(r.framing, BodyFraming::Length(5));
        let r = ok("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(r.framing, BodyFraming::Chunked);
        assert_eq!(
            err("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            ParseError::Malformed
        );
        assert_eq!(
            err("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
            ParseError::Malformed
        );
        assert_eq!(
            err("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            ParseError::Malformed
        );
        assert_eq!(
            err("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"),
            ParseError::Malformed
        );
    }

    #[test]
    fn expect_continue_with_a_body_ends_the_connection() {
        let r =
            ok("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n");
        assert!(!r.keep_alive);
        assert!(ok("GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n").keep_alive);
    }

    #[test]
    fn limits() {
        let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(9000));
        assert_eq!(err(&long), ParseError::TargetTooLong);
        let partial = format!("GET /{}", "a".repeat(9000));
        assert_eq!(err(&partial), ParseError::TargetTooLong);
        let big = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "b".repeat(17000)
        );
        assert_eq!(err(&big), ParseError::HeadTooLarge);
        let many: String = (0..101).map(|i| format!("X{i}: y\r\n")).collect();
        assert_eq!(
            err(&format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n")),
            ParseError::HeadTooLarge
        );
    }

    #[test]
    fn incomplete_heads_wait_for_more() {
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\nHost:"),
            Parsed::Incomplete
        ));
        assert!(matches!(parse(b""), Parsed::Incomplete));
    }

    #[test]
    fn repeated_list_headers_are_joined() {
        let r =
            ok("GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\"\r\nIf-None-Match: \"y\"\r\n\r\n");
        assert_eq!(r.if_none_match.as_deref(), Some("\"x\", \"y\""));
    }
}
