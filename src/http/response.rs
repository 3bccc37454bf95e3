//! Responses as data: heads as bytes (status line, headers, the cached
//! Date) and the pieces a body is made of.

use std::cell::RefCell;
use std::fs::File;
use std::sync::Arc;

use crate::pool::FreeList;
use std::time::{SystemTime, UNIX_EPOCH};

/// A piece of a response body.
pub enum Chunk {
    Bytes(Vec<u8>),
    /// Part of a file held in memory by the open-file cache.
    Shared {
        bytes: Arc<[u8]>,
        offset: usize,
        len: usize,
    },
    File {
        file: Arc<File>,
        offset: u64,
        len: u64,
    },
}

thread_local! {
    /// Lists of body chunks, reused through the thread's free list (here,
    /// beside `Chunk`, so that `pool` knows nothing of responses).
    pub static BODIES: FreeList<Vec<Chunk>> = const { FreeList::new() };
}

impl Chunk {
    /// The bytes it puts on the wire.
    pub fn size(&self) -> u64 {
        match self {
            Chunk::Bytes(bytes) => bytes.len() as u64,
            Chunk::Shared { len, .. } => *len as u64,
            Chunk::File { len, .. } => *len,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    NoContent,
    PartialContent,
    MovedPermanently,
    Found,
    SeeOther,
    TemporaryRedirect,
    PermanentRedirect,
    NotModified,
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    LengthRequired,
    PreconditionFailed,
    UriTooLong,
    RangeNotSatisfiable,
    HeaderFieldsTooLarge,
    InternalServerError,
    NotImplemented,
    BadGateway,
    ServiceUnavailable,
    GatewayTimeout,
    VersionNotSupported,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::NoContent => 204,
            Status::PartialContent => 206,
            Status::MovedPermanently => 301,
            Status::Found => 302,
            Status::SeeOther => 303,
            Status::TemporaryRedirect => 307,
            Status::PermanentRedirect => 308,
            Status::NotModified => 304,
            Status::BadRequest => 400,
            Status::Unauthorized => 401,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::LengthRequired => 411,
            Status::PreconditionFailed => 412,
            Status::UriTooLong => 414,
            Status::RangeNotSatisfiable => 416,
            Status::HeaderFieldsTooLarge => 431,
            Status::InternalServerError => 500,
            Status::NotImplemented => 501,
            Status::BadGateway => 502,
            Status::ServiceUnavailable => 503,
            Status::GatewayTimeout => 504,
            Status::VersionNotSupported => 505,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::NoContent => "No Content",
            Status::PartialContent => "Partial Content",
            Status::MovedPermanently => "Moved Permanently",
            Status::Found => "Found",
            Status::SeeOther => "See Other",
            Status::TemporaryRedirect => "Temporary Redirect",
            Status::PermanentRedirect => "Permanent Redirect",
            Status::NotModified => "Not Modified",
            Status::BadRequest => "Bad Request",
            Status::Unauthorized => "Unauthorized",
            Status::Forbidden => "Forbidden",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::LengthRequired => "Length Required",
            Status::PreconditionFailed => "Precondition Failed",
            Status::UriTooLong => "URI Too Long",
            Status::RangeNotSatisfiable => "Range Not Satisfiable",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::InternalServerError => "Internal Server Error",
            Status::NotImplemented => "Not Implemented",
            Status::BadGateway => "Bad Gateway",
            Status::ServiceUnavailable => "Service Unavailable",
            Status::GatewayTimeout => "Gateway Timeout",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}

/// Builds a response head. Every head starts with the status line, Date and
/// Server; `finish` adds the connection header and the blank line.
pub struct HeadBuilder {
    buf: Vec<u8>,
}

impl HeadBuilder {
    pub fn new(status: Status) -> HeadBuilder {
        HeadBuilder::with_code(status.code(), status.reason())
    }

    /// A head with any status code, as a CGI script may choose.
    pub fn with_code(code: u16, reason: &str) -> HeadBuilder {
        let mut buf = crate::pool::take(&crate::pool::HEADS);
        buf.reserve(256);
        buf.extend_from_slice(b"HTTP/1.1 ");
        push_u64(&mut buf, u64::from(code));
        buf.push(b' ');
        buf.extend_from_slice(reason.as_bytes());
        buf.extend_from_slice(b"\r\nDate: ");
        with_http_date_now(|d| buf.extend_from_slice(d));
        buf.extend_from_slice(b"\r\nServer: staticd\r\n");
        HeadBuilder { buf }
    }

    pub fn header(&mut self, name: &str, value: &str) -> &mut Self {
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b": ");
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    /// A header whose value is written straight into the head, without
    /// an intermediate String.
    pub fn header_display(&mut self, name: &str, value: impl std::fmt::Display) -> &mut Self {
        use std::io::Write;
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b": ");
        // Writing to a Vec cannot fail.
        let _ = write!(self.buf, "{value}");
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    pub fn header_u64(&mut self, name: &str, value: u64) -> &mut Self {
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b": ");
        push_u64(&mut self.buf, value);
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    /// Removes every field named `name` (in any case) written so far.
    pub fn remove(&mut self, name: &str) {
        let mut from = self.fields_start();
        while let Some((start, value_end)) = self.find_field(name, from) {
            self.buf.drain(start..value_end + 2);
            from = start;
        }
    }

    /// Adds `value` to the list-valued field `name` (Vary, say): after its
    /// value when it was written already, else as a new field.
    pub fn append_to_list(&mut self, name: &str, value: impl std::fmt::Display) {
        use std::io::Write;
        let Some((_, value_end)) = self.find_field(name, self.fields_start()) else {
            self.header_display(name, value);
            return;
        };
        // Written at the end, then rotated into place: no second buffer.
        let end = self.buf.len();
        // Writing to a Vec cannot fail.
        let _ = write!(self.buf, ", {value}");
        let added = self.buf.len() - end;
        self.buf[value_end..].rotate_right(added);
    }

    /// Where the fields start: after the status line.
    fn fields_start(&self) -> usize {
        self.buf
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(self.buf.len(), |i| i + 2)
    }

    /// The first field named `name` (in any case) at or after `from`: where
    /// its line starts, and where its value ends (at its CRLF).
    fn find_field(&self, name: &str, from: usize) -> Option<(usize, usize)> {
        let mut at = from;
        while let Some(len) = self.buf.get(at..)?.windows(2).position(|w| w == b"\r\n") {
            let line = &self.buf[at..at + len];
            let named = line.len() > name.len()
                && line[name.len()] == b':'
                && line[..name.len()].eq_ignore_ascii_case(name.as_bytes());
            if named {
                return Some((at, at + len));
            }
            at += len + 2;
        }
        None
    }

    /// Ends the head. `persistence` says what to tell the client about the
    /// connection.
    pub fn finish(mut self, persistence: Persistence) -> Vec<u8> {
        match persistence {
            Persistence::Close => self.buf.extend_from_slice(b"Connection: close\r\n"),
            Persistence::KeepAlive10 => self.buf.extend_from_slice(b"Connection: keep-alive\r\n"),
            Persistence::Default11 => {}
        }
        self.buf.extend_from_slice(b"\r\n");
        self.buf
    }
}

/// Adds a field of up to 128 bytes to a finished head, after the status
/// line (the head may carry a small body after its end, so it cannot go
/// last).
pub fn insert_header(head: &mut Vec<u8>, name: &str, value: impl std::fmt::Display) {
    use std::io::Write;
    let Some(line_end) = head.windows(2).position(|w| w == b"\r\n") else {
        return;
    };
    let mut field = [0u8; 128];
    let mut cursor = std::io::Cursor::new(&mut field[..]);
    if write!(cursor, "{name}: {value}\r\n").is_err() {
        return;
    }
    let len = cursor.position() as usize;
    let at = line_end + 2;
    head.splice(at..at, field[..len].iter().copied());
}

/// What the Connection header of a response says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// The server closes after this response.
    Close,
    /// HTTP/1.0 keep-alive, which must be confirmed explicitly.
    KeepAlive10,
    /// HTTP/1.1 persistence, the default: nothing to say.
    Default11,
}

fn push_u64(buf: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

thread_local! {
    /// The Date value changes once a second; render it once a second per thread.
    static DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Calls `f` with the current time as an IMF-fixdate.
pub fn with_http_date_now<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != secs {
            let rendered = httpdate::fmt_http_date(now);
            cached.1.copy_from_slice(&rendered.as_bytes()[..29]);
            cached.0 = secs;
        }
        f(&cached.1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_layout() {
        let mut b = HeadBuilder::new(Status::NotFound);
        b.header_u64("Content-Length", 14);
        let head = String::from_utf8(b.finish(Persistence::Close)).unwrap();
        assert!(head.starts_with("HTTP/1.1 404 Not Found\r\nDate: "));
        assert!(head.contains("\r\nServer: staticd\r\n"));
        assert!(head.ends_with("Content-Length: 14\r\nConnection: close\r\n\r\n"));
    }

    #[test]
    fn header_inserted_after_the_status_line() {
        let mut head = b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody".to_vec();
        insert_header(&mut head, "X", format_args!("y={}", 1));
        assert_eq!(head, b"HTTP/1.1 200 OK\r\nX: y=1\r\nA: b\r\n\r\nbody");
    }

    #[test]
    fn fields_removed_joined_and_extended() {
        let mut b = HeadBuilder::new(Status::Ok);
        b.header("Content-Type", "text/plain");
        b.header("Vary", "Accept");
        b.header("content-type", "x/y");
        b.remove("Content-Type");
        b.append_to_list("Vary", "Origin, Cookie");
        b.append_to_list("X-List", "a, b");
        b.header_display("Cache-Control", "public, max-age=60");
        let head = String::from_utf8(b.finish(Persistence::Default11)).unwrap();
        assert!(
            !head.to_ascii_lowercase().contains("content-type"),
            "{head}"
        );
        assert!(
            head.contains("\r\nVary: Accept, Origin, Cookie\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nX-List: a, b\r\n"), "{head}");
        assert!(head.ends_with("\r\nCache-Control: public, max-age=60\r\n\r\n"));
        // A name that is a prefix of another's is not that field.
        let mut b = HeadBuilder::new(Status::Ok);
        b.header("Varying", "x");
        b.remove("Vary");
        assert!(String::from_utf8(b.finish(Persistence::Close))
            .unwrap()
            .contains("Varying: x"));
    }

    #[test]
    fn numbers() {
        let mut v = Vec::new();
        push_u64(&mut v, 0);
        v.push(b' ');
        push_u64(&mut v, u64::MAX);
        assert_eq!(v, b"0 18446744073709551615");
    }

    #[test]
    fn date_is_imf_fixdate() {
        with_http_date_now(|d| {
            let s = std::str::from_utf8(d).unwrap();
            assert!(httpdate::parse_http_date(s).is_ok(), "{s}");
            assert!(s.ends_with(" GMT"));
        });
    }
}
