//! HTTP/2 and HTTP/3 heads as data: a stream's request head (the fields nghttp2 or h3 decoded)
//! becomes the same [`Request`] the HTTP/1.1 parser gives, and a
//! decided response head ([`Head`]) becomes fields directly. The two
//! protocols map fields alike (RFC 9113 §8.3, RFC 9114 §4.3). No I/O here;
//! [`crate::h2session`] and [`serve::h3`](crate::serve::h3) run the connections.
//!
//! The request borrows its values from the stream's field list, as the
//! HTTP/1.1 parser's borrow from the read buffer, and the checks that
//! matter for one decision (target length, fragment, Host syntax) use the
//! parser's own functions.

use std::borrow::Cow;
use std::ops::Range;

use super::head::{Framing, Head};
use super::limits::{MAX_HEADERS, MAX_HEAD_BYTES, MAX_TARGET_BYTES};
use super::parse::{
    append, valid_host, BodyFraming, HeaderFields, HttpVersion, Method, ParseError, Request,
};
use crate::pool::{self, FreeList};

thread_local! {
    static TEXT: FreeList<Vec<u8>> = const { FreeList::new() };
    static SPANS: FreeList<Vec<(Range<u32>, Range<u32>)>> = const { FreeList::new() };
}

/// A request head as it arrived: names and values in one text buffer
/// (from this thread's free list), at most `MAX_HEAD_BYTES` of them.
pub struct Fields {
    text: Vec<u8>,
    spans: Vec<(Range<u32>, Range<u32>)>,
}

impl Default for Fields {
    fn default() -> Fields {
        Fields {
            text: pool::take(&TEXT),
            spans: pool::take(&SPANS),
        }
    }
}

impl Drop for Fields {
    fn drop(&mut self) {
        pool::give(&TEXT, std::mem::take(&mut self.text));
        pool::give(&SPANS, std::mem::take(&mut self.spans));
    }
}

impl Fields {
    /// Adds one field; Err once the head would pass the HTTP/1.1 limits
    /// (bytes, as RFC 9113's header list size counts them, or fields).
    pub fn push(&mut self, name: &[u8], value: &[u8]) -> Result<(), ParseError> {
        let size = self.text.len() + name.len() + value.len() + 32 * (self.spans.len() + 1);
        if size > MAX_HEAD_BYTES || self.spans.len() >= MAX_HEADERS + 4 {
            return Err(ParseError::HeadTooLarge);
        }
        let at = self.text.len() as u32;
        self.text.extend_from_slice(name);
        let mid = self.text.len() as u32;
        self.text.extend_from_slice(value);
        self.spans.push((at..mid, mid..self.text.len() as u32));
        Ok(())
    }

    /// Every field as it came, pseudo-fields too.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.spans.iter().map(|(n, v)| {
            (
                &self.text[n.start as usize..n.end as usize],
                &self.text[v.start as usize..v.end as usize],
            )
        })
    }

    /// Every field as text, values as the HTTP/1.1 parser accepts them
    /// (UTF-8); Malformed if any is not. The buffer is checked once, and
    /// then that each value begins and ends at a character boundary (as it
    /// does when the names around it are tokens): together, that is each
    /// value being UTF-8 on its own.
    fn texts(&self) -> Result<impl Iterator<Item = (&[u8], &str)> + Clone, ParseError> {
        let text = std::str::from_utf8(&self.text).map_err(|_| ParseError::Malformed)?;
        let bounded = |at: u32| text.is_char_boundary(at as usize);
        if !self
            .spans
            .iter()
            .all(|(_, v)| bounded(v.start) && bounded(v.end))
        {
            return Err(ParseError::Malformed);
        }
        Ok(self.spans.iter().map(move |(n, v)| {
            let value = &text[v.start as usize..v.end as usize];
            (&text.as_bytes()[n.start as usize..n.end as usize], value)
        }))
    }
}

