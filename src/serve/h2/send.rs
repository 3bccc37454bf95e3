//! Sending a decided response on an HTTP/2 stream: its head as HEADERS
//! (encoded from the structured head), then its body as DATA. A small body
//! held in memory goes out at once from the connection's task; a file is
//! read in blocks by a task of its own, as the flow-control windows open.

use std::future::poll_fn;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use h2::{Reason, SendStream};

use super::{Open, Served};
use crate::http::h2 as fields;
use crate::http::response::Chunk;
use crate::pace::Pace;
use crate::pool;
use crate::session::{self, Sent};

/// A body up to this size, held in memory, is queued whole at once,
/// without a task of its own.
const INLINE_MAX: u64 = 16 << 10;
/// File bytes are read in blocks of up to this size into DATA frames.
const FILE_BLOCK: usize = 16 << 10;

/// Sends a decided response: the head, then a small body at once or a
/// larger one from a task, which gives up on a client that takes it slower
/// than `--min-rate` allows (see `pace`).
pub(super) fn send(
    mut sent: Sent,
    mut respond: SendResponse<Bytes>,
    served: &Arc<Served>,
    mut open: Open,
) {
    let hsts = session::hsts(&served.cfg, served.kind);
    let Some((status, fields)) = fields::response_fields(&sent.response.head, hsts) else {
        // A status or field HTTP/2 cannot carry (a script's, say).
        respond.send_reset(Reason::INTERNAL_ERROR);
        return;
    };
    let chunks = &sent.response.body;
    let total = chunks.iter().map(Chunk::size).sum::<u64>();
    let mut message = http::Response::new(());
    *message.status_mut() = status;
    *message.headers_mut() = fields;
    let Ok(mut out) = respond.send_response(message, total == 0) else {
        open.was_reset();
        return;
    };
    // The log counts body bytes only: the head went to h2 as fields.
    if total == 0 {
        return;
    }
    if let Some(bytes) = in_memory(chunks, total) {
        if out.send_data(bytes, true).is_ok() {
            sent.written += total;
        }
        return;
    }
    let served = Arc::clone(served);
    let pace = Pace::new(Instant::now(), served.cfg.send_timeout, served.cfg.min_rate);
    tokio::spawn(async move {
        let mut body = Body {
            out,
            pace,
            left: total,
            pushed: 0,
        };
        let result = body.send_all(&mut sent).await;
        match result.map_err(|e| e.kind()) {
            Ok(()) => {}
            Err(io::ErrorKind::ConnectionReset) => open.was_reset(),
            Err(kind) => {
                body.out.send_reset(Reason::CANCEL);
                if kind == io::ErrorKind::TimedOut {
                    let (client, cfg) = (&served.client, &served.cfg);
                    crate::serve::response_failed(&kind.into(), &body.pace, client, cfg);
                    open.stalled();
                }
            }
        }
        drop(open);
    });
}

/// A small body made only of bytes in memory, as one buffer (no copy when
/// it is one piece).
fn in_memory(chunks: &[Chunk], total: u64) -> Option<Bytes> {
    if total > INLINE_MAX || chunks.iter().any(|c| c.memory().is_none()) {
        return None;
    }
    match chunks {
        [Chunk::Shared { bytes, offset, len }] => {
            let part = Shared(Arc::clone(bytes), *offset, *len);
            return Some(Bytes::from_owner(part));
        }
        [Chunk::Static(bytes)] => return Some(Bytes::from_static(bytes)),
        _ => {}
    }
    let mut joined = BytesMut::with_capacity(total as usize);
    for chunk in chunks {
        joined.extend_from_slice(chunk.memory().unwrap_or_default());
    }
    Some(joined.freeze())
}

/// Part of a file the open-file cache holds, lent to h2 without a copy.
struct Shared(Arc<[u8]>, usize, usize);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        &self.0[self.1..self.1 + self.2]
    }
}

/// A block of the per-thread free list, filled from a file and lent to h2;
/// it goes back to the list when h2 has written it.
struct Block(Box<[u8]>, usize);

impl AsRef<[u8]> for Block {
    fn as_ref(&self) -> &[u8] {
        &self.0[..self.1]
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        pool::give(&pool::BLOCKS, std::mem::take(&mut self.0));
    }
}

