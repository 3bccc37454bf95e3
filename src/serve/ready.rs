//! Descriptors with tokio's readiness for them: what HTTP/2's `FdLink`
//! (`serve::h2`, when built in) and a CGI exchange's HTTP/1.1
//! client ([`cgi::http1`](crate::serve::cgi::http1)) read and write: a
//! socket of the event loop, stdin/stdout in inetd mode, or a duplicate of a
//! connection's socket on a runtime of its own.

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
    /// Forgets that `input` is readable, after a read emptied it: the next
    /// `poll_io` waits for the poller. (tokio keeps readiness that arrived
    /// since, so nothing is missed.) HTTP/2's reads use it.
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    fn forget_readable(&self);
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
            fn forget_readable(&self) {
                let _ = self.try_io(Interest::READABLE, || {
                    Err::<(), _>(io::ErrorKind::WouldBlock.into())
                });
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

/// An input and an output descriptor watched by a runtime made for them:
/// inetd mode's stdin and stdout (often one socket, twice), or a CGI
/// exchange's duplicate of its connection (one descriptor, both ways).
/// Both are made non-blocking. A descriptor epoll cannot watch (a regular
/// file, /dev/null: `staticd --inetd < request > response`) is always
/// ready, as poll(2) would say.
pub(crate) struct Descriptors {
    input: Watch,
    /// None: the output is the input's descriptor.
    output: Option<Watch>,
    socket: bool,
}

/// One descriptor, watched by the runtime or always ready.
enum Watch {
    Polled(AsyncFd<Fd>),
    Always(Fd),
}

impl Watch {
    /// # Safety
    /// `fd` must stay open, on the same file, for the life of the `Watch`.
    unsafe fn new(fd: RawFd, interest: Interest) -> io::Result<Watch> {
        // SAFETY: as the caller promised.
        match unsafe { AsyncFd::register_with_interest(Fd(fd), interest) } {
            Ok(watched) => Ok(Watch::Polled(watched)),
            Err(e) => match e.into_parts() {
                (fd, cause) if cause.raw_os_error() == Some(libc::EPERM) => Ok(Watch::Always(fd)),
                (_, cause) => Err(cause),
            },
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        let raw = match self {
            Watch::Polled(watched) => watched.as_raw_fd(),
            Watch::Always(fd) => fd.0,
        };
        // SAFETY: open for the life of `self` (see `new`).
        unsafe { BorrowedFd::borrow_raw(raw) }
    }

    fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        mut f: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let Watch::Polled(watched) = self else {
            return Poll::Ready(f());
        };
        loop {
            let mut guard = if interest.is_readable() {
                ready!(watched.poll_read_ready(cx))?
            } else {
                ready!(watched.poll_write_ready(cx))?
            };
            if let Ok(result) = guard.try_io(|_| f()) {
                return Poll::Ready(result);
            }
        }
    }

    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    fn forget_readable(&self) {
        if let Watch::Polled(watched) = self {
            let _ = watched.try_io(Interest::READABLE, |_| {
                Err::<(), _>(io::ErrorKind::WouldBlock.into())
            });
        }
    }
}

impl Descriptors {
    /// Must run inside a tokio runtime.
    ///
    /// # Safety
    /// `input` and `output` must stay open, on the same files, for the
    /// life of the `Descriptors`: fds 0 and 1 in inetd mode (never closed
    /// or replaced), or a duplicate the caller owns and outlives it with.
    pub(crate) unsafe fn new(
        input: BorrowedFd<'_>,
        output: BorrowedFd<'_>,
    ) -> io::Result<Descriptors> {
        sys::set_nonblocking(input);
        sys::set_nonblocking(output);
        let socket = sys::is_socket(output);
        let same = input.as_raw_fd() == output.as_raw_fd();
        // One registration per descriptor: epoll refuses a second.
        let both = Interest::READABLE | Interest::WRITABLE;
        // SAFETY: as the caller promised.
        let (input, output) = unsafe {
            if same {
                (Watch::new(input.as_raw_fd(), both)?, None)
            } else {
                (
                    Watch::new(input.as_raw_fd(), Interest::READABLE)?,
                    Some(Watch::new(output.as_raw_fd(), Interest::WRITABLE)?),
                )
            }
        };
        Ok(Descriptors {
            input,
            output,
            socket,
        })
    }

    fn output_watch(&self) -> &Watch {
        self.output.as_ref().unwrap_or(&self.input)
    }
}

impl Ready for Descriptors {
    fn input(&self) -> BorrowedFd<'_> {
        self.input.fd()
    }
    fn output(&self) -> BorrowedFd<'_> {
        self.output_watch().fd()
    }
    fn socket(&self) -> bool {
        self.socket
    }
    fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        f: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        if interest.is_readable() {
            self.input.poll_io(cx, interest, f)
        } else {
            self.output_watch().poll_io(cx, interest, f)
        }
    }
    fn forget_readable(&self) {
        self.input.forget_readable();
    }
}

/// Resolves once SIGTERM or SIGINT asked the process to stop (the pipe
/// [`sys::stop_on_signals`] made turns readable); never if there is none.
/// Must run inside a tokio runtime.
pub(crate) async fn signalled() {
    let watched = sys::stop_fd().and_then(|fd| {
        // SAFETY: the stop pipe stays open for the life of the process.
        unsafe { AsyncFd::register_with_interest(Fd(fd.as_raw_fd()), Interest::READABLE) }.ok()
    });
    match watched {
        Some(pipe) => {
            let _ = pipe.readable().await;
        }
        None => std::future::pending().await,
    }
}