/// The request a stream's head stands for, with HTTP/1.1 semantics
/// (persistent, `minor_version` 1); the Host is `:authority`, else a
/// `host` field (RFC 9113 §8.3.1, RFC 9114 §4.3.1). nghttp2 or h3 has
/// checked the pseudo-fields and that names are lower-case tokens.
pub fn request(fields: &Fields, version: HttpVersion) -> Result<Request<'_>, ParseError> {
    let texts = fields.texts()?;
    let get = |name: &[u8]| texts.clone().find(|(n, _)| *n == name).map(|(_, v)| v);
    let target = get(b":path").unwrap_or("/");
    if target.len() > MAX_TARGET_BYTES {
        return Err(ParseError::TargetTooLong);
    }
    if target.contains('#') {
        return Err(ParseError::Malformed);
    }
    let method = get(b":method").unwrap_or("GET");
    let mut out = Request {
        method: Method::from_token(method),
        target: Cow::Borrowed(target),
        minor_version: 1,
        version,
        keep_alive: true,
        fields: HeaderFields::Decoded {
            text: &fields.text,
            spans: &fields.spans,
        },
        ..Request::default()
    };
    let host = get(b":authority").or_else(|| get(b"host"));
    if let Some(host) = host.map(str::trim).filter(|h| !h.is_empty()) {
        if !valid_host(host) {
            return Err(ParseError::Malformed);
        }
        out.host = Some(Cow::Borrowed(host));
    }
    for (name, value) in texts {
        if name.first() == Some(&b':') {
            continue;
        }
        match name {
            b"content-length" => {
                let n = value.trim().parse().map_err(|_| ParseError::Malformed)?;
                out.framing = if n == 0 {
                    BodyFraming::None
                } else {
                    BodyFraming::Length(n)
                };
            }
            b"range" => append(&mut out.range, value),
            b"if-range" => out.if_range = Some(Cow::Borrowed(value.trim())),
            b"if-match" => append(&mut out.if_match, value),
            b"if-none-match" => append(&mut out.if_none_match, value),
            b"if-modified-since" => out.if_modified_since = Some(Cow::Borrowed(value.trim())),
            b"if-unmodified-since" => out.if_unmodified_since = Some(Cow::Borrowed(value.trim())),
            b"accept" => append(&mut out.accept, value),
            b"accept-encoding" => append(&mut out.accept_encoding, value),
            b"user-agent" => out.user_agent = Some(Cow::Borrowed(value)),
            b"referer" => out.referer = Some(Cow::Borrowed(value)),
            b"authorization" => out.authorization = Some(Cow::Borrowed(value.trim())),
            b"forwarded" => append(&mut out.forwarded, value),
            b"x-forwarded-for" => append(&mut out.x_forwarded_for, value),
            _ => {}
        }
    }
    Ok(out)
}

/// Fields that mean something only to an HTTP/1.1 connection and are
/// malformed in HTTP/2 (RFC 9113 §8.2.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "upgrade",
    "proxy-connection",
];

