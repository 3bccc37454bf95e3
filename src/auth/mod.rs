//! HTTP Basic authentication (RFC 7617) against Apache htpasswd files:
//! `--auth PREFIX=HTPASSWD`, repeatable.
//!
//! A request whose path falls under a prefix needs a user and password of
//! that prefix's file; the longest matching prefix decides. [`Auth::check`]
//! is the whole interface: it says whether a path is open, granted (and to
//! whom, for the access log) or denied (and with which realm, for the 401's
//! `WWW-Authenticate`). It is called by every worker thread: the files'
//! tables sit behind short locks, and the slow part, verifying a hash, runs
//! outside them, at most once per user and password and file version
//! thanks to a cache of verified credentials. A file is checked for change
//! at most once a second and read again when it changed.

pub mod basic;
mod cache;
pub mod htpasswd;
pub mod locks;

use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::AuthArea;
use crate::rules::locks::Locks;
use crate::site::{Access, Guard};
use crate::sys::describe;
use basic::Credentials;
use htpasswd::Table;

/// How long a file is trusted before it is looked at again.
const RECHECK: Duration = Duration::from_secs(1);

/// What a request to a path may do.
#[derive(Debug, PartialEq, Eq)]
pub enum Check<'a> {
    /// No area covers the path.
    Open,
    /// The credentials are good: this user (for the access log).
    Granted { user: Arc<str> },
    /// Missing or wrong credentials: answer 401 with
    /// `WWW-Authenticate: Basic realm="<realm>", charset="UTF-8"`. The realm
    /// is the area's prefix, already escaped for the quoted string.
    Denied { realm: &'a str },
}

/// Every `--auth` area, and the credentials verified so far.
pub struct Auth {
    /// Longest prefix first, so the first that covers a path decides.
    areas: Vec<Area>,
    verified: cache::Verified,
    /// Numbers each version of each file, for the cache keys.
    generations: AtomicU64,
    recheck: Duration,
    /// Where problems found after start-up go.
    report: Box<dyn Fn(&str) + Send + Sync>,
    /// Hashes verified so far (cache misses), for the tests.
    verifications: AtomicU64,
}

struct Area {
    prefix: String,
    realm: String,
    /// None: the table was given in memory and is never read again.
    file: Option<PathBuf>,
    state: Mutex<FileState>,
}

struct FileState {
    checked: Instant,
    stamp: Option<Stamp>,
    table: Arc<Table>,
    generation: u64,
    readable: bool,
}

/// What tells one version of a file from the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }
}

impl Auth {
    /// Reads every area's file; a file that cannot be read is an error
    /// naming it. Problems inside a file go to `warn`, one line each
    /// (without a `staticd:` prefix). Later problems (a file that changed,
    /// or can no longer be read) go to stderr.
    pub fn load(areas: &[AuthArea], warn: &mut dyn FnMut(&str)) -> Result<Auth, String> {
        let report = |m: &str| crate::log::diagnostic(&format!("staticd: {m}\n"));
        Auth::load_reporting(areas, warn, Box::new(report), RECHECK)
    }

    /// Areas whose htpasswd text is given as bytes, never read again: for
    /// fuzzing and tests.
    pub fn from_memory(
        areas: &[(&str, &[u8])],
        warn: &mut dyn FnMut(&str),
    ) -> Result<Auth, String> {
        let mut auth = Auth::empty(Box::new(|_| {}), RECHECK);
        for (prefix, text) in areas {
            auth.add(prefix, None, text, None, warn)?;
        }
        auth.sort();
        Ok(auth)
    }

    fn load_reporting(
        areas: &[AuthArea],
        warn: &mut dyn FnMut(&str),
        report: Box<dyn Fn(&str) + Send + Sync>,
        recheck: Duration,
    ) -> Result<Auth, String> {
        let mut auth = Auth::empty(report, recheck);
        for area in areas {
            let (bytes, stamp) = read(&area.file)
                .map_err(|e| format!("htpasswd {}: {}", area.file.display(), describe(&e)))?;
            let file = Some(area.file.clone());
            auth.add(&area.prefix, file, &bytes, Some(stamp), warn)?;
        }
        auth.sort();
        Ok(auth)
    }

    fn empty(report: Box<dyn Fn(&str) + Send + Sync>, recheck: Duration) -> Auth {
        Auth {
            areas: Vec::new(),
            verified: cache::Verified::default(),
            generations: AtomicU64::new(0),
            recheck,
            report,
            verifications: AtomicU64::new(0),
        }
    }

