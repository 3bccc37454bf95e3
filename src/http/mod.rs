//! HTTP as data: requests parsed, responses as a structured head and the
//! encodings of it; no socket I/O anywhere below here.

pub mod body;
pub mod conditional;
#[cfg(any(feature = "http2", feature = "http3"))]
pub mod fields;
pub mod head;
pub mod limits;
pub mod parse;
pub mod range;
pub mod response;
pub mod status;

/// What a client speaking HTTP/2 sends first (RFC 9113 §3.4).
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// RFC 9110 §5.6.2: whether `name` is a token (what a field name must be).
pub fn is_token(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b))
}

/// `s` as the inside of a quoted-string (RFC 9110 §5.6.4): `"` and `\`
/// escaped. A challenge's realm is written so.
pub fn escape_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert!(is_token(b"X-Frame-Options"));
        assert!(is_token(b"a!#$%&'*+-.^_`|~9"));
        for bad in ["", "a b", "a:b", "a\r", "\u{e9}", "a(b)", "a/b"] {
            assert!(!is_token(bad.as_bytes()), "{bad:?}");
        }
    }

    #[test]
    fn quoted_string_insides() {
        assert_eq!(escape_quoted("/admin/*"), "/admin/*");
        assert_eq!(escape_quoted(r#"/a"b\c"#), r#"/a\"b\\c"#);
    }
}
