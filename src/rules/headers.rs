//! `_headers`: response fields by URL pattern (the Netlify / Cloudflare
//! Pages format).
//!
//! ```text
//! # a comment
//! /secure/page
//!   X-Frame-Options: DENY
//! /static/*
//!   Access-Control-Allow-Origin: *
//! https://:project.example.dev/*
//!   X-Robots-Tag: noindex
//! /*.jpg
//!   ! Content-Security-Policy
//! ```
//!
//! A pattern line starts at column 0; the field lines under it are
//! indented. Every block whose pattern matches applies, in file order; the
//! values of one field (names compared regardless of case) from several
//! blocks, or several lines, are joined with `, `; a `! Name` line in a
//! matching block removes what earlier blocks set for that field (values
//! in its own block stay). `:name` and `:splat` in a value are replaced
//! by what the pattern captured, %-encoded.
//!
//! Where Netlify and Cloudflare Pages differ, staticd follows Cloudflare:
//! - `! Name` (detach) is Cloudflare's; Netlify has no way to remove a field.
//! - Patterns may be absolute `https://host/path` URLs, matched against the
//!   Host header without its port (Cloudflare); Netlify takes paths only.
//!   An `http://` pattern or one with a port is a malformed line.
//! - `*` matches any text, `/` included, and may stand anywhere
//!   (`/*.jpg` matches `/a/b.jpg`), once per pattern; `:name` placeholders
//!   and their substitution into values are Cloudflare's.
//! - Paths match exactly and case-sensitively: `/blog/*` does not match
//!   `/blog`, `/about` does not match `/about/`.
//!
//! Fields that are instructions to the host rather than response fields
//! are never sent:
//! - `Basic-Auth: user:password user2:password2` (Netlify's) protects the
//!   paths its block's pattern matches: see [`super::locks`](crate::rules::locks).
//! - Netlify-CDN-Cache-Control, Netlify-Vary, Netlify-Cache-Tag (Netlify's
//!   CDN), Cloudflare-CDN-Cache-Control (Cloudflare's) and Cache-Tag (both)
//!   are read by those CDNs and stripped before the response leaves them;
//!   staticd does not follow them, so each is reported and ignored.
//!   CDN-Cache-Control (RFC 9213) is sent: it is meant for any CDN in front
//!   of the server, and Cloudflare passes it on too.
//!
//! And where staticd differs from both:
//! - A placeholder must begin a path segment (`/:slug.html`, not
//!   `/v:version`) and be its segment's only placeholder or splat.
//! - Fields staticd decides itself are reported and ignored: Content-Length,
//!   Content-Range, Transfer-Encoding, Connection, Keep-Alive, Upgrade, TE,
//!   Trailer, Proxy-Connection, Date, ETag, Last-Modified, Content-Encoding,
//!   Server.
//! - Limits: 1,000 blocks and 64 KiB (Cloudflare: 100 rules, 2,000
//!   characters a line); past them the rest of the file is ignored.
//! - A field name that is not a token, a value with a control character,
//!   or an empty value is a malformed line.

use std::fmt;

use super::locks::{self, Lock, Locks};
use super::pattern::Pattern;
use super::template::Template;
use super::{report_limit, Lines, Warn, MAX_RULES};
use crate::http::is_token;

/// Most distinct field names one file may set or remove.
pub const MAX_NAMES: usize = 1024;

const BITSET_WORDS: usize = MAX_RULES.div_ceil(64);

/// Fields the server writes itself, from what the request and the file
/// are: a second one from `_headers` would contradict the first.
const SERVER_OWNED: [&str; 14] = [
    "content-length",
    "content-range",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
    "date",
    "etag",
    "last-modified",
    "content-encoding",
    "server",
];

/// Fields a host reads as an instruction to its own CDN and strips before
/// the response leaves it, and whose they are. staticd has no such cache:
/// sent, they would only tell every client what was meant for the host.
const HOST_INSTRUCTIONS: [(&str, &str); 5] = [
    ("netlify-cdn-cache-control", "Netlify's CDN"),
    ("netlify-vary", "Netlify's CDN"),
    ("netlify-cache-tag", "Netlify's CDN"),
    ("cloudflare-cdn-cache-control", "Cloudflare's CDN"),
    ("cache-tag", "Netlify's and Cloudflare's CDNs"),
];

