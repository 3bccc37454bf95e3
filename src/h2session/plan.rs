//! One turn's output of an HTTP/2 connection: every frame nghttp2 had to
//! send, in order, as bytes in one buffer, except the payloads of DATA
//! frames that come from files, which are noted where they go (so that
//! the transport can send them with sendfile(2) in cleartext, or read them
//! straight into TLS records). The transport writes a plan whole before
//! the next turn; the buffer comes from this thread's free list for the
//! turn and goes back once written, so an idle connection holds none.

use std::collections::VecDeque;
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

/// How far back a connection remembers the DATA payloads it wrote
/// ([`Written`]): beyond what the kernel holds unacknowledged for
/// a client that stopped taking bytes (a raised queue's
/// [`RAISED_LIMIT`](crate::unsent::RAISED_LIMIT) waiting unsent, the write that crossed it, what
/// was in flight when the client stopped).
const REMEMBERED_BYTES: u64 = crate::unsent::RAISED_LIMIT as u64 + (1 << 20);

/// And at most this many payloads, however small (a script's writes): 6 KiB
/// a connection, enough for `REMEMBERED_BYTES` of 16 KiB payloads (the
/// default frame size). The streams whose log lines are still to be
/// written are the ones that matter, and a stalled stream's payloads are
/// large.
const REMEMBERED_PAYLOADS: usize = 384;

/// The DATA payloads of the turns already written, each with its stream,
/// its length and where it ends among all the connection's bytes. A
/// client given up on is reset (see [`serve::pacing`](crate::serve::pacing)), and the reset
/// discards what the kernel still held for it: the last bytes written,
/// which may go back past the turn being written. The log lines of the
/// streams they belonged to must not count them.
#[derive(Default)]
pub struct Written {
    /// All the bytes of the turns written whole.
    total: u64,
    /// Stream, length (a frame's payload: at most 16 MiB), end.
    data: VecDeque<(i32, u32, u64)>,
}

impl Written {
    /// `plan` was written whole.
    pub fn add(&mut self, plan: &Plan) {
        for &(stream, len, end) in &plan.data {
            if self.data.len() == REMEMBERED_PAYLOADS {
                self.data.pop_front();
            }
            self.data.push_back((stream, len as u32, self.total + end));
        }
        self.total += plan.len();
        while self
            .data
            .front()
            .is_some_and(|&(_, _, end)| end + REMEMBERED_BYTES <= self.total)
        {
            self.data.pop_front();
        }
    }

    /// The body bytes of each stream that never reached the client when
    /// writing `plan` failed `written` bytes in, and the reset discarded
    /// the last `discarded` of all the bytes written by then.
    pub fn unsent<'a>(
        &'a self,
        plan: &'a Plan,
        written: u64,
        discarded: u64,
    ) -> impl Iterator<Item = (i32, u64)> + 'a {
        let cut = (self.total + written).saturating_sub(discarded);
        let turn = plan
            .data
            .iter()
            .map(|&(stream, len, end)| (stream, len, self.total + end));
        self.data
            .iter()
            .map(|&(stream, len, end)| (stream, u64::from(len), end))
            .chain(turn)
            .filter(move |&(_, _, end)| end > cut)
            .map(move |(stream, len, end)| (stream, len.min(end - cut)))
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
        let written = Written::default();
        let unsent = |at, discarded| written.unsent(&plan, at, discarded).collect::<Vec<_>>();
        assert_eq!(unsent(10, 0), [(1, 4), (3, 3)]);
        assert_eq!(unsent(15, 0), [(3, 2)]);
        assert_eq!(unsent(17, 7), [(1, 4), (3, 3)]);
        assert_eq!(plan.files[0].at, 9);
        assert_eq!(plan.len(), 17);
        assert!(!plan.full());
        plan.clear();
        assert!(plan.is_empty());
        assert_eq!(plan.len(), 0);
    }

    #[test]
    fn a_reset_discards_bytes_of_turns_written_before() {
        let mut written = Written::default();
        let mut turn = Plan::default();
        // Two turns of a 9-byte frame head and 100 payload bytes each.
        for stream in [1, 3] {
            turn.push(&[0; 9]);
            turn.push(&[7; 100]);
            turn.data_frame(stream, 100);
            written.add(&turn);
            turn.clear();
        }
        turn.push(&[0; 9]);
        turn.push(&[7; 100]);
        turn.data_frame(5, 100);
        // 50 bytes into the third turn, the reset discards 200 bytes: the
        // last 41 of the first payload, all of the second, and the 50
        // bytes of the third's payload that had been written.
        let unsent: Vec<_> = written.unsent(&turn, 50, 200).collect();
        assert_eq!(unsent, [(1, 41), (3, 100), (5, 100)]);
        // Nothing discarded: only what the turn did not write.
        let unsent: Vec<_> = written.unsent(&turn, 50, 0).collect();
        assert_eq!(unsent, [(5, 59)]);
    }

    #[test]
    fn payloads_far_enough_back_are_forgotten() {
        let mut written = Written::default();
        let mut turn = Plan::default();
        // 16 KiB payloads (no frame heads): the last REMEMBERED_BYTES of them.
        turn.push(&[7; 16384]);
        turn.data_frame(1, 16384);
        for _ in 0..2 * REMEMBERED_BYTES / 16384 {
            written.add(&turn);
        }
        assert_eq!(written.data.len() as u64, REMEMBERED_BYTES / 16384);
        turn.clear();
        turn.push(&[7; 1]);
        turn.data_frame(1, 1);
        for _ in 0..2 * REMEMBERED_PAYLOADS {
            written.add(&turn);
        }
        assert_eq!(written.data.len(), REMEMBERED_PAYLOADS);
    }

    fn tempfile_for_test() -> File {
        File::open("/proc/self/exe").unwrap()
    }
}
