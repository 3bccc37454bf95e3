//! HTTP/2 as data: an h2 stream's request head becomes the same `Request`
//! the HTTP/1.1 parser gives, and a decided response head (HTTP/1.1 text)
//! becomes h2 fields. No I/O here; `serve::h2` moves the frames.
//!
//! The request is built from the h2 header map directly rather than by
//! rendering HTTP/1.1 text and parsing it again: the values borrow from the
//! map, as the HTTP/1.1 parser's borrow from the read buffer, and the
//! checks that matter for one decision (target length, fragment, Host
//! syntax) use the parser's own functions.

use std::borrow::Cow;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, HOST};
use http::{Method as H2Method, StatusCode, Uri};

use super::limits::{MAX_HEADERS, MAX_TARGET_BYTES};
use super::parse::{append, valid_host, BodyFraming, Method, ParseError, Request};

/// The request an h2 stream's head stands for, with HTTP/1.1 semantics
/// (persistent, `minor_version` 1); the Host is `:authority`, else a
/// `host` field (RFC 9113 §8.3.1).
pub fn request<'a>(
    method: &'a H2Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
) -> Result<Request<'a>, ParseError> {
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    if target.len() > MAX_TARGET_BYTES {
        return Err(ParseError::TargetTooLong);
    }
    if target.contains('#') {
        return Err(ParseError::Malformed);
    }
    if headers.len() > MAX_HEADERS {
        return Err(ParseError::HeadTooLarge);
    }
    let mut out = Request {
        method: Method::from_token(method.as_str()),
        target: Cow::Borrowed(target),
        minor_version: 1,
        http2: true,
        keep_alive: true,
        ..Request::default()
    };
    let host = match uri.authority() {
        Some(authority) => Some(authority.as_str()),
        None => headers.get(HOST).map(text).transpose()?,
    };
    if let Some(host) = host.map(str::trim).filter(|h| !h.is_empty()) {
        if !valid_host(host) {
            return Err(ParseError::Malformed);
        }
        out.host = Some(Cow::Borrowed(host));
    }
    for (name, value) in headers {
        let value = text(value)?;
        match name.as_str() {
            "content-length" => {
                let n = value.trim().parse().map_err(|_| ParseError::Malformed)?;
                out.framing = if n == 0 {
                    BodyFraming::None
                } else {
                    BodyFraming::Length(n)
                };
            }
            "range" => append(&mut out.range, value),
            "if-range" => out.if_range = Some(Cow::Borrowed(value.trim())),
            "if-match" => append(&mut out.if_match, value),
            "if-none-match" => append(&mut out.if_none_match, value),
            "if-modified-since" => out.if_modified_since = Some(Cow::Borrowed(value.trim())),
            "if-unmodified-since" => out.if_unmodified_since = Some(Cow::Borrowed(value.trim())),
            "accept" => append(&mut out.accept, value),
            "accept-encoding" => append(&mut out.accept_encoding, value),
            "user-agent" => out.user_agent = Some(Cow::Borrowed(value)),
            "referer" => out.referer = Some(Cow::Borrowed(value)),
            "authorization" => out.authorization = Some(Cow::Borrowed(value.trim())),
            "forwarded" => append(&mut out.forwarded, value),
            "x-forwarded-for" => append(&mut out.x_forwarded_for, value),
            _ => {}
        }
    }
    Ok(out)
}

