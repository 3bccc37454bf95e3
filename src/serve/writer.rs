//! Moving a decided response to a file descriptor, one system call at a time.
//!
//! `write_some` never blocks on its own: it makes one call and reports
//! WouldBlock when the descriptor is full, so the blocking inetd transport
//! and the event loop share it and differ only in how they wait.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use memmap2::{Mmap, MmapOptions};

use crate::http::response::Chunk;
use crate::pace::Pace;
use crate::pool;
use crate::sys;

/// Largest single sendfile(2) or write: below the kernel's 0x7ffff000 cap.
const MAX_CALL: usize = 1 << 30;
/// How much of a response one connection writes before the other connections of its
/// event loop get their turn ([`ResponseWriter::in_turns`]): lighttpd's 256 KiB per
/// write event, nginx's `sendfile_max_chunk` (2 MiB). Turns keep one fast download from
/// holding a loop for as long as its socket takes bytes, and measured, they cost less too:
/// 1 MB keep-alive, 50 clients, 0.65x the server CPU per response (why the kernel spends
/// more on a socket written until it is full was not found;
/// benches/compare/results/2026-12-06-turns).
pub const TURN: u64 = 256 << 10;
/// How much of a file is mapped at once when sendfile cannot be used.
const MAP_WINDOW: u64 = 4 << 20;
/// How much of a file one read moves with `--no-sendfile` (what the
/// per-thread free list keeps).
const COPY_BLOCK: usize = 64 << 10;

/// Where a response's bytes go.
pub enum Out<'a> {
    /// Straight to the descriptor, files by sendfile(2). `socket`: send(2)
    /// with MSG_MORE is available.
    Fd { fd: BorrowedFd<'a>, socket: bool },
    /// Sealed into TLS records, then to the descriptor. Files are read in
    /// blocks (sendfile cannot carry TLS without kernel TLS).
    #[cfg(feature = "tls")]
    Tls {
        fd: BorrowedFd<'a>,
        tls: &'a mut crate::tls::Connection,
    },
}

impl<'a> Out<'a> {
    pub fn fd(fd: BorrowedFd<'a>, socket: bool) -> Out<'a> {
        Out::Fd { fd, socket }
    }

    /// The descriptor written to, to wait on.
    pub fn raw(&self) -> BorrowedFd<'a> {
        match self {
            Out::Fd { fd, .. } => *fd,
            #[cfg(feature = "tls")]
            Out::Tls { fd, .. } => *fd,
        }
    }

    /// Whether bytes already taken still wait to be written (TLS records).
    pub fn pending(&self) -> bool {
        match self {
            Out::Fd { .. } => false,
            #[cfg(feature = "tls")]
            Out::Tls { tls, .. } => tls.wants_write(),
        }
    }

    /// Writes what waits; WouldBlock when the descriptor is full.
    pub fn flush(&mut self) -> io::Result<()> {
        match self {
            Out::Fd { .. } => Ok(()),
            #[cfg(feature = "tls")]
            Out::Tls { fd, tls } => tls.flush(*fd),
        }
    }

    pub(crate) fn write(&mut self, buf: &[u8], more: bool) -> io::Result<usize> {
        match self {
            Out::Fd { fd, socket: true } => sys::send(*fd, buf, more),
            Out::Fd { fd, socket: false } => sys::write(*fd, buf),
            #[cfg(feature = "tls")]
            Out::Tls { fd, tls } => tls.send(*fd, buf, more),
        }
    }
}

pub struct ResponseWriter<'a> {
    /// The head's bytes (and a small body), then the body's chunks.
    head: &'a [u8],
    body: &'a [Chunk],
    /// Bytes of the head already written.
    head_done: usize,
    /// Bytes of the whole response written, for the access log.
    written: u64,
    /// The body chunk being written and how far into it.
    chunk: usize,
    chunk_done: u64,
    files: FileSender,
}

/// Sends parts of files: by sendfile(2) to a plain descriptor, else
/// through mmap, or read in blocks (over TLS, and with `--no-sendfile`).
#[derive(Default)]
pub struct FileSender {
    /// The largest call: [`TURN`] when writing in turns, else unbounded ([`MAX_CALL`]).
    most: Option<usize>,
    /// Set once sendfile(2) refused this descriptor; files then go through mmap.
    use_mmap: bool,
    /// Files are read into a buffer and written from it (`--no-sendfile`).
    copy: bool,
    /// With `copy`: the block read last, and how much of it is written.
    block: Box<[u8]>,
    block_len: usize,
    block_sent: usize,
}

impl Drop for FileSender {
    fn drop(&mut self) {
        pool::give(&pool::BLOCKS, std::mem::take(&mut self.block));
    }
}

