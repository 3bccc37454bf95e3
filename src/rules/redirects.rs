//! `_redirects`: redirects and rewrites by URL pattern (the Netlify /
//! Cloudflare Pages format).
//!
//! ```text
//! # from          to                        [status][!]
//! /home           /                         301
//! /blog/*         https://blog.example/:splat
//! /news/:year/*   /archive/:year/:splat     302
//! /api/*          /api/missing.json         404
//! /*              /index.html               200
//! /old.html       /new.html                 301!
//! ```
//!
//! One rule a line; the first rule whose `from` matches applies. Status
//! 301 (the default), 302, 303, 307 and 308 redirect; 200 rewrites (the
//! target's content is served under the requested URL); 404 serves the
//! target with status 404. A rule applies only when no file exists at the
//! requested path, unless its status ends in `!` (Netlify's shadowing):
//! the caller asks [`RedirectRules::first_match`], then checks the file
//! when [`Match::force`] is false.
//!
//! `*` in `from` is captured as `:splat`; `:name` placeholders capture one segment; both are put
//! into the target (see [`pattern`](crate::rules::pattern) and
//! `template`).
//!
//! Differences from Netlify and Cloudflare Pages:
//! - The default status is 301 (Netlify's; Cloudflare's is 302).
//! - Rules without `!` yield to existing files (Netlify); Cloudflare always
//!   applies its rules.
//! - Rewrites (200) and 404 rules take a path on the same site; an absolute
//!   target with 200 (proxying) is a malformed line, as are query-parameter
//!   conditions (`/store id=:id /blog/:id`), conditions after the status
//!   (`Country=`, `Language=`, `Role=`, `Cookie=`), and an absolute URL as
//!   `from` (domain-level redirects).
//! - Paths match exactly and case-sensitively (Cloudflare); a placeholder
//!   must begin a segment; one splat per rule.
//! - Limits: 1,000 rules and 64 KiB; past them the rest is ignored.
//!
//! The query string: a target with its own `?query` keeps it and drops the
//! request's; otherwise the request's query is passed on (Cloudflare's
//! rule, and what Netlify does by default), before any `#fragment`.

use super::pattern::{strip_prefix_ignore_case, Captures, Pattern};
use super::template::Template;
use super::{report_limit, Lines, Warn, MAX_RULES};

#[derive(Debug, Default)]
pub struct RedirectRules {
    rules: Vec<Rule>,
}

#[derive(Debug)]
struct Rule {
    from: Pattern,
    to: Template,
    status: u16,
    force: bool,
    /// The target is an `http://` or `https://` URL.
    absolute: bool,
    /// The target has a query string of its own.
    own_query: bool,
    line: usize,
}

/// The rule that applies to a request, with what its pattern captured.
#[derive(Debug)]
pub struct Match<'r, 'p> {
    rule: &'r Rule,
    captures: Captures<'p>,
}

