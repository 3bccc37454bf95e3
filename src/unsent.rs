//! Raised unsent queues (the budget, and `Queue`, which the event loop's HTTP/1.1 writer
//! keeps per response): the bound on what waits unsent in the kernel per connection
//! ([`sys::UNSENT_LIMIT`], 128 KiB) is raised to [`RAISED_LIMIT`] for a response whose client
//! has shown it takes bytes fast, out of one budget for the whole server (`--unsent-budget`).
//!
//! Why: at 128 KiB a 10 MB response to a fast client takes about 80 wake-ups and
//! sendfile(2) calls, where nginx, whose socket buffers grow to megabytes, makes a few
//! (docs/performance.md, "The unsent bound and new connections"). The bound is what keeps a
//! slow reader from pinning megabytes of kernel memory (issue 28), so it is raised only:
//! - for a client whose TCP acknowledged at least one whole bounded queue at a rate that
//!   would drain a raised one within a second (`Queue::measure`);
//! - while the server-wide budget has room, each raise taking `RAISED_LIMIT -
//!   UNSENT_LIMIT` of it; a client that is never fast, or comes when the budget is spent,
//!   keeps 128 KiB;
//! - until the response is written and its queue has drained back under the bound
//!   (`Queue::lower`, then the writer waits for room): a share goes back to the budget only
//!   when what it paid for has left the kernel, or was discarded by a reset (a client given
//!   up on), never while a closed connection's bytes still wait.
//!
//! A client whose rate falls is lowered at once (it keeps its share until it drains): what
//! it had queued stays, and `--min-rate` measures it by what it acknowledges, as before.
//!
//! HTTP/2 connections on the event loop keep one `Queue` across their turns: the measurement
//! begins with the first turn larger than the bound, and when the connection has nothing
//! more to write (`Queue::pause`) a raised queue is lowered and the connection waits for it
//! to drain, as an HTTP/1.1 response's writer does, before it reads on (serve::h2).
//!
//! Only the event loop's writers raise (HTTP/1.1 and HTTP/2, cleartext and TLS). inetd mode
//! has one process per connection, where a budget shared by the server cannot be kept;
//! io_uring writes through a path of its own, which keeps 128 KiB.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::sys;

/// What a raised connection may hold unsent: Linux's default largest send buffer
/// (`net.ipv4.tcp_wmem`'s 4 MiB), what a connection without the bound gets. Measured: 1 MiB
/// still spent 1.4-1.6 ms of server CPU per 10 MB response with `Connection: close`, 4 MiB
/// 0.85-0.87 (nginx 0.84-1.05; benches/compare/results/2026-12-06-h2c-modes/close-unsent.txt).
pub const RAISED_LIMIT: u32 = 4 << 20;

/// A raised queue must drain within this at the client's measured rate.
const DRAIN: Duration = Duration::from_secs(1);

/// The default budget: this fraction of physical memory (384 MiB, 99 raised connections,
/// on a 24 GiB machine; 16 MiB, 4 of them, on 1 GiB).
const BUDGET_SHARE_OF_MEMORY: u64 = 64;

/// The budget in bytes (0 until [`set_budget`]: nothing is raised).
static CAPACITY: AtomicU64 = AtomicU64::new(0);
/// Bytes of the budget raised queues hold now.
static HELD: AtomicU64 = AtomicU64::new(0);
/// Raises given since start-up.
static RAISES: AtomicU64 = AtomicU64::new(0);

/// What one raise takes from the budget: the queue above the bound every connection has.
const SHARE: u64 = (RAISED_LIMIT - sys::UNSENT_LIMIT) as u64;

/// `--unsent-budget`'s default: a share of physical memory.
pub fn default_budget() -> u64 {
    sys::physical_memory().map_or(0, |m| m / BUDGET_SHARE_OF_MEMORY)
}

