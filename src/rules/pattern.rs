//! A URL pattern of `_headers` and `_redirects`: literal text, `:name`
//! placeholders and at most one `*` splat, optionally behind
//! `https://host` (in `_headers`).
//!
//! Cloudflare Pages' semantics: a splat matches any text, possibly empty,
//! `/` included, and may stand anywhere (`/*.jpg` matches `/a/b.jpg`); a
//! placeholder (`:` then a letter, then letters, digits and `_`) matches one
//! or more characters up to the next `/` (in a host, the next `.`). The
//! whole path must match, case-sensitively; a host matches without its port
//! and regardless of case.
//!
//! One restriction Cloudflare does not have: a placeholder must begin a
//! segment (`/:slug.html` is fine, `/v:version` is not) and be the segment's
//! only placeholder or splat. That makes every match unique and found in one
//! pass (the text before the splat from the left, the text after it from the
//! right), so matching is linear and never backtracks.

/// Most placeholders in one pattern (the splat comes on top).
pub const MAX_PLACEHOLDERS: usize = 8;

/// Most captured values of one match: the placeholders and the splat.
pub const MAX_CAPTURES: usize = MAX_PLACEHOLDERS + 1;

#[derive(Debug)]
enum Token {
    Literal(Box<[u8]>),
    /// A placeholder or the splat, with its capture index.
    Placeholder(u8),
    Splat(u8),
}

/// The host or the path of a pattern.
#[derive(Debug)]
struct Part {
    tokens: Box<[Token]>,
    /// What a placeholder stops at: `/` in a path, `.` in a host.
    delimiter: u8,
    /// Hosts compare regardless of case (their literals are stored lower-case).
    ignore_case: bool,
}

#[derive(Debug)]
pub struct Pattern {
    host: Option<Part>,
    path: Part,
    /// The name of each capture, by index; the splat's is `splat`.
    names: Box<[Box<str>]>,
}

/// The values a match captured, as slices of the host and path matched.
#[derive(Clone, Copy, Debug)]
pub struct Captures<'a> {
    values: [&'a [u8]; MAX_CAPTURES],
}

impl<'a> Captures<'a> {
    /// The value of capture `index` (empty if the pattern has none there).
    pub fn get(&self, index: usize) -> &'a [u8] {
        self.values.get(index).copied().unwrap_or_default()
    }
}

impl Pattern {
    /// Parses a pattern: a path starting with `/`, or, when `allow_host`,
    /// also `https://host/path`. A `#fragment` is ignored (browsers never
    /// send one). The error says what is wrong, for the file's message.
    pub fn parse(text: &str, allow_host: bool) -> Result<Pattern, &'static str> {
        let text = text.split('#').next().unwrap_or_default();
        let mut names: Vec<Box<str>> = Vec::new();
        let mut splat = false;
        let (host, path) = if let Some(rest) = strip_prefix_ignore_case(text, "https://") {
            if !allow_host {
                return Err("the source must be a path starting with /");
            }
            let (host, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, "/"),
            };
            (Some(parse_host(host, &mut names, &mut splat)?), path)
        } else if strip_prefix_ignore_case(text, "http://").is_some() {
            return Err("an absolute URL pattern must begin with https://");
        } else {
            (None, text)
        };
        if !path.starts_with('/') {
            return Err("a pattern must be a path starting with / (or an https:// URL)");
        }
        if path.contains('?') {
            return Err("a query string in a pattern is not supported");
        }
        let path = parse_part(path.as_bytes(), b'/', &mut names, &mut splat)?;
        Ok(Pattern {
            host,
            path,
            names: names.into_boxed_slice(),
        })
    }

    /// The index of the capture called `name`, if the pattern has one.
    pub fn capture_index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| &**n == name)
    }

    /// A path the pattern matches, each placeholder and the splat standing
    /// for `x` (`/assets/*` -> `/assets/x`); None for a pattern with a host,
    /// which matches no path alone.
    pub fn sample_path(&self) -> Option<Vec<u8>> {
        if self.host.is_some() {
            return None;
        }
        let mut path = Vec::new();
        for token in &self.path.tokens {
            match token {
                Token::Literal(bytes) => path.extend_from_slice(bytes),
                Token::Placeholder(_) | Token::Splat(_) => path.push(b'x'),
            }
        }
        Some(path)
    }

    /// Whether the pattern names a host (and so needs one to match).
    pub fn has_host(&self) -> bool {
        self.host.is_some()
    }

    /// Matches a request: `host` as sent in the Host header (a port and a
    /// final dot are ignored), `path` decoded and normalised, starting with
    /// `/`. Allocates nothing.
    pub fn matches<'a>(&self, host: Option<&'a str>, path: &'a [u8]) -> Option<Captures<'a>> {
        let mut captures = Captures {
            values: [&[][..]; MAX_CAPTURES],
        };
        if let Some(part) = &self.host {
            let host = host_name(host?);
            part.matches(host.as_bytes(), &mut captures.values)
                .then_some(())?;
        }
        self.path
            .matches(path, &mut captures.values)
            .then_some(captures)
    }
}