#[derive(Debug, Default)]
pub struct HeaderRules {
    blocks: Vec<Pattern>,
    names: Vec<Name>,
    values: Vec<Value>,
    /// For each path pattern whose Cache-Control says `immutable`, a path it
    /// matches (`/assets/*` -> `/assets/x`): what `root_files` asks the
    /// `_redirects` rules about, to warn of a rewrite that would serve
    /// another file there.
    immutable: Vec<Box<[u8]>>,
    /// The blocks' `Basic-Auth` lines, at most one lock a block, in file
    /// order.
    locks: Vec<Lock>,
}

/// One field name, as first written, with where it is set and removed.
#[derive(Debug)]
struct Name {
    name: Box<str>,
    /// Indices into `values`, in file order.
    values: Vec<u32>,
    /// The blocks holding `! Name`, in file order.
    detached_in: Vec<u16>,
}

#[derive(Debug)]
struct Value {
    block: u16,
    template: Template,
}

impl HeaderRules {
    /// Parses a `_headers` file, reporting each malformed line through
    /// `warn` (which gets the 1-based line number).
    pub fn parse(text: &[u8], warn: Warn<'_>) -> HeaderRules {
        let mut rules = HeaderRules::default();
        let mut lines = Lines::new(text);
        // The block that indented lines belong to; None before the first
        // pattern or after a malformed one (whose lines are dropped with it).
        let mut current: Option<(u16, &str)> = None;
        let mut seen_pattern = false;
        let mut limit_at = None;
        while let Some((number, line)) = lines.next_line() {
            let line = match line {
                Ok(text) => text,
                Err(bytes) => {
                    warn(number, super::NOT_TEXT);
                    // A password line the parser cannot read must not leave
                    // its block's paths open: the block is locked all the
                    // same, and only the pairs read elsewhere get in.
                    if let Some((block, pattern)) = current.filter(|_| is_basic_auth_bytes(bytes)) {
                        if let Err(why) = rules.add_lock(block, pattern, "") {
                            warn(number, &why);
                        }
                    }
                    continue;
                }
            };
            let trimmed = line.trim_matches([' ', '\t']);
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            if !line.starts_with([' ', '\t']) {
                if rules.blocks.len() == MAX_RULES {
                    limit_at = Some(number);
                    break;
                }
                seen_pattern = true;
                current = match parse_pattern_line(trimmed) {
                    Ok(pattern) => {
                        rules.blocks.push(pattern);
                        Some(((rules.blocks.len() - 1) as u16, trimmed))
                    }
                    Err(why) => {
                        warn(number, why);
                        None
                    }
                };
                continue;
            }
            match current {
                Some((block, pattern)) => {
                    if let Err(why) = rules.add_field_line(block, pattern, trimmed) {
                        warn(number, &why);
                    }
                }
                None if !seen_pattern => warn(number, "a field line before any URL pattern"),
                // The pattern above was reported; a password under it
                // protecting nothing is worth a line of its own.
                None if is_basic_auth(trimmed) => warn(
                    number,
                    "Basic-Auth under a malformed pattern protects nothing",
                ),
                None => {}
            }
        }
        report_limit(&lines, limit_at, warn);
        rules
    }

    /// Paths that patterns marked immutable match, one per such pattern.
    pub fn immutable_samples(&self) -> &[Box<[u8]>] {
        &self.immutable
    }

    /// Whether no block sets or removes anything.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The `Basic-Auth` locks a request for `host` and `path` (as for
    /// [`HeaderRules::matching`]) meets. Allocates nothing.
    pub fn locks<'r, 'a>(&'r self, host: Option<&'a str>, path: &'a [u8]) -> Locks<'r, 'a> {
        Locks::new(&self.locks, &self.blocks, host, path)
    }

