//! Text with `:name` references to a pattern's captures: a header value
//! (`x-movie-name: You are watching ":title"`) or a redirect target
//! (`/posts/:year/:splat`). Parsed once; written per request into any
//! `fmt::Write` (a response head through `Display`, or a String).
//!
//! A `:name` the pattern does not capture stays as written (Cloudflare's
//! rule), so `https://host:8080/` or `a:b` in a value are left alone.
//! Captured values come from the decoded path, so they are %-encoded again
//! as they are written: what they can add is then plain data, never a CR,
//! LF, space, a new query parameter or a different host.

use std::fmt;

use super::pattern::{Captures, Pattern};
use crate::site::path::{path_keeps, percent_encode};

/// Which characters of a captured value may be written as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// In the host of an absolute URL: unreserved characters only.
    Authority,
    /// In a path (or a header value): as [`site::path::path_keeps`](crate::site::path::path_keeps).
    Path,
    /// In a query or fragment: no `&`, `=`, `+` or `#`, which would
    /// change the parameters.
    Query,
}

impl Encoding {
    fn keeps(self, b: u8) -> bool {
        let unreserved = b.is_ascii_alphanumeric() || b"-._~".contains(&b);
        match self {
            Encoding::Authority => unreserved,
            Encoding::Path => path_keeps(b),
            Encoding::Query => unreserved || b"!$'()*,;:@/?".contains(&b),
        }
    }
}

/// Writes `bytes` with every byte `encoding` does not keep as `%XX`.
pub(crate) fn encode(bytes: &[u8], encoding: Encoding, out: &mut dyn fmt::Write) -> fmt::Result {
    percent_encode(bytes, |b| encoding.keeps(b), out)
}

#[derive(Debug)]
enum Piece {
    Literal(Box<str>),
    Capture { index: u8, encoding: Encoding },
}

#[derive(Debug)]
pub(crate) struct Template {
    pieces: Box<[Piece]>,
}

impl Template {
    /// A header value: every capture is encoded as in a path.
    pub(crate) fn value(text: &str, pattern: &Pattern) -> Template {
        Template::parse(text, pattern, false)
    }

    /// A redirect target (a path or an absolute URL): captures are encoded
    /// for the part of the URL they land in, and non-ASCII literal text is
    /// %-encoded so the result is a valid URI.
    pub(crate) fn target(text: &str, pattern: &Pattern) -> Template {
        Template::parse(text, pattern, true)
    }

    fn parse(text: &str, pattern: &Pattern, url: bool) -> Template {
        let (authority_end, query_start) = url_parts(text);
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            if b == b':' && bytes.get(i + 1).is_some_and(u8::is_ascii_alphabetic) {
                let len = bytes[i + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                    .count();
                let name = &text[i + 1..i + 1 + len];
                if let Some(index) = pattern.capture_index(name) {
                    if !literal.is_empty() {
                        pieces.push(Piece::Literal(std::mem::take(&mut literal).into()));
                    }
                    let encoding = if url && i < authority_end {
                        Encoding::Authority
                    } else if url && i > query_start {
                        Encoding::Query
                    } else {
                        Encoding::Path
                    };
                    pieces.push(Piece::Capture {
                        index: index as u8,
                        encoding,
                    });
                    i += 1 + len;
                    continue;
                }
            }
            let ch = text[i..].chars().next().unwrap_or_default();
            if url && !ch.is_ascii() {
                let mut buf = [0; 4];
                let _ = encode(
                    ch.encode_utf8(&mut buf).as_bytes(),
                    Encoding::Authority,
                    &mut literal,
                );
            } else {
                literal.push(ch);
            }
            i += ch.len_utf8();
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal.into()));
        }
        Template {
            pieces: pieces.into_boxed_slice(),
        }
    }

    /// The text as written, when it has no captures.
    pub(crate) fn as_literal(&self) -> Option<&str> {
        match &*self.pieces {
            [] => Some(""),
            [Piece::Literal(text)] => Some(text),
            _ => None,
        }
    }

    /// Whether the template writes nothing with `captures` put in: it is
    /// only captures, and they are empty (a splat can be).
    pub(crate) fn writes_nothing(&self, captures: &Captures<'_>) -> bool {
        self.pieces.iter().all(|piece| match piece {
            Piece::Literal(text) => text.is_empty(),
            Piece::Capture { index, .. } => captures.get(usize::from(*index)).is_empty(),
        })
    }

    /// Whether some captures could make the template write nothing.
    pub(crate) fn may_write_nothing(&self) -> bool {
        self.pieces
            .iter()
            .all(|piece| matches!(piece, Piece::Capture { .. }))
    }

    /// Writes the template with `captures` put in.
    pub(crate) fn write(&self, captures: &Captures<'_>, out: &mut dyn fmt::Write) -> fmt::Result {
        for piece in self.pieces.iter() {
            match piece {
                Piece::Literal(text) => out.write_str(text)?,
                Piece::Capture { index, encoding } => {
                    encode(captures.get(usize::from(*index)), *encoding, out)?
                }
            }
        }
        Ok(())
    }
}

