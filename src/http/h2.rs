//! HTTP/2 as data: an h2 stream's request head becomes the same `Request`
//! the HTTP/1.1 parser gives, and a decided response head (`Head`) becomes
//! h2 fields directly. No I/O here; `serve::h2` moves the frames.
//!
//! The request is built from the h2 header map directly rather than by
//! rendering HTTP/1.1 text and parsing it again: the values borrow from the
//! map, as the HTTP/1.1 parser's borrow from the read buffer, and the
//! checks that matter for one decision (target length, fragment, Host
//! syntax) use the parser's own functions.

use std::borrow::Cow;

use bytes::{BufMut, BytesMut};
use http::header::STRICT_TRANSPORT_SECURITY;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, DATE, HOST, SERVER};
use http::{Method as H2Method, StatusCode, Uri};

use super::head::{Framing, Head};
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

/// Fields that mean something only to an HTTP/1.1 connection and are
/// malformed in HTTP/2 (RFC 9113 §8.2.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "upgrade",
    "proxy-connection",
];

/// `head` as h2 sends it: its status, Date and Server, Strict-Transport-
/// Security when `hsts` (`--hsts` over HTTPS), its fields, and
/// content-length for a body of known length; an open-ended body ends with
/// the stream. The values are slices of one copy of the head's text, not a
/// copy each. None: a status HTTP/2 cannot carry (a CGI script's, over
/// 999), or a field name it cannot (never one of ours).
pub fn response_fields(head: &Head, hsts: Option<u64>) -> Option<(StatusCode, HeaderMap)> {
    use std::io::Write;
    let status = StatusCode::from_u16(head.code()).ok()?;
    let mut text = BytesMut::with_capacity(head.text().len() + 64);
    text.put_slice(head.text().as_bytes());
    let date = text.len()..text.len() + 29;
    super::response::with_http_date_now(|d| text.put_slice(d));
    let hsts_at = text.len();
    if let Some(max_age) = hsts {
        // Writing to a BytesMut cannot fail.
        let _ = write!((&mut text).writer(), "max-age={max_age}");
    }
    let hsts_value = hsts_at..text.len();
    let text = text.freeze();
    let value = |range| HeaderValue::from_maybe_shared(text.slice(range)).ok();
    let mut fields = HeaderMap::with_capacity(head.spans().count() + 4);
    fields.append(DATE, value(date)?);
    fields.append(SERVER, HeaderValue::from_static("staticd"));
    if hsts.is_some() {
        fields.append(STRICT_TRANSPORT_SECURITY, value(hsts_value)?);
    }
    for (name, range) in head.spans() {
        // Lower-cased here, as HTTP/2 requires.
        let name = HeaderName::from_bytes(head.text()[name].as_bytes()).ok()?;
        if CONNECTION_SPECIFIC.contains(&name.as_str()) {
            continue;
        }
        fields.append(name, value(range)?);
    }
    if let Framing::Length(n) = head.framing {
        fields.append(CONTENT_LENGTH, HeaderValue::from(n));
    }
    Some((status, fields))
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
    fn response_fields_from_the_head_with_what_the_connection_adds() {
        use crate::http::status::Status;
        let mut head = Head::new(Status::NotFound);
        head.header("Content-Type", "text/plain")
            .header("Connection", "close")
            .header("X-Custom", "A")
            .length(3);
        let (status, fields) = response_fields(&head, Some(600)).unwrap();
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(fields.get("connection").is_none());
        assert_eq!(fields["x-custom"], "A");
        assert_eq!(fields["content-type"], "text/plain");
        assert_eq!(fields["content-length"], "3");
        assert_eq!(fields["server"], "staticd");
        assert_eq!(fields["strict-transport-security"], "max-age=600");
        assert!(httpdate::parse_http_date(fields["date"].to_str().unwrap()).is_ok());
        let mut open = Head::with_code(299, "Mine");
        open.framing = Framing::Open;
        let (status, fields) = response_fields(&open, None).unwrap();
        assert_eq!(status.as_u16(), 299);
        assert!(fields.get("content-length").is_none());
        assert!(fields.get("strict-transport-security").is_none());
        assert!(response_fields(&Head::with_code(1000, ""), None).is_none());
    }
}
