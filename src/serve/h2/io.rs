//! The byte stream the h2 crate reads and writes: a connection's `Wire`
//! (cleartext, or TLS through the same rustls connection HTTP/1.1 uses)
//! over a socket of the event loop or over stdin/stdout in inetd mode.
//! Only bytes move here; the plaintext the transport read before it knew
//! the connection spoke HTTP/2 (the preface) is handed to h2 first.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::serve::{Got, Wire};
use crate::sys;

/// Descriptors to read from and write to, with tokio's readiness for them.
pub(crate) trait Ready: Unpin {
    fn input(&self) -> BorrowedFd<'_>;
    fn output(&self) -> BorrowedFd<'_>;
    /// Whether `output` is a socket (send(2) rather than write(2)).
    fn socket(&self) -> bool;
    /// Runs `f`, one non-blocking call on `input` (READABLE) or `output`
    /// (WRITABLE), once the descriptor is ready; WouldBlock from `f` forgets
    /// the readiness and waits again.
    fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        f: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>>;
}

macro_rules! socket_ready {
    ($stream:ty) => {
        impl Ready for $stream {
            fn input(&self) -> BorrowedFd<'_> {
                self.as_fd()
            }
            fn output(&self) -> BorrowedFd<'_> {
                self.as_fd()
            }
            fn socket(&self) -> bool {
                true
            }
            fn poll_io<R>(
                &self,
                cx: &mut Context<'_>,
                interest: Interest,
                mut f: impl FnMut() -> io::Result<R>,
            ) -> Poll<io::Result<R>> {
                loop {
                    if interest.is_readable() {
                        ready!(self.poll_read_ready(cx))?;
                    } else {
                        ready!(self.poll_write_ready(cx))?;
                    }
                    match self.try_io(interest, &mut f) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        other => return Poll::Ready(other),
                    }
                }
            }
        }
    };
}

socket_ready!(TcpStream);
socket_ready!(UnixStream);

/// A raw descriptor number, for `AsyncFd`.
pub(crate) struct Fd(pub(crate) RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// inetd mode's stdin and stdout (often one socket, twice), non-blocking
/// and watched by the runtime.
pub(crate) struct Stdio {
    input: AsyncFd<Fd>,
    output: AsyncFd<Fd>,
    socket: bool,
}

impl Stdio {
    /// Must run inside a tokio runtime. Fails for descriptors epoll cannot
    /// watch (a regular file).
    pub(crate) fn new(input: BorrowedFd<'_>, output: BorrowedFd<'_>) -> io::Result<Stdio> {
        sys::set_nonblocking(input);
        sys::set_nonblocking(output);
        // SAFETY: fds 0 and 1 stay open, on the same files, for the life
        // of the process (inetd mode never closes or replaces them).
        let (input, output) = unsafe {
            (
                AsyncFd::register_with_interest(Fd(input.as_raw_fd()), Interest::READABLE)?,
                AsyncFd::register_with_interest(Fd(output.as_raw_fd()), Interest::WRITABLE)?,
            )
        };
        let socket = sys::is_socket(output.as_fd());
        Ok(Stdio {
            input,
            output,
            socket,
        })
    }
}

impl Ready for Stdio {
    fn input(&self) -> BorrowedFd<'_> {
        self.input.as_fd()
    }
    fn output(&self) -> BorrowedFd<'_> {
        self.output.as_fd()
    }
    fn socket(&self) -> bool {
        self.socket
    }
    fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        mut f: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let mut guard = if interest.is_readable() {
                ready!(self.input.poll_read_ready(cx))?
            } else {
                ready!(self.output.poll_write_ready(cx))?
            };
            if let Ok(result) = guard.try_io(|_| f()) {
                return Poll::Ready(result);
            }
        }
    }
}

/// A connection as h2 sees it: an AsyncRead + AsyncWrite over a `Wire`.
pub(crate) struct WireIo<R> {
    ready: R,
    wire: Wire,
    /// Plaintext read and not yet taken by h2, from `at` on.
    input: Vec<u8>,
    at: usize,
}

impl<R: Ready> WireIo<R> {
    /// `read`: what the transport read already (the preface, at least).
    pub(crate) fn new(ready: R, wire: Wire, read: Vec<u8>) -> WireIo<R> {
        WireIo {
            ready,
            wire,
            input: read,
            at: 0,
        }
    }
}

impl<R: Ready> AsyncRead for WireIo<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let WireIo {
            ready,
            wire,
            input,
            at,
        } = self.get_mut();
        loop {
            if *at < input.len() {
                let n = buf.remaining().min(input.len() - *at);
                buf.put_slice(&input[*at..*at + n]);
                *at += n;
                return Poll::Ready(Ok(()));
            }
            input.clear();
            *at = 0;
            // TLS records a read queued (the handshake's last messages,
            // session tickets) go out before the next wait, if they can
            // now; otherwise the next write takes them along.
            let _ = wire.out(ready.output(), ready.socket()).flush();
            let fd = ready.input();
            match ready!(ready.poll_io(cx, Interest::READABLE, || wire.read(fd, input))) {
                Ok(Got::Bytes) => {}
                Ok(Got::Closed) => return Poll::Ready(Ok(())),
                Ok(Got::Cleartext) => return Poll::Ready(Err(io::ErrorKind::InvalidData.into())),
                Err(e) => {
                    // The alert TLS queued, if the descriptor takes it.
                    let _ = wire.out(ready.output(), ready.socket()).flush();
                    return Poll::Ready(Err(e));
                }
            }
        }
    }
}

impl<R: Ready> AsyncWrite for WireIo<R> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let WireIo { ready, wire, .. } = self.get_mut();
        let (fd, socket) = (ready.output(), ready.socket());
        ready.poll_io(cx, Interest::WRITABLE, || {
            wire.out(fd, socket).write(buf, false)
        })
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let WireIo { ready, wire, .. } = self.get_mut();
        let (fd, socket) = (ready.output(), ready.socket());
        ready.poll_io(cx, Interest::WRITABLE, || {
            wire.out(fd, socket).write_vectored(bufs)
        })
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let WireIo { ready, wire, .. } = self.get_mut();
        let (fd, socket) = (ready.output(), ready.socket());
        let mut out = wire.out(fd, socket);
        if !out.pending() {
            return Poll::Ready(Ok(()));
        }
        ready.poll_io(cx, Interest::WRITABLE, || out.flush())
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.as_mut().get_mut();
        this.wire.close_notify();
        ready!(self.as_mut().poll_flush(cx))?;
        let this = self.get_mut();
        if this.ready.socket() {
            sys::shutdown_write(this.ready.output());
        }
        Poll::Ready(Ok(()))
    }
}
