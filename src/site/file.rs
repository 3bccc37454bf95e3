//! A file and its variants, as found on disk: the unit that is cached and
//! from which each request picks what suits its Accept headers.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::compress::{self, Background, Cached, Claim, Identity, Weigh};
use super::digest;
use super::negotiate::{self, Coding, ImageFormat};
use super::{content_type, SiteError};
use crate::http::conditional::{http_date, Validators};
use crate::sys;

/// Compression on the fly, of these files' variants.
pub type Compression = compress::Compression<Variant>;

/// Files up to this size are read into memory when looked up, and sent
/// with their head in a single write.
pub const SMALL_FILE: u64 = 32 * 1024;

/// Where a variant's bytes come from.
#[derive(Clone)]
pub enum Source {
    Memory(Arc<[u8]>),
    File(Arc<File>),
}

/// One servable representation: the file asked for, or a sibling.
#[derive(Clone)]
pub struct Variant {
    pub source: Source,
    pub len: u64,
    /// Modification time, to the nanosecond.
    pub mtime: SystemTime,
    pub validators: Validators,
    pub content_type: Arc<str>,
    /// Content-Encoding of a precompressed sibling.
    pub encoding: Option<&'static str>,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Original,
    Coded(Coding),
    Image(ImageFormat),
}

/// A file with the variants a client may get instead.
pub struct FileSet {
    pub original: Variant,
    /// Usable siblings: regular files no older than the original.
    alternatives: Vec<Variant>,
    /// The Vary header: set whenever a sibling exists, usable or not,
    /// since the response would differ if it were, and when the file is
    /// compressed on the fly.
    pub vary: Option<&'static str>,
    /// Set when the file is compressed on the fly: it qualifies and has no
    /// precompressed sibling to send instead.
    on_the_fly: Option<OnTheFly>,
    /// The file's own URL path (`/docs/index.html` for `/docs/`): what
    /// `--auth` and `Basic-Auth` are asked about again when it differs
    /// from the URL that reached it.
    url: Box<[u8]>,
}

/// Where a file's compressed variants are kept, and under what name.
struct OnTheFly {
    cache: Arc<compress::Cache<Variant>>,
    identity: Identity,
    /// Who compresses a variant not yet cached: None, the request that
    /// wants it, while it waits (a small file, or inetd mode); else the
    /// background threads, while the request gets the file as it is.
    background: Option<Arc<Background>>,
}

/// How much of the chosen variant a request sends: compressing a file
/// pays only when the whole of it is sent, so a HEAD or a Range request
/// gets a compressed variant only from the cache.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Whole,
    /// The head alone, or a range.
    Part,
}

/// The variant chosen for a request: one of the set's, or one compressed
/// on the fly (held by the shared cache as well).
pub enum Chosen<'a> {
    Stored(&'a Variant),
    Compressed(Arc<Variant>),
    /// The file as it is, standing in for the compressed variant the
    /// request would get once it is made (see `stands_in`).
    StandIn(&'a Variant),
}

impl Chosen<'_> {
    /// Whether this is the file as it is for a client that will get a
    /// compressed variant later: a cache (the browser's, a proxy's) should
    /// not keep it for the site's lifetime in place of that one.
    pub fn stands_in(&self) -> bool {
        matches!(self, Chosen::StandIn(_))
    }
}

impl Deref for Chosen<'_> {
    type Target = Variant;

    fn deref(&self) -> &Variant {
        match self {
            Chosen::Stored(v) | Chosen::StandIn(v) => v,
            Chosen::Compressed(v) => v,
        }
    }
}

/// What there is of a variant compressed on the fly.
enum Made {
    Compressed(Arc<Variant>),
    /// Compressing saves nothing (or the result would not fit the cache).
    NotWorthIt,
    /// Not yet: being compressed, to be, or not for this request.
    NotYet,
}

impl FileSet {
    /// Opens the file at `rel` in `dir` (already open as `file`) and finds
    /// its siblings; with `compression`, a file that qualifies and has no
    /// precompressed sibling is compressed on the fly.
    /// The file's own URL path, from the site's root.
    pub fn url(&self) -> &[u8] {
        &self.url
    }

