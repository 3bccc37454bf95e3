//! Compression on the fly: which files qualify, the codecs and their
//! levels, the bounded cache of compressed variants that every worker
//! thread shares, so a file is compressed once per coding, not per request,
//! and the background threads that compress what is too large to compress
//! while a request waits.

use std::collections::{HashMap, HashSet};
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use super::negotiate::Coding;
use crate::config::CompressSettings;
use crate::http::conditional;
use crate::sys;

/// Whether this build has the codecs (feature `compress`).
pub const AVAILABLE: bool = cfg!(feature = "compress");

/// Files smaller than this are sent as they are: the coding's own framing
/// eats most of what it would save.
pub const MIN_SIZE: u64 = 256;

/// Files up to this size are compressed while the request that first
/// wants them waits: about a millisecond at the levels below (br 6: 3.6 ms
/// per 100 KB), a TLS handshake's cost. Larger ones are compressed by the
/// background threads, and sent as they are until that is done.
pub const INLINE_MAX: u64 = 32 * 1024;

/// In inetd mode, larger files are sent as they are. A process serves one
/// connection, so there is no one to compress for in the background: its
/// own request waits, and pays again on every connection (about 0.1 s of
/// CPU per MiB with br). Precompressed siblings have no such bound.
pub const INETD_MAX: u64 = 1 << 20;

/// Whether a file of this size and type is compressed on the fly.
pub fn applies(settings: &CompressSettings, size: u64, content_type: &str) -> bool {
    let max = match settings.background {
        true => settings.max_size,
        false => settings.max_size.min(INETD_MAX),
    };
    (MIN_SIZE..=max).contains(&size) && is_compressible(content_type)
}

/// Whether a file of this size is compressed while its request waits,
/// rather than in the background.
pub fn inline(settings: &CompressSettings, size: u64) -> bool {
    !settings.background || size <= INLINE_MAX
}

/// Text and the binary formats that compress well: JavaScript, JSON, XML
/// (SVG, feeds), WebAssembly and the font formats not compressed already
/// (woff and woff2 are).
pub fn is_compressible(content_type: &str) -> bool {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    mime.starts_with("text/")
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
        || matches!(
            mime.as_str(),
            "application/javascript"
                | "application/x-javascript"
                | "application/ecmascript"
                | "application/json"
                | "application/xml"
                | "application/wasm"
                | "font/ttf"
                | "font/otf"
                | "font/collection"
                | "application/font-sfnt"
                | "application/x-font-ttf"
                | "application/x-font-otf"
                | "application/vnd.ms-fontobject"
        )
}

/// `bytes` in `coding`; None if the coding is unknown or this build has
/// no codecs.
pub use codec::encode;

#[cfg(feature = "compress")]
mod codec {
    use std::io::Write;

    use crate::site::negotiate::Coding;

    /// Levels, from timing a 100 KB minified JavaScript file (highlight.js)
    /// on the development machine, per 100 KB: gzip 6 takes 2.8 ms for
    /// 33.6 % (9: the same ratio, no faster); br 6 3.6 ms for 31.9 % (9:
    /// 22 ms for 31.5 %, 11: 125 ms for 29.0 %); zstd 9 1.8 ms for 32.6 %
    /// (19: 26 ms for 31.0 %). The result is cached, but the compressing
    /// happens on a worker thread whose other connections wait meanwhile,
    /// up to 40 times as long for a file at the 4 MB default limit, and an
    /// inetd process pays it on each connection: so the level where the
    /// ratio stops paying for the time.
    const GZIP_LEVEL: u32 = 6;
    const BROTLI_QUALITY: u32 = 6;
    /// 4 MiB, the default limit's size: a larger window finds nothing more.
    const BROTLI_WINDOW_BITS: u32 = 22;
    const ZSTD_LEVEL: i32 = 9;