/// A response body on its way out as DATA frames.
pub(super) struct Body {
    pub(super) out: SendStream<Bytes>,
    /// How long the client may take to open the windows (see `pace`).
    pub(super) pace: Pace,
    /// Bytes still to send; the frame that sends the last ends the stream.
    /// u64::MAX for a body of unknown length, ended by `finish`.
    pub(super) left: u64,
    /// Body bytes handed to h2 so far, for the log line.
    pub(super) pushed: u64,
}

impl Body {
    /// The body's chunks; counts what went out in `sent.written`, for the
    /// log line.
    async fn send_all(&mut self, sent: &mut Sent) -> io::Result<()> {
        let result = async {
            for chunk in &sent.response.body {
                match chunk {
                    Chunk::File { file, offset, len } => {
                        self.file(file, *offset, *len).await?;
                    }
                    other => {
                        let bytes = Bytes::copy_from_slice(other.memory().unwrap_or_default());
                        self.data(bytes).await?;
                    }
                }
            }
            Ok(())
        }
        .await;
        sent.written += self.pushed;
        result
    }

    /// Part of a file, read in blocks as the windows open.
    async fn file(&mut self, file: &std::fs::File, offset: u64, len: u64) -> io::Result<()> {
        let (mut at, end) = (offset, offset + len);
        while at < end {
            let room = self
                .capacity((end - at).min(FILE_BLOCK as u64) as usize)
                .await?;
            let mut block = pool::take(&pool::BLOCKS);
            if block.len() < FILE_BLOCK {
                block = vec![0; FILE_BLOCK].into_boxed_slice();
            }
            let want = room.min(FILE_BLOCK);
            let n = file.read_at(&mut block[..want], at)?;
            if n == 0 {
                // The file shrank under us: the stream cannot be completed
                // honestly (the caller resets it).
                pool::give(&pool::BLOCKS, block);
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            at += n as u64;
            self.push(Bytes::from_owner(Block(block, n)))?;
        }
        Ok(())
    }

    /// Sends `bytes` as the windows allow.
    pub(super) async fn data(&mut self, mut bytes: Bytes) -> io::Result<()> {
        while !bytes.is_empty() {
            let room = self.capacity(bytes.len()).await?;
            self.push(bytes.split_to(room.min(bytes.len())))?;
        }
        Ok(())
    }

    /// Waits, at most until the pace's deadline, until the stream may send
    /// some of `want` bytes; returns how many. Room granted is the client's
    /// progress: its windows open as it takes the data.
    async fn capacity(&mut self, want: usize) -> io::Result<usize> {
        self.out.reserve_capacity(want);
        loop {
            let granted = poll_fn(|cx| self.out.poll_capacity(cx));
            match tokio::time::timeout_at(self.pace.deadline().into(), granted).await {
                Ok(Some(Ok(0))) => {}
                Ok(Some(Ok(n))) => {
                    self.pace.progress(Instant::now(), n as u64);
                    return Ok(n);
                }
                Ok(Some(Err(e))) => return Err(stream_error(&e)),
                Ok(None) => return Err(io::ErrorKind::ConnectionReset.into()),
                Err(_) => {
                    // Given up on: what h2 still holds of the stream goes
                    // with it, never sent.
                    let held = super::SEND_BUFFER.saturating_sub(self.out.capacity());
                    self.pushed = self.pushed.saturating_sub(held as u64);
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
        }
    }

    /// Ends a body of unknown length.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        self.out
            .send_data(Bytes::new(), true)
            .map_err(|e| stream_error(&e))
    }

    /// Queues one DATA frame's worth, ending the stream with the last.
    fn push(&mut self, piece: Bytes) -> io::Result<()> {
        self.left -= piece.len() as u64;
        self.pushed += piece.len() as u64;
        let end = self.left == 0;
        self.out.send_data(piece, end).map_err(|e| stream_error(&e))
    }
}

/// A reset from the client is ConnectionReset (it counts toward the Rapid
/// Reset bound); anything else is another error.
pub(super) fn stream_error(e: &h2::Error) -> io::Error {
    if e.is_reset() && e.is_remote() {
        io::ErrorKind::ConnectionReset.into()
    } else {
        io::Error::other(e.to_string())
    }
}