impl<'a> ResponseWriter<'a> {
    /// A writer for a response encoded as HTTP/1.1 (a `Sent`'s `wire`, then
    /// its body), which it borrows: the transport keeps the response once,
    /// and the writer adds only its progress.
    pub fn new(head: &'a [u8], body: &'a [Chunk]) -> ResponseWriter<'a> {
        ResponseWriter {
            head,
            body,
            head_done: 0,
            written: 0,
            chunk: 0,
            chunk_done: 0,
            files: FileSender::default(),
        }
    }

    /// With `on`, file bytes are copied through a buffer instead of handed
    /// to the kernel by sendfile(2): what leaves is what was read, so a file
    /// truncated meanwhile can only end the response early, never change
    /// bytes already queued (see SECURITY.md).
    pub fn copying(mut self, on: bool) -> Self {
        self.files.copy = on;
        self
    }

    /// Makes no single write larger than a [`TURN`], so that the caller can give the
    /// other connections of its loop their turn between two (see [`TURN`]).
    pub fn in_turns(mut self) -> Self {
        self.files.most = Some(TURN as usize);
        self
    }

    /// Bytes of the response written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Whether every byte went out: all taken, and nothing waiting in `out`.
    pub fn is_done(&self, out: &Out<'_>) -> bool {
        self.all_taken() && !out.pending()
    }

    fn all_taken(&self) -> bool {
        self.head_done == self.head.len() && self.chunk == self.body.len()
    }

    /// Makes one write towards finishing the response. Returns the bytes
    /// taken (over TLS, sealed: they leave with this or a later call); a
    /// file that ended early (it shrank) is an UnexpectedEof error, which
    /// ends the connection: padding would send bytes that are not the file.
    pub fn write_some(&mut self, out: &mut Out<'_>) -> io::Result<usize> {
        if self.all_taken() {
            out.flush()?;
            return Ok(0);
        }
        let n = self.write_next(out)?;
        self.written += n as u64;
        Ok(n)
    }

    fn write_next(&mut self, out: &mut Out<'_>) -> io::Result<usize> {
        if self.head_done < self.head.len() {
            let more = !self.body.is_empty();
            let n = out.write(&self.head[self.head_done..], more)?;
            self.head_done += n;
            return Ok(n);
        }
        let last = self.chunk + 1 == self.body.len();
        let body = self.body;
        let n = match &body[self.chunk] {
            Chunk::File { file, offset, len } => {
                let (offset, len) = (*offset, *len);
                let at = offset + self.chunk_done;
                let n = self.files.send(out, file, at, len - self.chunk_done)?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being sent",
                    ));
                }
                self.advance(n as u64, len);
                n
            }
            memory => {
                let bytes = memory.memory().unwrap_or_default();
                let n = out.write(&bytes[self.chunk_done as usize..], !last)?;
                self.advance(n as u64, bytes.len() as u64);
                n
            }
        };
        Ok(n)
    }

    fn advance(&mut self, n: u64, chunk_len: u64) {
        self.chunk_done += n;
        if self.chunk_done == chunk_len {
            self.chunk += 1;
            self.chunk_done = 0;
        }
    }
}

impl FileSender {
    /// With `on`, file bytes are copied through a buffer (see
    /// [`ResponseWriter::copying`](crate::serve::writer::ResponseWriter::copying)).
    pub fn copying(on: bool) -> FileSender {
        let mut sender = FileSender::default();
        sender.copy = on;
        sender
    }

    /// Whether file bytes are copied through a buffer (`--no-sendfile`).
    pub fn copies(&self) -> bool {
        self.copy
    }

    /// Makes one write of up to `left` bytes of `file` from `at`; 0 when
    /// the file ends first.
    pub fn send(
        &mut self,
        out: &mut Out<'_>,
        file: &std::fs::File,
        at: u64,
        left: u64,
    ) -> io::Result<usize> {
        let count = left.min(self.most.unwrap_or(MAX_CALL) as u64) as usize;
        let (fd, socket) = match *out {
            Out::Fd { fd, socket } if !self.copy => (fd, socket),
            _ => return self.write_copied(out, file, at, count),
        };
        if !self.use_mmap {
            let mut offset = at;
            match sys::sendfile(fd, file, &mut offset, count) {
                Err(e) if sendfile_unsupported(&e) => self.use_mmap = true,
                other => return other,
            }
        }
        write_mapped(fd, file, at, count, socket)
    }

    /// Writes from the block read last, reading the next block of the file
    /// (at `at`, up to `count` bytes) once that one is all out. Returns 0
    /// when the file ends before `count`.
    fn write_copied(
        &mut self,
        out: &mut Out<'_>,
        file: &std::fs::File,
        at: u64,
        count: usize,
    ) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        if self.block_sent == self.block_len {
            if self.block.is_empty() {
                self.block = pool::take(&pool::BLOCKS);
                if self.block.is_empty() {
                    self.block = vec![0; COPY_BLOCK].into_boxed_slice();
                }
            }
            let want = count.min(self.block.len());
            let n = file.read_at(&mut self.block[..want], at)?;
            if n == 0 {
                return Ok(0);
            }
            self.block_len = n;
            self.block_sent = 0;
        }
        let pending = &self.block[self.block_sent..self.block_len];
        let n = out.write(pending, false)?;
        self.block_sent += n;
        Ok(n)
    }
}