/// Whether a request field is one HTTP/2 and HTTP/3 forbid (RFC 9113
/// §8.2.2, RFC 9114 §4.2): HTTP/1.1's connection fields, and `te` other
/// than `trailers`. nghttp2 checks this for HTTP/2; h3 does not.
pub fn connection_specific(name: &[u8], value: &[u8]) -> bool {
    if name.eq_ignore_ascii_case(b"te") {
        return !value.eq_ignore_ascii_case(b"trailers");
    }
    CONNECTION_SPECIFIC
        .iter()
        .any(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// What HTTP/2 and HTTP/3 add to a head of their own: `:status`, Date,
/// Server, Strict-Transport-Security, Alt-Svc and content-length, rendered
/// into a small
/// buffer of its own; `fields` lists them with the head's.
pub struct ResponseFields {
    buf: [u8; 128],
    status: Range<usize>,
    date: Range<usize>,
    hsts: Option<Range<usize>>,
    alt_svc: Option<Range<usize>>,
    length: Option<Range<usize>>,
}

impl ResponseFields {
    /// None: a status HTTP/2 cannot carry (a CGI script's, over 999).
    /// `alt_svc`: the UDP port of HTTP/3, for a response over TCP.
    pub fn new(head: &Head, hsts: Option<u64>, alt_svc: Option<u16>) -> Option<ResponseFields> {
        let code = head.code();
        if !(100..=999).contains(&code) {
            return None;
        }
        let mut out = ResponseFields {
            buf: [0; 128],
            status: 0..3,
            date: 3..32,
            hsts: None,
            alt_svc: None,
            length: None,
        };
        let digits = &mut [0; 20];
        out.buf[..3].copy_from_slice(super::response::decimal(code.into(), digits));
        super::response::with_http_date_now(|d| out.buf[3..32].copy_from_slice(d));
        // At most 32 + 28 (HSTS: "max-age=", 20 digits) + 21 (Alt-Svc, a
        // 5-digit port) + 20 (content-length) = 101 bytes: `render` never
        // runs past the buffer.
        let mut at = 32;
        let mut render = |buf: &mut [u8; 128], parts: &[&[u8]]| {
            let start = at;
            for part in parts {
                buf[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            start..at
        };
        if let Some(max_age) = hsts {
            let n = super::response::decimal(max_age, digits);
            out.hsts = Some(render(&mut out.buf, &[b"max-age=", n]));
        }
        if let Some(port) = alt_svc {
            let max_age = super::response::ALT_SVC_MAX_AGE.as_bytes();
            let port = super::response::decimal(port.into(), digits);
            out.alt_svc = Some(render(
                &mut out.buf,
                &[b"h3=\":", port, b"\"; ma=", max_age],
            ));
        }
        if let Framing::Length(n) = head.framing {
            let n = super::response::decimal(n, digits);
            out.length = Some(render(&mut out.buf, &[n]));
        }
        Some(out)
    }

    /// Every field of the response, `:status` first. Names may be in any
    /// case (nghttp2 lower-cases them); HTTP/1.1's connection fields are
    /// left out.
    pub fn fields<'a>(&'a self, head: &'a Head) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let buf = &self.buf;
        let ours = [
            Some((&b":status"[..], &buf[self.status.clone()])),
            Some((&b"date"[..], &buf[self.date.clone()])),
            Some((&b"server"[..], &b"staticd"[..])),
            self.hsts
                .clone()
                .map(|r| (&b"strict-transport-security"[..], &buf[r])),
            self.alt_svc.clone().map(|r| (&b"alt-svc"[..], &buf[r])),
        ];
        let text = head.text();
        let theirs = head
            .spans()
            .map(move |(n, v)| (&text[n], &text[v]))
            .filter(|(n, _)| {
                !CONNECTION_SPECIFIC
                    .iter()
                    .any(|c| c.eq_ignore_ascii_case(n))
            })
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()));
        let length = self
            .length
            .clone()
            .map(|r| (&b"content-length"[..], &buf[r]));
        ours.into_iter().flatten().chain(theirs).chain(length)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(list: &[(&str, &str)]) -> Fields {
        let mut f = Fields::default();
        for (n, v) in list {
            f.push(n.as_bytes(), v.as_bytes()).unwrap();
        }
        f
    }

    #[test]
    fn request_takes_authority_as_host_and_joins_lists() {
        let f = fields(&[
            (":method", "HEAD"),
            (":scheme", "http"),
            (":authority", "example.test:8080"),
            (":path", "/a/b?c=d"),
            ("accept-encoding", "gzip"),
            ("accept-encoding", "br"),
            ("range", "bytes=0-9"),
        ]);
        let req = request(&f, HttpVersion::Http2).unwrap();
        assert_eq!(req.method, Method::Head);
        assert_eq!(req.target, "/a/b?c=d");
        assert_eq!(req.host.as_deref(), Some("example.test:8080"));
        assert_eq!(req.accept_encoding.as_deref(), Some("gzip, br"));
        assert_eq!(req.range.as_deref(), Some("bytes=0-9"));
        assert!(req.version == HttpVersion::Http2 && req.keep_alive);
        // Every field, for CGI: `:authority` stands for the Host it did
        // not send; no pseudo-field.
        let pairs = req.fields.pairs();
        let names: Vec<&str> = pairs.iter().map(|(n, _)| &**n).collect();
        assert_eq!(
            names,
            ["host", "accept-encoding", "accept-encoding", "range"]
        );
        assert_eq!(pairs[0].1, "example.test:8080");
    }

    #[test]
    fn request_refuses_what_http1_refuses() {
        let long = format!("/{}", "a".repeat(MAX_TARGET_BYTES));
        let f = fields(&[(":method", "GET"), (":path", &long)]);
        assert_eq!(
            request(&f, HttpVersion::Http2).err(),
            Some(ParseError::TargetTooLong)
        );
        let f = fields(&[(":method", "GET"), (":path", "/"), ("host", "a b")]);
        assert_eq!(
            request(&f, HttpVersion::Http2).err(),
            Some(ParseError::Malformed)
        );
        let mut big = Fields::default();
        let value = "v".repeat(1000);
        let refused = (0..40).any(|_| big.push(b"x-big", value.as_bytes()).is_err());
        assert!(refused, "a head over the HTTP/1.1 limit is refused");
    }

    #[test]
    fn a_value_that_is_not_utf8_is_malformed_even_where_its_neighbour_completes_it() {
        let malformed = |list: &[(&[u8], &[u8])]| {
            let mut f = Fields::default();
            for (n, v) in list {
                f.push(n, v).unwrap();
            }
            request(&f, HttpVersion::Http2).err() == Some(ParseError::Malformed)
        };
        let base: [(&[u8], &[u8]); 2] = [(b":method", b"GET"), (b":path", b"/")];
        assert!(!malformed(&[
            base[0],
            base[1],
            (b"user-agent", "é".as_bytes())
        ]));
        assert!(malformed(&[base[0], base[1], (b"user-agent", b"\xff")]));
        // The buffer as a whole is UTF-8 ("é" split over two values, as
        // only an empty name could place them): each value alone is not.
        assert!(malformed(&[
            base[0],
            base[1],
            (b"user-agent", b"\xc3"),
            (b"", b"\xa9")
        ]));
        assert!(malformed(&[base[0], (b":path", b"/\xc3"), (b"", b"\xa9")]));
    }

    #[test]
    fn connection_fields_are_forbidden_and_te_only_as_trailers() {
        for name in [
            "connection",
            "Keep-Alive",
            "transfer-encoding",
            "upgrade",
            "proxy-connection",
        ] {
            assert!(connection_specific(name.as_bytes(), b"x"), "{name}");
        }
        assert!(connection_specific(b"te", b"gzip"));
        assert!(!connection_specific(b"te", b"trailers"));
        assert!(!connection_specific(b"accept", b"*/*"));
    }

    #[test]
    fn response_fields_from_the_head_with_what_the_connection_adds() {
        use crate::http::status::Status;
        let mut head = Head::new(Status::NotFound);
        head.header("Content-Type", "text/plain")
            .header("Connection", "close")
            .header("X-Custom", "A")
            .length(3);
        let extra = ResponseFields::new(&head, Some(600), Some(65535)).unwrap();
        let list: Vec<(String, String)> = extra
            .fields(&head)
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).to_lowercase(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect();
        let get = |name: &str| {
            list.iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(list[0], (":status".to_string(), "404".to_string()));
        assert_eq!(get("connection"), None);
        assert_eq!(get("x-custom"), Some("A"));
        assert_eq!(get("content-type"), Some("text/plain"));
        assert_eq!(get("content-length"), Some("3"));
        assert_eq!(get("server"), Some("staticd"));
        assert_eq!(get("strict-transport-security"), Some("max-age=600"));
        assert_eq!(get("alt-svc"), Some("h3=\":65535\"; ma=86400"));
        assert!(httpdate::parse_http_date(get("date").unwrap()).is_ok());
        let mut open = Head::with_code(299, "Mine");
        open.framing = Framing::Open;
        let extra = ResponseFields::new(&open, None, None).unwrap();
        let names: Vec<&[u8]> = extra.fields(&open).map(|(n, _)| n).collect();
        assert_eq!(names[0], b":status");
        assert!(!names.contains(&&b"content-length"[..]));
        assert!(!names.contains(&&b"strict-transport-security"[..]));
        assert!(ResponseFields::new(&Head::with_code(1000, ""), None, None).is_none());
    }
}
