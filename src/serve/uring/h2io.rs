//! HTTP/2 over io_uring. The HTTP/2 driver reads and writes through tokio's
//! `AsyncRead` and `AsyncWrite`, which tokio-uring's streams (completion
//! based, with buffers they own while the kernel works) do not implement;
//! this adapter does, with at most one read and one write operation in
//! flight, through TLS when the wire has it.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::socket::{self, Socket};
use crate::serve::wire::{Got, Wire, READ_CHUNK};

/// Plaintext taken from the driver before a write operation must start.
const SEND_BUFFER: usize = 64 << 10;

/// An operation in flight, with the buffer it gives back.
type Op<T> = Pin<Box<dyn Future<Output = (std::io::Result<T>, Vec<u8>)>>>;

pub(crate) struct UringIo<S> {
    stream: Rc<S>,
    wire: Wire,
    /// Plaintext read, from `taken` on not yet given to h2.
    input: Vec<u8>,
    taken: usize,
    reading: Option<Op<usize>>,
    /// The client closed (or TLS said close_notify).
    ended: bool,
    /// Plaintext h2 wrote that no write operation has yet.
    output: Vec<u8>,
    writing: Option<Op<()>>,
    /// Buffers back from finished operations, for the next ones.
    spare_read: Vec<u8>,
    spare_write: Vec<u8>,
    /// close_notify is queued.
    closing: bool,
}

impl<S: Socket> UringIo<S> {
    /// Over `stream` through `wire`, `read` being what arrived before h2
    /// took over (the preface, at least).
    pub(crate) fn new(stream: Rc<S>, wire: Wire, read: Vec<u8>) -> UringIo<S> {
        UringIo {
            stream,
            wire,
            input: read,
            taken: 0,
            reading: None,
            ended: false,
            output: Vec::new(),
            writing: None,
            spare_read: Vec::new(),
            spare_write: Vec::new(),
            closing: false,
        }
    }

    /// Drives the writes until every byte h2 wrote (sealed, over TLS) and
    /// every record TLS has waiting is out.
    fn poll_written(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        loop {
            if let Some(write) = &mut self.writing {
                let (result, mut buf) = ready!(write.as_mut().poll(cx));
                self.writing = None;
                buf.clear();
                self.spare_write = buf;
                result?;
            }
            let mut next = std::mem::take(&mut self.spare_write);
            match &mut self.wire {
                Wire::Clear => std::mem::swap(&mut next, &mut self.output),
                #[cfg(feature = "tls")]
                Wire::Tls(tls) => {
                    let mut at = 0;
                    while at < self.output.len() {
                        at += tls.seal(&self.output[at..])?;
                    }
                    self.output.clear();
                    tls.sealed(&mut next);
                }
            }
            if next.is_empty() {
                self.spare_write = next;
                return Poll::Ready(Ok(()));
            }
            let stream = Rc::clone(&self.stream);
            self.writing = Some(Box::pin(async move { stream.write_all(next).await }));
        }
    }
}

impl<S: Socket> AsyncRead for UringIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.taken < this.input.len() {
                let n = (this.input.len() - this.taken).min(buf.remaining());
                buf.put_slice(&this.input[this.taken..this.taken + n]);
                this.taken += n;
                if this.taken == this.input.len() {
                    this.input.clear();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            let read = this.reading.get_or_insert_with(|| {
                let stream = Rc::clone(&this.stream);
                let mut buf = std::mem::take(&mut this.spare_read);
                buf.reserve(READ_CHUNK);
                Box::pin(async move { stream.read(buf).await })
            });
            let (result, mut bytes) = ready!(read.as_mut().poll(cx));
            this.reading = None;
            let got = result.and_then(|_| socket::take(&mut this.wire, &bytes, &mut this.input));
            bytes.clear();
            this.spare_read = bytes;
            if got? != Got::Bytes {
                this.ended = true;
            }
            // What TLS answered (a key update, say) leaves with h2's next
            // flush; h2 flushes whenever it wrote, and it writes at least
            // its acknowledgements of what it reads.
        }
    }
}

impl<S: Socket> AsyncWrite for UringIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        // Bounded as h2's own send buffer is: a client that stops reading
        // holds up h2, not ever more memory here.
        if this.output.len() >= SEND_BUFFER {
            ready!(this.poll_written(cx))?;
        }
        this.output.extend_from_slice(buf);
        // Under way at once; finished by the flush h2 makes.
        match this.poll_written(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(buf.len())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().poll_written(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if !std::mem::replace(&mut this.closing, true) {
            this.wire.close_notify();
        }
        ready!(this.poll_written(cx))?;
        let _ = this.stream.shutdown(std::net::Shutdown::Write);
        Poll::Ready(Ok(()))
    }
}
