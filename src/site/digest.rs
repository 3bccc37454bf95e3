//! Content digests, for the ETag of a file whose mtime is a placeholder
//! ([`crate::http::conditional::EARLIEST_DATE`]): every
//! file of a Nix deploy has mtime 1, so only the bytes can tell one version from the next.
//!
//! A file is read whole once per version: digests are remembered for the
//! whole process by what identifies a version of an inode (its ctime changes
//! with every write), so the open-file cache's refills (each thread, each
//! second) do not read a large file again.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::Mutex;

use crate::http::conditional::fnv1a;

/// Most digests remembered; past it the memo starts over.
const MAX_REMEMBERED: usize = 4096;
/// The bytes read at a time.
const BLOCK: usize = 64 * 1024;

/// One version of one file: device, inode, size, ctime (s, ns).
type Version = (u64, u64, u64, i64, i64);

static MEMO: Mutex<Option<HashMap<Version, u64>>> = Mutex::new(None);

fn version(meta: &Metadata) -> Version {
    (
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.ctime(),
        meta.ctime_nsec(),
    )
}

/// The digest of bytes already in memory.
pub fn of_bytes(bytes: &[u8]) -> u64 {
    fnv1a(0, bytes.iter().copied())
}

/// The digest of [`file`](crate::site::file) (whose metadata is `meta`), read once per version.
pub fn of_file(file: &File, meta: &Metadata) -> io::Result<u64> {
    let key = version(meta);
    if let Some(known) = memo(|m| m.get(&key).copied()) {
        return Ok(known);
    }
    let mut hash = of_bytes(&[]);
    let mut block = vec![0u8; BLOCK];
    let mut offset = 0u64;
    while offset < meta.len() {
        let n = file.read_at(&mut block, offset)?;
        if n == 0 {
            break;
        }
        hash = fnv1a_continue(hash, &block[..n]);
        offset += n as u64;
    }
    // A file written to while it was read has a new ctime: its digest is
    // used once (the cache looks again within a second) and not remembered.
    if file.metadata().is_ok_and(|now| version(&now) == key) {
        memo(|m| {
            if m.len() >= MAX_REMEMBERED {
                m.clear();
            }
            m.insert(key, hash);
        });
    }
    Ok(hash)
}

/// FNV-1a carried on from `hash` over `bytes`: the same as one pass over
/// everything, so a file read in blocks digests as its bytes in memory do.
fn fnv1a_continue(hash: u64, bytes: &[u8]) -> u64 {
    // fnv1a mixes its argument into the offset basis by XOR: undo that to
    // start from `hash` itself.
    fnv1a(hash ^ of_bytes(&[]), bytes.iter().copied())
}

fn memo<T>(f: impl FnOnce(&mut HashMap<Version, u64>) -> T) -> T {
    let mut guard = MEMO.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(HashMap::new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_read_in_blocks_digests_as_its_bytes() {
        let mut bytes = Vec::new();
        for i in 0..(3 * BLOCK + 17) {
            bytes.push((i * 7 % 251) as u8);
        }
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&bytes).unwrap();
        let meta = f.metadata().unwrap();
        assert_eq!(of_file(&f, &meta).unwrap(), of_bytes(&bytes));
        // Remembered: the same answer without reading.
        assert_eq!(of_file(&f, &meta).unwrap(), of_bytes(&bytes));
        assert_ne!(of_bytes(&bytes[1..]), of_bytes(&bytes));
    }
}
