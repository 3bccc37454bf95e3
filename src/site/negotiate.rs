//! Which variant of a file a client should get: precompressed siblings by
//! Accept-Encoding, modern image formats by Accept. Only the choosing is
//! here; [`site`](crate::site) opens the candidates.

/// A content coding with a precompressed sibling `NAME.<suffix>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coding {
    /// The token in Accept-Encoding and Content-Encoding.
    pub token: &'static str,
    pub suffix: &'static str,
}

/// In order of preference when the client rates them equally.
pub const CODINGS: [Coding; 3] = [
    Coding {
        token: "br",
        suffix: ".br",
    },
    Coding {
        token: "zstd",
        suffix: ".zst",
    },
    Coding {
        token: "gzip",
        suffix: ".gz",
    },
];

/// An image format that may stand in for a JPEG, PNG or GIF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageFormat {
    pub mime: &'static str,
    pub extension: &'static str,
}

/// In order of preference: AVIF compresses better than WebP.
pub const IMAGE_FORMATS: [ImageFormat; 2] = [
    ImageFormat {
        mime: "image/avif",
        extension: "avif",
    },
    ImageFormat {
        mime: "image/webp",
        extension: "webp",
    },
];

/// The image types that may be replaced by a sibling in a newer format.
pub fn is_replaceable_image(content_type: &str) -> bool {
    matches!(content_type, "image/jpeg" | "image/png" | "image/gif")
}

/// How much the client wants `coding`, in thousandths: its own q-value,
/// else that of `*`, else 0 (refused). The first mention counts.
pub fn coding_quality(accept_encoding: &str, coding: Coding) -> u16 {
    let is_it = |t: &str| {
        t.eq_ignore_ascii_case(coding.token)
            || (coding.token == "gzip" && t.eq_ignore_ascii_case("x-gzip"))
    };
    let named = weighted(accept_encoding).find(|(t, _)| is_it(t));
    let star = || weighted(accept_encoding).find(|(t, _)| *t == "*");
    named.or_else(star).map_or(0, |(_, q)| q)
}

/// The coding to send among those `available`: the client's highest
/// q-value, ties going to br, then zstd, then gzip. None: identity.
pub fn best_coding(
    accept_encoding: Option<&str>,
    available: impl Fn(Coding) -> bool,
) -> Option<Coding> {
    let header = accept_encoding?;
    CODINGS
        .iter()
        .enumerate()
        .filter(|(_, c)| available(**c))
        .map(|(rank, c)| (coding_quality(header, *c), rank, *c))
        .filter(|(q, _, _)| *q > 0)
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, _, c)| c)
}

/// The codings the client accepts, best first (q-value, then br, zstd,
/// gzip). `q=0` refuses a coding; `*` covers codings not named.
pub fn acceptable_codings(accept_encoding: Option<&str>) -> Vec<Coding> {
    let Some(header) = accept_encoding else {
        return Vec::new();
    };
    let mut rated: Vec<(u16, usize, Coding)> = CODINGS
        .iter()
        .enumerate()
        .map(|(rank, c)| (coding_quality(header, *c), rank, *c))
        .filter(|(q, _, _)| *q > 0)
        .collect();
    rated.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    rated.into_iter().map(|(_, _, c)| c).collect()
}

/// Whether the client's Accept names `format` explicitly with q > 0. A
/// bare `*/*` or `image/*` does not count: every browser sends those, and
/// they do not say the client can decode AVIF or WebP.
pub fn accepts_image(accept: Option<&str>, format: ImageFormat) -> bool {
    accept.is_some_and(|header| {
        weighted(header).any(|(t, q)| t.eq_ignore_ascii_case(format.mime) && q > 0)
    })
}

/// Image formats the client accepts (see `accepts_image`), best first.
pub fn acceptable_images(accept: Option<&str>) -> Vec<ImageFormat> {
    IMAGE_FORMATS
        .iter()
        .filter(|f| accepts_image(accept, **f))
        .copied()
        .collect()
}

/// Whether the client prefers JSON to HTML (for directory listings).
pub fn prefers_json(accept: Option<&str>) -> bool {
    let Some(header) = accept else {
        return false;
    };
    let q_of = |mime: &str| {
        weighted(header)
            .find(|(t, _)| t.eq_ignore_ascii_case(mime))
            .map(|(_, q)| q)
    };
    match (q_of("application/json"), q_of("text/html")) {
        (Some(json), Some(html)) => json > html,
        (Some(json), None) => json > 0,
        _ => false,
    }
}

