//! Access-log lines. Formatting is pure; `emit` is the one write to stderr.

use std::fmt::{self, Write as _};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::LogFormat;
use crate::http::parse::Request;
use crate::pool;

/// What one response contributes to the log.
pub struct Entry<'a> {
    /// Client IP address, or `-` when unknown.
    pub client: &'a str,
    /// The request, when its head parsed.
    pub request: Option<&'a Request<'a>>,
    pub status: u16,
    pub body_len: u64,
}

/// One formatted access-log line (empty when logging is off). Its buffer
/// goes back to the thread's free list when dropped.
#[derive(Default)]
pub struct Line(String);

impl Line {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Appends another line (pipelined answers log in one write).
    pub fn push(&mut self, more: &Line) {
        if self.0.is_empty() {
            self.0 = pool::take(&pool::LINES);
        }
        self.0.push_str(&more.0);
    }

    /// Writes the line, if there is one.
    pub fn emit(&self) {
        if !self.0.is_empty() {
            emit(&self.0);
        }
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        pool::give(&pool::LINES, std::mem::take(&mut self.0));
    }
}

pub fn format(format: LogFormat, e: &Entry, now: SystemTime) -> Line {
    if format == LogFormat::Off {
        return Line::default();
    }
    let mut out = pool::take(&pool::LINES);
    // Writing to a String cannot fail.
    let _ = match format {
        LogFormat::Off => Ok(()),
        LogFormat::Fnord => fnord(&mut out, e),
        LogFormat::Common | LogFormat::Combined => common(&mut out, format, e, now),
    };
    out.push('\n');
    Line(out)
}

/// The Common Log Format, and with Combined the referer and user agent.
fn common(out: &mut String, format: LogFormat, e: &Entry, now: SystemTime) -> fmt::Result {
    let req = e.request;
    write!(out, "{} - - [", e.client)?;
    clf_time(out, now)?;
    out.push_str("] \"");
    match req {
        Some(r) => {
            escape(out, r.method.as_str());
            out.push(' ');
            escape(out, &r.target);
            write!(out, " HTTP/1.{}", r.minor_version)?;
        }
        None => out.push('-'),
    }
    write!(out, "\" {} ", e.status)?;
    if e.body_len == 0 {
        out.push('-');
    } else {
        write!(out, "{}", e.body_len)?;
    }
    if format == LogFormat::Combined {
        let referer = req.and_then(|r| r.referer.as_deref()).unwrap_or("-");
        let agent = req.and_then(|r| r.user_agent.as_deref()).unwrap_or("-");
        out.push_str(" \"");
        escape(out, referer);
        out.push_str("\" \"");
        escape(out, agent);
        out.push('"');
    }
    Ok(())
}

/// fnord's line: `IP STATUS SIZE HOST USER_AGENT REFERER PATH`, spaces in
/// the agent and referer turned into `_`, `none` for a missing referer.
fn fnord(out: &mut String, e: &Entry) -> fmt::Result {
    let req = e.request;
    let host = req.and_then(|r| r.host.as_deref()).unwrap_or("-");
    let agent = req.and_then(|r| r.user_agent.as_deref()).unwrap_or("-");
    let referer = req.and_then(|r| r.referer.as_deref()).unwrap_or("none");
    let path = req.map_or("-", |r| &r.target);
    write!(out, "{} {} {} ", e.client, e.status, e.body_len)?;
    escape(out, host);
    out.push(' ');
    escape_underscored(out, agent);
    out.push(' ');
    escape_underscored(out, referer);
    out.push(' ');
    escape(out, path);
    Ok(())
}

/// Appends a client-supplied value kept on one line and free of quotes.
fn escape(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// `escape`, with spaces as `_` (fnord's fields are space-separated).
fn escape_underscored(out: &mut String, s: &str) {
    for part in s.split(' ').enumerate() {
        if part.0 > 0 {
            out.push('_');
        }
        escape(out, part.1);
    }
}

/// `10/Oct/2000:13:55:36 +0000`, in UTC.
fn clf_time(out: &mut String, t: SystemTime) -> fmt::Result {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    write!(
        out,
        "{d:02}/{}/{y}:{:02}:{:02}:{:02} +0000",
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), after Howard Hinnant's
/// `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Where access-log lines go: stderr unless `--log-file` names a file.
static ACCESS_LOG: Mutex<Option<AccessFile>> = Mutex::new(None);

struct AccessFile {
    path: PathBuf,
    file: File,
}

/// Sends access-log lines to `path` (appending) instead of stderr.
pub fn open_file(path: &Path) -> io::Result<()> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let mut slot = ACCESS_LOG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *slot = Some(AccessFile {
        path: path.to_path_buf(),
        file,
    });
    Ok(())
}

/// Opens the log file again under its name (after SIGHUP), so rotation by
/// renaming works. On failure the old file stays in use.
pub fn reopen() -> io::Result<()> {
    let mut slot = ACCESS_LOG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(current) = slot.as_mut() {
        current.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&current.path)?;
    }
    Ok(())
}

/// Writes one access-log line in a single write, so lines from several
/// threads never interleave.
pub fn emit(line: &str) {
    let mut slot = ACCESS_LOG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match slot.as_mut() {
        Some(f) => {
            let _ = f.file.write_all(line.as_bytes());
        }
        None => diagnostic(line),
    }
}

/// Writes a line about the server itself (not a request) to stderr.
pub fn diagnostic(line: &str) {
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(971_186_136) // 2000-10-10 13:55:36 UTC
    }

    fn req() -> Request<'static> {
        Request {
            target: "/a b?x".into(),
            minor_version: 1,
            host: Some("example.test".into()),
            user_agent: Some("Mozilla/5.0 (X11)".into()),
            ..Request::default()
        }
    }

    #[test]
    fn common_and_combined() {
        let r = req();
        let e = Entry {
            client: "10.0.0.1",
            request: Some(&r),
            status: 200,
            body_len: 2326,
        };
        assert_eq!(
            format(LogFormat::Common, &e, t()).as_str(),
            "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a b?x HTTP/1.1\" 200 2326\n"
        );
        assert_eq!(
            format(LogFormat::Combined, &e, t()).as_str(),
            "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a b?x HTTP/1.1\" 200 2326 \"-\" \"Mozilla/5.0 (X11)\"\n"
        );
    }

    #[test]
    fn fnord_line() {
        let r = req();
        let e = Entry {
            client: "10.0.0.1",
            request: Some(&r),
            status: 404,
            body_len: 0,
        };
        assert_eq!(
            format(LogFormat::Fnord, &e, t()).as_str(),
            "10.0.0.1 404 0 example.test Mozilla/5.0_(X11) none /a b?x\n"
        );
    }

    #[test]
    fn unparsed_requests_and_hostile_values() {
        let e = Entry {
            client: "-",
            request: None,
            status: 400,
            body_len: 12,
        };
        assert!(format(LogFormat::Common, &e, t())
            .as_str()
            .contains("\"-\" 400 12"));
        let mut escaped = String::new();
        escape(&mut escaped, "a\"b\x1b");
        assert_eq!(escaped, "a\\\"b\\x1b");
        assert!(format(LogFormat::Off, &e, t()).is_empty());
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        let mut s = String::new();
        clf_time(&mut s, UNIX_EPOCH).unwrap();
        assert_eq!(s, "01/Jan/1970:00:00:00 +0000");
    }
}