impl RedirectRules {
    /// Parses a `_redirects` file, reporting each malformed line through
    /// `warn` (which gets the 1-based line number).
    pub fn parse(text: &[u8], warn: Warn<'_>) -> RedirectRules {
        let mut rules = Vec::new();
        let mut lines = Lines::new(text);
        let mut limit_at = None;
        while let Some((number, line)) = lines.next_text(warn) {
            let line = line.trim_matches([' ', '\t']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if rules.len() == MAX_RULES {
                limit_at = Some(number);
                break;
            }
            match parse_rule(line, number) {
                Ok(rule) => rules.push(rule),
                Err(why) => warn(number, why),
            }
        }
        report_limit(&lines, limit_at, warn);
        RedirectRules { rules }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// The first rule matching `path` (decoded and normalised, starting with
    /// `/`). Allocates nothing.
    pub fn first_match<'r, 'p>(&'r self, path: &'p [u8]) -> Option<Match<'r, 'p>> {
        self.rules.iter().find_map(|rule| {
            let captures = rule.from.matches(None, path)?;
            Some(Match { rule, captures })
        })
    }
}

impl Match<'_, '_> {
    /// 301, 302, 303, 307 or 308 (redirect), 200 (rewrite) or 404.
    pub fn status(&self) -> u16 {
        self.rule.status
    }

    /// Whether the rule applies even when a file exists at the path.
    pub fn force(&self) -> bool {
        self.rule.force
    }

    /// Whether the answer is a redirect (a 3xx with Location); otherwise
    /// the target is a path on the same site to serve.
    pub fn is_redirect(&self) -> bool {
        (300..400).contains(&self.rule.status)
    }

    /// The line of the file the rule is on, for messages.
    pub fn line(&self) -> usize {
        self.rule.line
    }

    /// The target with the captures put in, %-encoded, and the request's
    /// `query` (without `?`) passed on unless the target has its own.
    ///
    /// For a redirect it is the Location value: an absolute URL, or a path whose runs of `/` are
    /// collapsed (so never `//host`). For a rewrite or 404 it is an origin-form target without
    /// fragment (`/a/b?q`), to be checked like a request's with
    /// [`site::path::SitePath::from_target`](crate::site::path::SitePath::from_target).
    pub fn target(&self, query: Option<&str>) -> String {
        let mut target = String::new();
        // Writing to a String cannot fail.
        let _ = self.rule.to.write(&self.captures, &mut target);
        if !self.rule.absolute {
            target = collapse_slashes(&target);
        }
        if !self.is_redirect() {
            if let Some(hash) = target.find('#') {
                target.truncate(hash);
            }
        }
        match query {
            Some(q) if !q.is_empty() && !self.rule.own_query => {
                let at = target.find('#').unwrap_or(target.len());
                target.insert(at, '?');
                target.insert_str(at + 1, q);
            }
            _ => {}
        }
        target
    }
}

fn parse_rule(line: &str, number: usize) -> Result<Rule, &'static str> {
    let mut fields = line.split([' ', '\t']).filter(|f| !f.is_empty());
    let from = fields.next().unwrap_or_default();
    if is_absolute(from) {
        return Err("an absolute URL as the source (a domain-level redirect) is not supported");
    }
    let Some(to) = fields.next() else {
        return Err("expected `from to [status]`");
    };
    let absolute = is_absolute(to);
    if !absolute && !to.starts_with('/') {
        return Err(if to.contains('=') {
            "query-parameter conditions (`from name=:value to`) are not supported"
        } else {
            "the target must be a path starting with / or an http:// or https:// URL"
        });
    }
    if to.chars().any(char::is_control) {
        return Err("a control character in the target");
    }
    let (status, force) = match fields.next() {
        Some(text) => parse_status(text)?,
        None => (301, false),
    };
    if let Some(extra) = fields.next() {
        return Err(if extra.contains('=') {
            "conditions (Country=, Language=, Role=, Cookie=) are not supported"
        } else {
            "unexpected text after the status"
        });
    }
    if absolute && status == 200 {
        return Err("proxying (an absolute URL with status 200) is not supported");
    }
    if absolute && status == 404 {
        return Err("a 404 rule needs a path on this site as its target");
    }
    if absolute && url_host(to).is_empty() {
        return Err("the target URL has no host");
    }
    let from = Pattern::parse(from, false)?;
    Ok(Rule {
        to: Template::target(to, &from),
        from,
        status,
        force,
        absolute,
        own_query: to.split('#').next().unwrap_or_default().contains('?'),
        line: number,
    })
}

fn parse_status(text: &str) -> Result<(u16, bool), &'static str> {
    let (digits, force) = match text.strip_suffix('!') {
        Some(digits) => (digits, true),
        None => (text, false),
    };
    match digits.parse::<u16>() {
        Ok(status @ (200 | 301 | 302 | 303 | 307 | 308 | 404)) if digits.len() == 3 => {
            Ok((status, force))
        }
        _ => Err("unknown status (301, 302, 303, 307, 308, 200 or 404, optionally with !)"),
    }
}

fn is_absolute(text: &str) -> bool {
    strip_prefix_ignore_case(text, "http://").is_some()
        || strip_prefix_ignore_case(text, "https://").is_some()
}

