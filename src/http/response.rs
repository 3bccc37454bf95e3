//! Responses on the wire in HTTP/1.1: a structured head encoded as bytes
//! (status line, the cached Date, fields, framing), and the pieces a body
//! is made of.

use std::cell::RefCell;
use std::fs::File;
use std::sync::Arc;

use super::head::{Framing, Head};
use crate::pool::FreeList;
use std::time::{Duration, UNIX_EPOCH};

/// A piece of a response body.
pub enum Chunk {
    Bytes(Vec<u8>),
    /// Bytes built into the binary (error pages, status lines).
    Static(&'static [u8]),
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
    /// Lists of body chunks, reused through the thread's free list (here, beside
    /// [`Chunk`](crate::http::response::Chunk), so that [`pool`](crate::pool) knows nothing of
    /// responses).
    pub static BODIES: FreeList<Vec<Chunk>> = const { FreeList::new() };
}

impl Chunk {
    /// Its bytes, when it is held in memory (None for a file).
    pub fn memory(&self) -> Option<&[u8]> {
        match self {
            Chunk::Bytes(bytes) => Some(bytes),
            Chunk::Static(bytes) => Some(bytes),
            Chunk::Shared { bytes, offset, len } => Some(&bytes[*offset..*offset + *len]),
            Chunk::File { .. } => None,
        }
    }

    /// The bytes it puts on the wire.
    pub fn size(&self) -> u64 {
        match self {
            Chunk::Bytes(bytes) => bytes.len() as u64,
            Chunk::Static(bytes) => bytes.len() as u64,
            Chunk::Shared { len, .. } => *len as u64,
            Chunk::File { len, .. } => *len,
        }
    }

    /// The bytes `chunks` put on the wire together.
    pub fn total(chunks: &[Chunk]) -> u64 {
        chunks.iter().map(Chunk::size).sum()
    }
}

/// What follows the port in an Alt-Svc field value: a day of validity,
/// as Caddy and h2o advertise (RFC 7838 §3.1's `ma`).
pub const ALT_SVC_MAX_AGE: &str = "86400";

/// What an HTTP/1.1 head says of the connection besides the response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Http1 {
    /// The request's minor version (1 when it is not known).
    pub minor_version: u8,
    /// The server closes the connection after this response.
    pub close: bool,
    /// `--hsts` on an HTTPS connection: Strict-Transport-Security's max-age.
    pub hsts: Option<u64>,
    /// HTTPS with HTTP/3 on: the UDP port `Alt-Svc: h3=":PORT"` names.
    pub alt_svc: Option<u16>,
}

impl Http1 {
    /// Whether an open-ended body (`Framing::Open`) goes in chunks; else
    /// it ends when the connection closes (HTTP/1.0).
    pub fn chunked(&self, head: &Head) -> bool {
        head.framing == Framing::Open && self.minor_version >= 1
    }
}