fn parse_host(
    host: &str,
    names: &mut Vec<Box<str>>,
    splat: &mut bool,
) -> Result<Part, &'static str> {
    if host.is_empty() {
        return Err("an https:// pattern needs a host");
    }
    let bytes = host.as_bytes();
    if host.starts_with('[') {
        // An IPv6 literal: all text, no placeholders.
        if !host.ends_with(']') {
            return Err("a port in a pattern is not supported");
        }
        return Ok(Part {
            tokens: Box::new([Token::Literal(
                host.to_ascii_lowercase().into_bytes().into(),
            )]),
            delimiter: b'.',
            ignore_case: true,
        });
    }
    let port = bytes
        .windows(2)
        .any(|w| w[0] == b':' && w[1].is_ascii_digit());
    if port || host.ends_with(':') {
        return Err("a port in a pattern is not supported");
    }
    if host.contains(['@', '?', '\\']) {
        return Err("not a host name");
    }
    let mut part = parse_part(bytes, b'.', names, splat)?;
    part.ignore_case = true;
    for token in part.tokens.iter_mut() {
        if let Token::Literal(lit) = token {
            lit.make_ascii_lowercase();
        }
    }
    Ok(part)
}

/// Splits a host or path into tokens, checking the placeholder and splat
/// rules. Path literals are %-decoded, as the paths they meet are.
fn parse_part(
    text: &[u8],
    delimiter: u8,
    names: &mut Vec<Box<str>>,
    splat: &mut bool,
) -> Result<Part, &'static str> {
    let mut tokens = Vec::new();
    let mut literal = Vec::new();
    // Whether the current segment holds a placeholder, after which it may
    // hold only literal text.
    let mut placeholder_segment = false;
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        if b == b'*' {
            if *splat {
                return Err("more than one * in a pattern");
            }
            if placeholder_segment {
                return Err("a * in the same segment as a placeholder");
            }
            *splat = true;
            flush(&mut literal, &mut tokens, delimiter);
            tokens.push(Token::Splat(new_capture("splat", names)?));
            i += 1;
            continue;
        }
        if b == b':' && text.get(i + 1).is_some_and(u8::is_ascii_alphabetic) {
            let at_segment_start = if i == 0 {
                delimiter == b'.'
            } else {
                text[i - 1] == delimiter
            };
            if !at_segment_start {
                return Err("a placeholder must begin a segment (/:name)");
            }
            let len = text[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            let name = std::str::from_utf8(&text[i + 1..i + 1 + len]).unwrap_or_default();
            flush(&mut literal, &mut tokens, delimiter);
            tokens.push(Token::Placeholder(new_capture(name, names)?));
            placeholder_segment = true;
            i += 1 + len;
            continue;
        }
        if b == delimiter {
            placeholder_segment = false;
        }
        literal.push(b);
        i += 1;
    }
    flush(&mut literal, &mut tokens, delimiter);
    Ok(Part {
        tokens: tokens.into_boxed_slice(),
        delimiter,
        ignore_case: false,
    })
}

fn new_capture(name: &str, names: &mut Vec<Box<str>>) -> Result<u8, &'static str> {
    if names.iter().any(|n| &**n == name) {
        return Err("a placeholder name used twice in a pattern");
    }
    let placeholders = names.iter().filter(|n| &***n != "splat").count();
    if name != "splat" && placeholders >= MAX_PLACEHOLDERS {
        return Err("more than 8 placeholders in a pattern");
    }
    names.push(name.into());
    Ok((names.len() - 1) as u8)
}

fn flush(literal: &mut Vec<u8>, tokens: &mut Vec<Token>, delimiter: u8) {
    if literal.is_empty() {
        return;
    }
    let bytes = if delimiter == b'/' {
        percent_decode_lenient(literal)
    } else {
        std::mem::take(literal)
    };
    literal.clear();
    tokens.push(Token::Literal(bytes.into_boxed_slice()));
}

/// Decodes the valid %-escapes and keeps anything else as written: a rule
/// for `/100%` should still match the path `/100%`.
fn percent_decode_lenient(input: &[u8]) -> Vec<u8> {
    let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        match (b, hex(input.get(i + 1)), hex(input.get(i + 2))) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi << 4 | lo) as u8);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

