//! Request-target -> a path relative to the site root, or the reason not.
//!
//! Decoding happens exactly once, here, and the result is normalised before
//! it ever reaches the file system; `open.rs` then resolves it with the
//! kernel's RESOLVE_BENEATH so that symlinks cannot lead out either.

use std::borrow::Cow;
use std::fmt;

#[derive(Debug, PartialEq, Eq)]
pub enum PathError {
    /// Malformed target, bad %-escape, NUL byte, or `..` above the root.
    BadRequest,
    /// A hidden component (`.name`), which is never served.
    Hidden,
}

/// A normalised path under the root. It borrows from the request-target
/// when the target is already normal (no escapes, no `.`, `..` or empty
/// components), which is nearly always.
#[derive(Debug, PartialEq, Eq)]
pub struct SitePath<'a> {
    /// Components joined by `/`, no leading or trailing slash; empty for the root.
    pub rel: Cow<'a, [u8]>,
    /// Whether the request path ended in `/` (it names a directory).
    pub trailing_slash: bool,
    /// The query string, as sent, without the `?`.
    pub query: Option<&'a str>,
}

impl<'a> SitePath<'a> {
    pub fn from_target(target: &'a str) -> Result<SitePath<'a>, PathError> {
        let path_and_query = origin_form(target).ok_or(PathError::BadRequest)?;
        let (raw_path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path_and_query, None),
        };
        let (rel, trailing_slash) = match already_normal(raw_path.as_bytes()) {
            Some(rel) => (Cow::Borrowed(rel), raw_path.ends_with('/')),
            None => {
                let (rel, trailing_slash) = normalise(raw_path.as_bytes())?;
                (Cow::Owned(rel), trailing_slash)
            }
        };
        let hidden = rel
            .split(|&b| b == b'/')
            .enumerate()
            .any(|(i, c)| c.starts_with(b".") && !(i == 0 && c == b".well-known"));
        if hidden {
            return Err(PathError::Hidden);
        }
        Ok(SitePath {
            rel,
            trailing_slash,
            query,
        })
    }

    /// The URL path of this directory (`/a/b/`), for listings.
    pub fn directory_url_without_query(&self) -> String {
        self.as_directory(None).to_string()
    }

    /// The URL of this path as a directory (`/a/b/`), query kept: the
    /// target of the redirect for `/a/b`. Built from the normalised path,
    /// never the raw target, so it cannot become `//host/...`.
    pub fn directory_url(&self) -> String {
        self.as_directory(self.query).to_string()
    }

    fn as_directory<'q>(&'q self, query: Option<&'q str>) -> PathUrl<'q> {
        PathUrl {
            rel: &self.rel,
            slash: true,
            query,
        }
    }
}

/// The URL of a site-relative path (`rel` percent-encoded after `/`, then
/// `/` if `slash` and `rel` is not the root, then `?query`), written
/// where it goes: a Location built with it allocates nothing.
pub struct PathUrl<'a> {
    pub rel: &'a [u8],
    pub slash: bool,
    pub query: Option<&'a str>,
}

impl fmt::Display for PathUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("/")?;
        percent_encode(self.rel, path_keeps, f)?;
        if self.slash && !self.rel.is_empty() {
            f.write_str("/")?;
        }
        match self.query {
            Some(q) => write!(f, "?{q}"),
            None => Ok(()),
        }
    }
}

