//! What HTTP/3 decides about a request stream, without I/O (RFC 9114),
//! beside [`h2session`](crate::h2session)'s for HTTP/2: which fields a head
//! may carry, when a request may be answered from 0-RTT data, how a body
//! of unannounced length is read, and whether a body matches its
//! Content-Length. nghttp2 makes the same checks for HTTP/2; here they are
//! made once for HTTP/3, whose connection ([`conn`]) asks. Its frames
//! ([`frames`]) and header compression ([`qpack`]) are read here too;
//! `serve::h3` only moves datagrams. [`loopback`] joins a connection to a
//! QUIC client in memory, for tests and fuzzing.

pub mod conn;
pub mod frames;
pub mod loopback;
pub mod qpack;

use crate::http::fields::{self, Fields};
use crate::http::parse::{BodyFraming, HttpVersion, Method, ParseError, Request};

/// Adds one field of a request's head (pseudo-fields first, as they
/// came). A field HTTP/3 forbids (RFC 9114 §4.2: HTTP/1.1's connection
/// fields, `te` other than `trailers`) makes the request malformed.
pub fn push_field(head: &mut Fields, name: &[u8], value: &[u8]) -> Result<(), ParseError> {
    if fields::connection_specific(name, value) {
        return Err(ParseError::Malformed);
    }
    head.push(name, value)
}

/// The request a whole head stands for, as HTTP/2's is read.
pub fn request(head: &Fields) -> Result<Request<'_>, ParseError> {
    fields::request(head, HttpVersion::Http3)
}

/// The stream carries a body (it did not end with the head): one without a
/// Content-Length is read as HTTP/1.1 reads a chunked body, to the
/// stream's end.
pub fn body_follows(request: &mut Request) {
    if request.framing == BodyFraming::None {
        request.framing = BodyFraming::Chunked;
    }
}

/// Whether a request may be answered from 0-RTT data, which may be a
/// replay (RFC 9001 §9.2): it changes nothing and carries no credentials
/// (RFC 8470 §3's "safe" requests). Any other waits for the handshake,
/// which a replayed flight never completes, so a replay never runs a
/// script or reaches an `--auth` area.
pub fn replay_safe(request: &Request) -> bool {
    matches!(request.method, Method::Get | Method::Head)
        && request.authorization.is_none()
        && request.framing == BodyFraming::None
}

/// A request body measured against its Content-Length as it arrives (RFC
/// 9114 §4.1.2: longer or shorter makes the request malformed).
pub struct BodyLength {
    declared: Option<u64>,
    received: u64,
}

/// A body longer or shorter than its Content-Length: the stream is reset
/// with H3_MESSAGE_ERROR.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed;

impl BodyLength {
    pub fn of(request: &Request) -> BodyLength {
        let declared = match request.framing {
            BodyFraming::Length(n) => Some(n),
            _ => None,
        };
        BodyLength {
            declared,
            received: 0,
        }
    }

    /// `n` more body bytes arrived.
    pub fn more(&mut self, n: usize) -> Result<(), Malformed> {
        self.received += n as u64;
        match self.declared {
            Some(declared) if self.received > declared => Err(Malformed),
            _ => Ok(()),
        }
    }

    /// The stream ended.
    pub fn ended(&self) -> Result<(), Malformed> {
        match self.declared {
            Some(declared) if self.received < declared => Err(Malformed),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(extra: &[(&str, &str)]) -> Fields {
        let mut head = Fields::default();
        let base = [(":method", "POST"), (":scheme", "https"), (":path", "/x")];
        for (name, value) in base.iter().chain(extra) {
            push_field(&mut head, name.as_bytes(), value.as_bytes()).unwrap();
        }
        head
    }

    #[test]
    fn connection_fields_make_a_request_malformed() {
        let mut fields = head(&[]);
        for (name, value) in [("connection", "close"), ("Transfer-Encoding", "chunked")] {
            let pushed = push_field(&mut fields, name.as_bytes(), value.as_bytes());
            assert_eq!(pushed, Err(ParseError::Malformed), "{name}");
        }
        assert_eq!(
            push_field(&mut fields, b"te", b"gzip"),
            Err(ParseError::Malformed)
        );
        assert_eq!(push_field(&mut fields, b"te", b"trailers"), Ok(()));
    }

    #[test]
    fn a_body_without_length_is_read_to_the_streams_end() {
        let fields = head(&[]);
        let mut request = super::request(&fields).unwrap();
        assert_eq!(request.framing, BodyFraming::None);
        assert!(!replay_safe(&request), "a POST");
        body_follows(&mut request);
        assert_eq!(request.framing, BodyFraming::Chunked);
        let fields = head(&[("content-length", "3")]);
        let mut request = super::request(&fields).unwrap();
        body_follows(&mut request);
        assert_eq!(request.framing, BodyFraming::Length(3), "the length stands");
    }

    #[test]
    fn only_a_get_or_head_without_credentials_or_body_is_replay_safe() {
        let get = |extra: &[(&str, &str)]| {
            let mut fields = Fields::default();
            for (name, value) in [(":method", "GET"), (":scheme", "https"), (":path", "/")]
                .iter()
                .chain(extra)
            {
                push_field(&mut fields, name.as_bytes(), value.as_bytes()).unwrap();
            }
            fields
        };
        let plain = get(&[]);
        assert!(replay_safe(&super::request(&plain).unwrap()));
        let credentials = get(&[("authorization", "Basic dTpw")]);
        assert!(!replay_safe(&super::request(&credentials).unwrap()));
        let mut with_body = super::request(&plain).unwrap();
        body_follows(&mut with_body);
        assert!(!replay_safe(&with_body));
    }

    #[test]
    fn a_body_is_measured_against_its_content_length() {
        let fields = head(&[("content-length", "5")]);
        let request = super::request(&fields).unwrap();
        let mut length = BodyLength::of(&request);
        assert_eq!(length.more(3), Ok(()));
        assert_eq!(length.ended(), Err(Malformed), "short");
        assert_eq!(length.more(2), Ok(()));
        assert_eq!(length.ended(), Ok(()));
        assert_eq!(length.more(1), Err(Malformed), "long");
        let fields = head(&[]);
        let mut open = BodyLength::of(&super::request(&fields).unwrap());
        assert_eq!((open.more(1 << 20), open.ended()), (Ok(()), Ok(())));
    }
}