    fn add(
        &mut self,
        prefix: &str,
        file: Option<PathBuf>,
        bytes: &[u8],
        stamp: Option<Stamp>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<(), String> {
        AuthArea::check_prefix(prefix).map_err(|e| format!("--auth: {e}"))?;
        let prefix = normalise(prefix);
        if self.areas.iter().any(|a| a.prefix == prefix) {
            return Err(format!("--auth: the prefix {prefix} is given twice"));
        }
        let name = file
            .as_deref()
            .map_or("-".into(), |f| f.display().to_string());
        let table = Table::parse(bytes, &name, warn);
        if table.decoy().is_none() {
            warn(&format!(
                "htpasswd {name}: no user can log in: everyone is refused under {prefix}"
            ));
        }
        let state = FileState {
            checked: Instant::now(),
            stamp,
            table: Arc::new(table),
            generation: self.next_generation(),
            readable: true,
        };
        self.areas.push(Area {
            realm: crate::http::escape_quoted(&prefix),
            prefix,
            file,
            state: Mutex::new(state),
        });
        Ok(())
    }

    fn sort(&mut self) {
        self.areas
            .sort_by_key(|a| std::cmp::Reverse(a.prefix.len()));
    }

    fn next_generation(&self) -> u64 {
        self.generations.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether a request for `path` (the decoded, normalised URL path,
    /// without the query) with this Authorization field value may go on.
    pub fn check(&self, path: &str, authorization: Option<&[u8]>) -> Check<'_> {
        let Some(area) = self.areas.iter().find(|a| covers(&a.prefix, path)) else {
            return Check::Open;
        };
        let denied = Check::Denied { realm: &area.realm };
        let Some(credentials) = authorization.and_then(basic::decode) else {
            return denied;
        };
        let (table, generation) = self.current(area);
        let key = cache::key(generation, credentials.user(), credentials.password());
        if let Some(user) = self.verified.get(&key) {
            return Check::Granted { user };
        }
        match self.verify(&table, &credentials) {
            Some(user) => {
                self.verified.insert(key, user.clone());
                Check::Granted { user }
            }
            None => denied,
        }
    }

    /// The user, when the password is theirs. An unknown user, or one who
    /// cannot log in, costs a verification all the same, so that the time
    /// taken does not tell which users exist.
    fn verify(&self, table: &Table, credentials: &Credentials) -> Option<Arc<str>> {
        let entry = table.find(credentials.user());
        let hash = entry.and_then(|e| e.hash.as_ref()).or(table.decoy())?;
        self.verifications.fetch_add(1, Ordering::Relaxed);
        let good = hash.verify(credentials.password());
        match entry {
            Some(e) if good && e.hash.is_some() => Some(e.user.clone()),
            _ => None,
        }
    }

    /// The area's table and its generation, read again first if the file
    /// changed.
    fn current(&self, area: &Area) -> (Arc<Table>, u64) {
        let mut state = area.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = &area.file {
            let now = Instant::now();
            if now.duration_since(state.checked) >= self.recheck {
                state.checked = now;
                self.refresh(area, file, &mut state);
            }
        }
        (state.table.clone(), state.generation)
    }

    fn refresh(&self, area: &Area, file: &Path, state: &mut FileState) {
        let now = fs::metadata(file).ok().map(|m| Stamp::of(&m));
        if state.readable && now.is_some() && now == state.stamp {
            return;
        }
        let name = file.display();
        match read(file) {
            Ok((bytes, stamp)) => {
                let mut warn = |m: &str| (self.report)(&format!("warning: {m}"));
                let table = Table::parse(&bytes, &name.to_string(), &mut warn);
                let again = if state.readable {
                    "read again"
                } else {
                    "readable again"
                };
                (self.report)(&format!("htpasswd {name}: {again}, {} users", table.len()));
                state.table = Arc::new(table);
                state.stamp = Some(stamp);
                state.readable = true;
            }
            Err(e) => {
                if state.readable {
                    (self.report)(&format!(
                        "warning: htpasswd {name}: {}: everyone is refused under {} until it can be read",
                        describe(&e),
                        area.prefix
                    ));
                }
                state.table = Arc::new(Table::default());
                state.stamp = None;
                state.readable = false;
            }
        }
        state.generation = self.next_generation();
    }

    /// How many hashes were verified (cache misses), for tests.
    #[cfg(test)]
    fn verifications(&self) -> u64 {
        self.verifications.load(Ordering::Relaxed)
    }
}

/// How the site asks: the `--auth` area's [`Check`], then the `_headers`
/// locks', as the site's `Access`. Both must let the credentials through:
/// the site's file cannot open what the command line protects, nor the
/// command line what the site protects.
impl Guard for Auth {
    fn access<'a>(
        &'a self,
        path: &str,
        locks: Locks<'a, '_>,
        authorization: Option<&str>,
    ) -> Access<'a> {
        let authorization = authorization.map(str::as_bytes);
        let area = match self.check(path, authorization) {
            Check::Open => None,
            Check::Granted { user } => Some(user),
            Check::Denied { realm } => return Access::Denied { realm },
        };
        match (locks::check(locks, authorization), area) {
            (Check::Denied { realm }, _) => Access::Denied { realm },
            (_, Some(user)) | (Check::Granted { user }, None) => Access::Granted { user },
            (Check::Open, None) => Access::Open,
        }
    }
}

/// `/private/` and `/private` are the same area; `/` stays.
fn normalise(prefix: &str) -> String {
    let trimmed = prefix.trim_end_matches('/');
    if trimmed.is_empty() {
        "/".to_string()
    } else {
        trimmed.to_string()
    }
}

/// `/private` covers `/private` and `/private/...`, not `/privateer`.
fn covers(prefix: &str, path: &str) -> bool {
    prefix == "/"
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The file's bytes (at most one more than a table reads, so that the
/// parser can say it was cut) and what identifies this version of it.
fn read(path: &Path) -> io::Result<(Vec<u8>, Stamp)> {
    // A FIFO or a device would block the open or never end.
    if !fs::metadata(path)?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let file = File::open(path)?;
    let stamp = Stamp::of(&file.metadata()?);
    let mut bytes = Vec::new();
    file.take(htpasswd::MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes, stamp))
}

#[cfg(test)]
mod tests;
