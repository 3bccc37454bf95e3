//! The files in a site's root that change how it is served: `_headers` and
//! `_redirects`, the Netlify / Cloudflare Pages conventions (parsed by
//! [`crate::rules`]).
//!
//! They are read when a site is first asked for and again when they change,
//! checked at most once a second (like the open-file cache). A check or read
//! that fails because the process is out of descriptors or memory changes
//! nothing: the rules in use stay, and the next check tries again. Whether the
//! root holds an error page (`404.html`...) is looked up the first time that
//! error is answered and kept with the files, so a later error costs no lookup
//! of a page the site does not have, and a process that answers no error (inetd
//! mode: one per connection) looks for none. Parsing happens
//! once per change for the whole process, under one lock, so each problem in
//! a file is reported once; worker threads then keep the parsed rules in a
//! per-thread map, so a request takes no lock and allocates nothing.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::rules::headers::HeaderRules;
use crate::rules::redirects::RedirectRules;
use crate::rules::MAX_BYTES;
use crate::sys;

/// How long a check of the files is trusted.
const FRESH_FOR: Duration = Duration::from_secs(1);
/// Most hosts a worker thread remembers; past it, it starts over (a client
/// cannot grow the map by sending made-up Host headers).
const MAX_LOCAL: usize = 256;

pub const HEADERS: &[u8] = b"_headers";
pub const REDIRECTS: &[u8] = b"_redirects";

/// A site's parsed root files; empty rules when a file is absent.
#[derive(Default)]
pub struct RootFiles {
    pub headers: HeaderRules,
    pub redirects: RedirectRules,
    /// Which `<code>.html` error pages the root holds, as far as looked.
    error_pages: ErrorPages,
}

impl RootFiles {
    /// Whether the root may hold the page for this error status: false when
    /// staticd has no such error, or a lookup found none since the files
    /// were read.
    pub fn may_have_error_page(&self, code: u16) -> bool {
        self.error_pages.may_have(code)
    }

    /// Notes that a lookup of this status's page found none.
    pub fn note_no_error_page(&self, code: u16) {
        self.error_pages.note_absent(code);
    }
}

/// One bit per [`ERROR_CODES`] entry: set in `absent` once a lookup found no
/// page. Kept with the files, which are read again when the root directory
/// changes (a page added or removed changes its mtime), so it is never older
/// than they are. Atomic: every worker thread shares one `RootFiles`.
#[derive(Default)]
struct ErrorPages {
    absent: AtomicU32,
}

impl ErrorPages {
    fn bit(code: u16) -> Option<u32> {
        let i = ERROR_CODES.iter().position(|&c| c == code)?;
        Some(1 << i)
    }

    fn may_have(&self, code: u16) -> bool {
        Self::bit(code).is_some_and(|bit| self.absent.load(Ordering::Relaxed) & bit == 0)
    }

    fn note_absent(&self, code: u16) {
        if let Some(bit) = Self::bit(code) {
            self.absent.fetch_or(bit, Ordering::Relaxed);
        }
    }
}

/// The error statuses staticd answers with, whose pages a site may replace.
const ERROR_CODES: [u16; 16] = [
    400, 401, 403, 404, 405, 411, 412, 414, 416, 431, 500, 501, 502, 503, 504, 505,
];

/// What identifies a version of a file: None when it is absent or unreadable.
type Stamp = Option<(u64, u64, u64, i64, i64)>;

/// The files could not be checked or read for now: the process is out of descriptors or memory
/// ([`sys::out_of_resources`]), which passes. Not the same as a file
/// that is absent or unreadable, whose rules are dropped.
#[derive(Debug)]
pub struct Exhausted;

/// The stamps of `_headers`, `_redirects` and the root directory itself,
/// whose mtime changes when an error page is added or removed.
type Stamps = [Stamp; 3];

struct Loaded {
    checked: Instant,
    /// The root's tree they were read in ([`super::root`](crate::site::root)): another tree's
    /// files are looked at again, whenever they were checked.
    generation: u64,
    stamps: Stamps,
    files: Arc<RootFiles>,
}

/// Every site's files, by directory name under the root ("" for the root).
static STORE: Mutex<Option<HashMap<String, Loaded>>> = Mutex::new(None);

/// A thread's view of one site's files: when it asked the store, and what
/// it got.
type Seen = (Instant, Arc<RootFiles>);

