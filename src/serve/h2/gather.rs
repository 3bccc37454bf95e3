//! A turn's frames and the small file payloads between them, read into one
//! block so that they leave in one write.
//!
//! DATA frames cut a file into payloads of the client's frame size (16 KiB
//! unless it asks for more), each after a 9-byte frame header. Sent as
//! they lie in a [`Plan`] (header by send(2), payload by sendfile(2)), each
//! payload costs two system calls, and since sendfile(2) cannot say "more
//! follows", each leaves as a TCP segment of its own that wakes the client
//! once; over TLS each becomes records of its own. Read into a block with
//! the frame bytes around them, a turn's payloads go out in one write of
//! full segments (or records), as h2o's do (the measurements:
//! docs/performance.md, "HTTP/2: frames gathered into blocks"). A payload
//! of [`SENDFILE_FROM`] or more (a client that allows large frames) still
//! goes by sendfile(2) in cleartext: one call moves enough to fill segments
//! on its own. Frame bytes with no file payload after them (headers, small
//! cached bodies) are written from the plan as they are, not copied.
//!
//! A block is held only while a write of it is being made: whatever the
//! descriptor did not take is read again for the next write, so a
//! connection that waits for a slow reader holds no block (each thread
//! keeps one spare). What leaves is what was read, as with
//! `--no-sendfile`: a file truncated meanwhile ends the connection early
//! (the read comes up short), it never changes bytes already queued.

use std::cell::RefCell;
use std::io;
use std::os::unix::fs::FileExt;

use crate::h2session::{Plan, TURN_BYTES};

/// A block's size in cleartext: a whole turn. h2session stops a turn once it is past
/// [`TURN_BYTES`], the frame that crossed it included, and a payload of [`SENDFILE_FROM`]
/// or more is not copied, so a turn of copied payloads fits. (A block of 256 KiB left the
/// last frame headers of every full turn to a write of their own: 16 DATA frames of 16 KiB
/// are 144 bytes more than 256 KiB.) Measured against 64 KiB blocks, the larger write made
/// the 1 MB h2c cell faster and steadier (docs/performance.md).
pub(crate) const BLOCK: usize = TURN_BYTES + SENDFILE_FROM as usize;

/// A block's size for [`Way::Buffered`].
pub(crate) const BUFFERED: usize = 64 << 10;

/// File payloads at least this long are left to sendfile(2) in cleartext.
pub(crate) const SENDFILE_FROM: u64 = 64 << 10;

/// Where blocks go, which decides how much a block takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Way {
    /// A descriptor in cleartext, one write a block; with `sendfile`, long
    /// payloads are left to sendfile(2) (not with `--no-sendfile`).
    Clear { sendfile: bool },
    /// A writer that copies what it is given into a buffer of its own
    /// (io_uring's adapter, which holds 64 KiB before it waits): blocks
    /// of [`BUFFERED`], so that it holds no more than before.
    Buffered,
    /// TLS records: a block is what one send seals
    /// ([`tls::MAX_SEALED`](crate::tls::MAX_SEALED)), so none is read again
    /// for want of room in the records.
    #[cfg(feature = "tls")]
    Sealed,
}

impl Way {
    fn block(self) -> usize {
        match self {
            Way::Clear { .. } => BLOCK,
            Way::Buffered => BUFFERED,
            #[cfg(feature = "tls")]
            Way::Sealed => crate::tls::MAX_SEALED,
        }
    }

    fn sendfile(self) -> bool {
        matches!(self, Way::Clear { sendfile: true })
    }
}

/// A block of a plan's bytes being written: they are the plan's from
/// position `at` on, `sent` of them already out.
#[derive(Default)]
pub(crate) struct Gather {
    block: Box<[u8]>,
    at: u64,
    len: usize,
    sent: usize,
}

/// What comes next in a plan from a position on.
pub(crate) enum Next<'a> {
    /// Bytes to write (the block's, or the plan's own); `more`: the plan
    /// goes on after them.
    Bytes { bytes: &'a [u8], more: bool },
    /// A long file payload (see [`Way::Clear`]): this many of its bytes
    /// are sent already, the rest is for sendfile(2).
    File { part: usize, done: u64 },
    /// The plan is all out.
    End,
}

