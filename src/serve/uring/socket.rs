//! io_uring socket and file I/O: reads into a connection's buffer and
//! responses written by gathered operations, through TLS (sealed here with
//! rustls, written by io_uring) when the wire has it.

use std::cell::RefCell;
use std::fs::File;
use std::future::Future;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;

use io_uring::{cqueue, opcode, types};
use tokio_uring::buf::{BoundedBuf, BoundedBufMut, IoBuf};
use tokio_uring::net::{TcpStream, UnixStream};
use tokio_uring::{BufResult, OneshotOutputTransform, UnsubmittedOneshot};

use crate::http::response::Chunk;
use crate::pace::Pace;
use crate::pipeline::Sent;
use crate::pool;
use crate::serve::wire::{Got, Wire, READ_CHUNK};
use crate::serve::{linger_deadline, pacing, proxy_header};

/// How much of a file one read operation moves.
const FILE_BLOCK: usize = 128 * 1024;

/// The descriptor of something that owns one, for the [`sys`](crate::sys) helpers.
pub(super) fn borrow(owner: &(impl AsRawFd + ?Sized)) -> BorrowedFd<'_> {
    // SAFETY: `owner` keeps the descriptor open for as long as the borrow.
    unsafe { BorrowedFd::borrow_raw(owner.as_raw_fd()) }
}

/// What a connection does with its socket, TCP or Unix-domain: tokio-uring
/// gives both these methods, but no trait for them.
pub(super) trait Socket: AsRawFd + 'static {
    async fn read<T: BoundedBufMut>(&self, buf: T) -> BufResult<usize, T>;
    /// Over TLS, and for HTTP/2.
    #[cfg_attr(not(any(feature = "tls", feature = "http2")), allow(dead_code))]
    async fn write_all<T: BoundedBuf>(&self, buf: T) -> BufResult<(), T>;
    async fn writev<T: BoundedBuf>(&self, bufs: Vec<T>) -> BufResult<usize, Vec<T>>;
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
}

macro_rules! socket {
    ($stream:ty) => {
        impl Socket for $stream {
            async fn read<T: BoundedBufMut>(&self, buf: T) -> BufResult<usize, T> {
                <$stream>::read(self, buf).await
            }
            async fn write_all<T: BoundedBuf>(&self, buf: T) -> BufResult<(), T> {
                <$stream>::write_all(self, buf).await
            }
            async fn writev<T: BoundedBuf>(&self, bufs: Vec<T>) -> BufResult<usize, Vec<T>> {
                <$stream>::writev(self, bufs).await
            }
            fn shutdown(&self, how: Shutdown) -> io::Result<()> {
                <$stream>::shutdown(self, how)
            }
        }
    };
}

socket!(TcpStream);
socket!(UnixStream);

/// Reads what is there into the spare capacity of `input`. False: the
/// client closed or failed.
async fn read_some(stream: &impl Socket, input: &mut Vec<u8>) -> io::Result<bool> {
    let mut buf = std::mem::take(input);
    if buf.capacity() == 0 {
        buf = pool::take(&pool::READS);
    }
    buf.reserve(READ_CHUNK);
    let filled = buf.len();
    let (result, buf) = stream.read(buf.slice(filled..)).await;
    *input = buf.into_inner();
    Ok(result? > 0)
}

/// Reads and drops what the client still sends until it closes or the
/// linger time is over.
pub(super) async fn linger(stream: &impl Socket) {
    let _ = tokio::time::timeout_at(linger_deadline().into(), async {
        let mut scratch = Vec::with_capacity(4096);
        loop {
            let (result, buf) = stream.read(scratch).await;
            scratch = buf;
            scratch.clear();
            if !matches!(result, Ok(n) if n > 0) {
                return;
            }
        }
    })
    .await;
}