    /// How many blocks (patterns) the file holds.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// The fields for a request: `host` as in the Host header (or None),
    /// `path` decoded and normalised, starting with `/`. Allocates nothing.
    pub fn matching<'r, 'a>(&'r self, host: Option<&'a str>, path: &'a [u8]) -> Applied<'r, 'a> {
        let mut matched = [0u64; BITSET_WORDS];
        for (i, pattern) in self.blocks.iter().enumerate() {
            if pattern.matches(host, path).is_some() {
                matched[i / 64] |= 1 << (i % 64);
            }
        }
        Applied {
            rules: self,
            host,
            path,
            matched,
        }
    }

    /// Adds an indented line (`Name: value` or `! Name`) to `block`, whose
    /// pattern reads [`pattern`](crate::rules::pattern).
    fn add_field_line(&mut self, block: u16, pattern: &str, line: &str) -> Result<(), String> {
        if let Some(name) = line.strip_prefix('!') {
            let name = name.trim_matches([' ', '\t']);
            check_name(name)?;
            let id = self.name_id(name)?;
            self.names[id].detached_in.push(block);
            return Ok(());
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err("expected `Name: value` or `! Name`".into());
        };
        let name = name.trim_end_matches([' ', '\t']);
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case(locks::NAME) {
            return self.add_lock(block, pattern, value);
        }
        check_name(name)?;
        if value.is_empty() {
            return Err(format!("{name} has an empty value"));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!("a control character in the value of {name}"));
        }
        let id = self.name_id(name)?;
        let pattern = &self.blocks[usize::from(block)];
        let immutable = name.eq_ignore_ascii_case("Cache-Control")
            && value.to_ascii_lowercase().contains("immutable");
        if let Some(sample) = pattern.sample_path().filter(|_| immutable) {
            self.immutable.push(sample.into());
        }
        let template = Template::value(value, pattern);
        self.names[id].values.push(self.values.len() as u32);
        self.values.push(Value { block, template });
        Ok(())
    }

    /// A `Basic-Auth` value, into `block`'s lock: the lock is there even if
    /// every pair is malformed (then no one passes).
    fn add_lock(&mut self, block: u16, pattern: &str, value: &str) -> Result<(), String> {
        if self.locks.last().is_none_or(|l| l.block() != block) {
            self.locks.push(Lock::new(block, pattern));
        }
        match self.locks.last_mut() {
            Some(lock) => lock.add(value, pattern),
            None => Ok(()),
        }
    }

    /// The index of `name` (compared regardless of case), added if new.
    fn name_id(&mut self, name: &str) -> Result<usize, String> {
        if let Some(id) = self
            .names
            .iter()
            .position(|n| n.name.eq_ignore_ascii_case(name))
        {
            return Ok(id);
        }
        if self.names.len() == MAX_NAMES {
            return Err(format!("more than {MAX_NAMES} different field names"));
        }
        self.names.push(Name {
            name: name.into(),
            values: Vec::new(),
            detached_in: Vec::new(),
        });
        Ok(self.names.len() - 1)
    }
}

fn parse_pattern_line(line: &str) -> Result<Pattern, &'static str> {
    if line.contains([' ', '\t']) {
        return Err("a pattern line holds one URL pattern and nothing else");
    }
    Pattern::parse(line, true)
}

fn check_name(name: &str) -> Result<(), String> {
    if !is_token(name.as_bytes()) {
        return Err(format!("{name:?} is not a valid field name"));
    }
    if SERVER_OWNED.iter().any(|o| o.eq_ignore_ascii_case(name)) {
        return Err(format!("staticd sets {name} itself; line ignored"));
    }
    if let Some((_, whose)) = HOST_INSTRUCTIONS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
    {
        return Err(format!(
            "{name} is an instruction to {whose}, which staticd does not follow; never sent, line ignored"
        ));
    }
    // Only `! Basic-Auth` gets here: a value line is a lock.
    if name.eq_ignore_ascii_case(locks::NAME) {
        return Err(format!(
            "{name} cannot be removed: what another block protects stays protected; line ignored"
        ));
    }
    Ok(())
}