impl Gather {
    /// What to write next to continue `plan` from `at`: the rest of the
    /// block if it holds `at`; the plan's own bytes if no file payload
    /// follows; else a new block filled from `at` (frame bytes, and file
    /// payloads read in). A file that ended early (it shrank) is an
    /// UnexpectedEof error once the bytes before it are out.
    pub(crate) fn next<'a>(
        &'a mut self,
        plan: &'a Plan,
        at: u64,
        way: Way,
    ) -> io::Result<Next<'a>> {
        let more = |end: u64| end < plan.len();
        if self.sent < self.len && self.at + self.sent as u64 == at {
            let end = self.at + self.len as u64;
            return Ok(Next::Bytes {
                bytes: &self.block[self.sent..self.len],
                more: more(end),
            });
        }
        (self.len, self.sent) = (0, 0);
        if at == plan.len() {
            return Ok(Next::End);
        }
        if let Some(from) = only_bytes_after(plan, at) {
            return Ok(Next::Bytes {
                bytes: &plan.bytes[from..],
                more: false,
            });
        }
        if self.block.is_empty() {
            self.block = take_block();
        }
        let size = way.block().min(self.block.len());
        match fill(plan, at, &mut self.block[..size], way.sendfile())? {
            Filled::Bytes(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            )),
            Filled::Bytes(n) => {
                (self.at, self.len) = (at, n);
                Ok(Next::Bytes {
                    bytes: &self.block[..n],
                    more: more(at + n as u64),
                })
            }
            Filled::LongFile { part, done } => Ok(Next::File { part, done }),
        }
    }

    /// `n` of the bytes `next` gave went out.
    pub(crate) fn sent(&mut self, n: usize) {
        self.sent += n;
    }

    /// Lets go of the block (the thread keeps it for the next): call once
    /// a write is made, before waiting. What it held and did not go out is
    /// read again.
    pub(crate) fn release(&mut self) {
        (self.len, self.sent) = (0, 0);
        if !self.block.is_empty() {
            give_block(std::mem::take(&mut self.block));
        }
    }
}

impl Drop for Gather {
    fn drop(&mut self) {
        self.release();
    }
}

thread_local! {
    /// The thread's spare block: blocks are held only during a write, so
    /// one is enough for every connection of an event-loop thread.
    static SPARE: RefCell<Box<[u8]>> = RefCell::default();
}

fn take_block() -> Box<[u8]> {
    let spare = SPARE.try_with(|s| std::mem::take(&mut *s.borrow_mut()));
    match spare {
        Ok(block) if block.len() == BLOCK => block,
        _ => vec![0; BLOCK].into_boxed_slice(),
    }
}

fn give_block(block: Box<[u8]>) {
    let _ = SPARE.try_with(|s| {
        let mut spare = s.borrow_mut();
        if spare.is_empty() {
            *spare = block;
        }
    });
}

/// Where the plan's bytes from `at` begin, if no file payload follows.
fn only_bytes_after(plan: &Plan, at: u64) -> Option<usize> {
    let files: u64 = plan.files.iter().map(|f| f.len).sum();
    let last = plan.files.last().map_or(0, |f| f.at as u64 + files);
    (at >= last).then(|| (at - files) as usize)
}

enum Filled {
    /// This many bytes of the plan are in the block (0: a file came up
    /// short before any).
    Bytes(usize),
    /// A long file payload comes first (see [`Way::Clear`]).
    LongFile { part: usize, done: u64 },
}

/// Copies the plan's bytes from `at` into `block`: frame bytes as they
/// are, file payloads read at their offsets. Stops when the block is full,
/// the plan ends, a file comes up short, or (with `sendfile`) at a long
/// payload. Payloads that continue one another in one file (a stream's DATA
/// frames, which nghttp2 sends one after another) are read by one preadv(2)
/// into their places between the frame headers: a call per run, not per
/// 16 KiB frame.
fn fill(plan: &Plan, at: u64, block: &mut [u8], sendfile: bool) -> io::Result<Filled> {
    let mut filled = 0;
    let mut run = Run::default();
    // Frame bytes before part i: files[i].at; file bytes before it: the
    // sum of the earlier parts (as in the plan's own layout).
    let mut files_before = 0u64;
    let mut pos = at;
    for (i, part) in plan.files.iter().enumerate() {
        let before = files_before;
        files_before += part.len;
        let start = part.at as u64 + before;
        if pos >= start + part.len {
            continue;
        }
        if pos < start {
            let from = (pos - before) as usize;
            let n = copy_into(&mut block[filled..], &plan.bytes[from..part.at]);
            filled += n;
            pos += n as u64;
            if pos < start {
                return run.finish(block, filled);
            }
        }
        if sendfile && part.len >= SENDFILE_FROM {
            if filled > 0 {
                return run.finish(block, filled);
            }
            return Ok(Filled::LongFile {
                part: i,
                done: pos - start,
            });
        }
        let done = pos - start;
        let want = ((part.len - done) as usize).min(block.len() - filled);
        if let Some(end) = run.add(block, (&part.file, part.offset + done), (filled, want))? {
            return Ok(Filled::Bytes(end));
        }
        filled += want;
        pos += want as u64;
        if filled == block.len() {
            return run.finish(block, filled);
        }
    }
    let from = (pos - files_before) as usize;
    filled += copy_into(&mut block[filled..], &plan.bytes[from..]);
    run.finish(block, filled)
}