/// Appends [`head`](crate::http::head) as HTTP/1.1 bytes to `out`: the status line, Date and
/// Server, the connection's own fields, the head's, the framing, and the
/// blank line. Allocates nothing when `out` has room.
pub fn encode(head: &Head, conn: &Http1, out: &mut Vec<u8>) {
    out.extend_from_slice(b"HTTP/1.1 ");
    push_u64(out, u64::from(head.code()));
    out.push(b' ');
    out.extend_from_slice(head.reason().as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    with_http_date_now(|d| out.extend_from_slice(d));
    out.extend_from_slice(b"\r\nServer: staticd\r\n");
    if let Some(max_age) = conn.hsts {
        out.extend_from_slice(b"Strict-Transport-Security: max-age=");
        push_u64(out, max_age);
        out.extend_from_slice(b"\r\n");
    }
    if let Some(port) = conn.alt_svc {
        out.extend_from_slice(b"Alt-Svc: h3=\":");
        push_u64(out, u64::from(port));
        out.extend_from_slice(b"\"; ma=");
        out.extend_from_slice(ALT_SVC_MAX_AGE.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in head.fields() {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    match head.framing {
        Framing::Length(n) => {
            out.extend_from_slice(b"Content-Length: ");
            push_u64(out, n);
            out.extend_from_slice(b"\r\n");
        }
        Framing::Open if conn.chunked(head) => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n")
        }
        Framing::Open | Framing::Empty => {}
    }
    match (conn.close, conn.minor_version) {
        (true, _) => out.extend_from_slice(b"Connection: close\r\n"),
        // HTTP/1.0 keep-alive must be confirmed explicitly.
        (false, 0) => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        (false, _) => {}
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `bytes` to `out` as one chunk of a chunked body.
pub fn push_chunk(out: &mut Vec<u8>, bytes: &[u8]) {
    use std::io::Write;
    if bytes.is_empty() {
        return;
    }
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{:x}\r\n", bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// The end of a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

fn push_u64(buf: &mut Vec<u8>, n: u64) {
    buf.extend_from_slice(decimal(n, &mut [0; 20]));
}

/// `n` in decimal, written at the end of `digits`: what `{n}` formats,
/// without the formatting machinery (a measurable part of a small HTTP/2
/// response's cost when its fields were rendered with `write!`).
pub(crate) fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &digits[i..]
}

thread_local! {
    /// The Date value changes once a second; render it once a second per thread.
    static DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Calls `f` with the current time as an IMF-fixdate. The clock read is
/// the coarse one (the kernel's last tick, a few milliseconds behind at
/// most): a value that changes once a second needs no finer reading, and
/// the fine one was a measurable part of a small response's cost.
pub fn with_http_date_now<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    let coarse = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    let secs = u64::try_from(coarse.tv_sec).unwrap_or(0);
    DATE.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != secs {
            let rendered = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
            cached.1.copy_from_slice(&rendered.as_bytes()[..29]);
            cached.0 = secs;
        }
        f(&cached.1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::status::Status;

    fn encoded(head: &Head, conn: Http1) -> String {
        let mut out = Vec::new();
        encode(head, &conn, &mut out);
        String::from_utf8(out).unwrap()
    }

    const KEEP: Http1 = Http1 {
        minor_version: 1,
        close: false,
        hsts: None,
        alt_svc: None,
    };

    #[test]
    fn alt_svc_names_the_http3_port() {
        let mut head = Head::new(Status::Ok);
        head.length(0);
        let conn = Http1 {
            alt_svc: Some(8443),
            ..KEEP
        };
        let text = encoded(&head, conn);
        assert!(
            text.contains("\r\nAlt-Svc: h3=\":8443\"; ma=86400\r\n"),
            "{text}"
        );
        assert!(!encoded(&head, KEEP).contains("Alt-Svc"));
    }

    #[test]
    fn head_layout() {
        let mut h = Head::new(Status::NotFound);
        h.header("Content-Type", "text/plain");
        h.length(14);
        let close = Http1 {
            close: true,
            hsts: Some(600),
            alt_svc: None,
            ..KEEP
        };
        let text = encoded(&h, close);
        assert!(
            text.starts_with("HTTP/1.1 404 Not Found\r\nDate: "),
            "{text}"
        );
        assert!(text.contains("\r\nServer: staticd\r\nStrict-Transport-Security: max-age=600\r\n"));
        assert!(text.ends_with(
            "Content-Type: text/plain\r\nContent-Length: 14\r\nConnection: close\r\n\r\n"
        ));
    }

    #[test]
    fn framing_and_persistence_follow_the_version() {
        let mut h = Head::with_code(299, "");
        h.framing = Framing::Open;
        let text = encoded(&h, KEEP);
        assert!(text.starts_with("HTTP/1.1 299 \r\n"), "{text}");
        assert!(
            text.ends_with("\r\nTransfer-Encoding: chunked\r\n\r\n"),
            "{text}"
        );
        let old = Http1 {
            minor_version: 0,
            close: true,
            hsts: None,
            alt_svc: None,
        };
        let text = encoded(&h, old);
        assert!(!text.contains("chunked") && text.ends_with("Connection: close\r\n\r\n"));
        let kept = Http1 {
            close: false,
            ..old
        };
        let h = Head::new(Status::NoContent);
        assert!(encoded(&h, kept).ends_with("Server: staticd\r\nConnection: keep-alive\r\n\r\n"));
    }

    #[test]
    fn chunks() {
        let mut v = Vec::new();
        push_chunk(&mut v, b"hello, world!!!!!");
        push_chunk(&mut v, b"");
        v.extend_from_slice(LAST_CHUNK);
        assert_eq!(v, b"11\r\nhello, world!!!!!\r\n0\r\n\r\n");
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