/// Whether a line that is not UTF-8 is a `Basic-Auth: ...` field line.
fn is_basic_auth_bytes(line: &[u8]) -> bool {
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return false;
    };
    let name = line[..colon].trim_ascii();
    name.eq_ignore_ascii_case(locks::NAME.as_bytes())
}

/// Whether a field line is `Basic-Auth: ...`.
fn is_basic_auth(line: &str) -> bool {
    line.split_once(':')
        .is_some_and(|(name, _)| name.trim_end().eq_ignore_ascii_case(locks::NAME))
}

/// The fields `_headers` gives one request.
pub struct Applied<'r, 'a> {
    rules: &'r HeaderRules,
    host: Option<&'a str>,
    path: &'a [u8],
    /// Which blocks matched, one bit each.
    matched: [u64; BITSET_WORDS],
}

impl<'r, 'a> Applied<'r, 'a> {
    fn matched(&self, block: u16) -> bool {
        let i = usize::from(block);
        self.matched
            .get(i / 64)
            .is_some_and(|word| word & (1 << (i % 64)) != 0)
    }

    /// Whether `value` (of a matched block) comes out empty: a value that
    /// is only an empty splat is left out rather than sent as `X: `.
    fn writes_nothing(&self, value: &Value) -> bool {
        if !value.template.may_write_nothing() {
            return false;
        }
        let pattern = &self.rules.blocks[usize::from(value.block)];
        pattern
            .matches(self.host, self.path)
            .is_none_or(|captures| value.template.writes_nothing(&captures))
    }

    /// Whether no field applies.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Each field once, as first spelt in the file, with its value: write
    /// it as `name: value` (the value's `Display` joins several with `, `).
    pub fn iter(&self) -> impl Iterator<Item = (&'r str, FieldValue<'_, 'r, 'a>)> + '_ {
        self.rules.names.iter().filter_map(move |name| {
            // A `! Name` in a matching block drops what came before it.
            let from_block = name
                .detached_in
                .iter()
                .rev()
                .find(|&&b| self.matched(b))
                .copied()
                .unwrap_or(0);
            let value = FieldValue {
                applied: self,
                name,
                from_block,
            };
            let applies = value.values().next().is_some();
            applies.then_some((&*name.name, value))
        })
    }
}

/// The value of one field for one request, written by `Display`.
pub struct FieldValue<'x, 'r, 'a> {
    applied: &'x Applied<'r, 'a>,
    name: &'r Name,
    from_block: u16,
}

impl<'x, 'r, 'a> FieldValue<'x, 'r, 'a> {
    /// The values joined in this field, in file order, each written by
    /// `Display`.
    pub fn values(&self) -> impl Iterator<Item = OneValue<'x, 'r, 'a>> + '_ {
        let applied = self.applied;
        self.name
            .values
            .iter()
            .filter_map(|&i| applied.rules.values.get(i as usize))
            .filter(|v| v.block >= self.from_block && applied.matched(v.block))
            .filter(|v| !applied.writes_nothing(v))
            .map(move |value| OneValue { applied, value })
    }
}

impl fmt::Display for FieldValue<'_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, value) in self.values().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            fmt::Display::fmt(&value, f)?;
        }
        Ok(())
    }
}

/// One value of a field, from one line of the file.
pub struct OneValue<'x, 'r, 'a> {
    applied: &'x Applied<'r, 'a>,
    value: &'r Value,
}

