//! One turn's output of an HTTP/2 connection: every frame nghttp2 had to
//! send, in order, as bytes in one buffer, except the payloads of DATA
//! frames that come from files, which are noted where they go (so that
//! the transport can send them with sendfile(2) in cleartext, or read them
//! straight into TLS records). The transport writes a plan whole before
//! the next turn; the buffer comes from this thread's free list for the
//! turn and goes back once written, so an idle connection holds none.

use std::fs::File;
use std::sync::Arc;

use crate::pool;

/// A file's bytes to send at `at` in the plan's bytes.
pub struct FilePart {
    pub at: usize,
    pub file: Arc<File>,
    pub offset: u64,
    pub len: u64,
}

#[derive(Default)]
pub struct Plan {
    /// Frame bytes (and DATA payloads held in memory).
    pub bytes: Vec<u8>,
    /// File payloads, in order of `at`.
    pub files: Vec<FilePart>,
    file_bytes: u64,
    /// Each DATA payload's stream, length, and where it ends among all
    /// the plan's bytes: what did not go out if the connection fails.
    pub data: Vec<(i32, u64, u64)>,
}

/// A turn stops taking frames past this many bytes (a few DATA frames per
/// stream of a busy connection): what one connection may hold at once.
pub const TURN_BYTES: usize = 256 << 10;

impl Plan {
    /// Appends frame bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.bytes.capacity() == 0 {
            self.bytes = pool::take(&pool::HEADS);
        }
        self.bytes.extend_from_slice(bytes);
    }

    /// Appends `len` bytes of `file` from `offset`.
    pub fn file(&mut self, file: &Arc<File>, offset: u64, len: u64) {
        self.files.push(FilePart {
            at: self.bytes.len(),
            file: Arc::clone(file),
            offset,
            len,
        });
        self.file_bytes += len;
    }

    /// Notes that the last `len` bytes added were a DATA payload of
    /// `stream`.
    pub fn data_frame(&mut self, stream: i32, len: u64) {
        self.data.push((stream, len, self.len()));
    }

    /// The body bytes of each stream the plan holds beyond `written`.
    pub fn unsent(&self, written: u64) -> impl Iterator<Item = (i32, u64)> + '_ {
        self.data
            .iter()
            .filter(move |(_, _, end)| *end > written)
            .map(move |&(stream, len, end)| (stream, len.min(end - written)))
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.files.is_empty()
    }

    /// All the bytes the plan sends.
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64 + self.file_bytes
    }

    /// Whether the turn should stop taking frames.
    pub fn full(&self) -> bool {
        self.len() >= TURN_BYTES as u64
    }

    /// Once written: empty again, its buffer back on the free list.
    pub fn clear(&mut self) {
        pool::give(&pool::HEADS, std::mem::take(&mut self.bytes));
        self.files.clear();
        self.data.clear();
        self.file_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_placed_between_frame_bytes() {
        let file = Arc::new(tempfile_for_test());
        let mut plan = Plan::default();
        plan.push(b"123456789");
        plan.file(&file, 10, 5);
        plan.data_frame(1, 5);
        plan.push(b"abc");
        plan.data_frame(3, 3);
        assert_eq!(plan.unsent(10).collect::<Vec<_>>(), [(1, 4), (3, 3)]);
        assert_eq!(plan.unsent(15).collect::<Vec<_>>(), [(3, 2)]);
        assert_eq!(plan.files[0].at, 9);
        assert_eq!(plan.len(), 17);
        assert!(!plan.full());
        plan.clear();
        assert!(plan.is_empty());
        assert_eq!(plan.len(), 0);
    }

    fn tempfile_for_test() -> File {
        File::open("/proc/self/exe").unwrap()
    }
}