impl Part {
    /// Matches the whole of `input`, filling the captures of this part.
    fn matches<'a>(&self, input: &'a [u8], captures: &mut [&'a [u8]; MAX_CAPTURES]) -> bool {
        let splat_at = self
            .tokens
            .iter()
            .position(|t| matches!(t, Token::Splat(_)));
        let (prefix, suffix) = match splat_at {
            Some(i) => (&self.tokens[..i], &self.tokens[i + 1..]),
            None => (&self.tokens[..], &[][..]),
        };
        let Some(start) = self.forward(prefix, input, captures) else {
            return false;
        };
        let rest = &input[start..];
        match splat_at.map(|i| &self.tokens[i]) {
            Some(&Token::Splat(index)) => match self.backward(suffix, rest, captures) {
                Some(end) => {
                    captures[usize::from(index)] = &rest[..end];
                    true
                }
                None => false,
            },
            _ => rest.is_empty(),
        }
    }

    /// Matches `tokens` at the start of `input`; returns where they end.
    fn forward<'a>(
        &self,
        tokens: &[Token],
        input: &'a [u8],
        captures: &mut [&'a [u8]; MAX_CAPTURES],
    ) -> Option<usize> {
        let mut pos = 0;
        for (i, token) in tokens.iter().enumerate() {
            match token {
                Token::Literal(lit) => {
                    let here = input.get(pos..pos + lit.len())?;
                    self.same(here, lit).then_some(())?;
                    pos += lit.len();
                }
                Token::Placeholder(index) => {
                    let segment_end = input[pos..]
                        .iter()
                        .position(|&b| b == self.delimiter)
                        .map_or(input.len(), |n| pos + n);
                    // The literal text after a placeholder, up to the end
                    // of its segment, is not part of the value.
                    let tail = match tokens.get(i + 1) {
                        Some(Token::Literal(lit)) => lit
                            .iter()
                            .position(|&b| b == self.delimiter)
                            .unwrap_or(lit.len()),
                        _ => 0,
                    };
                    let end = segment_end.checked_sub(tail).filter(|&end| end > pos)?;
                    captures[usize::from(*index)] = &input[pos..end];
                    pos = end;
                }
                Token::Splat(_) => return None,
            }
        }
        Some(pos)
    }

    /// Matches `tokens` at the end of `input`; returns where they begin.
    fn backward<'a>(
        &self,
        tokens: &[Token],
        input: &'a [u8],
        captures: &mut [&'a [u8]; MAX_CAPTURES],
    ) -> Option<usize> {
        let mut end = input.len();
        for token in tokens.iter().rev() {
            match token {
                Token::Literal(lit) => {
                    let start = end.checked_sub(lit.len())?;
                    self.same(&input[start..end], lit).then_some(())?;
                    end = start;
                }
                Token::Placeholder(index) => {
                    // A placeholder begins its segment, so it reaches back
                    // to the delimiter before it.
                    let start = input[..end]
                        .iter()
                        .rposition(|&b| b == self.delimiter)
                        .map_or(0, |n| n + 1);
                    if start == end {
                        return None;
                    }
                    captures[usize::from(*index)] = &input[start..end];
                    end = start;
                }
                Token::Splat(_) => return None,
            }
        }
        Some(end)
    }

    fn same(&self, input: &[u8], literal: &[u8]) -> bool {
        if self.ignore_case {
            input.eq_ignore_ascii_case(literal)
        } else {
            input == literal
        }
    }
}

/// The host name of a Host header value: without a port or a final dot.
fn host_name(host: &str) -> &str {
    let name = if host.starts_with('[') {
        host.find(']').map_or(host, |i| &host[..=i])
    } else {
        host.split(':').next().unwrap_or_default()
    };
    name.strip_suffix('.').unwrap_or(name)
}

