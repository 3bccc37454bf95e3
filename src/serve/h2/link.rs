//! How an HTTP/2 connection's bytes move: reading what the client sent,
//! and writing a turn's [`Plan`] whole. Two kinds of link:
//! - [`FdLink`], over a descriptor tokio watches (the event loop's
//!   sockets, inetd mode's stdin and stdout): a plan's frames and the file payloads between them
//!   are gathered into blocks (see [`gather`](super::gather)), each one write, or sealed into TLS
//!   records (through the same [`Wire`] HTTP/1.1 uses); in cleartext a payload of 64 KiB or more
//!   (a client that allows large frames) goes by sendfile(2);
//! - [`IoLink`], over any `AsyncRead + AsyncWrite` (io_uring's
//!   adapter, the fuzz target's in-memory pipe): the same blocks, 64 KiB each, each one write.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};

use crate::h2session::Plan;
use crate::serve::ready::Ready;
use crate::serve::wire::{lend_read_buffer, return_unused_read_buffer, Got, Wire, READ_CHUNK};
use crate::serve::writer::{FileSender, Out};
use crate::unsent::Queue;

use super::gather::{Gather, Next, Way};

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
    /// The connection has nothing to write for now: the measurement of its client's rate
    /// ends (see [`unsent`](crate::unsent); the next write begins another). Returns whether
    /// its unsent queue was raised meanwhile: it must [`settle`](Link::settle) before the
    /// connection waits for anything else.
    fn pause(&mut self) -> bool;
    /// Lowers a raised queue back to the bound and waits until it has drained under it,
    /// when its share goes back to the budget.
    async fn settle(&mut self) -> io::Result<()>;
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
    gather: Gather,
    files: FileSender,
    /// The socket's unsent queue, measured across turns while the connection writes.
    queue: Queue,
}

impl<R: Ready> FdLink<R> {
    /// `read`: what the transport read already (the preface, at least);
    /// `copy`: `--no-sendfile`.
    pub(crate) fn new(ready: R, wire: Wire, read: Vec<u8>, copy: bool) -> FdLink<R> {
        FdLink {
            ready,
            wire,
            read,
            gather: Gather::default(),
            files: FileSender::copying(copy),
            queue: Queue::default(),
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
        let mut drained = false;
        let got = std::future::poll_fn(|cx| {
            ready.poll_io(cx, Interest::READABLE, || {
                let lent = lend_read_buffer(buf);
                let (before, clear) = (buf.len(), matches!(wire, Wire::Clear));
                buf.reserve(READ_CHUNK);
                let room = buf.capacity() - before;
                let got = wire.read(fd, buf);
                return_unused_read_buffer(buf, lent, buf.len() > before);
                let got = got?;
                drained = match clear {
                    true => got == Got::Bytes && buf.len() - before < room,
                    false => wire.drained(),
                };
                Ok(got)
            })
        })
        .await;
        if drained {
            // A short read emptied the socket, as in HTTP/1.1's reads: the
            // next read waits for epoll instead of costing a read(2) that
            // finds nothing (a third of an h2c worker's reads).
            ready.forget_readable();
        }
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
            ready,
            wire,
            gather,
            files,
            queue,
            ..
        } = self;
        let (fd, socket) = (ready.output(), ready.socket());
        if socket {
            queue.next_write(fd, plan.len() - at, Instant::now());
        }
        let start = at;
        // How far the calls below went: kept across the waits of poll_io,
        // which calls again after WouldBlock (bytes TLS took are not taken
        // twice).
        let mut at = at;
        // The socket was full when last tried: this try follows a wait.
        let mut waited = false;
        std::future::poll_fn(|cx| {
            ready.poll_io(cx, Interest::WRITABLE, || {
                if std::mem::take(&mut waited) {
                    queue.woke(fd, Instant::now());
                }
                let mut out = wire.out(fd, socket);
                // As much as the descriptor takes now; WouldBlock only when
                // it took nothing.
                let result = loop {
                    // The plan is out once TLS's records are too (None).
                    let step = match at == plan.len() {
                        true => out.flush().map(|()| None),
                        false => write_some(&mut out, gather, files, plan, at).map(Some),
                    };
                    let full = match step {
                        Ok(None) => break Ok(at),
                        Ok(Some(0)) => break Err(io::ErrorKind::UnexpectedEof.into()),
                        Ok(Some(n)) => {
                            at += n as u64;
                            continue;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => e,
                        Err(e) => break Err(e),
                    };
                    if at > start && at < plan.len() {
                        break Ok(at);
                    }
                    // Raised just now: the socket has room again at once.
                    if !(socket && queue.blocked(fd, Instant::now())) {
                        waited = true;
                        break Err(full);
                    }
                };
                // Nothing waits holding a block.
                gather.release();
                result
            })
        })
        .await
    }

    fn socket(&self) -> Option<BorrowedFd<'_>> {
        self.ready.socket().then(|| self.ready.output())
    }