/// Where the authority of an absolute URL ends (0 for a path) and where
/// its query or fragment begins (the text's length if it has none).
fn url_parts(text: &str) -> (usize, usize) {
    let authority_end = match text.find("://") {
        Some(i) => {
            let start = i + 3;
            text[start..]
                .find(['/', '?', '#'])
                .map_or(text.len(), |n| start + n)
        }
        None => 0,
    };
    let query_start = text[authority_end..]
        .find(['?', '#'])
        .map_or(text.len(), |n| authority_end + n);
    (authority_end, query_start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(pattern: &str, target: &str, path: &str, url: bool) -> String {
        let p = Pattern::parse(pattern, false).unwrap();
        let t = Template::parse(target, &p, url);
        let c = p.matches(None, path.as_bytes()).unwrap();
        let mut out = String::new();
        t.write(&c, &mut out).unwrap();
        out
    }

    #[test]
    fn substitutes_known_names_only() {
        assert_eq!(
            render(
                "/blog/:year/*",
                "/news/:year/:splat/:other",
                "/blog/2024/a/b",
                true
            ),
            "/news/2024/a/b/:other"
        );
        assert_eq!(
            render(
                "/movies/:title",
                "You are watching \":title\"",
                "/movies/up",
                false
            ),
            "You are watching \"up\""
        );
        assert_eq!(
            render("/a/:id", "/b/:id_2/:idx", "/a/7", true),
            "/b/:id_2/:idx"
        );
        assert_eq!(
            render("/a/:id", "https://h:8080/:id", "/a/7", true),
            "https://h:8080/7"
        );
    }

    #[test]
    fn captures_are_encoded_for_where_they_land() {
        let path = "/go/a b\r\n&x=1#?é\\";
        assert_eq!(
            render("/go/*", "/to/:splat", path, true),
            "/to/a%20b%0D%0A&x=1%23%3F%C3%A9%5C"
        );
        assert_eq!(
            render("/go/*", "/to?q=:splat", path, true),
            "/to?q=a%20b%0D%0A%26x%3D1%23?%C3%A9%5C"
        );
        assert_eq!(
            render(
                "/go/*",
                "https://:splat.example.com/",
                "/go/evil.com/x",
                true
            ),
            "https://evil.com%2Fx.example.com/"
        );
        assert_eq!(
            render("/go/*", "https://example.com/:splat", "/go/a/b", true),
            "https://example.com/a/b"
        );
        assert_eq!(
            render("/go/*", "v=:splat", "/go/a\r\nb", false),
            "v=a%0D%0Ab"
        );
    }

    #[test]
    fn non_ascii_literals_in_targets_are_encoded() {
        assert_eq!(render("/a", "/café", "/a", true), "/caf%C3%A9");
        assert_eq!(render("/a", "café", "/a", false), "café");
    }

    #[test]
    fn literal_templates() {
        let p = Pattern::parse("/a/:x", false).unwrap();
        assert_eq!(Template::value("no refs", &p).as_literal(), Some("no refs"));
        assert_eq!(Template::value("x :x", &p).as_literal(), None);
        assert!(!Template::value("x :x", &p).may_write_nothing());
        let splat = Pattern::parse("/a/*", false).unwrap();
        let t = Template::value(":splat", &splat);
        assert!(t.may_write_nothing());
        assert!(t.writes_nothing(&splat.matches(None, b"/a/").unwrap()));
        assert!(!t.writes_nothing(&splat.matches(None, b"/a/b").unwrap()));
    }
}