pub(crate) fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> Pattern {
        Pattern::parse(text, true).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// The captures of `text` matching `path`, by name, as strings.
    fn captures(text: &str, host: Option<&str>, path: &str) -> Option<Vec<(String, String)>> {
        let p = pattern(text);
        let c = p.matches(host, path.as_bytes())?;
        Some(
            p.names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    (
                        n.to_string(),
                        String::from_utf8_lossy(c.get(i)).into_owned(),
                    )
                })
                .collect(),
        )
    }

    fn matches(text: &str, path: &str) -> bool {
        pattern(text).matches(None, path.as_bytes()).is_some()
    }

    fn pairs(v: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
        Some(
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        )
    }

    #[test]
    fn literal_paths_match_exactly() {
        assert!(matches("/secure/page", "/secure/page"));
        assert!(!matches("/secure/page", "/secure/page/"));
        assert!(!matches("/secure/page", "/secure/pag"));
        assert!(!matches("/secure/page", "/Secure/page"));
        assert!(matches("/", "/"));
        assert!(!matches("/", "/x"));
    }

    #[test]
    fn splat_matches_any_rest_including_slashes_and_nothing() {
        assert_eq!(
            captures("/static/*", None, "/static/a/b.css"),
            pairs(&[("splat", "a/b.css")])
        );
        assert_eq!(
            captures("/static/*", None, "/static/"),
            pairs(&[("splat", "")])
        );
        assert!(!matches("/static/*", "/static"));
        assert!(matches("/*", "/"));
        assert!(matches("/*", "/anything/at/all"));
    }

    #[test]
    fn splat_may_stand_inside_a_segment() {
        // Cloudflare's detach example.
        assert_eq!(
            captures("/*.jpg", None, "/images/cat.jpg"),
            pairs(&[("splat", "images/cat")])
        );
        assert!(!matches("/*.jpg", "/cat.png"));
        assert!(!matches("/*.jpg", "/.jp"));
        assert!(matches("/a*a", "/aa"));
        assert!(!matches("/a*a", "/a"));
        assert_eq!(
            captures("/a/*/z", None, "/a/b/c/z"),
            pairs(&[("splat", "b/c")])
        );
    }

    #[test]
    fn placeholders_take_one_segment() {
        assert_eq!(
            captures("/news/:year/:month/:slug", None, "/news/2024/05/hello"),
            pairs(&[("year", "2024"), ("month", "05"), ("slug", "hello")])
        );
        assert!(!matches("/news/:year", "/news/2024/05"));
        assert!(!matches("/news/:year", "/news/"));
        assert!(!matches("/news/:year/x", "/news//x"));
        assert_eq!(
            captures("/posts/:slug.html", None, "/posts/a.b.html"),
            pairs(&[("slug", "a.b")])
        );
        assert!(!matches("/posts/:slug.html", "/posts/.html"));
        assert!(!matches("/posts/:slug.html", "/posts/a.htm"));
    }

    #[test]
    fn placeholders_and_splat_together() {
        assert_eq!(
            captures("/:lang/*/:file.md", None, "/en/a/b/readme.md"),
            pairs(&[("lang", "en"), ("splat", "a/b"), ("file", "readme")])
        );
        assert_eq!(
            captures("/:lang/*/:file.md", None, "/en//readme.md"),
            pairs(&[("lang", "en"), ("splat", ""), ("file", "readme")])
        );
        assert!(!matches("/:lang/*/:file.md", "/en/readme.md"));
        assert!(!matches("/*/:file", "/x/"));
    }

    #[test]
    fn literals_are_percent_decoded_like_paths() {
        assert!(matches("/some%20page", "/some page"));
        assert!(matches("/100%", "/100%"));
        assert!(matches("/a%3Ab", "/a:b"));
    }

    #[test]
    fn hosts_match_without_port_or_case() {
        let p = pattern("https://myproject.pages.dev/*");
        assert!(p.has_host());
        for host in [
            "myproject.pages.dev",
            "MyProject.Pages.Dev:8443",
            "myproject.pages.dev.",
        ] {
            assert!(p.matches(Some(host), b"/home").is_some(), "{host}");
        }
        assert!(p.matches(Some("other.dev"), b"/home").is_none());
        assert!(p.matches(None, b"/home").is_none());
        assert!(pattern("https://[::1]/x")
            .matches(Some("[::1]:80"), b"/x")
            .is_some());
        assert!(pattern("https://example.com")
            .matches(Some("example.com"), b"/")
            .is_some());
        assert_eq!(
            captures(
                "https://:project.pages.dev/*",
                Some("staging.pages.dev"),
                "/x"
            ),
            pairs(&[("project", "staging"), ("splat", "x")])
        );
        assert!(pattern("https://:p.pages.dev/")
            .matches(Some("a.b.pages.dev"), b"/")
            .is_none());
    }

    #[test]
    fn malformed_patterns() {
        for (text, host_ok) in [
            ("/a/*/b/*", true),
            ("https://*.example.com/*", true),
            ("/v:version", true),
            ("/:a:b", true),
            ("/:a*", true),
            ("/:a/:a", true),
            ("/*/:splat", true),
            ("/:a/:b/:c/:d/:e/:f/:g/:h/:i", true),
            ("relative", true),
            ("", true),
            ("http://example.com/x", true),
            ("https://example.com:8443/x", true),
            ("https:///x", true),
            ("https://example.com/x", false),
            ("/a?b=c", true),
        ] {
            assert!(Pattern::parse(text, host_ok).is_err(), "{text}");
        }
        // Eight placeholders and a splat are fine; a colon before a digit is text.
        assert!(Pattern::parse("/:a/:b/:c/:d/:e/:f/:g/:h/*", false).is_ok());
        assert!(matches("/a:1", "/a:1"));
        assert!(matches("/x#frag", "/x"));
    }
}
