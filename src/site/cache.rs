//! The open-file cache: what a path resolved to (descriptor or bytes,
//! metadata, variants), kept per worker thread so that lookups need no lock,
//! revalidated at most once a second, bounded in entries and bytes.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::file::FileSet;

/// How long a cached lookup is trusted before the file system is asked again.
const FRESH_FOR: Duration = Duration::from_secs(1);
/// Most entries per thread; each may hold a few descriptors.
pub const MAX_ENTRIES: usize = 256;
/// Most file bytes held in memory per thread.
const MAX_BYTES: usize = 32 * 1024 * 1024;

/// What a lookup is keyed on: everything that decides which file it finds.
#[derive(Hash, PartialEq, Eq)]
pub struct Key {
    /// The Host header as the site sees it (empty without virtual hosts).
    pub host: Vec<u8>,
    pub rel: Vec<u8>,
    pub trailing_slash: bool,
}

struct Entry {
    checked: Instant,
    set: Arc<FileSet>,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<Key, Entry>,
    bytes: usize,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// The cached file set for `key`, if it was looked up less than a second ago.
pub fn get(key: &Key, now: Instant) -> Option<Arc<FileSet>> {
    CACHE.with(|c| {
        let c = c.borrow();
        let e = c.entries.get(key)?;
        (now.duration_since(e.checked) < FRESH_FOR).then(|| Arc::clone(&e.set))
    })
}

/// Forgets every entry of this thread, closing their descriptors.
pub fn clear() {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.entries.clear();
        c.bytes = 0;
    });
}

/// Remembers a fresh lookup. When a bound would be passed, the cache starts
/// over: simple, and a hot set refills within a second.
pub fn put(key: Key, set: Arc<FileSet>, now: Instant) {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let size = set.memory();
        if size > MAX_BYTES / 8 {
            return;
        }
        if let Some(old) = c.entries.remove(&key) {
            c.bytes -= old.set.memory();
        }
        if c.entries.len() >= MAX_ENTRIES || c.bytes + size > MAX_BYTES {
            c.entries.clear();
            c.bytes = 0;
        }
        c.bytes += size;
        c.entries.insert(key, Entry { checked: now, set });
    });
}
