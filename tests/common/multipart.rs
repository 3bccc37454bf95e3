//! multipart/byteranges parsing.

use super::*;

#[derive(Debug)]
pub struct Part {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Part {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Extracts the boundary parameter from a `multipart/byteranges; boundary=...` type.
pub fn boundary_of(content_type: &str) -> String {
    let (mime, params) = content_type
        .split_once(';')
        .unwrap_or_else(|| panic!("no boundary parameter in {content_type:?}"));
    assert_eq!(
        mime.trim().to_ascii_lowercase(),
        "multipart/byteranges",
        "Content-Type"
    );
    params
        .split(';')
        .filter_map(|p| p.trim().split_once('='))
        .find(|(k, _)| k.eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("no boundary parameter in {content_type:?}"))
}

/// Parses a multipart/byteranges body strictly (RFC 2046 framing with CRLF line ends).
pub fn parse_multipart(body: &[u8], boundary: &str) -> Vec<Part> {
    let delimiter = format!("--{boundary}").into_bytes();
    let start = find(body, &delimiter).expect("no opening boundary");
    let preamble = &body[..start];
    assert!(
        preamble.is_empty() || preamble == b"\r\n",
        "unexpected preamble {:?}",
        String::from_utf8_lossy(preamble)
    );
    let mut rest = &body[start + delimiter.len()..];
    let close = [b"\r\n".as_slice(), &delimiter].concat();
    let mut parts = Vec::new();
    loop {
        if let Some(epilogue) = rest.strip_prefix(b"--") {
            assert!(
                epilogue.is_empty() || epilogue == b"\r\n",
                "unexpected epilogue {:?}",
                String::from_utf8_lossy(epilogue)
            );
            return parts;
        }
        rest = rest
            .strip_prefix(b"\r\n")
            .expect("boundary line not ended by CRLF");
        let head_end = find(rest, b"\r\n\r\n").expect("part without header end");
        let headers = std::str::from_utf8(&rest[..head_end])
            .unwrap()
            .split("\r\n")
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').expect("part header");
                (n.to_string(), v.trim().to_string())
            })
            .collect();
        rest = &rest[head_end + 4..];
        let end = find(rest, &close).expect("part not closed by a boundary");
        parts.push(Part {
            headers,
            body: rest[..end].to_vec(),
        });
        rest = &rest[end + close.len()..];
    }
}