/// The request head as HTTP/1.1 text, for what reads a raw head (CGI's
/// HTTP_* variables): the request line, `host` from `:authority`, and the
/// fields as they came.
pub fn request_head(request: &Request, headers: &HeaderMap) -> Vec<u8> {
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(request.method.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(request.target.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\n");
    if let (Some(host), false) = (&request.host, headers.contains_key(HOST)) {
        head.extend_from_slice(b"host: ");
        head.extend_from_slice(host.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    for (name, value) in headers {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// A field value as text, as the HTTP/1.1 parser accepts it (UTF-8).
fn text(value: &HeaderValue) -> Result<&str, ParseError> {
    std::str::from_utf8(value.as_bytes()).map_err(|_| ParseError::Malformed)
}

/// Most fields a response head of ours carries (a `_headers` rule can add
/// some to the usual dozen).
const MAX_RESPONSE_FIELDS: usize = 128;

/// Fields that mean something only to an HTTP/1.1 connection and are
/// malformed in HTTP/2 (RFC 9113 §8.2.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "upgrade",
    "proxy-connection",
];

/// A response head as h2 sends it, and how many bytes of the HTTP/1.1 head
/// it came from: what follows them in the buffer is the start of the body.
pub struct Head {
    pub status: StatusCode,
    pub fields: HeaderMap,
    pub len: usize,
}

/// Reads a response head rendered as HTTP/1.1 text (`respond` or the CGI
/// exchange made it, so a failure is a bug, not the client's doing); None
/// too while the head is incomplete. The field values are slices of
/// `bytes`, not copies.
pub fn response_head(bytes: &Bytes) -> Option<Head> {
    let mut parsed = [httparse::EMPTY_HEADER; MAX_RESPONSE_FIELDS];
    let mut response = httparse::Response::new(&mut parsed);
    let len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        _ => return None,
    };
    let status = StatusCode::from_u16(response.code?).ok()?;
    let mut fields = HeaderMap::with_capacity(response.headers.len());
    for field in response.headers.iter() {
        // Lower-cased here, as HTTP/2 requires.
        let name = HeaderName::from_bytes(field.name.as_bytes()).ok()?;
        if CONNECTION_SPECIFIC.contains(&name.as_str()) {
            continue;
        }
        let value = bytes.slice_ref(field.value);
        fields.append(name, HeaderValue::from_maybe_shared(value).ok()?);
    }
    Some(Head {
        status,
        fields,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_takes_authority_as_host_and_joins_lists() {
        let uri: Uri = "http://example.test:8080/a/b?c=d".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.append("accept-encoding", HeaderValue::from_static("gzip"));
        headers.append("accept-encoding", HeaderValue::from_static("br"));
        headers.insert("range", HeaderValue::from_static("bytes=0-9"));
        let method = H2Method::HEAD;
        let req = request(&method, &uri, &headers).unwrap();
        assert_eq!(req.method, Method::Head);
        assert_eq!(req.target, "/a/b?c=d");
        assert_eq!(req.host.as_deref(), Some("example.test:8080"));
        assert_eq!(req.accept_encoding.as_deref(), Some("gzip, br"));
        assert_eq!(req.range.as_deref(), Some("bytes=0-9"));
        assert!(req.http2 && req.keep_alive);
    }

    #[test]
    fn request_refuses_what_http1_refuses() {
        let method = H2Method::GET;
        let headers = HeaderMap::new();
        let long: Uri = format!("/{}", "a".repeat(MAX_TARGET_BYTES))
            .parse()
            .unwrap();
        assert_eq!(
            request(&method, &long, &headers).err(),
            Some(ParseError::TargetTooLong)
        );
        let mut bad_host = HeaderMap::new();
        bad_host.insert(HOST, HeaderValue::from_static("a b"));
        let path: Uri = "/".parse().unwrap();
        assert_eq!(
            request(&method, &path, &bad_host).err(),
            Some(ParseError::Malformed)
        );
    }

    #[test]
    fn response_head_drops_connection_fields_and_finds_the_body() {
        let head = Bytes::from_static(
            b"HTTP/1.1 404 Not Found\r\nDate: x\r\nContent-Length: 3\r\n\
            Connection: close\r\nKeep-Alive: timeout=5\r\nX-Custom: A\r\n\r\nabc",
        );
        let h = response_head(&head).unwrap();
        assert_eq!(h.status, StatusCode::NOT_FOUND);
        assert_eq!(&head[h.len..], b"abc");
        assert!(h.fields.get("connection").is_none());
        assert!(h.fields.get("keep-alive").is_none());
        assert_eq!(h.fields["x-custom"], "A");
        assert_eq!(h.fields["content-length"], "3");
    }
}