impl fmt::Display for OneValue<'_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(text) = self.value.template.as_literal() {
            return f.write_str(text);
        }
        // The block matched; matching it again gives its captures without
        // keeping them for every block.
        let pattern = &self.applied.rules.blocks[usize::from(self.value.block)];
        match pattern.matches(self.applied.host, self.applied.path) {
            Some(captures) => self.value.template.write(&captures, f),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (HeaderRules, Vec<(usize, String)>) {
        let mut warnings = Vec::new();
        let rules = HeaderRules::parse(text.as_bytes(), &mut |n, m| {
            warnings.push((n, m.to_string()))
        });
        (rules, warnings)
    }

    fn fields(rules: &HeaderRules, host: Option<&str>, path: &str) -> Vec<String> {
        rules
            .matching(host, path.as_bytes())
            .iter()
            .map(|(name, value)| format!("{name}: {value}"))
            .collect()
    }

    /// Cloudflare's example file and the table of what each URL gets.
    const CLOUDFLARE: &str = "# This is a comment\n\
        /secure/page\n  X-Frame-Options: DENY\n  X-Content-Type-Options: nosniff\n  Referrer-Policy: no-referrer\n\n\
        /static/*\n  Access-Control-Allow-Origin: *\n  X-Robots-Tag: nosnippet\n\n\
        https://myproject.pages.dev/*\n  X-Robots-Tag: noindex\n";

    #[test]
    fn immutable_patterns_give_a_path_they_match() {
        let (rules, warnings) = parse(
            "/assets/*\n  Cache-Control: public, max-age=31536000, IMMUTABLE\n\
             /:lang/app.js\n  cache-control: immutable\n\
             /a%20b/*\n  Cache-Control: immutable\n\
             https://example.org/*\n  Cache-Control: immutable\n\
             /html/*\n  Cache-Control: no-cache\n  X-Note: immutable\n",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        let samples: Vec<&[u8]> = rules.immutable_samples().iter().map(|s| &**s).collect();
        assert_eq!(samples, [&b"/assets/x"[..], b"/x/app.js", b"/a b/x"]);
        for (i, sample) in samples.iter().enumerate() {
            assert!(
                rules.blocks[i].matches(None, sample).is_some(),
                "{sample:?}"
            );
        }
    }

    #[test]
    fn cloudflare_example() {
        let (rules, warnings) = parse(CLOUDFLARE);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(rules.len(), 3);
        let custom = Some("custom.domain");
        let project = Some("myproject.pages.dev");
        assert_eq!(
            fields(&rules, custom, "/secure/page"),
            [
                "X-Frame-Options: DENY",
                "X-Content-Type-Options: nosniff",
                "Referrer-Policy: no-referrer"
            ]
        );
        assert_eq!(
            fields(&rules, custom, "/static/image.jpg"),
            ["Access-Control-Allow-Origin: *", "X-Robots-Tag: nosnippet"]
        );
        assert_eq!(fields(&rules, project, "/home"), ["X-Robots-Tag: noindex"]);
        assert_eq!(fields(&rules, project, "/secure/page").len(), 4);
        assert_eq!(
            fields(&rules, project, "/static/styles.css"),
            [
                "Access-Control-Allow-Origin: *",
                "X-Robots-Tag: nosnippet, noindex"
            ]
        );
        assert!(rules.matching(custom, b"/other").is_empty());
        assert!(rules.matching(None, b"/home").is_empty());
    }

    #[test]
    fn detach_removes_what_earlier_blocks_set() {
        let (rules, warnings) = parse(
            "/*\n  Content-Security-Policy: default-src 'self';\n  X-A: 1\n\
             /*.jpg\n  ! Content-Security-Policy\n\
             /b/*\n  x-a: 2\n  ! X-A\n  X-A: 3\n",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            fields(&rules, None, "/a.html"),
            ["Content-Security-Policy: default-src 'self';", "X-A: 1"]
        );
        assert_eq!(fields(&rules, None, "/img/a.jpg"), ["X-A: 1"]);
        // The detach drops block 1's value, not its own block's.
        assert_eq!(
            fields(&rules, None, "/b/x"),
            ["Content-Security-Policy: default-src 'self';", "X-A: 2, 3"]
        );
    }

    #[test]
    fn same_field_in_one_block_is_joined_and_names_ignore_case() {
        let (rules, _) = parse("/*\n  Cache-Control: max-age=0\n  cache-control: no-cache\n");
        assert_eq!(
            fields(&rules, None, "/"),
            ["Cache-Control: max-age=0, no-cache"]
        );
        let applied = rules.matching(None, b"/");
        let (_, value) = applied.iter().next().unwrap();
        let each: Vec<String> = value.values().map(|v| v.to_string()).collect();
        assert_eq!(each, ["max-age=0", "no-cache"]);
    }

    #[test]
    fn placeholders_in_values() {
        let (rules, _) = parse(
            "/movies/:title\n  x-movie-name: You are watching \":title\"\n\
             https://:project.pages.dev/*\n  Access-Control-Allow-Origin: https://staging.:project.pages.dev/\n  X-Rest: :splat\n",
        );
        assert_eq!(
            fields(&rules, None, "/movies/up"),
            ["x-movie-name: You are watching \"up\""]
        );
        // A value that comes out empty is left out.
        assert_eq!(
            fields(&rules, Some("demo.pages.dev"), "/"),
            ["Access-Control-Allow-Origin: https://staging.demo.pages.dev/"]
        );
        assert_eq!(
            fields(&rules, Some("demo.pages.dev"), "/a b\r\n"),
            [
                "Access-Control-Allow-Origin: https://staging.demo.pages.dev/",
                "X-Rest: a%20b%0D%0A"
            ]
        );
    }

    #[test]
    fn malformed_lines_are_reported_once_and_skipped() {
        let text = [
            "  X-Early: 1",
            "/ok",
            "  X-Good: yes",
            "  Bad Name: x",
            "  X-Ctl: a\u{7}b",
            "  X-Empty:",
            "  no colon",
            "  ! ",
            "  Content-Length: 5",
            "  ETag: \"x\"",
            "  server: me",
            "  ! Date",
            "/a/*/b/*",
            "  X-Lost: 1",
            "/two words",
            "  # an indented comment",
            "/ok2",
            "  X-Also: fine",
        ]
        .join("\n");
        let (rules, warnings) = parse(&text);
        let lines: Vec<usize> = warnings.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            lines,
            [1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15],
            "{warnings:?}"
        );
        assert!(warnings[8].1.contains("staticd sets"), "{warnings:?}");
        assert_eq!(fields(&rules, None, "/ok"), ["X-Good: yes"]);
        assert_eq!(fields(&rules, None, "/ok2"), ["X-Also: fine"]);
        assert!(rules.matching(None, b"/a/x/b/y").is_empty());
    }

    #[test]
    fn basic_auth_is_a_lock_never_a_field() {
        let (rules, warnings) = parse(
            "/admin/*\n  Basic-Auth: alice:hunter2 bob:pw\n  X-A: 1\n  basic-auth  : carol:pw3\n\
             /*\n  ! Basic-Auth\n  X-B: 2\n\
             /open/*\n  X-C: 3\n",
        );
        let lines: Vec<usize> = warnings.iter().map(|(n, _)| *n).collect();
        let expected: &[usize] = if cfg!(feature = "auth") {
            &[6]
        } else {
            &[2, 4, 6]
        };
        assert_eq!(lines, expected, "{warnings:?}");
        assert!(warnings.iter().all(|(_, w)| !w.contains("hunter2")));
        assert_eq!(fields(&rules, None, "/admin/x.html"), ["X-A: 1", "X-B: 2"]);
        let locks: Vec<&Lock> = rules.locks(None, b"/admin/x.html").iter().collect();
        assert_eq!(locks.len(), 1);
        assert_eq!(locks[0].realm(), "/admin/*");
        let users: Vec<&str> = locks[0].pairs().iter().map(|p| &**p.user()).collect();
        assert_eq!(users, ["alice", "bob", "carol"]);
        assert_eq!(rules.locks(None, b"/open/x").iter().count(), 0);
        assert_eq!(rules.locks(None, b"/admin").iter().count(), 0);
        assert!(
            format!("{rules:?}").contains("alice") && !format!("{rules:?}").contains("hunter2")
        );
    }

    #[test]
    fn a_lock_fails_closed() {
        let (rules, warnings) =
            parse("/a/*\n  Basic-Auth:\n/b/*\n  Basic-Auth: x y\n/c/* bad\n  Basic-Auth: u:p\n");
        let lines: Vec<usize> = warnings.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [2, 4, 5, 6], "{warnings:?}");
        assert!(warnings[3].1.contains("protects nothing"), "{warnings:?}");
        for path in [&b"/a/x"[..], b"/b/x"] {
            let locks: Vec<&Lock> = rules.locks(None, path).iter().collect();
            assert_eq!(locks.len(), 1, "{path:?}");
            assert!(locks[0].pairs().is_empty());
        }
    }

    #[test]
    fn host_instructions_are_reported_and_never_sent() {
        let (rules, warnings) = parse(
            "/*\n  Netlify-CDN-Cache-Control: public, s-maxage=60\n  netlify-vary: query\n\
             \x20 Netlify-Cache-Tag: a\n  Cloudflare-CDN-Cache-Control: max-age=60\n  Cache-Tag: b\n\
             \x20 ! Cache-Tag\n  CDN-Cache-Control: max-age=60\n  X-Kept: 1\n",
        );
        let lines: Vec<usize> = warnings.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7], "{warnings:?}");
        assert!(warnings[0].1.contains("Netlify's CDN"), "{warnings:?}");
        assert_eq!(
            fields(&rules, None, "/x"),
            ["CDN-Cache-Control: max-age=60", "X-Kept: 1"]
        );
    }

    #[test]
    fn invalid_utf8_line_is_malformed() {
        let mut warnings = Vec::new();
        let rules = HeaderRules::parse(b"/a\n  X-A: \xff\n  X-B: ok\n", &mut |n, _| {
            warnings.push(n)
        });
        assert_eq!(warnings, [2]);
        assert_eq!(fields(&rules, None, "/a"), ["X-B: ok"]);
    }

    #[test]
    fn a_password_line_that_is_not_utf8_locks_its_block_all_the_same() {
        let mut warnings = Vec::new();
        let text = b"/a/*\n  Basic-Auth: alice:caf\xe9\n/b/*\n  Basic-Auth: bob:pw\n  basic-auth : eve:\xff\n";
        let rules = HeaderRules::parse(text, &mut |n, _| warnings.push(n));
        let a: Vec<_> = rules.locks(None, b"/a/x").iter().collect();
        assert_eq!(a.len(), 1, "the block is locked");
        assert!(a[0].pairs().is_empty(), "and no one can open it");
        let b: Vec<_> = rules.locks(None, b"/b/x").iter().collect();
        assert_eq!(b.len(), 1);
        let users: Vec<_> = b[0].pairs().iter().map(|p| p.user().to_string()).collect();
        assert_eq!(users, ["bob"]);
        assert!(
            warnings.contains(&2) && warnings.contains(&5),
            "{warnings:?}"
        );
    }

    #[test]
    fn crlf_files() {
        let (rules, warnings) = parse("/a\r\n  X-A: 1\r\n");
        assert!(warnings.is_empty());
        assert_eq!(fields(&rules, None, "/a"), ["X-A: 1"]);
    }

    #[test]
    fn rule_limit_reports_once() {
        let mut text = String::new();
        for i in 0..MAX_RULES + 5 {
            text.push_str(&format!("/p{i}\n  X-N: {i}\n"));
        }
        let (rules, warnings) = parse(&text);
        assert_eq!(rules.len(), MAX_RULES);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0].0, 2 * MAX_RULES + 1);
        assert_eq!(fields(&rules, None, "/p999"), ["X-N: 999"]);
        assert!(rules.matching(None, b"/p1000").is_empty());
    }

    #[test]
    fn size_limit_reports_once() {
        let mut text = String::from("/*\n");
        while text.len() < super::super::MAX_BYTES + 100 {
            text.push_str("  X-Pad: 0123456789\n");
        }
        let (rules, warnings) = parse(&text);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].1.contains("64 KiB"));
        assert!(!rules.is_empty());
    }

    #[test]
    fn empty_file() {
        let (rules, warnings) = parse("");
        assert!(rules.is_empty() && warnings.is_empty());
        assert!(rules.matching(Some("h"), b"/").is_empty());
    }
}
