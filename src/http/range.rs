//! Which bytes a Range header asks for (RFC 9110 §14).

use super::limits::MAX_RANGES;

/// An inclusive byte range within a representation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    /// Never zero: a range holds at least its first byte.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum RangeOutcome {
    /// Serve the whole representation: no usable Range header.
    Whole,
    /// Serve these ranges (one: a plain 206; several: multipart/byteranges).
    Ranges(Vec<ByteRange>),
    /// 416: the header is valid but no range overlaps the representation.
    Unsatisfiable,
}

/// Evaluates a Range header against a representation of `len` bytes.
///
/// A malformed header is ignored (RFC 9110 §14.2). So is one with more than
/// `MAX_RANGES` ranges; overlapping or adjacent ranges are coalesced, so
/// repeated or overlapping ranges can never make the response larger than
/// the file (RFC 9110 §15.3.7.2 allows both).
pub fn evaluate(header: &str, len: u64) -> RangeOutcome {
    let Some(specs) = byte_specs(header) else {
        return RangeOutcome::Whole;
    };
    let mut ranges = Vec::new();
    let mut count = 0;
    for spec in specs.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        count += 1;
        if count > MAX_RANGES {
            return RangeOutcome::Whole;
        }
        match parse_spec(spec, len) {
            Spec::Malformed => return RangeOutcome::Whole,
            Spec::Unsatisfiable => {}
            Spec::Range(r) => ranges.push(r),
        }
    }
    if count == 0 {
        return RangeOutcome::Whole;
    }
    if ranges.is_empty() {
        return RangeOutcome::Unsatisfiable;
    }
    RangeOutcome::Ranges(coalesce(ranges))
}

/// The one range of a header that asks for exactly one satisfiable range
/// (what `evaluate` would answer with a list of one), found without
/// building a list: the common case, decided without allocating.
pub fn single(header: &str, len: u64) -> Option<ByteRange> {
    let mut specs = byte_specs(header)?
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty());
    match (specs.next(), specs.next()) {
        (Some(spec), None) => match parse_spec(spec, len) {
            Spec::Range(r) => Some(r),
            Spec::Unsatisfiable | Spec::Malformed => None,
        },
        _ => None,
    }
}

/// What follows `bytes=`; None for another unit or no `=`.
fn byte_specs(header: &str) -> Option<&str> {
    match header.split_once('=') {
        Some((unit, specs)) if unit.trim().eq_ignore_ascii_case("bytes") => Some(specs),
        _ => None,
    }
}

enum Spec {
    Range(ByteRange),
    Unsatisfiable,
    Malformed,
}

fn parse_spec(spec: &str, len: u64) -> Spec {
    let Some((first, last)) = spec.split_once('-') else {
        return Spec::Malformed;
    };
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        // Suffix range: the last N bytes.
        return match parse_digits(last) {
            None => Spec::Malformed,
            Some(0) => Spec::Unsatisfiable,
            Some(_) if len == 0 => Spec::Unsatisfiable,
            Some(n) => Spec::Range(ByteRange {
                start: len.saturating_sub(n),
                end: len - 1,
            }),
        };
    }
    let Some(start) = parse_digits(first) else {
        return Spec::Malformed;
    };
    let end = if last.is_empty() {
        u64::MAX
    } else {
        match parse_digits(last) {
            Some(end) if end >= start => end,
            _ => return Spec::Malformed,
        }
    };
    if start >= len {
        return Spec::Unsatisfiable;
    }
    Spec::Range(ByteRange {
        start,
        end: end.min(len - 1),
    })
}

fn parse_digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Merges ranges that overlap or touch. Ranges that are already disjoint
/// keep the order the client asked for.
fn coalesce(ranges: Vec<ByteRange>) -> Vec<ByteRange> {
    let mut sorted = ranges.clone();
    sorted.sort_by_key(|r| r.start);
    let disjoint = sorted
        .windows(2)
        .all(|w| w[0].end.saturating_add(1) < w[1].start);
    if disjoint {
        return ranges;
    }
    let mut merged: Vec<ByteRange> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match merged.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(1) => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    #[test]
    fn single_forms() {
        assert_eq!(
            evaluate("bytes=0-9", 100),
            RangeOutcome::Ranges(vec![r(0, 9)])
        );
        assert_eq!(
            evaluate("bytes=90-", 100),
            RangeOutcome::Ranges(vec![r(90, 99)])
        );
        assert_eq!(
            evaluate("bytes=-10", 100),
            RangeOutcome::Ranges(vec![r(90, 99)])
        );
        assert_eq!(
            evaluate("bytes=-500", 100),
            RangeOutcome::Ranges(vec![r(0, 99)])
        );
        assert_eq!(
            evaluate("bytes=50-5000", 100),
            RangeOutcome::Ranges(vec![r(50, 99)])
        );
    }

    #[test]
    fn single_agrees_with_evaluate() {
        // Exactly one satisfiable spec: the range evaluate would give.
        for h in [
            "bytes=0-9",
            "bytes=-10",
            "bytes=90-",
            "bytes=50-5000",
            " bytes = 3-4 ,",
        ] {
            let RangeOutcome::Ranges(v) = evaluate(h, 100) else {
                panic!("{h}")
            };
            assert_eq!(single(h, 100), Some(v[0]), "{h}");
        }
        // Anything else is left to evaluate.
        for h in [
            "bytes=100-",
            "bytes=0-1,5-6",
            "bytes=0-1,1-2",
            "bytes=5-1",
            "items=0-1",
            "bytes=",
        ] {
            assert_eq!(single(h, 100), None, "{h}");
        }
    }

    #[test]
    fn unsatisfiable() {
        assert_eq!(evaluate("bytes=100-", 100), RangeOutcome::Unsatisfiable);
        assert_eq!(evaluate("bytes=-0", 100), RangeOutcome::Unsatisfiable);
        assert_eq!(evaluate("bytes=0-", 0), RangeOutcome::Unsatisfiable);
        assert_eq!(
            evaluate("bytes=200-300, 400-", 100),
            RangeOutcome::Unsatisfiable
        );
    }

    #[test]
    fn malformed_is_ignored() {
        for h in [
            "bytes=5-1",
            "bytes=a-b",
            "items=0-1",
            "bytes=",
            "bytes=1",
            "0-1",
            "bytes=--1",
        ] {
            assert_eq!(evaluate(h, 100), RangeOutcome::Whole, "{h}");
        }
    }

    #[test]
    fn several_ranges_keep_order_unless_they_overlap() {
        assert_eq!(
            evaluate("bytes=50-59, 0-9", 100),
            RangeOutcome::Ranges(vec![r(50, 59), r(0, 9)])
        );
        assert_eq!(
            evaluate("bytes=0-10, 5-20, 21-30, 80-", 100),
            RangeOutcome::Ranges(vec![r(0, 30), r(80, 99)])
        );
    }

    #[test]
    fn range_count_is_capped() {
        let many = (0..17)
            .map(|i| format!("{}-{}", i * 2, i * 2))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(evaluate(&format!("bytes={many}"), 100), RangeOutcome::Whole);
        let repeated = vec!["0-"; 16].join(",");
        assert_eq!(
            evaluate(&format!("bytes={repeated}"), 100),
            RangeOutcome::Ranges(vec![r(0, 99)])
        );
    }

    #[test]
    fn past_four_gib() {
        let len = 5 << 30;
        assert_eq!(
            evaluate("bytes=4831838208-4831838217", len),
            RangeOutcome::Ranges(vec![r(4831838208, 4831838217)])
        );
    }
}
