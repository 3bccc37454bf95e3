//! The script's response-header block (RFC 3875 §6): Status, Location,
//! Content-Type and the fields passed on, parsed from the start of its
//! output.

use crate::http::is_token;

/// A script's header block, blank line included, must fit in this many bytes.
pub const MAX_HEAD: usize = 32 * 1024;

/// What the script's output so far says about its response head.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderBlock {
    /// No blank line yet: read more.
    Incomplete,
    /// The head, and where the body starts in the buffer.
    Complete(CgiHead, usize),
    /// Answer 502; the text says why, for the server's log.
    Malformed(&'static str),
}

/// The response a script asked for (RFC 3875 §6).
#[derive(Debug, PartialEq, Eq)]
pub struct CgiHead {
    pub status: u16,
    /// The script's reason phrase; empty when it gave none, and the server
    /// should use the usual one for `status`.
    pub reason: String,
    pub location: Option<Location>,
    pub content_type: Option<String>,
    /// When the script gave one, the body is exactly this long; otherwise
    /// it ends when the script closes stdout.
    pub content_length: Option<u64>,
    /// Every other field, in order, to be sent as it is. Fields the server
    /// owns (framing, Date, Server) and fields with bytes that cannot go
    /// into a response head are already gone.
    pub other: Vec<(String, String)>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Location {
    /// A local redirect (§6.2.2): serve this path and query as if the client
    /// had asked for it with GET, ignoring the rest of the script's output.
    Local(String),
    /// Send this Location to the client with `status` (302 unless the script
    /// chose another).
    Client(String),
}

/// Parses the script's header block from the start of its output. Call it
/// again with the whole buffer after each read; `eof` says that the script
/// has closed stdout, so an unfinished block is malformed.
pub fn parse_header_block(buf: &[u8], eof: bool) -> HeaderBlock {
    let window = &buf[..buf.len().min(MAX_HEAD)];
    let mut fields = Fields::default();
    let mut pos = 0;
    while let Some(newline) = window[pos..].iter().position(|&b| b == b'\n') {
        let end = pos + newline;
        let line = window[pos..end]
            .strip_suffix(b"\r")
            .unwrap_or(&window[pos..end]);
        pos = end + 1;
        if line.is_empty() {
            return match fields.finish() {
                Ok(head) => HeaderBlock::Complete(head, pos),
                Err(why) => HeaderBlock::Malformed(why),
            };
        }
        if let Err(why) = fields.add(line) {
            return HeaderBlock::Malformed(why);
        }
    }
    if buf.len() >= MAX_HEAD {
        HeaderBlock::Malformed("no blank line within the first 32 KiB of output")
    } else if eof {
        HeaderBlock::Malformed("output ended before the blank line after the headers")
    } else {
        HeaderBlock::Incomplete
    }
}

/// The header fields seen so far.
#[derive(Default)]
struct Fields {
    status: Option<(u16, String)>,
    location: Option<String>,
    content_type: Option<String>,
    content_length: Option<u64>,
    other: Vec<(String, String)>,
}

impl Fields {
    fn add(&mut self, line: &[u8]) -> Result<(), &'static str> {
        // A continuation line (obsolete folding) could hide one field inside
        // another; RFC 3875 has no folding, so refuse it.
        if line[0] == b' ' || line[0] == b'\t' {
            return Err("folded header line");
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or("header line without a colon")?;
        let name = &line[..colon];
        let value = trim_ows(&line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"status") {
            let status = parse_status(value)?;
            return set_once(&mut self.status, status, "repeated Status");
        }
        if name.eq_ignore_ascii_case(b"location") {
            let location = field_text(value).ok_or("invalid Location")?;
            if location.is_empty() {
                return Err("empty Location");
            }
            return set_once(&mut self.location, location, "repeated Location");
        }
        if name.eq_ignore_ascii_case(b"content-type") {
            let ty = field_text(value).ok_or("invalid Content-Type")?;
            return set_once(&mut self.content_type, ty, "repeated Content-Type");
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let len = parse_length(value).ok_or("invalid Content-Length")?;
            return set_once(&mut self.content_length, len, "repeated Content-Length");
        }
        // Anything else is passed on if it can be, and dropped if not: one
        // odd field is no reason to fail the whole response.
        if !is_token(name) || is_server_owned(name) {
            return Ok(());
        }
        if let (Ok(name), Some(value)) = (std::str::from_utf8(name), field_text(value)) {
            self.other.push((name.to_string(), value));
        }
        Ok(())
    }

