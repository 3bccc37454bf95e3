//! Redirects through symlinks, fnord style: a (dangling) symlink whose
//! target is a URL or an absolute path answers with a 301 there.

use super::path::percent_encode_path;

/// What a redirecting symlink points to.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// `=URL`: exactly this URL, whatever followed the link in the path.
    Exact(String),
    /// A URL or absolute path to which the rest of the request path is appended.
    Prefix(String),
}

/// The redirect a symlink's target text asks for, if it asks for one.
pub fn parse_target(link: &[u8]) -> Option<Target> {
    let (exact, url) = match link.strip_prefix(b"=") {
        Some(rest) => (true, rest),
        None => (false, link),
    };
    let is_redirect =
        url.starts_with(b"http://") || url.starts_with(b"https://") || url.starts_with(b"/");
    if !is_redirect {
        return None;
    }
    let url = encode_uri(url);
    Some(if exact {
        Target::Exact(url)
    } else {
        Target::Prefix(url)
    })
}

/// The Location for a request that reached the link at some path, with
/// `rest` (decoded components after the link, `/`-joined) still to go.
pub fn location(target: &Target, rest: &[u8], trailing_slash: bool, query: Option<&str>) -> String {
    let base = match target {
        Target::Exact(url) => return url.clone(),
        Target::Prefix(url) => url,
    };
    let mut out = base.clone();
    if !rest.is_empty() {
        if !out.ends_with('/') {
            out.push('/');
        }
        percent_encode_path(rest, &mut out);
        if trailing_slash {
            out.push('/');
        }
    }
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// Keeps a link's text a valid URI reference: bytes that may not appear in
/// a URI (controls, space, non-ASCII, `"<>\^`{|}`) are percent-encoded, so
/// no CR, LF or space can reach the Location header.
fn encode_uri(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let keeps = |b: u8| b > b' ' && b < 0x7f && !b"\"<>\\^`{|}".contains(&b);
    // Writing to a String cannot fail.
    let _ = super::path::percent_encode(bytes, keeps, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(
            parse_target(b"http://a.test/"),
            Some(Target::Prefix("http://a.test/".into()))
        );
        assert_eq!(
            parse_target(b"/elsewhere"),
            Some(Target::Prefix("/elsewhere".into()))
        );
        assert_eq!(
            parse_target(b"=https://a.test/x"),
            Some(Target::Exact("https://a.test/x".into()))
        );
        assert_eq!(parse_target(b"../sibling"), None);
        assert_eq!(parse_target(b"file.html"), None);
        assert_eq!(parse_target(b"ftp://x"), None);
    }

    #[test]
    fn locations() {
        let site = Target::Prefix("http://www.baz.test/".into());
        assert_eq!(
            location(&site, b"blub.html", false, None),
            "http://www.baz.test/blub.html"
        );
        assert_eq!(location(&site, b"", false, None), "http://www.baz.test/");
        assert_eq!(
            location(&site, b"a b/c", true, Some("q=1")),
            "http://www.baz.test/a%20b/c/?q=1"
        );
        let dir = Target::Prefix("/new".into());
        assert_eq!(location(&dir, b"x", false, None), "/new/x");
        let exact = Target::Exact("http://a.test/only".into());
        assert_eq!(
            location(&exact, b"ignored", false, Some("q")),
            "http://a.test/only"
        );
    }

    #[test]
    fn no_header_injection() {
        let t = parse_target(b"http://a.test/x\r\nSet-Cookie: y z").unwrap();
        let Target::Prefix(url) = t else { panic!() };
        assert_eq!(url, "http://a.test/x%0D%0ASet-Cookie:%20y%20z");
    }
}
