//! What the driver knows to be right: every version of every file it ever
//! wrote (or removed), the faults and when they ran, and the tallies of
//! requests and failures. A body is accepted only if it equals a version
//! that existed around the time of its request.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long before a request began a replaced version may still be served:
/// the open-file cache trusts what it has for a second, and `_headers` /
/// `_redirects` are checked at most once a second (per worker thread).
pub const SLACK: Duration = Duration::from_millis(3000);

/// How long after a fault ended failures it explains may still arrive.
pub const FAULT_TAIL: Duration = Duration::from_millis(3000);

#[derive(Clone)]
pub struct Version {
    pub id: u64,
    /// None: the file did not exist.
    pub content: Option<Arc<Vec<u8>>>,
    /// Set when this version is the old one truncated in place: the content
    /// it was cut from (a response begun before may end early).
    pub cut_from: Option<Arc<Vec<u8>>>,
    pub from: Instant,
    pub until: Option<Instant>,
}

impl Version {
    fn around(&self, start: Instant, end: Instant) -> bool {
        self.from <= end + Duration::from_millis(50)
            && self.until.is_none_or(|u| u + SLACK >= start)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Fault {
    CertSwap,
    HeadersEdit,
    RedirectsEdit,
    ReplaceFiles,
    Truncate,
    DirChurn,
    LogRotate,
    DiskFull,
    RollingRestart,
    FdExhaustion,
}

pub const FAULTS: [Fault; 10] = [
    Fault::CertSwap,
    Fault::HeadersEdit,
    Fault::RollingRestart,
    Fault::Truncate,
    Fault::LogRotate,
    Fault::FdExhaustion,
    Fault::RedirectsEdit,
    Fault::DirChurn,
    Fault::DiskFull,
    Fault::ReplaceFiles,
];

pub struct Window {
    pub fault: Fault,
    pub server: &'static str,
    pub start: Instant,
    pub end: Option<Instant>,
}

#[derive(Default)]
pub struct Tally {
    pub requests: BTreeMap<String, u64>,
    pub explained: BTreeMap<String, u64>,
    pub unexplained: BTreeMap<String, u64>,
    pub examples: Vec<String>,
    pub faults: BTreeMap<String, u64>,
    pub notes: Vec<String>,
}

/// A request id and when its response began, per server.
pub struct Answered {
    pub id: u64,
    pub at: Instant,
}

pub struct Soak {
    pub t0: Instant,
    pub versions: Mutex<HashMap<String, Vec<Version>>>,
    pub windows: Mutex<Vec<Window>>,
    pub tally: Mutex<Tally>,
    pub answered: Mutex<Vec<Answered>>,
    pub next_id: AtomicU64,
    pub next_version: AtomicU64,
    pub stop: AtomicBool,
    pub stop_slow: AtomicBool,
    /// Connections the driver holds open to each server (plain, tls).
    pub open: [AtomicI64; 2],
    pub good: Mutex<Vec<(Instant, Duration)>>,
}

pub enum Verdict {
    Ok,
    /// Accepted, but worth its own count ("short read of a truncated file").
    Explained(String),
    Bad(String),
}

impl Soak {
    pub fn new() -> Arc<Soak> {
        Arc::new(Soak {
            t0: Instant::now(),
            versions: Mutex::new(HashMap::new()),
            windows: Mutex::new(Vec::new()),
            tally: Mutex::new(Tally::default()),
            answered: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            next_version: AtomicU64::new(1),
            stop: AtomicBool::new(false),
            stop_slow: AtomicBool::new(false),
            open: [AtomicI64::new(0), AtomicI64::new(0)],
            good: Mutex::new(Vec::new()),
        })
    }

    pub fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn version_id(&self) -> u64 {
        self.next_version.fetch_add(1, Ordering::Relaxed)
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn secs(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.t0).as_secs_f64()
    }

    /// Records that `path` now holds `content` (None: absent).
    pub fn set(&self, path: &str, content: Option<Vec<u8>>, cut_from: Option<Arc<Vec<u8>>>) {
        let now = Instant::now();
        let mut v = self.versions.lock().unwrap();
        let list = v.entry(path.to_string()).or_default();
        if let Some(last) = list.last_mut() {
            last.until = Some(now);
        }
        list.push(Version {
            id: self.version_id(),
            content: content.map(Arc::new),
            cut_from,
            from: now,
            until: None,
        });
    }

    pub fn current(&self, path: &str) -> Option<Arc<Vec<u8>>> {
        let v = self.versions.lock().unwrap();
        v.get(path)
            .and_then(|l| l.last())
            .and_then(|x| x.content.clone())
    }

    pub fn candidates(&self, path: &str, start: Instant, end: Instant) -> Vec<Version> {
        let v = self.versions.lock().unwrap();
        v.get(path)
            .map(|l| l.iter().filter(|x| x.around(start, end)).cloned().collect())
            .unwrap_or_default()
    }

    pub fn count(&self, kind: &str) {
        *self
            .tally
            .lock()
            .unwrap()
            .requests
            .entry(kind.to_string())
            .or_default() += 1;
    }

    pub fn explained(&self, cause: &str) {
        *self
            .tally
            .lock()
            .unwrap()
            .explained
            .entry(cause.to_string())
            .or_default() += 1;
    }

    pub fn unexplained(&self, cause: &str, detail: String) {
        let mut t = self.tally.lock().unwrap();
        *t.unexplained.entry(cause.to_string()).or_default() += 1;
        if t.examples.len() < 60 {
            let line = format!("[{:.1}s] {cause}: {detail}", self.secs(Instant::now()));
            eprintln!("soak: UNEXPLAINED {line}");
            t.examples.push(line);
        }
    }

    pub fn note(&self, line: String) {
        println!("soak: [{:6.1}s] {line}", self.secs(Instant::now()));
        self.tally.lock().unwrap().notes.push(line);
    }

    pub fn answered(&self, id: u64) {
        self.answered.lock().unwrap().push(Answered {
            id,
            at: Instant::now(),
        });
    }

    pub fn fault_begins(&self, fault: Fault, server: &'static str) -> usize {
        let mut w = self.windows.lock().unwrap();
        w.push(Window {
            fault,
            server,
            start: Instant::now(),
            end: None,
        });
        *self
            .tally
            .lock()
            .unwrap()
            .faults
            .entry(format!("{fault:?}"))
            .or_default() += 1;
        w.len() - 1
    }

    pub fn fault_ends(&self, index: usize) {
        self.windows.lock().unwrap()[index].end = Some(Instant::now());
    }

    /// The fault of one of `kinds` on `server` running (or just ended)
    /// between `start` and `end`, if any.
    pub fn fault_during(
        &self,
        kinds: &[Fault],
        server: &str,
        start: Instant,
        end: Instant,
    ) -> Option<Fault> {
        let w = self.windows.lock().unwrap();
        w.iter()
            .filter(|x| kinds.contains(&x.fault) && (x.server == server || x.server == "both"))
            .find(|x| {
                x.start <= end + Duration::from_millis(50)
                    && x.end.is_none_or(|e| e + FAULT_TAIL >= start)
            })
            .map(|x| x.fault)
    }

    /// Checks a complete 200 (or 404) body of `path` against its versions.
    /// `complete`: the whole Content-Length arrived.
    pub fn check_body(
        &self,
        path: &str,
        status: u16,
        body: &[u8],
        complete: bool,
        start: Instant,
        end: Instant,
    ) -> Verdict {
        let cands = self.candidates(path, start, end);
        if cands.is_empty() {
            return Verdict::Bad(format!("{path}: no version known"));
        }
        if status == 404 {
            return if cands.iter().any(|c| c.content.is_none()) {
                Verdict::Explained(
                    "expected: 404 while the file or its directory was removed".into(),
                )
            } else {
                Verdict::Bad(format!("{path}: 404 but the file existed throughout"))
            };
        }
        if status != 200 {
            return Verdict::Bad(format!("{path}: status {status}"));
        }
        if complete
            && cands
                .iter()
                .any(|c| c.content.as_deref().map(|x| x.as_slice()) == Some(body))
        {
            return Verdict::Ok;
        }
        // A file truncated in place while it was sent: the old version's
        // bytes up to where the response ended, the connection closed.
        for c in &cands {
            if let Some(old) = &c.cut_from {
                if !complete && body.len() <= old.len() && old[..body.len()] == *body {
                    return Verdict::Explained(
                        "expected: short read of a file truncated in place (prefix, then close)"
                            .into(),
                    );
                }
                // Documented (docs/behaviour.md, Timeouts): with sendfile, bytes the
                // kernel already holds turn to zeros when the file is cut.
                let cut = c.content.as_ref().map_or(0, |x| x.len());
                if body.len() <= old.len()
                    && body.len() > cut
                    && old[..cut] == body[..cut]
                    && body[cut..]
                        .iter()
                        .zip(&old[cut..])
                        .all(|(b, o)| *b == 0 || b == o)
                {
                    return Verdict::Explained(
                        "documented: zeros past the cut of a file truncated in place (sendfile)"
                            .into(),
                    );
                }
            }
        }
        let which = self.whose(body);
        Verdict::Bad(format!(
            "{path}: body of {} bytes ({}) matches no version around the request ({} candidates){which}",
            body.len(),
            if complete { "complete" } else { "cut short" },
            cands.len()
        ))
    }

    /// Checks one range `first..=last` of `total` bytes: bytes of one
    /// version of that length.
    pub fn check_range(
        &self,
        path: &str,
        parts: &[(u64, u64, u64, Vec<u8>)],
        start: Instant,
        end: Instant,
    ) -> Verdict {
        let cands = self.candidates(path, start, end);
        for c in &cands {
            let Some(content) = &c.content else { continue };
            let fits = parts.iter().all(|(first, last, total, bytes)| {
                *total == content.len() as u64
                    && *last < *total
                    && first <= last
                    && content[*first as usize..=*last as usize] == bytes[..]
            });
            if fits {
                return Verdict::Ok;
            }
        }
        Verdict::Bad(format!(
            "{path}: ranges {:?} match no single version ({} candidates)",
            parts
                .iter()
                .map(|(a, b, t, x)| (*a, *b, *t, x.len()))
                .collect::<Vec<_>>(),
            cands.len()
        ))
    }

    /// Which file's version a body is, if any (for the failure detail).
    fn whose(&self, body: &[u8]) -> String {
        let v = self.versions.lock().unwrap();
        for (path, list) in v.iter() {
            for x in list {
                if x.content.as_deref().map(|c| c.as_slice()) == Some(body) {
                    return format!("; it is {path} version {}", x.id);
                }
            }
        }
        let head = String::from_utf8_lossy(&body[..body.len().min(60)]).into_owned();
        format!("; begins {head:?}")
    }

    /// Checks a header value (or Location) against the versions of a rule
    /// file, whose content is the value.
    pub fn check_value(&self, key: &str, value: &[u8], start: Instant, end: Instant) -> Verdict {
        let cands = self.candidates(key, start, end);
        if cands
            .iter()
            .any(|c| c.content.as_deref().map(|x| x.as_slice()) == Some(value))
        {
            Verdict::Ok
        } else {
            Verdict::Bad(format!(
                "{key}: {:?} is none of {:?}",
                String::from_utf8_lossy(&value[..value.len().min(80)]),
                cands
                    .iter()
                    .map(|c| c
                        .content
                        .as_deref()
                        .map(|x| String::from_utf8_lossy(x).into_owned()))
                    .collect::<Vec<_>>()
            ))
        }
    }
}
