//! The descriptors an HTTP/2 `FdLink` reads and writes, with tokio's
//! readiness for them: a socket of the event loop, or stdin/stdout in
//! inetd mode.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

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
