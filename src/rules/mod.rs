//! The `_headers` and `_redirects` files of a site (the Netlify / Cloudflare
//! Pages formats), parsed once when the file is read and matched per request
//! without allocating.
//!
//! [`pattern`] is the URL pattern both files share (literal text, `:name`
//! placeholders, one `*` splat); `template` puts captured values back
//! into a header value or a redirect target; [`headers`] and
//! [`redirects`] are the two files; [`locks`] holds
//! what `_headers`' `Basic-Auth` lines protect. Nothing here does I/O: the caller reads the file,
//! hands its bytes to [`HeaderRules::parse`](crate::rules::HeaderRules::parse) or
//! [`RedirectRules::parse`](crate::rules::RedirectRules::parse) with a callback for the messages,
//! and asks for matches.
//!
//! A malformed line is reported once (line number and reason), skipped, and
//! the rest of the file applies. Past [`MAX_RULES`] rules or [`MAX_BYTES`]
//! bytes the rest of the file is ignored, with one message.

pub mod headers;
pub mod locks;
pub mod pattern;
pub mod redirects;
mod template;

pub use headers::HeaderRules;
pub use redirects::RedirectRules;

/// Most rules (header blocks, redirect lines) one file may hold.
pub const MAX_RULES: usize = 1000;

/// Most bytes of a file that are read.
pub const MAX_BYTES: usize = 64 * 1024;

/// Where messages about a file go: the 1-based line number and what is
/// wrong with it. The caller adds the file's name.
pub type Warn<'w> = &'w mut dyn FnMut(usize, &str);

/// What is said of a line that is not UTF-8.
const NOT_TEXT: &str = "not UTF-8 text; line ignored";

/// The lines of a rules file within [`MAX_BYTES`], numbered from 1, without
/// their line ending. A line that is not UTF-8 is reported and skipped.
struct Lines<'t> {
    rest: &'t [u8],
    number: usize,
    /// The line number where the size limit cut the file, if it did.
    cut_at: Option<usize>,
}

impl<'t> Lines<'t> {
    fn new(text: &'t [u8]) -> Lines<'t> {
        let (rest, cut_at) = if text.len() > MAX_BYTES {
            // The line that straddles the limit goes with the ignored rest.
            let kept = &text[..MAX_BYTES];
            let end = kept.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let lines_kept = kept[..end].iter().filter(|&&b| b == b'\n').count();
            (&text[..end], Some(lines_kept + 1))
        } else {
            (text, None)
        };
        Lines {
            rest,
            number: 0,
            cut_at,
        }
    }

    /// The next line that is text, reporting those that are not.
    fn next_text(&mut self, warn: &mut dyn FnMut(usize, &str)) -> Option<(usize, &'t str)> {
        loop {
            match self.next_line()? {
                (number, Ok(text)) => return Some((number, text)),
                (number, Err(_)) => warn(number, NOT_TEXT),
            }
        }
    }

    /// The next line: its text, or its bytes when it is not UTF-8.
    fn next_line(&mut self) -> Option<(usize, Result<&'t str, &'t [u8]>)> {
        if self.rest.is_empty() {
            return None;
        }
        let (line, rest) = match self.rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
            None => (self.rest, &[][..]),
        };
        self.rest = rest;
        self.number += 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        Some((self.number, std::str::from_utf8(line).map_err(|_| line)))
    }
}

/// Reports, once, that the rest of a file is ignored: after the rule
/// limit was reached at `line`, or (when `line` is None) after the size
/// limit, if the file was cut.
fn report_limit(lines: &Lines<'_>, rule_limit_at: Option<usize>, warn: Warn<'_>) {
    if let Some(line) = rule_limit_at {
        warn(
            line,
            &format!("more than {MAX_RULES} rules; this line and the rest of the file are ignored"),
        );
    } else if let Some(line) = lines.cut_at {
        warn(
            line,
            &format!(
                "the file is larger than {} KiB; this line and the rest are ignored",
                MAX_BYTES / 1024
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_lines(text: &[u8]) -> (Vec<(usize, String)>, Vec<usize>) {
        let mut lines = Lines::new(text);
        let mut bad = Vec::new();
        let mut got = Vec::new();
        while let Some((n, l)) = lines.next_text(&mut |n, _| bad.push(n)) {
            got.push((n, l.to_string()));
        }
        (got, bad)
    }

    #[test]
    fn lines_are_numbered_and_lose_their_endings() {
        let (got, bad) = all_lines(b"a\r\n\xff\nb\n\nc");
        assert_eq!(bad, [2]);
        let want = [(1, "a"), (3, "b"), (4, ""), (5, "c")];
        assert_eq!(got.len(), want.len());
        for ((n, l), (wn, wl)) in got.iter().zip(want) {
            assert_eq!((*n, l.as_str()), (wn, wl));
        }
    }

    #[test]
    fn size_limit_drops_the_straddling_line() {
        let mut text = Vec::new();
        while text.len() < MAX_BYTES - 3 {
            text.extend_from_slice(b"xx\n");
        }
        let whole = text.len() / 3;
        text.extend_from_slice(b"straddles\nafter\n");
        let lines = Lines::new(&text);
        assert_eq!(lines.cut_at, Some(whole + 1));
        let (got, _) = all_lines(&text);
        assert_eq!(got.len(), whole);
        assert!(got.iter().all(|(_, l)| l == "xx"));
        assert_eq!(Lines::new(b"small\n").cut_at, None);
    }
}
