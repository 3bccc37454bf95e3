//! `--log-format json`: one JSON object per line, in the layout of Caddy's
//! access log.
//!
//! Why Caddy's layout, nested as it nests it: it is the one JSON access log
//! that tools already read as it comes (GoAccess's `--log-format=CADDY`,
//! lnav's caddy_log format, the jq recipes people share); nginx has no JSON
//! log of its own, only `log_format ... escape=json` with names each site
//! makes up (`remote_addr`, `request_time`, `body_bytes_sent` are the
//! usual ones). Where the two agree (`status`) the name is the same; where
//! they do not, Caddy's wins because it is a format, not a custom. So:
//!
//! ```text
//! {"ts":971186136.000000,"request":{"remote_ip":"10.0.0.1","proto":"HTTP/1.1",
//!  "method":"GET","host":"example.test","uri":"/a?b","headers":{"User-Agent":["curl/8"],
//!  "Referer":["https://x/"]},"tls":{"resumed":false,"version":772,
//!  "cipher_suite":4865,"proto":"h2"}},"user_id":"ann","status":200,"size":2326,
//!  "duration":0.000412}
//! ```
//!
//! `size` is the body bytes sent (nginx's `$body_bytes_sent`, Caddy's `size`), `duration` the
//! seconds from the response being decided to its last byte handed to the kernel (both filled in
//! when the line is written, see [`Line::fill`](crate::log::Line::fill)). `tls` is present only
//! over HTTPS (see [`Tls`](crate::log::Tls) for what it holds; Caddy also writes `server_name`,
//! which is the `host` here). Headers the request lacked are left out, as Caddy leaves them out.

use std::fmt::{self, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Entry;

/// Writes the line up to its size, and returns where the size goes: the
/// rest (`size`, `duration` and the closing brace) is written by `fill`.
pub(super) fn line(out: &mut String, e: &Entry, now: SystemTime) -> Result<usize, fmt::Error> {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    write!(
        out,
        "{{\"ts\":{}.{:06},\"request\":{{\"remote_ip\":",
        since.as_secs(),
        since.subsec_micros()
    )?;
    string(out, e.client);
    if let Some(r) = e.request {
        // The name the common format writes (HTTP/1.1, HTTP/2.0, HTTP/3.0).
        out.push_str(",\"proto\":\"");
        out.push_str(r.protocol_name());
        out.push_str("\",\"method\":");
        string(out, r.method.as_str());
        out.push_str(",\"host\":");
        string(out, r.host.as_deref().unwrap_or(""));
        out.push_str(",\"uri\":");
        string(out, &r.target);
        out.push_str(",\"headers\":{");
        let mut first = true;
        for (name, value) in [("User-Agent", &r.user_agent), ("Referer", &r.referer)] {
            if let Some(value) = value {
                if !first {
                    out.push(',');
                }
                first = false;
                write!(out, "\"{name}\":[")?;
                string(out, value);
                out.push(']');
            }
        }
        out.push('}');
    }
    if let Some(tls) = &e.tls {
        self::tls(out, tls)?;
    }
    out.push_str("},\"user_id\":");
    string(out, e.user.unwrap_or(""));
    write!(out, ",\"status\":{},\"size\":", e.status)?;
    Ok(out.len())
}

/// The `tls` object, with Caddy's names; what is not known is left out.
fn tls(out: &mut String, tls: &super::Tls) -> fmt::Result {
    out.push_str(",\"tls\":{");
    if let Some(resumed) = tls.resumed {
        write!(out, "\"resumed\":{resumed},")?;
    }
    write!(out, "\"version\":{}", tls.version)?;
    if let Some(suite) = tls.cipher_suite {
        write!(out, ",\"cipher_suite\":{suite}")?;
    }
    // One of a few fixed names: nothing to escape.
    write!(out, ",\"proto\":\"{}\"}}", tls.proto.as_str())
}

/// What follows the size: the duration, in seconds to the microsecond, and the end.
pub(super) fn tail(out: &mut String, took: Duration) {
    // In integers: formatting an f64 would link in float formatting, 6 KB of the minimal
    // build for this one number.
    let micros = (took.as_nanos() + 500) / 1000;
    let (seconds, fraction) = (micros / 1_000_000, micros % 1_000_000);
    // Writing to a String cannot fail.
    let _ = write!(out, ",\"duration\":{seconds}.{fraction:06}}}");
}

/// `s` as a JSON string: quotes, backslashes and every control character
/// escaped (C0, DEL and C1, which a terminal reading the log would act on),
/// and U+2028/U+2029, which end a line in JavaScript. A `&str` is valid
/// UTF-8 already: bytes that were not are U+FFFD by the time they get here.
pub(super) fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &str) -> String {
        let mut out = String::new();
        string(&mut out, s);
        out
    }

    #[test]
    fn hostile_strings_stay_one_json_string() {
        assert_eq!(escaped("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(escaped("\n\r\t\x1b[31m\x7f"), r#""\n\r\t\u001b[31m\u007f""#);
        assert_eq!(
            escaped("\u{85}\u{2028}é\u{fffd}"),
            "\"\\u0085\\u2028é\u{fffd}\""
        );
    }

    #[test]
    fn durations_are_seconds_rounded_to_the_microsecond() {
        let tail_of = |nanos| {
            let mut out = String::new();
            tail(&mut out, Duration::from_nanos(nanos));
            out
        };
        assert_eq!(tail_of(0), r#","duration":0.000000}"#);
        assert_eq!(tail_of(1_234_567_890), r#","duration":1.234568}"#);
        assert_eq!(tail_of(499), r#","duration":0.000000}"#);
        assert_eq!(tail_of(999_999_500), r#","duration":1.000000}"#);
        assert_eq!(tail_of(61_000_001_000), r#","duration":61.000001}"#);
    }
}
