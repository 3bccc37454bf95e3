//! Idle keep-alive connections that wait as tasks (in either transport),
//! and how the longest idle of them is told to close, to make room at
//! `--max-connections`.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use tokio::sync::Notify;

thread_local! {
    /// Idle connections of this worker waiting as tasks: each waits on
    /// this too, and tokio wakes `notify_one`'s waiters in the order they
    /// began to wait, so the first woken has been idle longest. Leaked
    /// once per worker thread, so a wait can borrow it for as long as it
    /// likes.
    /// (An atomic only so that a connection's future stays Send: it is
    /// only ever touched by its worker's thread.)
    static WAITING: &'static (Notify, AtomicUsize) =
        Box::leak(Box::new((Notify::new(), AtomicUsize::new(0))));
}

/// Runs `read`, the wait of a connection; if `idle`, it ends early
/// (ConnectionAborted) when the connection is chosen to be closed to make
/// room (see `shed_waiting`).
pub(crate) async fn unless_shed<T>(
    read: impl Future<Output = io::Result<T>>,
    idle: bool,
) -> io::Result<T> {
    let mut read = std::pin::pin!(read);
    if !idle {
        return read.await;
    }
    let (notify, count) = WAITING.with(|w| *w);
    count.fetch_add(1, Ordering::Relaxed);
    let _counted = Uncount(count);
    let mut shed = std::pin::pin!(notify.notified());
    std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = read.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        match shed.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into())),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Takes a waiting connection off the count when its wait ends.
struct Uncount(&'static AtomicUsize);

impl Drop for Uncount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Tells the longest-idle connection of this worker that waits as a task
/// to close. False if none waits. Its place is free once its task has run.
pub(crate) fn shed_waiting() -> bool {
    let (notify, count) = WAITING.with(|w| *w);
    // Only with a waiter: notify_one with none would store a permit for
    // the next connection to go idle, which is not the oldest.
    if count.load(Ordering::Relaxed) == 0 {
        return false;
    }
    notify.notify_one();
    crate::metrics::count(crate::metrics::Event::ConnectionShed);
    true
}
