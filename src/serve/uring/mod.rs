//! Standalone mode on io_uring (`--io-uring`, cargo feature `uring`): the
//! event loop's workers, listeners, signals and connection bound, with each
//! worker on a tokio-uring runtime and every accept, socket read and write
//! and HTTP/1.1 file read an io_uring operation (HTTP/2 streams read their
//! files with pread(2): see the `IoLink` of [`serve::h2`](crate::serve::h2)). HTTP/1.1's
//! [`Session`](crate::session::Session) and HTTP/2's [`h2session`](crate::h2session)
//! decide everything, as they do for the other transports, and a
//! connection opens with the same prelude (see `serve::prelude`).
//!
//! tokio-uring does not cancel an operation whose future is dropped: the
//! kernel finishes it, and the buffer and descriptor stay alive until then.
//! A connection given up on (a timeout, the stop) therefore shuts its socket
//! down, which ends any read or write still pending on it, so that the
//! descriptor closes at once rather than whenever the client sends again.

mod connection;
#[cfg(feature = "http2")]
mod h2io;
mod socket;

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use io_uring::{cqueue, opcode, types};
use tokio_uring::net::{TcpListener, TcpStream, UnixStream};
use tokio_uring::{OneshotOutputTransform, UnsubmittedOneshot};

use self::connection::connection;
use self::socket::{borrow, Socket};
use super::listen::Listener;
use super::workers::{self, Shared, Worker};
use super::{accept, stop, Extras};
use crate::config::Config;
use crate::site::Site;
use crate::sys::describe;

/// Submission queue entries of each worker's ring.
const RING_ENTRIES: u32 = 1024;

/// Fails with a message for the user when the kernel refuses io_uring:
/// ENOSYS without it, EPERM under a seccomp filter or
/// /proc/sys/kernel/io_uring_disabled.
pub fn check() -> Result<(), String> {
    match io_uring::IoUring::new(2) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "--io-uring: the kernel refuses io_uring: {}",
            describe(&e)
        )),
    }
}

/// Runs the workers until SIGINT or SIGTERM, as [`event_loop::run`](crate::serve::event_loop::run)
/// does.
pub fn run(
    cfg: Arc<Config>,
    site: Arc<Site>,
    listeners: Vec<Vec<Listener>>,
    extras: Extras,
) -> io::Result<()> {
    workers::run_workers(cfg, site, listeners, extras, worker)
}

fn worker(shared: Shared, group: Vec<Listener>, place: Worker) {
    let mut builder = tokio_uring::builder();
    builder.entries(RING_ENTRIES);
    let Some(rt) = place.runtime(|| tokio_uring::Runtime::new(&builder)) else {
        return;
    };
    rt.block_on(async move {
        // HTTP/3 on this worker's loop too: tokio's own I/O driver, which
        // tokio-uring's runtime runs beside the ring.
        let h3 = workers::start_http3(&shared, place.index);
        // A task of its own (see `Stop::listeners_must_close`).
        let _ = tokio_uring::spawn(accept_until_stop(group, shared.clone())).await;
        stop::connections_finished(&shared.stop, &shared.conns, shared.cfg.shutdown_grace).await;
        for task in h3 {
            let _ = task.await;
        }
    });
}

/// Accepts on `group`'s listeners until the stop, then closes them.
async fn accept_until_stop(group: Vec<Listener>, shared: Shared) {
    let accepting: Vec<_> = group
        .into_iter()
        .map(|l| match l {
            Listener::Tcp(l) => start(TcpListener::from_std(l), &shared, None),
            Listener::Unix(l) => start(l, &shared, None),
            Listener::Redirect(l, port) => start(TcpListener::from_std(l), &shared, Some(port)),
        })
        .collect();
    shared.stop.listening();
    shared.stop.listeners_must_close().await;
    for (listener, task) in &accepting {
        task.abort();
        // Ends the accept in flight, which would otherwise keep the
        // listener open: new connections are refused from now on.
        let _ = rustix::net::shutdown(borrow(&**listener), rustix::net::Shutdown::Both);
    }
    drop(accepting);
    shared.stop.listeners_closed();
}

/// Starts accepting on `listener` (`--redirect-http`'s when `redirect`
/// names the port its clients are sent to); returns it (to shut it down at
/// the stop) and the task.
fn start<L: Accept>(
    listener: L,
    shared: &Shared,
    redirect: Option<u16>,
) -> (Rc<dyn AsRawFd>, tokio::task::JoinHandle<()>) {
    let listener = Rc::new(listener);
    let accepting = accept_loop(Rc::clone(&listener), shared.clone(), redirect);
    (listener, tokio_uring::spawn(accepting))
}

async fn accept_loop<L: Accept>(listener: Rc<L>, shared: Shared, redirect: Option<u16>) {
    let mut last_complaint: Option<Instant> = None;
    let cleartext = redirect.is_some() || !shared.extras.tls_on();
    loop {
        match L::next(&listener).await {
            Ok((stream, peer)) => {
                let client = accept::client_name(peer);
                let admitted = accept::admit(&shared, peer, &client, borrow(&stream), cleartext);
                let Some(claim) = admitted else {
                    continue;
                };
                // As in the event loop: the place is taken after accept(2).
                let mut slot = accept::place(&shared.conns, claim).await;
                let Ok(wire) = accept::wire_for(&shared, redirect) else {
                    continue;
                };
                let shared = shared.clone();
                tokio_uring::spawn(async move {
                    connection(stream, client, wire, shared, &mut slot).await;
                    drop(slot);
                });
            }
            Err(e) => accept::accept_failed(&e, &mut last_complaint).await,
        }
    }
}

/// A listener as the accept loop sees it.
trait Accept: AsRawFd + 'static {
    type Stream: Socket;

    /// The next connection, and its client's address for the log.
    async fn next(listener: &Rc<Self>) -> io::Result<(Self::Stream, Option<IpAddr>)>;
}

impl Accept for TcpListener {
    type Stream = TcpStream;

    async fn next(listener: &Rc<Self>) -> io::Result<(TcpStream, Option<IpAddr>)> {
        let (stream, peer) = listener.accept().await?;
        Ok((stream, Some(peer.ip())))
    }
}

impl Accept for UnixListener {
    type Stream = UnixStream;

    async fn next(listener: &Rc<Self>) -> io::Result<(UnixStream, Option<IpAddr>)> {
        let fd = accept_unix(Rc::clone(listener)).await?;
        // SAFETY: accept(2) made the descriptor for this stream alone.
        let stream = unsafe { UnixStream::from_raw_fd(fd.into_raw_fd()) };
        Ok((stream, None))
    }
}

/// accept(2) on a Unix listener as an io_uring operation: tokio-uring's
/// UnixListener only binds a socket of its own, and staticd binds before it
/// gives up its privileges. The operation holds the listener open.
fn accept_unix(listener: Rc<UnixListener>) -> impl Future<Output = io::Result<OwnedFd>> {
    let sqe = opcode::Accept::new(
        types::Fd(listener.as_raw_fd()),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    )
    .flags(libc::SOCK_CLOEXEC)
    .build();
    UnsubmittedOneshot::new(listener, AcceptDone, sqe).submit()
}

struct AcceptDone;

impl OneshotOutputTransform for AcceptDone {
    type Output = io::Result<OwnedFd>;
    type StoredData = Rc<UnixListener>;

    fn transform_oneshot_output(self, _: Rc<UnixListener>, cqe: cqueue::Entry) -> Self::Output {
        let fd = cqe.result();
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd));
        }
        // SAFETY: the kernel made this descriptor for us, and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}
