//! Validators and conditional requests (RFC 9110 §8.8, §13).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::parse::Request;

/// The validators of one representation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validators {
    /// A strong entity-tag, quotes included.
    pub etag: String,
    /// Modification time, truncated to whole seconds as HTTP dates are.
    pub last_modified: SystemTime,
}

impl Validators {
    /// Validators for a file: the ETag changes whenever size, mtime (to the
    /// nanosecond) or inode does, so it is strong in practice.
    pub fn for_file(size: u64, mtime: SystemTime, inode: u64) -> Validators {
        let since = mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
        let etag = format!(
            "\"{:x}.{:x}-{:x}-{:x}\"",
            since.as_secs(),
            since.subsec_nanos(),
            size,
            inode
        );
        Validators {
            etag,
            last_modified: UNIX_EPOCH + Duration::from_secs(since.as_secs()),
        }
    }

    pub fn last_modified_http(&self) -> String {
        httpdate::fmt_http_date(self.last_modified)
    }
}

/// What the preconditions of a request say.
#[derive(Debug, PartialEq, Eq)]
pub enum Precondition {
    Proceed,
    /// 304: the client's copy is current.
    NotModified,
    /// 412: a precondition the client set does not hold.
    Failed,
}

/// Evaluates If-Match, If-Unmodified-Since, If-None-Match and
/// If-Modified-Since in the order of RFC 9110 §13.2.2, for GET and HEAD.
pub fn evaluate(req: &Request, v: &Validators) -> Precondition {
    if let Some(im) = &req.if_match {
        if !matches_any(im, &v.etag, Compare::Strong) {
            return Precondition::Failed;
        }
    } else if let Some(date) = req.if_unmodified_since.as_deref().and_then(parse_date) {
        if v.last_modified > date {
            return Precondition::Failed;
        }
    }
    if let Some(inm) = &req.if_none_match {
        if matches_any(inm, &v.etag, Compare::Weak) {
            return Precondition::NotModified;
        }
    } else if let Some(date) = req.if_modified_since.as_deref().and_then(parse_date) {
        if v.last_modified <= date {
            return Precondition::NotModified;
        }
    }
    Precondition::Proceed
}

/// Whether a Range may be honoured given If-Range (RFC 9110 §13.1.5): an
/// entity-tag must match strongly, a date must equal Last-Modified.
pub fn if_range_holds(if_range: Option<&str>, v: &Validators) -> bool {
    let Some(value) = if_range else {
        return true;
    };
    if value.starts_with('"') || value.starts_with("W/") {
        return !value.starts_with("W/") && value == v.etag;
    }
    parse_date(value) == Some(v.last_modified)
}

fn parse_date(s: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(s.trim()).ok()
}

#[derive(Clone, Copy)]
enum Compare {
    Strong,
    Weak,
}

/// Whether an If-Match / If-None-Match list matches `etag`.
fn matches_any(list: &str, etag: &str, compare: Compare) -> bool {
    if list.trim() == "*" {
        return true;
    }
    let ours = etag.as_bytes();
    let mut rest = list.as_bytes();
    loop {
        while let [b' ' | b'\t' | b',', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return false;
        }
        let weak = rest.starts_with(b"W/");
        if weak {
            rest = &rest[2..];
        }
        if rest.first() != Some(&b'"') {
            return false;
        }
        let Some(close) = rest[1..].iter().position(|&b| b == b'"') else {
            return false;
        };
        let tag = &rest[..close + 2];
        rest = &rest[close + 2..];
        let comparable = matches!(compare, Compare::Weak) || !weak;
        if comparable && tag == ours {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v() -> Validators {
        Validators {
            etag: "\"abc\"".into(),
            last_modified: httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap(),
        }
    }

    fn req(f: impl FnOnce(&mut Request)) -> Request {
        let mut r = Request::default();
        f(&mut r);
        r
    }

    #[test]
    fn if_match() {
        let ok = req(|r| r.if_match = Some("\"x\", \"abc\"".into()));
        assert_eq!(evaluate(&ok, &v()), Precondition::Proceed);
        let star = req(|r| r.if_match = Some("*".into()));
        assert_eq!(evaluate(&star, &v()), Precondition::Proceed);
        let weak = req(|r| r.if_match = Some("W/\"abc\"".into()));
        assert_eq!(evaluate(&weak, &v()), Precondition::Failed);
        let other = req(|r| r.if_match = Some("\"zzz\"".into()));
        assert_eq!(evaluate(&other, &v()), Precondition::Failed);
    }

    #[test]
    fn if_unmodified_since() {
        let before = req(|r| r.if_unmodified_since = Some("Sat, 05 Nov 1994 08:49:37 GMT".into()));
        assert_eq!(evaluate(&before, &v()), Precondition::Failed);
        let same = req(|r| r.if_unmodified_since = Some("Sun, 06 Nov 1994 08:49:37 GMT".into()));
        assert_eq!(evaluate(&same, &v()), Precondition::Proceed);
    }

    #[test]
    fn if_none_match_is_weak_and_beats_if_modified_since() {
        let weak = req(|r| r.if_none_match = Some("W/\"abc\"".into()));
        assert_eq!(evaluate(&weak, &v()), Precondition::NotModified);
        let miss = req(|r| {
            r.if_none_match = Some("\"nope\"".into());
            r.if_modified_since = Some("Sun, 06 Nov 1994 08:49:37 GMT".into());
        });
        assert_eq!(evaluate(&miss, &v()), Precondition::Proceed);
    }

    #[test]
    fn if_modified_since_in_all_three_formats() {
        for date in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            let r = req(|r| r.if_modified_since = Some(date.into()));
            assert_eq!(evaluate(&r, &v()), Precondition::NotModified, "{date}");
        }
        let older = req(|r| r.if_modified_since = Some("Sunday, 06-Nov-94 08:49:36 GMT".into()));
        assert_eq!(evaluate(&older, &v()), Precondition::Proceed);
        let junk = req(|r| r.if_modified_since = Some("yesterday".into()));
        assert_eq!(evaluate(&junk, &v()), Precondition::Proceed);
    }

    #[test]
    fn if_range() {
        assert!(if_range_holds(None, &v()));
        assert!(if_range_holds(Some("\"abc\""), &v()));
        assert!(!if_range_holds(Some("W/\"abc\""), &v()));
        assert!(!if_range_holds(Some("\"zzz\""), &v()));
        assert!(if_range_holds(Some("Sun, 06 Nov 1994 08:49:37 GMT"), &v()));
        assert!(!if_range_holds(Some("Sun, 06 Nov 1994 08:49:38 GMT"), &v()));
    }

    #[test]
    fn etag_changes_with_file() {
        let t = UNIX_EPOCH + Duration::new(1000, 5);
        let a = Validators::for_file(10, t, 1);
        assert_ne!(a.etag, Validators::for_file(11, t, 1).etag);
        assert_ne!(
            a.etag,
            Validators::for_file(10, t + Duration::from_nanos(1), 1).etag
        );
        assert!(a.etag.starts_with('"') && a.etag.ends_with('"'));
    }
}