    pub fn discover(
        dir: BorrowedFd<'_>,
        rel: &[u8],
        file: File,
        compression: Option<&Compression>,
    ) -> Result<FileSet, SiteError> {
        let meta = file.metadata().map_err(SiteError::from_io)?;
        let ft = meta.file_type();
        if !ft.is_file() {
            // FIFOs, sockets and devices are never content.
            let special =
                ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device();
            return Err(if special {
                SiteError::Forbidden
            } else {
                SiteError::NotFound
            });
        }
        let ct: Arc<str> = Arc::from(content_type(rel));
        let original =
            variant(file, &meta, ct.clone(), Kind::Original).map_err(SiteError::from_io)?;
        let mut set = FileSet {
            original,
            alternatives: Vec::new(),
            vary: None,
            on_the_fly: None,
            url: [b"/", rel].concat().into(),
        };
        if negotiate::is_replaceable_image(&ct) {
            if let Some(dot) = rel.iter().rposition(|&b| b == b'.') {
                for f in negotiate::IMAGE_FORMATS {
                    let name = [&rel[..=dot], f.extension.as_bytes()].concat();
                    set.add_sibling(dir, &name, Arc::from(f.mime), Kind::Image(f), "Accept");
                }
            }
        } else {
            for c in negotiate::CODINGS {
                let name = [rel, c.suffix.as_bytes()].concat();
                set.add_sibling(dir, &name, ct.clone(), Kind::Coded(c), "Accept-Encoding");
            }
            if let Some(c) = compression {
                set.compress_on_the_fly(c, &meta);
            }
        }
        Ok(set)
    }

    /// Compresses the file on the fly if it qualifies and no precompressed
    /// sibling can be sent instead (a stale one does not count).
    fn compress_on_the_fly(&mut self, c: &Compression, meta: &std::fs::Metadata) {
        let precompressed = self
            .alternatives
            .iter()
            .any(|v| matches!(v.kind, Kind::Coded(_)));
        if precompressed
            || !compress::applies(&c.settings, self.original.len, &self.original.content_type)
        {
            return;
        }
        self.vary = Some("Accept-Encoding");
        let inline = compress::inline(&c.settings, self.original.len);
        self.on_the_fly = Some(OnTheFly {
            cache: Arc::clone(&c.cache),
            identity: Identity::of(meta),
            background: (!inline).then(|| Arc::clone(&c.background)),
        });
    }

    fn add_sibling(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        ct: Arc<str>,
        kind: Kind,
        vary: &'static str,
    ) {
        let Ok(file) = sys::open_beneath(dir, name) else {
            return;
        };
        self.vary = Some(vary);
        let Ok(meta) = file.metadata() else {
            return;
        };
        // Whole seconds: `brotli -k` keeps only the seconds of the original's
        // mtime, and a variant made from it is not older for that.
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mtime = meta.modified().unwrap_or(UNIX_EPOCH);
        let fresh = meta.is_file() && secs(mtime) >= secs(self.original.mtime);
        if fresh {
            if let Ok(v) = variant(file, &meta, ct, kind) {
                self.alternatives.push(v);
            }
        }
    }

    /// The variant for a client with these Accept and Accept-Encoding
    /// headers, which will be `sent` whole or in part.
    pub fn choose(
        &self,
        accept: Option<&str>,
        accept_encoding: Option<&str>,
        sent: Sent,
    ) -> Chosen<'_> {
        if let Some(fly) = &self.on_the_fly {
            let made = negotiate::best_coding(accept_encoding, |_| true)
                .map_or(Made::NotWorthIt, |c| fly.variant(&self.original, c, sent));
            return match made {
                Made::Compressed(v) => Chosen::Compressed(v),
                Made::NotWorthIt => Chosen::Stored(&self.original),
                Made::NotYet => Chosen::StandIn(&self.original),
            };
        }
        Chosen::Stored(self.stored(accept, accept_encoding))
    }

    /// The best of the variants found on disk.
    fn stored(&self, accept: Option<&str>, accept_encoding: Option<&str>) -> &Variant {
        if self.alternatives.is_empty() {
            return &self.original;
        }
        let has = |k: Kind| self.alternatives.iter().any(|v| v.kind == k);
        let wanted = if negotiate::is_replaceable_image(&self.original.content_type) {
            negotiate::IMAGE_FORMATS
                .into_iter()
                .filter(|f| negotiate::accepts_image(accept, *f))
                .map(Kind::Image)
                .find(|k| has(*k))
        } else {
            negotiate::best_coding(accept_encoding, |c| has(Kind::Coded(c))).map(Kind::Coded)
        };
        wanted
            .and_then(|k| self.alternatives.iter().find(|v| v.kind == k))
            .unwrap_or(&self.original)
    }

    /// Bytes held in memory by this set.
    pub fn memory(&self) -> usize {
        std::iter::once(&self.original)
            .chain(&self.alternatives)
            .map(|v| match &v.source {
                Source::Memory(b) => b.len(),
                Source::File(_) => 0,
            })
            .sum()
    }
}