/// The most payloads one preadv(2) fills (a run longer than this is read in several).
const RUN_PIECES: usize = 32;

/// File payloads placed in a block and not read yet: contiguous bytes of one file, from
/// `offset`, each going to a place of its own (start, length) in the block.
#[derive(Default)]
struct Run<'p> {
    file: Option<&'p std::fs::File>,
    offset: u64,
    pieces: [(usize, usize); RUN_PIECES],
    count: usize,
}

impl<'p> Run<'p> {
    /// Places `len` bytes of `file` from `offset` at `at` in the block: in this run if they
    /// continue it, else in a new one once this one is read. Some: where the block's bytes
    /// end because the file came up short.
    fn add(
        &mut self,
        block: &mut [u8],
        (file, offset): (&'p std::fs::File, u64),
        (at, len): (usize, usize),
    ) -> io::Result<Option<usize>> {
        let continues = self.file.is_some_and(|f| std::ptr::eq(f, file))
            && self.offset + self.bytes() as u64 == offset
            && self.count < RUN_PIECES;
        if !continues {
            if let Some(end) = self.read(block)? {
                return Ok(Some(end));
            }
            (self.file, self.offset) = (Some(file), offset);
        }
        self.pieces[self.count] = (at, len);
        self.count += 1;
        Ok(None)
    }

    fn bytes(&self) -> usize {
        self.pieces[..self.count].iter().map(|&(_, len)| len).sum()
    }

    /// Reads what is placed, and says how many of the block's bytes are the plan's: `filled`,
    /// or fewer where a file came up short.
    fn finish(mut self, block: &mut [u8], filled: usize) -> io::Result<Filled> {
        Ok(Filled::Bytes(self.read(block)?.unwrap_or(filled)))
    }

    /// Reads the run into its places. Some: the file came up short, and the block's bytes
    /// end there.
    fn read(&mut self, block: &mut [u8]) -> io::Result<Option<usize>> {
        let Some(file) = self.file.take() else {
            return Ok(None);
        };
        let pieces = &self.pieces[..std::mem::take(&mut self.count)];
        read_pieces(file, self.offset, block, pieces)
    }
}

/// Reads contiguous bytes of `file` from `offset` into `pieces` of `block`, in order: by one
/// preadv(2), and what it left (a signal, or the file's end) piece by piece. Some: the file
/// came up short, and the block's bytes end there.
fn read_pieces(
    file: &std::fs::File,
    offset: u64,
    block: &mut [u8],
    pieces: &[(usize, usize)],
) -> io::Result<Option<usize>> {
    let mut got = preadv_pieces(file, offset, block, pieces)?;
    let mut total = 0;
    for &(at, len) in pieces {
        let done = got.min(len);
        got -= done;
        if done < len {
            let from = offset + (total + done) as u64;
            let n = read_full(file, &mut block[at + done..at + len], from)?;
            if done + n < len {
                return Ok(Some(at + done + n));
            }
        }
        total += len;
    }
    Ok(None)
}

/// One preadv(2) of `file` from `offset` into `pieces` (in order, not overlapping) of `block`.
fn preadv_pieces(
    file: &std::fs::File,
    offset: u64,
    block: &mut [u8],
    pieces: &[(usize, usize)],
) -> io::Result<usize> {
    let mut slices: [io::IoSliceMut<'_>; RUN_PIECES] =
        std::array::from_fn(|_| io::IoSliceMut::new(&mut []));
    let (mut rest, mut base) = (block, 0);
    for (slice, &(at, len)) in slices.iter_mut().zip(pieces) {
        let (piece, tail) = std::mem::take(&mut rest)[at - base..].split_at_mut(len);
        *slice = io::IoSliceMut::new(piece);
        (rest, base) = (tail, at + len);
    }
    match rustix::io::preadv(file, &mut slices[..pieces.len()], offset) {
        Ok(n) => Ok(n),
        Err(rustix::io::Errno::INTR) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Copies as much of `from` as `to` holds; returns how much.
fn copy_into(to: &mut [u8], from: &[u8]) -> usize {
    let n = to.len().min(from.len());
    to[..n].copy_from_slice(&from[..n]);
    n
}

/// Reads `buf.len()` bytes of `file` at `offset`, fewer only where the
/// file ends.
fn read_full(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;

    const CLEAR: Way = Way::Clear { sendfile: true };
    const COPYING: Way = Way::Clear { sendfile: false };

    fn file(bytes: &[u8]) -> Arc<std::fs::File> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        Arc::new(f)
    }

    /// Everything `plan` sends, through `next` and writes of at most `step`
    /// bytes (a socket that takes little at a time), the block let go after
    /// every other write (as after a wait); long payloads sent apart are
    /// read as sendfile(2) would, and where they begin is noted.
    fn drain(plan: &Plan, step: usize, way: Way) -> io::Result<(Vec<u8>, Vec<usize>)> {
        let (mut out, mut files_at) = (Vec::new(), Vec::new());
        let mut gather = Gather::default();
        let mut at = 0u64;
        loop {
            match gather.next(plan, at, way)? {
                Next::Bytes { bytes, more } => {
                    let n = bytes.len().min(step);
                    out.extend_from_slice(&bytes[..n]);
                    assert_eq!(more, at + (bytes.len() as u64) < plan.len());
                    gather.sent(n);
                    at += n as u64;
                    if at % 2 == 1 {
                        gather.release();
                    }
                }
                Next::File { part, done } => {
                    let part = &plan.files[part];
                    files_at.push(out.len());
                    let mut rest = vec![0; (part.len - done) as usize];
                    let n = read_full(&part.file, &mut rest, part.offset + done)?;
                    out.extend_from_slice(&rest[..n]);
                    at += n as u64;
                }
                Next::End => return Ok((out, files_at)),
            }
        }
    }

    #[test]
    fn frames_and_payloads_come_out_in_order_however_little_is_taken() {
        let a = file(b"0123456789");
        let mut plan = Plan::default();
        plan.push(b"AB");
        plan.file(&a, 2, 5);
        plan.push(b"CD");
        plan.file(&a, 0, 3);
        plan.file(&a, 9, 1);
        plan.push(b"E");
        for step in [1, 2, 3, 7, BLOCK] {
            let (out, apart) = drain(&plan, step, CLEAR).unwrap();
            assert_eq!(out, b"AB23456CD0129E", "step {step}");
            assert!(apart.is_empty());
        }
    }

    #[test]
    fn a_block_holds_many_small_payloads_and_stops_when_full() {
        let a = file(&[b'x'; 1000]);
        let mut plan = Plan::default();
        // 1,009 bytes each: more than a block holds.
        for _ in 0..BLOCK / 1000 + 10 {
            plan.push(&[b'h'; 9]);
            plan.file(&a, 0, 1000);
        }
        let mut gather = Gather::default();
        let Next::Bytes { bytes, more } = gather.next(&plan, 0, CLEAR).unwrap() else {
            panic!("a block first");
        };
        assert_eq!(bytes.len(), BLOCK);
        assert!(more);
        assert_eq!(&bytes[..10], b"hhhhhhhhhx");
        let (out, _) = drain(&plan, BLOCK, CLEAR).unwrap();
        assert_eq!(out.len() as u64, plan.len());
    }

    #[test]
    fn long_payloads_are_left_to_sendfile_in_cleartext_only() {
        let long = vec![b'L'; SENDFILE_FROM as usize + 5];
        let a = file(&long);
        let mut plan = Plan::default();
        plan.push(b"head");
        plan.file(&a, 0, long.len() as u64);
        plan.push(b"tail");
        let (out, apart) = drain(&plan, BLOCK, CLEAR).unwrap();
        assert_eq!(apart, [4]);
        assert_eq!(&out[..4], b"head");
        assert_eq!(&out[4..4 + long.len()], &long[..]);
        assert_eq!(&out[4 + long.len()..], b"tail");
        // Over TLS and with --no-sendfile it is read in blocks like the rest.
        let (copied, apart) = drain(&plan, 1000, COPYING).unwrap();
        assert!(apart.is_empty());
        assert_eq!(copied, out);
    }

    #[test]
    fn frame_bytes_after_the_last_payload_are_not_copied() {
        let a = file(b"0123");
        let mut plan = Plan::default();
        plan.push(b"AB");
        plan.file(&a, 0, 4);
        plan.push(b"CDEF");
        let mut gather = Gather::default();
        let Next::Bytes { bytes, .. } = gather.next(&plan, 7, CLEAR).unwrap() else {
            panic!("bytes");
        };
        assert_eq!(bytes, b"DEF");
        assert_eq!(bytes.as_ptr(), plan.bytes[3..].as_ptr());
    }

    /// The first block `way` gets for a one-byte head and a 100,000-byte
    /// payload (long enough for sendfile in cleartext): its length, and
    /// whether more follows.
    fn first_block_of_a_long_payload(way: Way) -> (usize, bool) {
        let a = file(&[b'x'; 100_000]);
        let mut plan = Plan::default();
        plan.push(b"h");
        plan.file(&a, 0, 100_000);
        let mut gather = Gather::default();
        let Next::Bytes { bytes, more } = gather.next(&plan, 0, way).unwrap() else {
            panic!("bytes, not sendfile");
        };
        (bytes.len(), more)
    }

    #[test]
    fn a_block_for_a_buffered_writer_is_64_kib_and_reads_every_payload() {
        assert_eq!(first_block_of_a_long_payload(Way::Buffered).0, BUFFERED);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_block_for_tls_is_what_one_send_seals() {
        let (len, more) = first_block_of_a_long_payload(Way::Sealed);
        assert_eq!(len, crate::tls::MAX_SEALED);
        assert!(more);
    }

    #[test]
    fn a_file_that_shrank_ends_the_plan_after_the_bytes_before_it() {
        let a = file(b"0123");
        let mut plan = Plan::default();
        plan.push(b"AB");
        plan.file(&a, 0, 10);
        plan.push(b"CD");
        let mut gather = Gather::default();
        let Next::Bytes { bytes, .. } = gather.next(&plan, 0, CLEAR).unwrap() else {
            panic!("a block first");
        };
        assert_eq!(bytes, b"AB0123");
        gather.sent(6);
        let e = gather
            .next(&plan, 6, CLEAR)
            .err()
            .expect("the file came up short");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    /// A stream's DATA frames: payloads that continue one another in one file, between
    /// frame headers, and more of them than one preadv(2) fills.
    fn run_plan(file_bytes: &[u8], parts: u64, each: u64) -> Plan {
        let a = file(file_bytes);
        let mut plan = Plan::default();
        for i in 0..parts {
            plan.push(b"hdr");
            plan.file(&a, i * each, each);
        }
        plan.push(b"end");
        plan
    }

    #[test]
    fn payloads_that_continue_one_another_come_out_in_place_however_little_is_taken() {
        let bytes: Vec<u8> = (0..=255).cycle().take(3 * (RUN_PIECES + 5)).collect();
        let plan = run_plan(&bytes, RUN_PIECES as u64 + 5, 3);
        let mut expected = Vec::new();
        for piece in bytes.chunks(3) {
            expected.extend_from_slice(b"hdr");
            expected.extend_from_slice(piece);
        }
        expected.extend_from_slice(b"end");
        for step in [1, 2, 5, 64, BLOCK] {
            for way in [CLEAR, COPYING] {
                let (out, apart) = drain(&plan, step, way).unwrap();
                assert_eq!(out, expected, "step {step}");
                assert!(apart.is_empty());
            }
        }
    }

    #[test]
    fn a_file_that_shrank_in_the_middle_of_a_run_ends_the_block_there() {
        // Five payloads of 4 bytes planned, 10 bytes left in the file: the third payload
        // has 2 of its bytes.
        let plan = run_plan(b"0123456789", 5, 4);
        let mut gather = Gather::default();
        let Next::Bytes { bytes, .. } = gather.next(&plan, 0, CLEAR).unwrap() else {
            panic!("a block first");
        };
        assert_eq!(bytes, b"hdr0123hdr4567hdr89");
        gather.sent(19);
        let e = gather
            .next(&plan, 19, CLEAR)
            .err()
            .expect("the file came up short");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