/// Writes a whole response: the head and in-memory chunks as they are,
/// files a block at a time through a buffer, each write gathering all that
/// is ready (so a head leaves with the first block of its file), counting
/// in `sent.written` what went out. A client that takes it slower than
/// [`pace`](crate::pace) allows is given up on; a file that shrank ends the connection
/// after what was read of it, never padded.
pub(super) async fn send(
    stream: &impl Socket,
    wire: &mut Wire,
    sent: &mut Sent,
    pace: &mut Pace,
) -> io::Result<()> {
    let Sent {
        response,
        wire: head,
        written,
        ..
    } = sent;
    let mut out = Outgoing {
        pieces: Vec::new(),
        head: None,
        wire,
        pace,
        acks: None,
        written,
    };
    out.pieces
        .push(Piece::new(Held::Head(std::mem::take(head))));
    let mut body = std::mem::take(&mut response.body);
    // A body the kernel may not take at once is measured by the bytes the
    // peer acknowledges from its start (see `paced`); a smaller one by its
    // writes, without a reading it would not need.
    let size = Chunk::total(&body);
    out.acks = pacing::start(out.pace, borrow(stream), size);
    let result = out.send_body(stream, &mut body).await;
    // Back where `Sent`'s and `Response`'s Drop hand them to the free lists.
    response.body = body;
    if let Some(written_head) = out.head.take() {
        *head = written_head;
    }
    result
}

/// What is ready to go out, in order.
struct Outgoing<'a> {
    pieces: Vec<Piece>,
    /// The response head once written, to be reused.
    head: Option<Vec<u8>>,
    /// Over TLS, the pieces are sealed into records on their way out.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    wire: &'a mut Wire,
    pace: &'a mut Pace,
    /// The socket's acknowledged bytes, once the response is measured by them.
    acks: Option<pacing::Acks>,
    /// Bytes of the response written so far.
    written: &'a mut u64,
}

impl Outgoing<'_> {
    /// The client was too slow (see [`pacing::paced`]): `discarded` of
    /// the bytes written never reached it.
    fn gave_up(&mut self, discarded: u64) -> io::Error {
        *self.written = self.written.saturating_sub(discarded);
        io::ErrorKind::TimedOut.into()
    }

    async fn send_body(&mut self, stream: &impl Socket, body: &mut Vec<Chunk>) -> io::Result<()> {
        for chunk in body.drain(..) {
            match chunk {
                Chunk::Bytes(bytes) => self.pieces.push(Piece::new(Held::Bytes(bytes))),
                Chunk::Static(bytes) => self.pieces.push(Piece::new(Held::Static(bytes))),
                Chunk::Shared { bytes, offset, len } => self.pieces.push(Piece {
                    held: Held::Shared(bytes),
                    start: offset,
                    end: offset + len,
                }),
                Chunk::File { file, offset, len } => {
                    self.send_file(stream, &file, offset, len).await?;
                }
            }
        }
        self.flush(stream).await
    }

    async fn send_file(
        &mut self,
        stream: &impl Socket,
        file: &Arc<File>,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let want = (end - at).min(FILE_BLOCK as u64) as usize;
            let (result, block) = read_at(Arc::clone(file), blocks::take(), at, want).await;
            match result {
                Ok(0) => {
                    blocks::give(block);
                    self.flush(stream).await?;
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being sent",
                    ));
                }
                Ok(n) => {
                    at += n as u64;
                    self.pieces.push(Piece::new(Held::Block(block)));
                    self.flush(stream).await?;
                }
                Err(e) => {
                    blocks::give(block);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Writes every piece, with as few operations as the socket allows.
    async fn flush(&mut self, stream: &impl Socket) -> io::Result<()> {
        #[cfg(feature = "tls")]
        if matches!(self.wire, Wire::Tls(_)) {
            return self.flush_sealed(stream).await;
        }
        while !self.pieces.is_empty() {
            let write = stream.writev(std::mem::take(&mut self.pieces));
            let paced = pacing::paced(write, self.acks, self.pace).await;
            let (result, mut pieces) = paced.map_err(|held| self.gave_up(held))?;
            let mut n = match result {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) => return Err(e),
            };
            *self.written += n as u64;
            pacing::written(self.pace, n as u64);
            let mut finished = 0;
            for piece in &mut pieces {
                let len = piece.end - piece.start;
                if n < len {
                    piece.start += n;
                    break;
                }
                n -= len;
                finished += 1;
            }
            for piece in pieces.drain(..finished) {
                match piece.held {
                    Held::Head(head) => self.head = Some(head),
                    Held::Block(block) => blocks::give(block),
                    Held::Bytes(_) | Held::Shared(_) | Held::Static(_) => {}
                }
            }
            self.pieces = pieces;
        }
        Ok(())
    }

    /// `flush` over TLS: every piece sealed into records, which go out as
    /// the socket takes them.
    #[cfg(feature = "tls")]
    async fn flush_sealed(&mut self, stream: &impl Socket) -> io::Result<()> {
        let Wire::Tls(tls) = &mut *self.wire else {
            return Ok(());
        };
        let mut plain = 0;
        let mut records = Vec::new();
        for piece in self.pieces.drain(..) {
            let mut bytes = piece.bytes();
            while !bytes.is_empty() {
                let n = tls.seal(bytes)?;
                bytes = &bytes[n..];
                plain += n as u64;
                tls.sealed(&mut records);
            }
            match piece.held {
                Held::Head(head) => self.head = Some(head),
                Held::Block(block) => blocks::give(block),
                Held::Bytes(_) | Held::Shared(_) | Held::Static(_) => {}
            }
        }
        let mut at = 0;
        while at < records.len() {
            let write = stream.writev(vec![records.slice(at..)]);
            // Too slow: this flush's bytes are not counted (see below), so
            // neither are the ones the reset discards.
            let paced = pacing::paced(write, self.acks, self.pace).await;
            let (result, mut left) = paced.map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?;
            records = left.pop().map(|s| s.into_inner()).unwrap_or_default();
            let n = match result {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) => return Err(e),
            };
            at += n;
            pacing::written(self.pace, n as u64);
        }
        *self.written += plain;
        Ok(())
    }
}

