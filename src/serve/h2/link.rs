//! How an HTTP/2 connection's bytes move: reading what the client sent,
//! and writing a turn's [`Plan`] whole. Two kinds of link:
//! - [`FdLink`], over a descriptor tokio watches (the event loop's
//!   sockets, inetd mode's stdin and stdout): a plan's frames go in one write, file payloads by
//!   sendfile(2) in cleartext and read straight into TLS records otherwise (through the same
//!   [`Wire`] HTTP/1.1 uses);
//! - [`IoLink`], over any `AsyncRead + AsyncWrite` (io_uring's
//!   adapter, the fuzz target's in-memory pipe): file payloads are read into a block, then written.

use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};

use crate::h2session::Plan;
use crate::pool;
use crate::serve::ready::Ready;
use crate::serve::wire::{Got, Wire, READ_CHUNK};
use crate::serve::writer::FileSender;

/// A connection's bytes, both ways.
pub(crate) trait Link {
    /// Appends what the client sent next to `buf` (decrypted over TLS;
    /// possibly nothing, a TLS handshake step). Ok(false): it closed. An
    /// empty `buf` without capacity gets a buffer of the thread's free list
    /// only once there is something to read.
    async fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<bool>;
    /// Makes progress writing `plan` from `at` (how far it went so far):
    /// returns the new position; `plan.len()` once all of it is out.
    async fn write(&mut self, plan: &Plan, at: u64) -> io::Result<u64>;
    /// Ends our side (close_notify over TLS), writing what it can.
    async fn close(&mut self);
    /// The socket written to, whose acknowledged bytes measure the client
    /// (see [`serve::pacing`](crate::serve::pacing)); None where they cannot be read.
    fn socket(&self) -> Option<BorrowedFd<'_>>;
}

/// A link over a descriptor (see the module's comment).
pub(crate) struct FdLink<R> {
    ready: R,
    wire: Wire,
    /// Plaintext the transport read before HTTP/2 took over.
    read: Vec<u8>,
    files: FileSender,
}

impl<R: Ready> FdLink<R> {
    /// `read`: what the transport read already (the preface, at least);
    /// `copy`: `--no-sendfile`.
    pub(crate) fn new(ready: R, wire: Wire, read: Vec<u8>, copy: bool) -> FdLink<R> {
        FdLink {
            ready,
            wire,
            read,
            files: FileSender::copying(copy),
        }
    }
}

impl<R: Ready> Link for FdLink<R> {
    async fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<bool> {
        if !self.read.is_empty() {
            buf.append(&mut self.read);
            return Ok(true);
        }
        let FdLink { ready, wire, .. } = self;
        // TLS records a read queued (the handshake's last messages,
        // session tickets) go out before the next wait, if they can now.
        let _ = wire.out(ready.output(), ready.socket()).flush();
        let fd = ready.input();
        let got =
            std::future::poll_fn(|cx| ready.poll_io(cx, Interest::READABLE, || wire.read(fd, buf)))
                .await;
        match got {
            Ok(Got::Bytes) => Ok(true),
            Ok(Got::Closed) => Ok(false),
            Ok(Got::Cleartext) => Err(io::ErrorKind::InvalidData.into()),
            Err(e) => {
                // The alert TLS queued, if the descriptor takes it.
                let _ = wire.out(ready.output(), ready.socket()).flush();
                Err(e)
            }
        }
    }

    async fn write(&mut self, plan: &Plan, at: u64) -> io::Result<u64> {
        let FdLink {
            ready, wire, files, ..
        } = self;
        let (fd, socket) = (ready.output(), ready.socket());
        let start = at;
        // How far the calls below went: kept across the waits of poll_io,
        // which calls again after WouldBlock (bytes TLS took are not taken
        // twice).
        let mut at = at;
        std::future::poll_fn(|cx| {
            ready.poll_io(cx, Interest::WRITABLE, || {
                let mut out = wire.out(fd, socket);
                // As much as the descriptor takes now; WouldBlock only when
                // it took nothing. The plan is out once TLS's records are
                // too.
                loop {
                    if at == plan.len() {
                        out.flush()?;
                        return Ok(at);
                    }
                    match write_some(&mut out, files, plan, at) {
                        Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                        Ok(n) => at += n as u64,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock && at > start => {
                            return Ok(at)
                        }
                        Err(e) => return Err(e),
                    }
                }
            })
        })
        .await
    }