    fn pause(&mut self) -> bool {
        self.queue.pause();
        self.queue.holds()
    }

    async fn settle(&mut self) -> io::Result<()> {
        let FdLink { ready, queue, .. } = self;
        let fd = ready.output();
        queue.lower(fd);
        std::future::poll_fn(|cx| ready.poll_io(cx, Interest::WRITABLE, || Queue::drained(fd)))
            .await?;
        queue.release();
        Ok(())
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

/// One write towards `plan` from `at`: frame bytes and the file payloads
/// between them gathered into blocks (see [`gather`](super::gather)), long
/// payloads by sendfile(2) in cleartext unless `--no-sendfile`.
fn write_some(
    out: &mut Out<'_>,
    gather: &mut Gather,
    files: &mut FileSender,
    plan: &Plan,
    at: u64,
) -> io::Result<usize> {
    let way = match out {
        Out::Fd { .. } => Way::Clear {
            sendfile: !files.copies(),
        },
        #[cfg(feature = "tls")]
        Out::Tls { .. } => Way::Sealed,
    };
    match gather.next(plan, at, way)? {
        Next::Bytes { bytes, more } => {
            // With "more follows", TLS holds the records back, so that a
            // turn leaves in one write as in cleartext: up to a turn's
            // bytes of records (h2session's bound on a connection's
            // outgoing frames) wait per connection.
            let n = out.write(bytes, more)?;
            gather.sent(n);
            Ok(n)
        }
        Next::File { part, done } => {
            let part = &plan.files[part];
            files.send(out, &part.file, part.offset + done, part.len - done)
        }
        Next::End => Ok(0),
    }
}

/// A link over an `AsyncRead + AsyncWrite` (see the module's comment).
pub(crate) struct IoLink<T> {
    io: T,
    read: Vec<u8>,
    gather: Gather,
}

impl<T: AsyncRead + AsyncWrite + Unpin> IoLink<T> {
    pub(crate) fn new(io: T, read: Vec<u8>) -> IoLink<T> {
        IoLink {
            io,
            read,
            gather: Gather::default(),
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Link for IoLink<T> {
    async fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<bool> {
        if !self.read.is_empty() {
            buf.append(&mut self.read);
            return Ok(true);
        }
        lend_read_buffer(buf);
        let start = buf.len();
        buf.resize(start + READ_CHUNK, 0);
        let n = self.io.read(&mut buf[start..]).await;
        buf.truncate(start + *n.as_ref().unwrap_or(&0));
        Ok(n? > 0)
    }

    async fn write(&mut self, plan: &Plan, at: u64) -> io::Result<u64> {
        let next = match self.gather.next(plan, at, Way::Buffered)? {
            Next::Bytes { bytes, .. } => {
                let written = self.io.write_all(bytes).await;
                let n = bytes.len();
                self.gather.release();
                written?;
                at + n as u64
            }
            Next::File { .. } | Next::End => at,
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

    fn pause(&mut self) -> bool {
        false
    }

    async fn settle(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}