impl OnTheFly {
    /// `original` in `coding`: from the cache, or compressed now (outside
    /// the cache's lock) when the whole of a small file is sent, or by the
    /// background threads, for a later request.
    fn variant(&self, original: &Variant, coding: Coding, sent: Sent) -> Made {
        if let Cached::Hit(v) = self.cache.get(self.identity, coding) {
            return v.map_or(Made::NotWorthIt, Made::Compressed);
        }
        if sent == Sent::Part {
            return Made::NotYet;
        }
        let Some(background) = &self.background else {
            let Some(variant) = compressed(original, self.identity, coding) else {
                return Made::NotYet;
            };
            self.cache.put(self.identity, coding, variant.clone());
            return variant.map_or(Made::NotWorthIt, Made::Compressed);
        };
        // Being compressed already, or no room in the queue: a later
        // request will try again. A job not queued drops its claim with it.
        if let Some(claim) = self.cache.claim(self.identity, coding) {
            background.try_run(compress_job(original.clone(), self.identity, coding, claim));
        }
        Made::NotYet
    }
}

/// A background job: `original` compressed into the cache; for nobody in
/// particular, since the request that asked has been sent the file as it is
/// (or was abandoned), but for the next one that asks.
fn compress_job(
    original: Variant,
    identity: Identity,
    coding: Coding,
    claim: Claim<Variant>,
) -> compress::Job {
    Box::new(move || {
        if let Some(variant) = compressed(&original, identity, coding) {
            claim.fill(variant);
        }
    })
}

/// `original` in `coding`: Some(None) if that saves nothing, None if it
/// could not be done (a read error, the file changed).
fn compressed(
    original: &Variant,
    identity: Identity,
    coding: Coding,
) -> Option<Option<Arc<Variant>>> {
    let bytes = read(original, identity)?;
    let packed = compress::encode(coding, &bytes)?;
    Some(
        (packed.len() < bytes.len())
            .then(|| Arc::new(Variant::compressed(original, coding, packed))),
    )
}

/// The original's bytes, if the file is still the one `identity` names: a
/// file changed since it was opened must not be cached under its old name.
fn read(original: &Variant, identity: Identity) -> Option<Cow<'_, [u8]>> {
    match &original.source {
        Source::Memory(bytes) => Some(Cow::Borrowed(bytes)),
        Source::File(file) => {
            let mut bytes = vec![0; usize::try_from(original.len).ok()?];
            file.read_exact_at(&mut bytes, 0).ok()?;
            let meta = file.metadata().ok()?;
            (Identity::of(&meta) == identity).then_some(Cow::Owned(bytes))
        }
    }
}

impl Weigh for Variant {
    fn bytes(&self) -> usize {
        self.len as usize
    }
}

impl Variant {
    /// `original` compressed on the fly as `packed`.
    fn compressed(original: &Variant, coding: Coding, packed: Vec<u8>) -> Variant {
        let etag = compress::etag(&original.validators.etag, coding, &packed);
        Variant {
            len: packed.len() as u64,
            source: Source::Memory(Arc::from(packed)),
            mtime: original.mtime,
            validators: Validators {
                etag,
                last_modified: original.validators.last_modified,
            },
            content_type: Arc::clone(&original.content_type),
            encoding: Some(coding.token),
            kind: Kind::Coded(coding),
        }
    }
}

/// A variant from an open file; small files are read into memory (and the
/// descriptor closed) when the file did not change while being read.
fn variant(
    mut file: File,
    meta: &std::fs::Metadata,
    content_type: Arc<str>,
    kind: Kind,
) -> io::Result<Variant> {
    let len = meta.len();
    let mtime = meta.modified().unwrap_or(UNIX_EPOCH);
    let encoding = match kind {
        Kind::Coded(c) => Some(c.token),
        _ => None,
    };
    let mut source = None;
    if len <= SMALL_FILE {
        let mut bytes = Vec::with_capacity(len as usize);
        let read_whole = (&mut file).take(len + 1).read_to_end(&mut bytes).is_ok();
        let unchanged = file
            .metadata()
            .is_ok_and(|m| m.len() == len && m.modified().ok() == Some(mtime));
        if read_whole && unchanged && bytes.len() as u64 == len {
            source = Some(Source::Memory(Arc::from(bytes)));
        }
    }
    let validators = match (http_date(mtime), &source) {
        (Some(_), _) => Validators::for_file(len, mtime),
        (None, Some(Source::Memory(bytes))) => {
            Validators::for_content(len, digest::of_bytes(bytes))
        }
        (None, _) => Validators::for_content(len, digest::of_file(&file, meta)?),
    };
    let source = source.unwrap_or_else(|| Source::File(Arc::new(file)));
    Ok(Variant {
        source,
        len,
        mtime,
        validators,
        content_type,
        encoding,
        kind,
    })
}