/// A thread's view, by the Host key the request gave. The empty key (every
/// request to a server without virtual hosts has it) has a slot of its own:
/// a map lookup, hashing and comparing the key, was a few percent of a small
/// response's cost.
#[derive(Default)]
struct Local {
    empty: Option<Seen>,
    by_host: HashMap<Vec<u8>, Seen>,
}

impl Local {
    fn get(&self, key: &[u8]) -> Option<&Seen> {
        match key {
            [] => self.empty.as_ref(),
            _ => self.by_host.get(key),
        }
    }

    fn put(&mut self, key: &[u8], seen: Seen) {
        if key.is_empty() {
            self.empty = Some(seen);
            return;
        }
        if let Some(entry) = self.by_host.get_mut(key) {
            *entry = seen;
            return;
        }
        if self.by_host.len() >= MAX_LOCAL {
            self.by_host.clear();
        }
        self.by_host.insert(key.to_vec(), seen);
    }
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::default();
}

/// The rules of the site a request with this host key reached, if this
/// thread looked them up less than a second ago.
pub fn cached(key: &[u8], now: Instant) -> Option<Arc<RootFiles>> {
    LOCAL.with(|l| {
        let l = l.borrow();
        let (checked, files) = l.get(key)?;
        (now.duration_since(*checked) < FRESH_FOR).then(|| Arc::clone(files))
    })
}

/// Forgets this thread's view of every site's files (the root moved to a
/// new tree: [`super::root`](crate::site::root)).
pub fn forget_local() {
    LOCAL.with(|l| *l.borrow_mut() = Local::default());
}

/// Remembers what `key` reached, for a second.
pub fn remember(key: &[u8], files: &Arc<RootFiles>, now: Instant) {
    LOCAL.with(|l| l.borrow_mut().put(key, (now, Arc::clone(files))));
}

/// The root files of the site in `dir` (named `name` under the root, shown
/// as `shown` in messages), read again if they changed. Out of descriptors
/// or memory, the files read last stay in use; Err only if there are none
/// yet.
pub fn load(
    dir: BorrowedFd<'_>,
    shown: &Path,
    name: &str,
    generation: u64,
    now: Instant,
) -> Result<Arc<RootFiles>, Exhausted> {
    let mut store = STORE.lock().unwrap_or_else(|e| e.into_inner());
    let store = store.get_or_insert_with(HashMap::new);
    if let Some(loaded) = store.get_mut(name) {
        if now.duration_since(loaded.checked) < FRESH_FOR && loaded.generation == generation {
            return Ok(Arc::clone(&loaded.files));
        }
        loaded.checked = now;
        loaded.generation = generation;
        match stamps(dir) {
            Ok(stamps) if stamps != loaded.stamps => {}
            // Unchanged, or not to be known now: kept until the next check.
            _ => return Ok(Arc::clone(&loaded.files)),
        }
    }
    let read = read(dir, shown);
    let (files, stamps) = match (read, store.get(name)) {
        (Ok(read), _) => read,
        (Err(Exhausted), Some(loaded)) => return Ok(Arc::clone(&loaded.files)),
        (Err(Exhausted), None) => return Err(Exhausted),
    };
    let files = Arc::new(files);
    let loaded = Loaded {
        checked: now,
        generation,
        stamps,
        files: Arc::clone(&files),
    };
    store.insert(name.to_string(), loaded);
    Ok(files)
}

fn stamps(dir: BorrowedFd<'_>) -> Result<Stamps, Exhausted> {
    Ok([stamp(dir, HEADERS)?, stamp(dir, REDIRECTS)?, dir_stamp(dir)])
}

fn dir_stamp(dir: BorrowedFd<'_>) -> Stamp {
    rustix::fs::fstat(dir).ok().map(|st| {
        (
            st.st_dev,
            st.st_ino,
            0,
            st.st_mtime,
            st.st_mtime_nsec as i64,
        )
    })
}

/// Reads and parses both files, reporting each problem on stderr.
/// Everything is read before anything is parsed, so a read cut short by
/// [`Exhausted`] does not repeat the parsers' reports.
fn read(dir: BorrowedFd<'_>, shown: &Path) -> Result<(RootFiles, Stamps), Exhausted> {
    // Each stamp is taken before its contents are read (a file's from the
    // descriptor it is read through): a change while reading is seen at
    // the next check.
    let dir_stamp = dir_stamp(dir);
    let (headers_text, headers_stamp) = read_file(dir, shown, HEADERS)?;
    let (redirects_text, redirects_stamp) = read_file(dir, shown, REDIRECTS)?;
    let mut files = RootFiles::default();
    if let Some(text) = headers_text {
        let path = file_path(shown, HEADERS);
        files.headers = HeaderRules::parse(&text, &mut |line, msg| report(&path, line, msg));
    }
    if let Some(text) = redirects_text {
        let path = file_path(shown, REDIRECTS);
        files.redirects = RedirectRules::parse(&text, &mut |line, msg| report(&path, line, msg));
    }
    warn_of_rewrites_over_immutable(&files, shown);
    Ok((files, [headers_stamp, redirects_stamp, dir_stamp]))
}