/// Sets the server's budget for raised queues (bytes; 0: none is raised). Once, at start-up.
pub fn set_budget(bytes: u64) {
    CAPACITY.store(bytes, Ordering::Relaxed);
}

/// The budget (`--unsent-budget`), in bytes.
pub fn budget() -> u64 {
    CAPACITY.load(Ordering::Relaxed)
}

/// Bytes of the budget held now by raised queues.
pub fn held() -> u64 {
    HELD.load(Ordering::Relaxed)
}

/// How many times a queue was raised since start-up.
pub fn raises() -> u64 {
    RAISES.load(Ordering::Relaxed)
}

/// Takes one share of the budget, if it has room.
fn take() -> bool {
    let capacity = CAPACITY.load(Ordering::Relaxed);
    HELD.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
        (held + SHARE <= capacity).then_some(held + SHARE)
    })
    .is_ok()
}

fn give_back() {
    HELD.fetch_sub(SHARE, Ordering::AcqRel);
}

/// Whether `acked` bytes in `elapsed` are a fast client's: at least one whole bounded queue,
/// at a rate that drains a raised one within [`DRAIN`]. None: too few bytes to tell yet.
fn fast(acked: u64, elapsed: Duration) -> Option<bool> {
    if acked < u64::from(sys::UNSENT_LIMIT) {
        return None;
    }
    // acked / elapsed >= RAISED_LIMIT / DRAIN, without dividing.
    let needed = u128::from(RAISED_LIMIT) * elapsed.as_nanos();
    Some(u128::from(acked) * DRAIN.as_nanos() >= needed)
}

/// Where a measurement of a write of `size` bytes to `fd` begins: now, at the bytes
/// acknowledged so far, if the write is larger than the bound (a smaller one never waits
/// long) and there is a budget at all.
fn probe(fd: BorrowedFd<'_>, size: u64, now: Instant) -> Option<(Instant, u64)> {
    match size > u64::from(sys::UNSENT_LIMIT) && budget() > 0 {
        true => sys::bytes_acked(fd).map(|acked| (now, acked)),
        false => None,
    }
}

/// One response's unsent queue on a TCP socket, as its writer waits on it (or one
/// connection's, across HTTP/2's turns).
#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// When and at what count of acknowledged bytes the current measurement began.
    probe: Option<(Instant, u64)>,
    /// The socket's limit is [`RAISED_LIMIT`] now.
    raised: bool,
    /// A share of the budget is held (until the queue drains: [`Queue::lower`]).
    holds: bool,
}

impl Queue {
    /// The queue of a response of `size` bytes about to be written to `fd`: the measurement
    /// of the client's rate begins with it (see `probe`).
    pub(crate) fn new(fd: BorrowedFd<'_>, size: u64, now: Instant) -> Queue {
        Queue {
            probe: probe(fd, size, now),
            ..Queue::default()
        }
    }

    /// A connection's next write of `size` bytes to `fd`, for a queue kept across writes
    /// (HTTP/2's turns): the measurement begins, as in [`Queue::new`], unless it is already
    /// going on.
    #[cfg(feature = "http2")]
    pub(crate) fn next_write(&mut self, fd: BorrowedFd<'_>, size: u64, now: Instant) {
        if self.probe.is_none() {
            self.probe = probe(fd, size, now);
        }
    }

    /// A write found the queue full. Returns true if the client has been fast since the
    /// measurement began and the limit was raised now: the socket has room again at once,
    /// and the write may be tried again without waiting. On loopback, or to a client close
    /// by, that is the first time the queue fills: one wait fewer per response.
    pub(crate) fn blocked(&mut self, fd: BorrowedFd<'_>, now: Instant) -> bool {
        let was = self.raised;
        self.measure(fd, now);
        self.raised && !was
    }

    /// The queue had room again after a wait: see [`Queue::measure`].
    pub(crate) fn woke(&mut self, fd: BorrowedFd<'_>, now: Instant) {
        self.measure(fd, now);
    }