/// Whether Accept names text/html itself with q > 0. Browsers do; a bare
/// `*/*` (curl) or `text/*` does not count.
pub fn lists_html(accept: Option<&str>) -> bool {
    accept.is_some_and(|header| {
        weighted(header).any(|(t, q)| t.eq_ignore_ascii_case("text/html") && q > 0)
    })
}

/// `a;q=0.5, b` -> ("a", 500), ("b", 1000): tokens as sent (compare them
/// ignoring case), q-values in thousandths (RFC 9110 §12.4.2). An
/// unparsable q counts as 0.
fn weighted(header: &str) -> impl Iterator<Item = (&str, u16)> {
    header.split(',').filter_map(|item| {
        let mut parts = item.split(';');
        let token = parts.next()?.trim();
        if token.is_empty() {
            return None;
        }
        let mut q = 1000;
        for param in parts {
            if let Some((k, v)) = param.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    q = parse_qvalue(v.trim()).unwrap_or(0);
                }
            }
        }
        Some((token, q))
    })
}

fn parse_qvalue(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole = match int {
        "0" => 0,
        "1" => 1000,
        _ => return None,
    };
    let mut thousandths = 0u16;
    for (i, b) in frac.bytes().enumerate() {
        thousandths += u16::from(b - b'0') * [100, 10, 1][i];
    }
    let q = whole + thousandths;
    (q <= 1000).then_some(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(h: &str) -> Vec<&'static str> {
        acceptable_codings(Some(h))
            .iter()
            .map(|c| c.token)
            .collect()
    }

    #[test]
    fn codings_by_preference() {
        assert_eq!(tokens("gzip, deflate, br, zstd"), ["br", "zstd", "gzip"]);
        assert_eq!(tokens("gzip"), ["gzip"]);
        assert_eq!(tokens("gzip;q=1.0, br;q=0.5"), ["gzip", "br"]);
        assert_eq!(tokens("br;q=0, *"), ["zstd", "gzip"]);
        assert_eq!(tokens("*;q=0, gzip;q=0.1"), ["gzip"]);
        assert_eq!(tokens("identity"), Vec::<&str>::new());
        assert_eq!(tokens("x-gzip"), ["gzip"]);
        assert_eq!(tokens("GZIP;Q=0.5"), ["gzip"]);
        assert_eq!(tokens("gzip;q=bogus"), Vec::<&str>::new());
        assert!(acceptable_codings(None).is_empty());
    }

    #[test]
    fn qvalues() {
        assert_eq!(parse_qvalue("0.5"), Some(500));
        assert_eq!(parse_qvalue("1"), Some(1000));
        assert_eq!(parse_qvalue("1.000"), Some(1000));
        assert_eq!(parse_qvalue("1.5"), None);
        assert_eq!(parse_qvalue("0.0001"), None);
    }

    #[test]
    fn images() {
        let browser = "image/avif,image/webp,image/apng,*/*;q=0.8";
        let got: Vec<_> = acceptable_images(Some(browser))
            .iter()
            .map(|f| f.extension)
            .collect();
        assert_eq!(got, ["avif", "webp"]);
        assert!(acceptable_images(Some("image/*,*/*")).is_empty());
        assert!(acceptable_images(Some("image/webp;q=0")).is_empty());
        assert!(is_replaceable_image("image/png"));
        assert!(!is_replaceable_image("image/svg+xml"));
    }

    #[test]
    fn json_listing() {
        assert!(prefers_json(Some("application/json")));
        assert!(!prefers_json(Some("text/html,application/json;q=0.9")));
        assert!(!prefers_json(Some("*/*")));
        assert!(!prefers_json(None));
    }

    #[test]
    fn html_only_when_listed() {
        let firefox = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        assert!(lists_html(Some(firefox)));
        assert!(lists_html(Some("TEXT/HTML;q=0.1")));
        assert!(!lists_html(Some("*/*")));
        assert!(!lists_html(Some("text/*")));
        assert!(!lists_html(Some("text/html;q=0, */*")));
        assert!(!lists_html(Some("application/json")));
        assert!(!lists_html(None));
    }
}