    fn finish(self) -> Result<CgiHead, &'static str> {
        let explicit_status = self.status.as_ref().map(|(code, _)| *code);
        let location = self.location.map(|target| {
            // Apache's rule: a path with no status (or 200) is served here;
            // with a 3xx the script wants the client itself to go there.
            let local = target.starts_with('/') && !target.starts_with("//");
            if local && matches!(explicit_status, None | Some(200)) {
                Location::Local(target)
            } else {
                Location::Client(target)
            }
        });
        let (status, reason) = match (self.status, &location) {
            (Some(status), _) => status,
            (None, Some(Location::Client(_))) => (302, String::new()),
            (None, _) => (200, String::new()),
        };
        // No field is required. A body without Content-Type goes out without
        // one: §6.3.1 says the server SHOULD NOT guess the type. A block with
        // no CGI field at all breaks §6.3's MUST, but Apache and lighttpd pass
        // it on as a 200 document, and refusing it would only fail a page that
        // works elsewhere; the framing stays the server's either way.
        Ok(CgiHead {
            status,
            reason,
            location,
            content_type: self.content_type,
            content_length: self.content_length,
            other: self.other,
        })
    }
}

fn set_once<T>(slot: &mut Option<T>, value: T, repeated: &'static str) -> Result<(), &'static str> {
    if slot.is_some() {
        return Err(repeated);
    }
    *slot = Some(value);
    Ok(())
}

/// `Status: 404 Not Found`: three digits, then an optional reason. 1xx is
/// refused: it cannot be the final answer to a request, and a client would
/// wait for another response after it.
fn parse_status(value: &[u8]) -> Result<(u16, String), &'static str> {
    const BAD: &str = "Status is not a code from 200 to 999";
    let (digits, rest) = value.split_at(value.len().min(3));
    if digits.len() != 3 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(BAD);
    }
    let code = digits
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    if code < 200 {
        return Err(BAD);
    }
    if !rest.is_empty() && rest[0] != b' ' && rest[0] != b'\t' {
        return Err(BAD);
    }
    let reason = field_text(trim_ows(rest)).ok_or("invalid Status reason")?;
    Ok((code, reason))
}

fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Fields the server writes itself: framing is the transport's business
/// (RFC 9110 §7.6.1 hop-by-hop fields) and a second Date or Server would
/// contradict the first.
fn is_server_owned(name: &[u8]) -> bool {
    const OWNED: [&[u8]; 9] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"te",
        b"trailer",
        b"upgrade",
        b"date",
        b"server",
    ];
    OWNED.iter().any(|owned| name.eq_ignore_ascii_case(owned))
}