/// Bytes to write, from `start` to `end` of what is held.
struct Piece {
    held: Held,
    start: usize,
    end: usize,
}

enum Held {
    Head(Vec<u8>),
    Bytes(Vec<u8>),
    /// A file's bytes read into a buffer of `blocks`.
    Block(Vec<u8>),
    Shared(Arc<[u8]>),
    Static(&'static [u8]),
}

impl Piece {
    fn new(held: Held) -> Piece {
        let end = match &held {
            Held::Head(v) | Held::Bytes(v) | Held::Block(v) => v.len(),
            Held::Shared(bytes) => bytes.len(),
            Held::Static(bytes) => bytes.len(),
        };
        Piece {
            held,
            start: 0,
            end,
        }
    }

    fn bytes(&self) -> &[u8] {
        let all: &[u8] = match &self.held {
            Held::Head(v) | Held::Bytes(v) | Held::Block(v) => v,
            Held::Shared(bytes) => bytes,
            Held::Static(bytes) => bytes,
        };
        &all[self.start..self.end]
    }
}

// SAFETY: the bytes live on the heap (a Vec's buffer or an Arc's
// allocation), so the pointer stays valid when the Piece moves, and nothing
// changes them while an operation holds the Piece.
unsafe impl IoBuf for Piece {
    fn stable_ptr(&self) -> *const u8 {
        self.bytes().as_ptr()
    }

    fn bytes_init(&self) -> usize {
        self.end - self.start
    }

    fn bytes_total(&self) -> usize {
        self.end - self.start
    }
}

/// Reads up to `len` bytes of `file` at `at` into the spare capacity of
/// `buf`: a pread(2) as an io_uring operation, which tokio-uring offers only
/// for files it owns.
fn read_at(
    file: Arc<File>,
    mut buf: Vec<u8>,
    at: u64,
    len: usize,
) -> impl Future<Output = (io::Result<usize>, Vec<u8>)> {
    let len = len.min(buf.capacity() - buf.len()).min(u32::MAX as usize);
    let sqe = opcode::Read::new(
        types::Fd(file.as_raw_fd()),
        buf.spare_capacity_mut().as_mut_ptr().cast(),
        len as u32,
    )
    .offset(at)
    .build();
    UnsubmittedOneshot::new(ReadAt { _file: file, buf }, ReadDone, sqe).submit()
}

/// What a file read holds while the kernel works: the file stays open and
/// the buffer alive even if the read's future is dropped.
struct ReadAt {
    _file: Arc<File>,
    buf: Vec<u8>,
}

struct ReadDone;

impl OneshotOutputTransform for ReadDone {
    type Output = (io::Result<usize>, Vec<u8>);
    type StoredData = ReadAt;

    fn transform_oneshot_output(self, data: ReadAt, cqe: cqueue::Entry) -> Self::Output {
        let mut buf = data.buf;
        let result = cqe.result();
        if result < 0 {
            return (Err(io::Error::from_raw_os_error(-result)), buf);
        }
        let n = result as usize;
        // SAFETY: the kernel wrote `n` bytes into the spare capacity, and
        // `read_at` asked for no more than that capacity.
        unsafe { buf.set_len(buf.len() + n) };
        (Ok(n), buf)
    }
}

/// File blocks, kept per thread for the next read.
mod blocks {
    use super::*;

