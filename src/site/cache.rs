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
pub struct Key<'a> {
    /// The Host header as the site sees it (empty without virtual hosts).
    pub host: &'a [u8],
    pub rel: &'a [u8],
    pub trailing_slash: bool,
    /// The lookup of `rel` as a pretty URL (`about` served from
    /// `about.html`, `routes.rs`), not as itself.
    pub pretty: bool,
}

impl Key<'_> {
    /// The key as one byte string: host length, host, path, slash and
    /// pretty flags.
    fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&(self.host.len() as u64).to_le_bytes());
        out.extend_from_slice(self.host);
        out.extend_from_slice(self.rel);
        out.push(u8::from(self.trailing_slash) | u8::from(self.pretty) << 1);
    }
}

struct Entry {
    checked: Instant,
    set: Arc<FileSet>,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<Vec<u8>, Entry>,
    bytes: usize,
    /// Where a key is encoded for a lookup, so a hit allocates nothing.
    scratch: Vec<u8>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// The cached file set for `key`, if it was looked up less than a second ago.
pub fn get(key: &Key, now: Instant) -> Option<Arc<FileSet>> {
    let found = find(key, now);
    if found.is_none() {
        missed();
    }
    found
}

/// `get` for a lookup tried under more than one key (a path, then its
/// pretty URL): a hit is counted, a miss is the caller's to count once.
pub fn find(key: &Key, now: Instant) -> Option<Arc<FileSet>> {
    let found = CACHE.with(|c| {
        let c = &mut *c.borrow_mut();
        key.encode(&mut c.scratch);
        let fresh = c.entries.get(c.scratch.as_slice());
        let fresh = fresh.filter(|e| now.duration_since(e.checked) < FRESH_FOR);
        fresh.map(|e| Arc::clone(&e.set))
    });
    if found.is_some() {
        crate::metrics::count(crate::metrics::Event::CacheHit);
    }
    found
}

/// A lookup the cache did not answer.
pub fn missed() {
    crate::metrics::count(crate::metrics::Event::CacheMiss);
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
pub fn put(key: &Key, set: Arc<FileSet>, now: Instant) {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let size = set.memory();
        if size > MAX_BYTES / 8 {
            return;
        }
        let mut key_bytes = Vec::new();
        key.encode(&mut key_bytes);
        if let Some(old) = c.entries.remove(&key_bytes) {
            c.bytes -= old.set.memory();
        }
        if c.entries.len() >= MAX_ENTRIES || c.bytes + size > MAX_BYTES {
            c.entries.clear();
            c.bytes = 0;
        }
        c.bytes += size;
        c.entries.insert(key_bytes, Entry { checked: now, set });
    });
}