    fn socket(&self) -> Option<BorrowedFd<'_>> {
        self.ready.socket().then(|| self.ready.output())
    }

    async fn close(&mut self) {
        let FdLink { ready, wire, .. } = self;
        wire.close_notify();
        let _ = wire.out(ready.output(), ready.socket()).flush();
        if ready.socket() {
            crate::sys::shutdown_write(ready.output());
        }
    }
}

/// Where `at` (a position among all the plan's bytes) falls: inside the
/// frame bytes at this index before file part `part`, or inside that file
/// part this far.
enum Place {
    Bytes { from: usize, to: usize, more: bool },
    File { part: usize, done: u64 },
}

fn place(plan: &Plan, at: u64) -> Place {
    // Frame bytes before part i: files[i].at; file bytes before it: the
    // sum of the earlier parts.
    let mut files_before = 0u64;
    for (i, part) in plan.files.iter().enumerate() {
        let start = part.at as u64 + files_before;
        if at < start {
            let from = (at - files_before) as usize;
            return Place::Bytes {
                from,
                to: part.at,
                more: true,
            };
        }
        if at < start + part.len {
            return Place::File {
                part: i,
                done: at - start,
            };
        }
        files_before += part.len;
    }
    Place::Bytes {
        from: (at - files_before) as usize,
        to: plan.bytes.len(),
        more: false,
    }
}

/// One write towards `plan` from `at`.
fn write_some(
    out: &mut crate::serve::writer::Out<'_>,
    files: &mut FileSender,
    plan: &Plan,
    at: u64,
) -> io::Result<usize> {
    match place(plan, at) {
        Place::Bytes { from, to, more } => out.write(&plan.bytes[from..to], more),
        Place::File { part, done } => {
            let part = &plan.files[part];
            files.send(out, &part.file, part.offset + done, part.len - done)
        }
    }
}

/// A link over an `AsyncRead + AsyncWrite` (see the module's comment).
pub(crate) struct IoLink<T> {
    io: T,
    read: Vec<u8>,
}

impl<T: AsyncRead + AsyncWrite + Unpin> IoLink<T> {
    pub(crate) fn new(io: T, read: Vec<u8>) -> IoLink<T> {
        IoLink { io, read }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Link for IoLink<T> {
    async fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<bool> {
        if !self.read.is_empty() {
            buf.append(&mut self.read);
            return Ok(true);
        }
        if buf.capacity() == 0 {
            *buf = pool::take(&pool::READS);
        }
        let start = buf.len();
        buf.resize(start + READ_CHUNK, 0);
        let n = self.io.read(&mut buf[start..]).await;
        buf.truncate(start + *n.as_ref().unwrap_or(&0));
        Ok(n? > 0)
    }

    async fn write(&mut self, plan: &Plan, at: u64) -> io::Result<u64> {
        let next = match place(plan, at) {
            Place::Bytes { from, to, .. } => {
                self.io.write_all(&plan.bytes[from..to]).await?;
                at + (to - from) as u64
            }
            Place::File { part, done } => {
                let part = &plan.files[part];
                let mut block = pool::take(&pool::BLOCKS);
                if block.len() < FILE_BLOCK {
                    block = vec![0; FILE_BLOCK].into_boxed_slice();
                }
                let want = ((part.len - done) as usize).min(block.len());
                let n = part.file.read_at(&mut block[..want], part.offset + done);
                let result = match n {
                    Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
                    Ok(n) => self.io.write_all(&block[..n]).await.map(|()| at + n as u64),
                    Err(e) => Err(e),
                };
                pool::give(&pool::BLOCKS, block);
                result?
            }
        };
        // The plan is out once the writer has let go of all of it (io_uring's
        // adapter holds what it took until a flush).
        if next == plan.len() {
            self.io.flush().await?;
        }
        Ok(next)
    }

    async fn close(&mut self) {
        let _ = self.io.shutdown().await;
    }

    fn socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

/// How much of a file one read moves over an [`IoLink`].
const FILE_BLOCK: usize = 64 << 10;