/// The authority of an absolute-form target (`http://host:port/x` ->
/// `host:port`), which stands in for the Host header.
pub fn authority(target: &str) -> Option<&str> {
    if target.starts_with('/') {
        return None;
    }
    let rest = strip_prefix_ignore_case(target, "http://")
        .or_else(|| strip_prefix_ignore_case(target, "https://"))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The path-and-query of an origin-form or absolute-form target.
fn origin_form(target: &str) -> Option<&str> {
    if target.starts_with('/') {
        return Some(target);
    }
    let rest = strip_prefix_ignore_case(target, "http://")
        .or_else(|| strip_prefix_ignore_case(target, "https://"))?;
    match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => Some(&rest[i..]),
        Some(_) => None,
        None => Some("/"),
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The path without its leading and trailing `/`, when decoding and
/// normalising would not change it.
fn already_normal(raw_path: &[u8]) -> Option<&[u8]> {
    let inner = raw_path.strip_prefix(b"/")?;
    let rel = inner.strip_suffix(b"/").unwrap_or(inner);
    if rel.is_empty() {
        return Some(rel);
    }
    let plain = !rel.iter().any(|&b| b == b'%' || b == 0)
        && rel
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..");
    plain.then_some(rel)
}

/// Decodes %-escapes once and resolves empty, `.` and `..` components;
/// `..` above the root, a bad escape or a NUL byte is refused. Also says
/// whether the decoded path ends in `/`.
fn normalise(raw_path: &[u8]) -> Result<(Vec<u8>, bool), PathError> {
    let decoded = percent_decode(raw_path).ok_or(PathError::BadRequest)?;
    if decoded.contains(&0) {
        return Err(PathError::BadRequest);
    }
    let trailing_slash = decoded.ends_with(b"/");
    let mut parts: Vec<&[u8]> = Vec::new();
    for component in decoded.split(|&b| b == b'/') {
        match component {
            b"" | b"." => {}
            b".." => {
                parts.pop().ok_or(PathError::BadRequest)?;
            }
            c => parts.push(c),
        }
    }
    Ok((parts.join(&b'/'), trailing_slash))
}

/// Decodes every %-escape; None if one is malformed.
pub fn percent_decode(input: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%' {
            let hi = hex_value(*input.get(i + 1)?)?;
            let lo = hex_value(*input.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(input[i]);
            i += 1;
        }
    }
    Some(out)
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Percent-encodes everything but unreserved characters, sub-delims that are
/// safe in a path, `:`, `@` and `/`.
pub fn percent_encode_path(bytes: &[u8], out: &mut String) {
    // Writing to a String cannot fail.
    let _ = percent_encode(bytes, path_keeps, out);
}

/// Whether a URL path keeps `b` as it is: RFC 3986's unreserved
/// characters, sub-delims, `:`, `@` and `/`.
pub fn path_keeps(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b)
}

/// Writes `bytes` with every byte `keeps` refuses as `%XX`: the one
/// percent-encoder that paths, listings, symlink redirects and `_redirects`
/// targets share, each with its own set of kept bytes.
pub fn percent_encode(
    bytes: &[u8],
    keeps: impl Fn(u8) -> bool,
    out: &mut dyn fmt::Write,
) -> fmt::Result {
    let mut rest = bytes;
    while !rest.is_empty() {
        let run = rest.iter().take_while(|&&b| keeps(b)).count();
        // Kept bytes are ASCII, so the run is always text.
        out.write_str(std::str::from_utf8(&rest[..run]).unwrap_or_default())?;
        if let Some(&b) = rest.get(run) {
            write!(out, "%{b:02X}")?;
            rest = &rest[run + 1..];
        } else {
            rest = &[];
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(target: &str) -> Vec<u8> {
        SitePath::from_target(target).unwrap().rel.into_owned()
    }

    #[test]
    fn path_urls() {
        let url = |rel: &[u8], slash, query| PathUrl { rel, slash, query }.to_string();
        assert_eq!(url(b"", true, None), "/");
        assert_eq!(url(b"", true, Some("x=1")), "/?x=1");
        assert_eq!(url(b"a b/c", false, None), "/a%20b/c");
        assert_eq!(url(b"a/b", true, Some("q")), "/a/b/?q");
    }

    #[test]
    fn normalises() {
        assert_eq!(rel("/"), b"");
        assert_eq!(rel("/a/b.html"), b"a/b.html");
        assert_eq!(rel("//a///./b/../c"), b"a/c");
        assert_eq!(rel("/a%20b"), b"a b");
        assert_eq!(rel("/a%2fb"), b"a/b");
        assert_eq!(rel("/a\\b"), b"a\\b");
        assert_eq!(rel("/x?y=/../.."), b"x");
        assert_eq!(rel("http://example.com/p/q"), b"p/q");
        assert_eq!(rel("HTTP://example.com"), b"");
    }

    #[test]
    fn decodes_once() {
        assert_eq!(rel("/%252e%252e/x"), b"%2e%2e/x");
    }

    #[test]
    fn refuses_escapes() {
        for t in [
            "/..",
            "/../etc/passwd",
            "/%2e%2e/x",
            "/a/../../x",
            "/..%2fx",
            "/%2E%2E%2F",
        ] {
            assert_eq!(SitePath::from_target(t), Err(PathError::BadRequest), "{t}");
        }
    }

    #[test]
    fn refuses_bad_input() {
        for t in [
            "/a%00b",
            "/%zz",
            "/%4",
            "*",
            "a/b",
            "ftp://x/y",
            "http://host?x",
        ] {
            assert_eq!(SitePath::from_target(t), Err(PathError::BadRequest), "{t}");
        }
    }

    #[test]
    fn hides_dotfiles_but_not_well_known() {
        assert_eq!(
            SitePath::from_target("/.git/config"),
            Err(PathError::Hidden)
        );
        assert_eq!(
            SitePath::from_target("/a/.htaccess"),
            Err(PathError::Hidden)
        );
        assert_eq!(SitePath::from_target("/%2eenv"), Err(PathError::Hidden));
        assert_eq!(
            SitePath::from_target("/a/.well-known/x"),
            Err(PathError::Hidden)
        );
        assert_eq!(rel("/.well-known/acme"), b".well-known/acme");
    }

    #[test]
    fn directory_url() {
        let p = SitePath::from_target("//evil.com/dir?x=1").unwrap();
        assert_eq!(p.directory_url(), "/evil.com/dir/?x=1");
        let p = SitePath::from_target("/a%20b").unwrap();
        assert_eq!(p.directory_url(), "/a%20b/");
        assert!(SitePath::from_target("/a").unwrap().directory_url() == "/a/");
    }
}