/// The single-page-app trap, said once when the files are loaded: a 200
/// rewrite (`/* /index.html 200`) over paths `_headers` marks immutable
/// (`/assets/*`). A rewritten response gets the `_headers` of the file it
/// serves (respond.rs), so the page is not cached as a missing script for a
/// year; but a missing asset still gets the page, with a 200.
fn warn_of_rewrites_over_immutable(files: &RootFiles, shown: &Path) {
    for sample in files.headers.immutable_samples() {
        let Some(rule) = files.redirects.first_match(sample) else {
            continue;
        };
        if rule.status() != 200 {
            continue;
        }
        let sample = String::from_utf8_lossy(sample);
        let msg = format!(
            "this 200 rewrite also answers {sample}, which _headers marks immutable; \
             a missing file there gets the rewrite's target with a 200, with the \
             _headers of that target, not of the URL (a rule such as `/assets/* /404.html 404` \
             before it keeps missing assets 404s)"
        );
        report(&file_path(shown, REDIRECTS), rule.line(), &msg);
        return;
    }
}

fn file_path(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(std::ffi::OsStr::new(
        std::str::from_utf8(name).unwrap_or_default(),
    ))
}

fn report(path: &Path, line: usize, msg: &str) {
    crate::log::diagnostic(&format!("staticd: {}:{line}: {msg}\n", path.display()));
}

/// The file's bytes (a little past the parsers' limit, so they can say it
/// was cut) and its stamp. An absent file is no error; an unreadable one is
/// reported and treated as absent.
fn read_file(
    dir: BorrowedFd<'_>,
    shown: &Path,
    name: &[u8],
) -> Result<(Option<Vec<u8>>, Stamp), Exhausted> {
    let unreadable = |e: &std::io::Error| {
        if sys::out_of_resources(e) {
            return Err(Exhausted);
        }
        let path = file_path(shown, name);
        crate::log::diagnostic(&format!(
            "staticd: {}: {}; ignored\n",
            path.display(),
            super::describe(e)
        ));
        Ok((None, None))
    };
    let file = match sys::open_beneath(dir, name) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, None)),
        Err(e) => return unreadable(&e),
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) if sys::out_of_resources(&e) => return Err(Exhausted),
        Err(_) => return Ok((None, None)),
    };
    if !meta.is_file() {
        return Ok((None, None));
    }
    let mut bytes = Vec::new();
    let limit = MAX_BYTES as u64 + 1;
    if let Err(e) = (&file).take(limit).read_to_end(&mut bytes) {
        return unreadable(&e);
    }
    Ok((Some(bytes), stamp_of(&meta)))
}

/// The stamp of `name` in `dir` as it is now.
fn stamp(dir: BorrowedFd<'_>, name: &[u8]) -> Result<Stamp, Exhausted> {
    let looked = sys::open_beneath(dir, name).and_then(|file| file.metadata());
    match looked {
        Ok(meta) => Ok(stamp_of(&meta)),
        Err(e) if sys::out_of_resources(&e) => Err(Exhausted),
        Err(_) => Ok(None),
    }
}

fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    meta.is_file().then(|| {
        (
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
        )
    })
}

/// Whether a site-relative path names one of the root files, which are
/// configuration, never content.
pub fn is_root_file(rel: &[u8]) -> bool {
    rel == HEADERS || rel == REDIRECTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_page_is_looked_for_until_a_lookup_finds_none() {
        let files = RootFiles::default();
        assert!(files.may_have_error_page(404));
        assert!(files.may_have_error_page(503));
        files.note_no_error_page(404);
        assert!(!files.may_have_error_page(404));
        assert!(files.may_have_error_page(503), "only the status looked for");
    }

    #[test]
    fn a_status_staticd_never_answers_has_no_page() {
        let files = RootFiles::default();
        assert!(!files.may_have_error_page(418));
        files.note_no_error_page(418);
        assert!(
            files.may_have_error_page(505),
            "an unknown status sets no bit"
        );
    }
}