    /// Blocks kept for reuse per thread; more are freed.
    const KEEP: usize = 16;

    thread_local! {
        static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn take() -> Vec<u8> {
        FREE.with(|f| f.borrow_mut().pop())
            .unwrap_or_else(|| Vec::with_capacity(FILE_BLOCK))
    }

    pub(super) fn give(mut block: Vec<u8>) {
        block.clear();
        FREE.with(|f| {
            let mut free = f.borrow_mut();
            if free.len() < KEEP {
                free.push(block);
            }
        });
    }
}

/// Reads what is there into `input`, through TLS when the wire has it:
/// what TLS has to say goes out before each read, and a read that only
/// moved the handshake along is not the end of the wait.
pub(super) async fn read_wire(
    stream: &impl Socket,
    wire: &mut Wire,
    input: &mut Vec<u8>,
) -> io::Result<Got> {
    if matches!(wire, Wire::Clear) {
        return Ok(match read_some(stream, input).await? {
            true => Got::Bytes,
            false => Got::Closed,
        });
    }
    loop {
        write_records(stream, wire).await?;
        let mut ciphertext = pool::take(&pool::READS);
        ciphertext.clear();
        ciphertext.reserve(READ_CHUNK);
        let (result, ciphertext) = stream.read(ciphertext).await;
        let before = input.len();
        let got = result.and_then(|_| take(wire, &ciphertext, input));
        pool::give(&pool::READS, ciphertext);
        match got {
            Ok(Got::Bytes) if input.len() == before => {}
            Ok(got) => return Ok(got),
            Err(e) => {
                // The alert TLS queued for the client, if the socket takes it.
                let _ = write_records(stream, wire).await;
                return Err(e);
            }
        }
    }
}

/// Takes `bytes` read off the connection: as they are on a cleartext wire,
/// through TLS otherwise (where cleartext HTTP turns the wire cleartext).
pub(super) fn take(wire: &mut Wire, bytes: &[u8], input: &mut Vec<u8>) -> io::Result<Got> {
    match wire {
        Wire::Clear if bytes.is_empty() => Ok(Got::Closed),
        Wire::Clear => {
            input.extend_from_slice(bytes);
            Ok(Got::Bytes)
        }
        #[cfg(feature = "tls")]
        Wire::Tls(tls) => match tls.receive_bytes(bytes, input)? {
            crate::tls::Received::Progress => Ok(Got::Bytes),
            crate::tls::Received::Closed => Ok(Got::Closed),
            crate::tls::Received::Cleartext => {
                *wire = Wire::Clear;
                Ok(Got::Cleartext)
            }
        },
    }
}

/// Writes the records TLS has waiting (handshake messages, tickets,
/// alerts); nothing on a cleartext wire.
#[cfg_attr(not(feature = "tls"), allow(unused_variables))]
pub(super) async fn write_records(stream: &impl Socket, wire: &mut Wire) -> io::Result<()> {
    match wire {
        Wire::Clear => Ok(()),
        #[cfg(feature = "tls")]
        Wire::Tls(tls) => {
            let mut records = Vec::new();
            tls.sealed(&mut records);
            match records.is_empty() {
                true => Ok(()),
                false => stream.write_all(records).await.0,
            }
        }
    }
}

/// Over TLS: says close_notify, within the linger time, before the socket
/// closes.
pub(super) async fn close(stream: &impl Socket, wire: &mut Wire) {
    wire.close_notify();
    let write = write_records(stream, wire);
    let _ = tokio::time::timeout_at(linger_deadline().into(), write).await;
}

/// Reads the PROXY protocol header (`--proxy-protocol`) off the connection:
/// the client it names, if any, and what the bytes read past it brought
/// (see `take`).
pub(super) async fn read_proxy_header(
    stream: &impl Socket,
    wire: &mut Wire,
    input: &mut Vec<u8>,
) -> io::Result<(Option<SocketAddr>, Got)> {
    let mut read = Vec::with_capacity(READ_CHUNK);
    loop {
        let filled = read.len();
        let (result, buf) = stream.read(read.slice(filled..)).await;
        read = buf.into_inner();
        if result? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if let Some((len, source)) = proxy_header::parse_read(&read)? {
            let rest = &read[len..];
            let got = match rest.is_empty() {
                true => Got::Bytes,
                false => take(wire, rest, input)?,
            };
            return Ok((source, got));
        }
        read.reserve(READ_CHUNK);
    }
}