/// A field value as text, if every byte may appear in a response head
/// (RFC 9110 §5.5: visible characters, space, tab, and UTF-8 text).
fn field_text(value: &[u8]) -> Option<String> {
    let allowed = |b: &u8| *b == b'\t' || (b' '..=b'~').contains(b) || *b >= 0x80;
    if !value.iter().all(allowed) {
        return None;
    }
    String::from_utf8(value.to_vec()).ok()
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgi::tests::complete;

    fn malformed(out: &[u8]) -> &'static str {
        match parse_header_block(out, true) {
            HeaderBlock::Malformed(why) => why,
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(out)),
        }
    }

    #[test]
    fn head_with_lf_lines() {
        let out = b"Content-Type: text/html\n\n<p>hi";
        let (head, start) = complete(out);
        assert_eq!(
            head,
            CgiHead {
                status: 200,
                reason: String::new(),
                location: None,
                content_type: Some("text/html".to_string()),
                content_length: None,
                other: Vec::new(),
            }
        );
        assert_eq!(&out[start..], b"<p>hi");
    }

    #[test]
    fn head_with_crlf_lines_and_other_fields() {
        let out = b"Status: 404 Not Here\r\nContent-Type:text/plain; charset=utf-8 \r\n\
            Content-Length: 5\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nConnection: close\r\n\
            Transfer-Encoding: chunked\r\nDate: yesterday\r\nX-Bad: a\x01b\r\nBad Name: x\r\n\
            Cache-Control: no-store\r\n\r\nnope!";
        let (head, start) = complete(out);
        assert_eq!(head.status, 404);
        assert_eq!(head.reason, "Not Here");
        assert_eq!(
            head.content_type.as_deref(),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(head.content_length, Some(5));
        let other: Vec<(&str, &str)> = head
            .other
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            other,
            [
                ("Set-Cookie", "a=1"),
                ("set-cookie", "b=2"),
                ("Cache-Control", "no-store")
            ]
        );
        assert_eq!(&out[start..], b"nope!");
    }

    #[test]
    fn head_arriving_in_pieces_is_incomplete_until_the_blank_line() {
        let out = b"Status: 201\r\nContent-Type: text/plain\r\nX-A: b\r\n\r\nbody";
        let blank_end = out.len() - 4;
        for cut in 0..blank_end {
            assert_eq!(
                parse_header_block(&out[..cut], false),
                HeaderBlock::Incomplete,
                "cut at {cut}"
            );
        }
        for cut in blank_end..=out.len() {
            let (head, start) = complete(&out[..cut]);
            assert_eq!((head.status, start), (201, blank_end));
        }
    }

    #[test]
    fn status_with_and_without_reason() {
        let (head, _) = complete(b"Status: 404\nContent-Type: text/plain\n\n");
        assert_eq!((head.status, head.reason.as_str()), (404, ""));
        let (head, _) = complete(b"status:  503   Busy, come back \nContent-Type: a/b\n\n");
        assert_eq!(
            (head.status, head.reason.as_str()),
            (503, "Busy, come back")
        );
    }

    #[test]
    fn local_location_is_served_here() {
        let (head, _) = complete(b"Location: /other.html?x=1\n\n");
        assert_eq!(
            head.location,
            Some(Location::Local("/other.html?x=1".to_string()))
        );
        assert_eq!(head.status, 200);
    }

    #[test]
    fn url_location_redirects_the_client() {
        let (head, _) = complete(b"Location: https://example.org/x\r\n\r\n");
        assert_eq!(
            head.location,
            Some(Location::Client("https://example.org/x".to_string()))
        );
        assert_eq!(head.status, 302);

        let (head, _) = complete(b"Status: 303 See Other\nLocation: http://a.example/\n\n");
        assert_eq!((head.status, head.reason.as_str()), (303, "See Other"));

        // A network-path reference is another host, not a local path.
        let (head, _) = complete(b"Location: //evil.example/\n\n");
        assert_eq!(
            head.location,
            Some(Location::Client("//evil.example/".to_string()))
        );
        assert_eq!(head.status, 302);

        // With a redirect status, a local path is for the client to follow.
        let (head, _) = complete(b"Status: 301\nLocation: /new/\n\n");
        assert_eq!(head.location, Some(Location::Client("/new/".to_string())));
        assert_eq!(head.status, 301);
    }

    #[test]
    fn bodiless_statuses_need_no_content_type() {
        assert_eq!(complete(b"Status: 304\n\n").0.status, 304);
        assert_eq!(complete(b"Status: 204 No Content\r\n\r\n").0.status, 204);
    }

    #[test]
    fn a_document_without_content_type_is_passed_on_untyped() {
        let out = b"Status: 200 OK\r\nX-Custom: yes\r\n\r\nbody";
        let (head, start) = complete(out);
        assert_eq!(
            (head.status, head.content_type, head.location),
            (200, None, None)
        );
        assert_eq!(head.other, [("X-Custom".to_string(), "yes".to_string())]);
        assert_eq!(&out[start..], b"body");

        // Other fields only, or none at all: a 200 document, as in Apache.
        let (head, start) = complete(b"X-Only: other\n\nhi");
        assert_eq!((head.status, head.content_type, start), (200, None, 15));
        let (head, start) = complete(b"\nhi");
        assert_eq!((head.status, head.other.len(), start), (200, 0, 1));
    }

    #[test]
    fn malformed_heads() {
        let cases: [&[u8]; 14] = [
            b"",
            b"Content-Type: text/plain\n",
            b"Content-Type: text/plain\r\n\r",
            b"hello world\n\n",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
            b"Status: 20\nContent-Type: a/b\n\n",
            b"Status: 2000\nContent-Type: a/b\n\n",
            b"Status: 100 Continue\nContent-Type: a/b\n\n",
            b"Status: abc\nContent-Type: a/b\n\n",
            b"Status: 200\nStatus: 404\nContent-Type: a/b\n\n",
            b"Content-Type: a/b\nContent-Length: -1\n\n",
            b"Content-Type: a/b\n folded\n\n",
            b"Content-Type: a\x00b\n\n",
            b"Location:\nContent-Type: a/b\n\n",
        ];
        for out in cases {
            malformed(out);
        }
    }

    #[test]
    fn a_bad_line_is_reported_before_the_block_ends() {
        assert_eq!(
            parse_header_block(b"oops\nContent-Ty", false),
            HeaderBlock::Malformed("header line without a colon")
        );
    }

    #[test]
    fn head_must_fit_in_32_kib() {
        let fitting = |extra: usize| {
            let mut out = b"Content-Type: text/plain\nX-Pad: ".to_vec();
            let pad = MAX_HEAD - out.len() - 2 + extra;
            out.resize(out.len() + pad, b'a');
            out.extend_from_slice(b"\n\nbody");
            out
        };
        let exact = fitting(0);
        assert_eq!(complete(&exact).1, MAX_HEAD);
        let over = fitting(1);
        assert!(matches!(
            parse_header_block(&over, false),
            HeaderBlock::Malformed(_)
        ));
        // Output without a blank line fails once 32 KiB have arrived.
        let endless = vec![b'a'; MAX_HEAD - 1];
        assert_eq!(parse_header_block(&endless, false), HeaderBlock::Incomplete);
        let endless = vec![b'a'; MAX_HEAD];
        assert!(matches!(
            parse_header_block(&endless, false),
            HeaderBlock::Malformed(_)
        ));
    }
}