    /// Once the client has acknowledged a whole bounded queue since the measurement began,
    /// raise the limit if it was fast (and the budget has room), lower it if it no longer
    /// is, and measure again from here.
    fn measure(&mut self, fd: BorrowedFd<'_>, now: Instant) {
        let Some((since, before)) = self.probe else {
            return;
        };
        let Some(acked) = sys::bytes_acked(fd) else {
            self.probe = None;
            return;
        };
        let Some(fast) = fast(acked.saturating_sub(before), now.duration_since(since)) else {
            return;
        };
        self.probe = Some((now, acked));
        if fast && !self.raised && (self.holds || take()) {
            self.holds = true;
            self.raised = sys::set_unsent_limit(fd, RAISED_LIMIT).is_ok();
            RAISES.fetch_add(u64::from(self.raised), Ordering::Relaxed);
        } else if !fast {
            self.lower(fd);
        }
    }

    /// The connection has nothing more to write for now (HTTP/2, between bursts of turns): the
    /// measurement ends, and the next write begins another.
    #[cfg(feature = "http2")]
    pub(crate) fn pause(&mut self) {
        self.probe = None;
    }

    /// Whether what waits unsent on `fd` has drained under the bound (the socket has room
    /// at it again): Ok, else WouldBlock, for a wait on the socket's write readiness. By
    /// poll(2), which arms the kernel's wake-up if not (see `sys::writable_now`).
    pub(crate) fn drained(fd: BorrowedFd<'_>) -> std::io::Result<()> {
        match sys::writable_now(fd) {
            true => Ok(()),
            false => Err(std::io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Whether a share is held: the writer must then [`lower`](Queue::lower) the limit once
    /// the response is written, and wait until the socket has room at the bound (less than
    /// it waits unsent) before it reads on or closes.
    pub(crate) fn holds(&self) -> bool {
        self.holds
    }

    /// The response is written: the limit goes back to the bound.
    pub(crate) fn lower(&mut self, fd: BorrowedFd<'_>) {
        if self.raised {
            self.raised = sys::set_unsent_limit(fd, sys::UNSENT_LIMIT).is_err();
        }
    }

    /// The queue drained under the bound (or the connection is being reset, or is gone): the
    /// share goes back.
    pub(crate) fn release(&mut self) {
        if std::mem::take(&mut self.holds) {
            give_back();
        }
    }
}

impl Drop for Queue {
    /// A response abandoned (an error, a client given up on and reset): its share goes back.
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: u64 = sys::UNSENT_LIMIT as u64;

    /// The one test that sets the budget: the others do not touch it.
    #[test]
    fn the_budget_gives_out_whole_shares_and_takes_them_back() {
        set_budget(2 * SHARE + SHARE / 2);
        assert!(take() && take(), "two shares fit");
        assert!(!take(), "a third does not");
        assert_eq!(held(), 2 * SHARE);
        give_back();
        assert!(take(), "one given back is one to take");
        give_back();
        give_back();
        assert_eq!(held(), 0);
        set_budget(0);
        assert!(!take(), "no budget, no raise");
    }

    #[test]
    fn too_few_bytes_tell_nothing() {
        assert_eq!(fast(BOUND - 1, Duration::from_nanos(1)), None);
    }

    #[test]
    fn a_client_that_would_drain_a_raised_queue_within_a_second_is_fast() {
        // 4 MiB/s exactly: a raised queue drains in one second.
        assert_eq!(fast(BOUND, Duration::from_millis(31)), Some(true));
        assert_eq!(fast(BOUND, Duration::from_millis(32)), Some(false));
        // A fast client measured over a longer stretch.
        assert_eq!(fast(40 << 20, Duration::from_secs(5)), Some(true));
        // 1 MB/s is not.
        assert_eq!(fast(1 << 20, Duration::from_secs(1)), Some(false));
    }
}