    pub fn encode(coding: Coding, bytes: &[u8]) -> Option<Vec<u8>> {
        match coding.token {
            "gzip" => {
                let level = flate2::Compression::new(GZIP_LEVEL);
                let mut enc = flate2::write::GzEncoder::new(Vec::new(), level);
                enc.write_all(bytes).ok()?;
                enc.finish().ok()
            }
            "br" => {
                let mut out = Vec::new();
                {
                    let mut w = brotli::CompressorWriter::new(
                        &mut out,
                        4096,
                        BROTLI_QUALITY,
                        BROTLI_WINDOW_BITS,
                    );
                    w.write_all(bytes).ok()?;
                    w.flush().ok()?;
                }
                // Dropping the writer ended the stream.
                Some(out)
            }
            "zstd" => zstd::bulk::compress(bytes, ZSTD_LEVEL).ok(),
            _ => None,
        }
    }
}

#[cfg(not(feature = "compress"))]
mod codec {
    use crate::site::negotiate::Coding;

    pub fn encode(_coding: Coding, _bytes: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// The strong ETag of a compressed variant: the original's, the coding and
/// a hash of the compressed bytes, so it differs from the original's, is
/// the same after a restart, and changes if another level or codec
/// version makes other bytes.
pub fn etag(original: &str, coding: Coding, compressed: &[u8]) -> String {
    let stem = original.trim_end_matches('"');
    let hash = conditional::fnv1a(0, compressed.iter().copied());
    format!("{stem}-{}.{hash:016x}\"", coding.token)
}

/// Compression on the fly for a site: its settings, the cache its
/// threads share, of compressed `V`s (the site's file variants: generic so
/// that the cache need not know the files that use it), and the background
/// threads that fill it.
pub struct Compression<V> {
    pub settings: CompressSettings,
    pub cache: Arc<Cache<V>>,
    pub background: Arc<Background>,
}

impl<V: Weigh> Compression<V> {
    pub fn new(settings: CompressSettings) -> Compression<V> {
        Compression {
            settings,
            cache: Arc::new(Cache::new(settings.cache_bytes)),
            background: Arc::new(Background::default()),
        }
    }
}

/// Most background compression threads: each holds a file and its
/// compressed bytes (up to `--compress-max` each) while it works.
const MAX_THREADS: usize = 8;

/// Their nice value: a core the serving threads want is theirs first.
const NICE: i32 = 10;

/// A job for a background thread: compress one variant into the cache.
pub type Job = Box<dyn FnOnce() + Send>;

/// Threads that compress in the background, one per core (at most
/// `MAX_THREADS`), at a lower priority than the threads
/// serving requests, started when the first job comes. At most one job per thread runs and as many
/// wait; a job that finds the queue full is not run, and its file goes out as it is until a later
/// request finds room.
#[derive(Default)]
pub struct Background {
    queue: OnceLock<Option<SyncSender<Job>>>,
}

impl Background {
    /// Queues `job`; false when the queue is full or no thread could be
    /// started.
    pub fn try_run(&self, job: Job) -> bool {
        match self.queue.get_or_init(start_threads) {
            Some(queue) => queue.try_send(job).is_ok(),
            None => false,
        }
    }
}

fn start_threads() -> Option<SyncSender<Job>> {
    let n = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS);
    let (queue, jobs) = mpsc::sync_channel::<Job>(n);
    let jobs = Arc::new(Mutex::new(jobs));
    let started = (0..n)
        .filter(|_| {
            let jobs = Arc::clone(&jobs);
            sys::spawn_helper("compress", move || work(&jobs)).is_ok()
        })
        .count();
    (started > 0).then_some(queue)
}

fn work(jobs: &Mutex<Receiver<Job>>) {
    sys::lower_priority(NICE);
    loop {
        let next = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        match next {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// What a file is, for the cache: a different file, or the same one
/// changed, is another identity.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Identity {
    pub fn of(meta: &Metadata) -> Identity {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }
}

#[derive(Clone, Copy, Hash, PartialEq, Eq)]
struct Key {
    identity: Identity,
    coding: &'static str,
}

impl Key {
    fn of(identity: Identity, coding: Coding) -> Key {
        Key {
            identity,
            coding: coding.token,
        }
    }
}

/// What an entry costs beyond its bytes (the variant, its ETag, the map's
/// slot), so many small files cannot pass the bound unseen.
const ENTRY_OVERHEAD: usize = 256;

/// What a cached value costs against the budget, beyond the overhead.
pub trait Weigh {
    fn bytes(&self) -> usize;
}

struct Entry<V> {
    /// None: the coding did not make the file smaller, send it as it is.
    variant: Option<Arc<V>>,
    /// When the entry was last used, on the cache's clock.
    used: u64,
}

impl<V: Weigh> Entry<V> {
    fn cost(&self) -> usize {
        ENTRY_OVERHEAD + self.variant.as_ref().map_or(0, |v| v.bytes())
    }
}

struct Inner<V> {
    entries: HashMap<Key, Entry<V>>,
    /// Variants being compressed in the background (at most two per
    /// background thread), so that each is compressed once at a time.
    pending: HashSet<Key>,
    bytes: usize,
    /// Counts lookups: the least recently used entry has the lowest `used`.
    clock: u64,
}

/// Compressed variants by file identity and coding, bounded in bytes and
/// shared by all threads. The lock is held for a lookup or an insertion,
/// never while compressing.
pub struct Cache<V> {
    budget: usize,
    inner: Mutex<Inner<V>>,
}

/// What the cache knows of a file in a coding.
pub enum Cached<V> {
    Miss,
    /// Compressed before; None if that did not make it smaller.
    Hit(Option<Arc<V>>),
}

impl<V: Weigh> Cache<V> {
    pub fn new(budget: usize) -> Cache<V> {
        let inner = Inner {
            entries: HashMap::new(),
            pending: HashSet::new(),
            bytes: 0,
            clock: 0,
        };
        Cache {
            budget,
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<V>> {
        // A panic elsewhere leaves the map consistent: every change to it
        // is a single insert or remove.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self, identity: Identity, coding: Coding) -> Cached<V> {
        let key = Key::of(identity, coding);
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        match inner.entries.get_mut(&key) {
            Some(e) => {
                e.used = now;
                Cached::Hit(e.variant.clone())
            }
            None => Cached::Miss,
        }
    }

    /// The right to compress `identity` in `coding`, if it is neither
    /// cached nor being compressed: until the claim is filled or dropped,
    /// nobody else gets it.
    pub fn claim(self: &Arc<Self>, identity: Identity, coding: Coding) -> Option<Claim<V>> {
        let key = Key::of(identity, coding);
        let mut inner = self.lock();
        let free = !inner.entries.contains_key(&key) && inner.pending.insert(key);
        drop(inner);
        free.then(|| Claim {
            cache: Arc::clone(self),
            identity,
            coding,
            filled: false,
        })
    }

    /// Remembers a compressed variant (None: not worth sending), making
    /// room by dropping the least recently used entries. A variant larger
    /// than the whole budget is remembered as not worth sending: compressed
    /// again for each request, it would be thrown away each time.
    pub fn put(&self, identity: Identity, coding: Coding, variant: Option<Arc<V>>) {
        let key = Key::of(identity, coding);
        let mut entry = Entry { variant, used: 0 };
        if entry.cost() > self.budget {
            entry.variant = None;
        }
        let cost = entry.cost();
        let mut inner = self.lock();
        inner.pending.remove(&key);
        if cost > self.budget {
            return;
        }
        inner.clock += 1;
        entry.used = inner.clock;
        if let Some(old) = inner.entries.remove(&key) {
            inner.bytes -= old.cost();
        }
        if inner.bytes + cost > self.budget {
            // Down to 7/8 of the budget, so the sort is paid once per
            // eighth of it, not on every insertion.
            let target = (self.budget - self.budget / 8).min(self.budget - cost);
            evict(&mut inner, target);
        }
        inner.bytes += cost;
        inner.entries.insert(key, entry);
    }

    /// Bytes held, as counted against the budget.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

/// A variant a background thread is compressing: filled with the result,
/// or, dropped unfilled (the file changed, the job was not queued), free
/// for the next request to claim.
pub struct Claim<V: Weigh> {
    cache: Arc<Cache<V>>,
    identity: Identity,
    coding: Coding,
    filled: bool,
}

impl<V: Weigh> Claim<V> {
    pub fn fill(mut self, variant: Option<Arc<V>>) {
        self.cache.put(self.identity, self.coding, variant);
        self.filled = true;
    }
}

impl<V: Weigh> Drop for Claim<V> {
    fn drop(&mut self) {
        if self.filled {
            return;
        }
        let key = Key::of(self.identity, self.coding);
        self.cache.lock().pending.remove(&key);
    }
}

/// Drops the least recently used entries until at most `target` bytes are
/// held.
fn evict<V: Weigh>(inner: &mut Inner<V>, target: usize) {
    let mut by_age: Vec<(u64, Key)> = inner.entries.iter().map(|(k, e)| (e.used, *k)).collect();
    by_age.sort_unstable_by_key(|(used, _)| *used);
    for (_, key) in by_age {
        if inner.bytes <= target {
            break;
        }
        if let Some(old) = inner.entries.remove(&key) {
            inner.bytes -= old.cost();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::negotiate::CODINGS;

    #[test]
    fn compressible_types() {
        for ct in [
            "text/html; charset=utf-8",
            "text/css; charset=utf-8",
            "application/javascript; charset=utf-8",
            "text/javascript",
            "application/json",
            "application/manifest+json",
            "image/svg+xml; charset=utf-8",
            "application/xml",
            "application/rss+xml",
            "application/wasm",
            "font/ttf",
            "font/otf",
            "application/vnd.ms-fontobject",
            "TEXT/PLAIN",
        ] {
            assert!(is_compressible(ct), "{ct}");
        }
        for ct in [
            "image/png",
            "image/jpeg",
            "font/woff",
            "font/woff2",
            "application/octet-stream",
            "application/gzip",
            "video/mp4",
            "",
        ] {
            assert!(!is_compressible(ct), "{ct}");
        }
    }

    #[test]
    fn the_file_types_staticd_names_are_compressible() {
        for name in [
            "a.js", "a.mjs", "a.json", "a.svg", "a.xml", "a.wasm", "a.ttf", "a.otf",
        ] {
            let ct = crate::site::content_type(name.as_bytes());
            assert!(is_compressible(&ct), "{name}: {ct}");
        }
        for name in ["a.woff", "a.woff2", "a.png", "a.gz"] {
            let ct = crate::site::content_type(name.as_bytes());
            assert!(!is_compressible(&ct), "{name}: {ct}");
        }
    }

    #[test]
    fn sizes_that_apply() {
        let mut s = CompressSettings {
            cache_bytes: 1 << 20,
            max_size: 1000,
            background: true,
        };
        assert!(!applies(&s, 255, "text/plain"));
        assert!(applies(&s, 256, "text/plain"));
        assert!(applies(&s, 1000, "text/plain"));
        assert!(!applies(&s, 1001, "text/plain"));
        assert!(!applies(&s, 500, "image/png"));
        assert!(inline(&s, INLINE_MAX) && !inline(&s, INLINE_MAX + 1));
        // inetd mode: compressed while the request waits, up to INETD_MAX.
        s.max_size = 4 << 20;
        s.background = false;
        assert!(applies(&s, INETD_MAX, "text/plain"));
        assert!(!applies(&s, INETD_MAX + 1, "text/plain"));
        assert!(inline(&s, INETD_MAX));
    }

    #[test]
    fn etags_differ_by_coding_and_bytes() {
        let original = "\"5f.0-400-7\"";
        let br = etag(original, CODINGS[0], b"abc");
        assert!(
            br.starts_with("\"5f.0-400-7-br.") && br.ends_with('"'),
            "{br}"
        );
        assert_ne!(br, etag(original, CODINGS[2], b"abc"));
        assert_ne!(br, etag(original, CODINGS[0], b"abd"));
        assert_eq!(br, etag(original, CODINGS[0], b"abc"));
    }

    impl Weigh for Vec<u8> {
        fn bytes(&self) -> usize {
            self.len()
        }
    }

    fn identity(ino: u64) -> Identity {
        Identity {
            dev: 1,
            ino,
            size: 1000,
            mtime: 1,
            mtime_nsec: 0,
        }
    }

    #[test]
    fn the_cache_stays_within_its_budget_dropping_the_least_recently_used() {
        let cache = Cache::<Vec<u8>>::new(10 * ENTRY_OVERHEAD);
        let gzip = CODINGS[2];
        for ino in 0..10 {
            cache.put(identity(ino), gzip, None);
        }
        assert_eq!(cache.bytes(), 10 * ENTRY_OVERHEAD);
        // Use 0 so that 1 is the oldest, then make room for one more.
        assert!(matches!(cache.get(identity(0), gzip), Cached::Hit(None)));
        cache.put(identity(10), gzip, None);
        assert!(cache.bytes() <= 10 * ENTRY_OVERHEAD);
        assert!(matches!(cache.get(identity(0), gzip), Cached::Hit(_)));
        assert!(matches!(cache.get(identity(1), gzip), Cached::Miss));
        assert!(matches!(cache.get(identity(10), gzip), Cached::Hit(_)));
        // Another coding of the same file is another entry.
        assert!(matches!(cache.get(identity(10), CODINGS[0]), Cached::Miss));
    }

    #[test]
    fn an_entry_larger_than_the_budget_is_not_kept() {
        let cache = Cache::<Vec<u8>>::new(ENTRY_OVERHEAD - 1);
        cache.put(identity(1), CODINGS[0], None);
        assert_eq!(cache.bytes(), 0);
        assert!(matches!(cache.get(identity(1), CODINGS[0]), Cached::Miss));
    }

    #[test]
    fn a_variant_is_claimed_once_until_filled_or_dropped() {
        let cache = Arc::new(Cache::<Vec<u8>>::new(1 << 20));
        let br = CODINGS[0];
        let claim = cache.claim(identity(1), br).expect("free");
        assert!(cache.claim(identity(1), br).is_none(), "pending");
        assert!(
            cache.claim(identity(1), CODINGS[2]).is_some(),
            "another coding"
        );
        drop(claim);
        let claim = cache.claim(identity(1), br).expect("free again");
        claim.fill(Some(Arc::new(vec![1; 10])));
        assert!(cache.claim(identity(1), br).is_none(), "cached");
        assert!(matches!(cache.get(identity(1), br), Cached::Hit(Some(_))));
    }

    #[test]
    fn a_variant_larger_than_the_budget_is_noted_as_not_worth_sending() {
        let cache = Arc::new(Cache::<Vec<u8>>::new(4 * ENTRY_OVERHEAD));
        let br = CODINGS[0];
        cache.put(identity(1), br, Some(Arc::new(vec![0; 4 * ENTRY_OVERHEAD])));
        assert!(matches!(cache.get(identity(1), br), Cached::Hit(None)));
        assert_eq!(cache.bytes(), ENTRY_OVERHEAD);
        assert!(
            cache.claim(identity(1), br).is_none(),
            "not compressed again"
        );
    }

    #[test]
    fn background_jobs_run_and_a_full_queue_refuses() {
        let background = Background::default();
        let (done, finished) = mpsc::channel();
        let (release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        // Jobs that wait for the gate fill the threads, then the queue.
        let mut queued = 0;
        while queued < 4 * MAX_THREADS {
            let (done, gate) = (done.clone(), Arc::clone(&gate));
            let job = Box::new(move || {
                let _ = gate.lock().unwrap().recv();
                done.send(()).unwrap();
            });
            if !background.try_run(job) {
                break;
            }
            queued += 1;
        }
        assert!(queued < 4 * MAX_THREADS, "the queue is bounded");
        assert!(queued >= 1, "room for one at least");
        for _ in 0..queued {
            release.send(()).unwrap();
        }
        for _ in 0..queued {
            finished.recv().unwrap();
        }
    }

    #[cfg(feature = "compress")]
    #[test]
    fn every_coding_shrinks_text() {
        let text = "staticd compresses text on the fly. ".repeat(100);
        for c in CODINGS {
            let packed = encode(c, text.as_bytes()).unwrap();
            assert!(packed.len() < text.len() / 4, "{}", c.token);
        }
    }
}