/// The authority of an `http(s)://` URL.
fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or("", |(_, rest)| rest);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// `//` and longer runs of `/` in the path part become one `/`, as
/// Cloudflare does for relative targets: an empty splat then leaves no
/// `//`, and a Location never starts with `//host`.
fn collapse_slashes(target: &str) -> String {
    let path_end = target.find(['?', '#']).unwrap_or(target.len());
    let (path, rest) = target.split_at(path_end);
    let mut out = String::with_capacity(target.len());
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::path::SitePath;

    fn parse(text: &str) -> (RedirectRules, Vec<(usize, String)>) {
        let mut warnings = Vec::new();
        let rules = RedirectRules::parse(text.as_bytes(), &mut |n, m| {
            warnings.push((n, m.to_string()))
        });
        (rules, warnings)
    }

    /// (status, force, target) for `path` and `query`.
    fn answer(
        rules: &RedirectRules,
        path: &str,
        query: Option<&str>,
    ) -> Option<(u16, bool, String)> {
        let m = rules.first_match(path.as_bytes())?;
        Some((m.status(), m.force(), m.target(query)))
    }

    fn some(status: u16, force: bool, target: &str) -> Option<(u16, bool, String)> {
        Some((status, force, target.to_string()))
    }

    /// Cloudflare's example file.
    const CLOUDFLARE: &str = "/home301 / 301\n/home302 / 302\n/querystrings /?query=string 301\n\
        /twitch https://twitch.tv\n/trailing /trailing/ 301\n/notrailing/ /nottrailing 301\n\
        /page/ /page2/#fragment 301\n/blog/* https://blog.my.domain/:splat\n\
        /products/:code/:name /products?code=:code&name=:name\n";

    #[test]
    fn cloudflare_example() {
        let (rules, warnings) = parse(CLOUDFLARE);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(rules.len(), 9);
        assert_eq!(answer(&rules, "/home301", None), some(301, false, "/"));
        assert_eq!(
            answer(&rules, "/home302", Some("a=1")),
            some(302, false, "/?a=1")
        );
        assert_eq!(
            answer(&rules, "/querystrings", Some("a=1")),
            some(301, false, "/?query=string")
        );
        assert_eq!(
            answer(&rules, "/twitch", None),
            some(301, false, "https://twitch.tv")
        );
        assert_eq!(
            answer(&rules, "/trailing", None),
            some(301, false, "/trailing/")
        );
        assert_eq!(answer(&rules, "/trailing/", None), None);
        assert_eq!(
            answer(&rules, "/page/", Some("x")),
            some(301, false, "/page2/?x#fragment")
        );
        assert_eq!(
            answer(&rules, "/blog/a/b.html", Some("q=1")),
            some(301, false, "https://blog.my.domain/a/b.html?q=1")
        );
        assert_eq!(
            answer(&rules, "/products/12/big hat", None),
            some(301, false, "/products?code=12&name=big%20hat")
        );
        assert_eq!(answer(&rules, "/nothing", None), None);
    }

    #[test]
    fn first_match_wins_and_force() {
        let (rules, warnings) =
            parse("/a /first 302\n/a /second 301\n/old.html /new.html 301!\n/* /index.html 200\n");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(answer(&rules, "/a", None), some(302, false, "/first"));
        assert_eq!(
            answer(&rules, "/old.html", None),
            some(301, true, "/new.html")
        );
        let spa = rules.first_match(b"/app/route").unwrap();
        assert!(!spa.is_redirect() && !spa.force());
        assert_eq!(spa.target(Some("tab=2")), "/index.html?tab=2");
        assert_eq!(spa.line(), 4);
    }

    #[test]
    fn statuses() {
        for (status, want) in [
            ("301", (301, false)),
            ("302", (302, false)),
            ("303", (303, false)),
            ("307", (307, false)),
            ("308", (308, false)),
            ("200", (200, false)),
            ("404", (404, false)),
            ("200!", (200, true)),
            ("302!", (302, true)),
        ] {
            assert_eq!(parse_status(status), Ok(want), "{status}");
        }
        for bad in ["300", "301!!", "!", "", "0301", "+301", "410", "abc", "500"] {
            assert!(parse_status(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn splats_and_placeholders() {
        let (rules, _) = parse(
            "/news/:year/:month/:date/:slug /blog/:year/:month/:date/:slug\n\
             /old/* /new/:splat/x 302\n\
             /files/* /f/:splat 200\n\
             /missing/* /404.html 404\n",
        );
        assert_eq!(
            answer(&rules, "/news/2024/05/01/hi", None),
            some(301, false, "/blog/2024/05/01/hi")
        );
        // An empty splat leaves no `//`.
        assert_eq!(answer(&rules, "/old/", None), some(302, false, "/new/x"));
        assert_eq!(
            answer(&rules, "/old/a/b", None),
            some(302, false, "/new/a/b/x")
        );
        assert_eq!(
            answer(&rules, "/missing/x", None),
            some(404, false, "/404.html")
        );
        // A rewrite target is an origin-form target the path checks accept,
        // and decodes to what the splat matched.
        let target = answer(&rules, "/files/a b/ü?#", Some("v=1")).unwrap().2;
        assert_eq!(target, "/f/a%20b/%C3%BC%3F%23?v=1");
        let site = SitePath::from_target(&target).unwrap();
        assert_eq!(&*site.rel, "f/a b/ü?#".as_bytes());
        assert_eq!(site.query, Some("v=1"));
    }

    #[test]
    fn rewrites_drop_fragments_and_redirects_stay_local() {
        let (rules, _) = parse("/r /page#top 200\n/go/* //:splat 302\n/x /a//b\n");
        assert_eq!(answer(&rules, "/r", Some("q")), some(200, false, "/page?q"));
        // `//evil.example` would leave the site; collapsed, it cannot.
        assert_eq!(
            answer(&rules, "/go/evil.example", None),
            some(302, false, "/evil.example")
        );
        assert_eq!(answer(&rules, "/x", Some("")), some(301, false, "/a/b"));
    }

    #[test]
    fn location_is_a_valid_uri() {
        let (rules, _) = parse("/s/* /t/:splat\n/u https://example.com/café?q=ü\n");
        let target = answer(&rules, "/s/\r\n\u{0}\\ é", None).unwrap().2;
        assert_eq!(target, "/t/%0D%0A%00%5C%20%C3%A9");
        assert_eq!(
            answer(&rules, "/u", Some("z")).unwrap().2,
            "https://example.com/caf%C3%A9?q=%C3%BC"
        );
    }

    #[test]
    fn unsupported_and_malformed_lines() {
        let text = "/ok /fine\n\
            /proxy https://api.example.com/ 200\n\
            /store id=:id /blog/:id 301\n\
            / /us 302 Country=us\n\
            /a /b 301 extra\n\
            /a /b 418\n\
            /only\n\
            https://example.com/* /x 301\n\
            /a relative 301\n\
            /a/*/b/* /c\n\
            /notfound https://example.com/ 404\n\
            /nohost https:///x\n\
            /v:version /x\n\
            # a comment\n\
            \n\
            /ok2 /fine2 307\n";
        let (rules, warnings) = parse(text);
        let lines: Vec<usize> = warnings.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, (2..=13).collect::<Vec<_>>(), "{warnings:?}");
        assert!(warnings[0].1.contains("proxying"));
        assert!(warnings[1].1.contains("query-parameter"));
        assert!(warnings[2].1.contains("Country"));
        assert_eq!(rules.len(), 2);
        assert_eq!(answer(&rules, "/ok2", None), some(307, false, "/fine2"));
    }

    #[test]
    fn limits_report_once() {
        let mut text = String::new();
        for i in 0..MAX_RULES + 3 {
            text.push_str(&format!("/p{i} /q{i}\n"));
        }
        let (rules, warnings) = parse(&text);
        assert_eq!(rules.len(), MAX_RULES);
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].0, MAX_RULES + 1);
        assert!(rules.first_match(b"/p1000").is_none());

        let mut big = String::new();
        while big.len() < super::super::MAX_BYTES + 10 {
            big.push_str("# padding padding padding\n");
        }
        let (rules, warnings) = parse(&big);
        assert!(rules.is_empty());
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn invalid_utf8_and_crlf() {
        let mut warnings = Vec::new();
        let rules =
            RedirectRules::parse(b"/a\xff /b\r\n/c /d 302\r\n", &mut |n, _| warnings.push(n));
        assert_eq!(warnings, [1]);
        assert_eq!(answer(&rules, "/c", None), some(302, false, "/d"));
    }
}