/// sendfile(2) refuses some output descriptors (EINVAL, or ENOSYS/EOPNOTSUPP
/// on odd file systems); mmap + write serves those.
fn sendfile_unsupported(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        e.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP)
    )
}

/// Writes part of a file through a bounded mapping. The file's size is
/// checked first: touching pages past its end would raise SIGBUS.
fn write_mapped(
    out: BorrowedFd<'_>,
    file: &std::fs::File,
    at: u64,
    count: usize,
    socket: bool,
) -> io::Result<usize> {
    let size = file.metadata()?.len();
    if at >= size {
        return Ok(0);
    }
    let window = (count as u64).min(MAP_WINDOW).min(size - at);
    // Mappings start on a page boundary.
    let page = rustix::param::page_size() as u64;
    let start = at - at % page;
    let map: Mmap = unsafe {
        // SAFETY: the mapping is read-only and private to this call; the
        // size check above keeps every touched page inside the file unless it
        // is truncated in the instant between the check and the write.
        MmapOptions::new()
            .offset(start)
            .len((at - start + window) as usize)
            .map(file)?
    };
    let bytes = &map[(at - start) as usize..];
    if socket {
        sys::send(out, bytes, false)
    } else {
        sys::write(out, bytes)
    }
}

/// Writes a whole response, waiting with poll(2) whenever the descriptor is full. A client that
/// takes it slower than [`pace`](crate::pace) allows is given up on (TimedOut), and so is every
/// client once inetd mode is asked to stop ([`sys::stop_requested`],
/// checked before each write and polled by [`sys::wait`]).
pub fn send_blocking(
    out: &mut Out<'_>,
    writer: &mut ResponseWriter<'_>,
    pace: &mut Pace,
) -> io::Result<()> {
    let fd = out.raw();
    let mut paced = 0;
    // Whether a wait ran out: a reading of the client's progress is due.
    let mut due = false;
    while !writer.is_done(out) {
        // Checked before every write, not only when one is interrupted: a
        // stop that came between two writes, or to a client that never
        // fills the socket, must end the response too.
        if sys::stop_requested() {
            return Err(io::ErrorKind::Interrupted.into());
        }
        match writer.write_some(out) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Blocking sockets report a send timeout (SO_SNDTIMEO) as
            // WouldBlock; a non-blocking descriptor says the same when full.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => loop {
                let now = Instant::now();
                let written = (writer.written(), &mut paced);
                if !super::pacing::account(pace, fd, now, written, due) {
                    let discarded = super::pacing::give_up(fd);
                    writer.written = writer.written.saturating_sub(discarded);
                    return Err(io::ErrorKind::TimedOut.into());
                }
                let left = pace.check_at(now).saturating_duration_since(now);
                due = !sys::wait(fd, true, left)?;
                if !due {
                    break;
                }
                if sys::stop_requested() {
                    return Err(io::ErrorKind::Interrupted.into());
                }
            },
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes bytes that are not a decided response (a CGI script's output as
/// it streams), the same way. Returns how many were written, and how the
/// writing ended.
pub fn send_bytes_blocking(
    out: &mut Out<'_>,
    bytes: Vec<u8>,
    send_timeout: Duration,
) -> (u64, io::Result<()>) {
    let mut writer = ResponseWriter::new(&bytes, &[]);
    // A script's output comes in pieces as it writes them: no rate, only
    // the timeout without progress.
    let mut pace = Pace::new(Instant::now(), send_timeout, 0);
    let result = send_blocking(out, &mut writer, &mut pace);
    (writer.written(), result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::sync::Arc;

    /// The writes one response of a 1 MiB file takes into a regular file, which takes every
    /// byte it is given: their sizes show where the writer itself stops.
    fn writes(in_turns: bool) -> Vec<usize> {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        std::fs::write(&source, vec![7u8; 1 << 20]).unwrap();
        let file = Arc::new(std::fs::File::open(&source).unwrap());
        let body = [Chunk::File {
            file,
            offset: 0,
            len: 1 << 20,
        }];
        let sink = std::fs::File::create(dir.path().join("sink")).unwrap();
        let mut out = Out::fd(sink.as_fd(), false);
        let mut writer = ResponseWriter::new(b"head\r\n\r\n", &body);
        if in_turns {
            writer = writer.in_turns();
        }
        let mut sizes = Vec::new();
        while !writer.is_done(&out) {
            sizes.push(writer.write_some(&mut out).unwrap());
        }
        assert_eq!(writer.written(), 8 + (1 << 20));
        assert_eq!(
            std::fs::metadata(dir.path().join("sink")).unwrap().len(),
            8 + (1 << 20)
        );
        sizes
    }

    #[test]
    fn in_turns_no_write_is_larger_than_a_turn() {
        let turn = TURN as usize;
        assert_eq!(writes(true), [8, turn, turn, turn, turn]);
        // Without turns the file goes in one call (inetd mode, HTTP/2's own frames).
        assert_eq!(writes(false), [8, 1 << 20]);
    }
}
