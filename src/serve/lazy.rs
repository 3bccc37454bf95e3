//! TCP connections that cost the runtime nothing until they have to wait.
//!
//! A connection of a `Connection: close` load brings its request with it
//! and takes its response at once. For such a connection, registering the
//! socket with epoll (and removing it again at close), tokio's readiness
//! record, and a wake-up through the poller before the first read are pure
//! overhead: nginx does none of it for a request that is already there.
//! So accepted sockets start bare: reads and writes are tried straight on
//! the descriptor, and the socket is registered with tokio the first time
//! one of them would block.

use std::io;
use std::mem::ManuallyDrop;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use rustix::net::SocketFlags;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// An accepted TCP connection, registered with the runtime on first wait.
pub(crate) struct LazyTcp {
    /// The descriptor. Once `registered` holds a stream, that stream owns
    /// it (and closes it); until then this does.
    bare: ManuallyDrop<std::net::TcpStream>,
    /// Set by the first wait: the same descriptor, watched by tokio. A
    /// failed registration is kept too (tokio closed the descriptor then).
    registered: OnceLock<io::Result<TcpStream>>,
}

impl LazyTcp {
    pub(crate) fn new(stream: std::net::TcpStream) -> LazyTcp {
        LazyTcp {
            bare: ManuallyDrop::new(stream),
            registered: OnceLock::new(),
        }
    }

    /// Whether tokio watches it yet.
    fn watched(&self) -> Option<&TcpStream> {
        match self.registered.get() {
            Some(Ok(s)) => Some(s),
            _ => None,
        }
    }

    /// The registered stream, registering it now if need be. Must run on
    /// the runtime.
    fn watch(&self) -> io::Result<&TcpStream> {
        let registered = self.registered.get_or_init(|| {
            // SAFETY: the new stream takes over the descriptor: `bare` is
            // never dropped once `registered` is set (see Drop), so the
            // descriptor has exactly one owner that closes it.
            let twin = unsafe { std::net::TcpStream::from_raw_fd(self.bare.as_raw_fd()) };
            TcpStream::from_std(twin)
        });
        registered
            .as_ref()
            .map_err(|e| io::Error::new(e.kind(), e.to_string()))
    }

    pub(crate) async fn readable(&self) -> io::Result<()> {
        self.watch()?.readable().await
    }

    pub(crate) async fn writable(&self) -> io::Result<()> {
        self.watch()?.writable().await
    }

    pub(crate) fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self.watched() {
            Some(s) => s.try_read(buf),
            None => crate::sys::read(self.as_fd(), buf),
        }
    }

    /// Reads into `buf`'s spare capacity, as tokio's `try_read_buf` does.
    pub(crate) fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        match self.watched() {
            Some(s) => s.try_read_buf(buf),
            None => {
                let (read, _) = rustix::io::read(self.as_fd(), buf.spare_capacity_mut())?;
                let n = read.len();
                // SAFETY: read(2) initialised the first n spare bytes.
                unsafe { buf.set_len(buf.len() + n) };
                Ok(n)
            }
        }
    }

    /// Runs `f`, one non-blocking call on the descriptor: straight away
    /// while bare (a WouldBlock then leads the caller to wait, which
    /// registers), through tokio's readiness once registered.
    pub(crate) fn try_io<R>(
        &self,
        interest: Interest,
        f: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        match self.watched() {
            Some(s) => s.try_io(interest, f),
            None => f(),
        }
    }

    /// The plain socket again, no longer watched by tokio (which forgets
    /// it): for parking an idle connection outside the runtime.
    pub(crate) fn into_std(self) -> io::Result<std::net::TcpStream> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; each field is
        // moved out exactly once.
        let registered = unsafe { std::ptr::read(&this.registered) };
        let bare = unsafe { ManuallyDrop::take(&mut this.bare) };
        match registered.into_inner() {
            None => Ok(bare),
            Some(watched) => {
                // The registered stream owns the descriptor now.
                std::mem::forget(bare);
                watched?.into_std()
            }
        }
    }
}

impl Drop for LazyTcp {
    fn drop(&mut self) {
        if self.registered.get().is_none() {
            // SAFETY: dropped once, here; nothing else owns the descriptor.
            unsafe { ManuallyDrop::drop(&mut self.bare) };
        }
        // Otherwise the registered stream (dropped after this) closes it,
        // or its failed registration already did.
    }
}

impl AsFd for LazyTcp {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.bare.as_fd()
    }
}

/// A TCP listener whose accepted sockets start bare (see [`LazyTcp`]).
pub(crate) struct LazyListener(AsyncFd<std::net::TcpListener>);

impl LazyListener {
    /// Must run on the runtime.
    pub(crate) fn new(listener: std::net::TcpListener) -> io::Result<LazyListener> {
        listener.set_nonblocking(true)?;
        // SAFETY: the listener owns its descriptor and is never replaced
        // while the AsyncFd holds it.
        let watched = unsafe { AsyncFd::register_with_interest(listener, Interest::READABLE) };
        Ok(LazyListener(watched.map_err(io::Error::from)?))
    }

    /// The next connection, non-blocking and close-on-exec, and its peer.
    pub(crate) async fn accept(&self) -> io::Result<(LazyTcp, SocketAddr)> {
        loop {
            let mut ready = self.0.readable().await?;
            match ready.try_io(|l| accept_bare(l.get_ref().as_fd())) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }
}

fn accept_bare(listener: BorrowedFd<'_>) -> io::Result<(LazyTcp, SocketAddr)> {
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let (fd, peer): (OwnedFd, _) = rustix::net::acceptfrom_with(listener, flags)?;
    let peer = peer
        .and_then(|p| SocketAddr::try_from(p).ok())
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    Ok((LazyTcp::new(std::net::TcpStream::from(fd)), peer))
}

/// HTTP/2 waits through tokio from its first read: the socket registers
/// then.
impl super::ready::Ready for LazyTcp {
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
        cx: &mut std::task::Context<'_>,
        interest: Interest,
        f: impl FnMut() -> io::Result<R>,
    ) -> std::task::Poll<io::Result<R>> {
        match self.watch() {
            Ok(stream) => stream.poll_io(cx, interest, f),
            Err(e) => std::task::Poll::Ready(Err(e)),
        }
    }

    fn forget_readable(&self) {
        if let Some(stream) = self.watched() {
            super::ready::Ready::forget_readable(stream);
        }
    }
}
