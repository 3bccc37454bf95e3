//! A graceful stop's end: which connections it waits for (those not idle
//! between requests, counted per worker by `Busy`), and for how long.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::workers::Shared;

/// Once a graceful stop begins, how long an idle keep-alive connection may
/// still send a request (answered, with `Connection: close`) before it is
/// closed: a client that sent one just as the stop began must not see its
/// connection close under it. Capped by the shutdown grace.
pub(crate) const LAST_CALL: Duration = Duration::from_secs(1);

/// Once stopping: returns when the responses in flight are done (or the
/// shutdown grace is over) and idle keep-alive connections have had their
/// last call; those still idle then are closed when the runtime drops
/// their tasks.
pub(crate) async fn connections_drained(shared: &Shared) {
    let start = shared.conns.stop_began();
    let grace = shared.cfg.shutdown_grace;
    let last_call = start + LAST_CALL.min(grace);
    loop {
        let now = Instant::now();
        let busy = BUSY.with(Cell::get) > 0;
        let open = shared.conns.active.load(Ordering::Acquire) > 0;
        if now >= start + grace || !(busy || open && now < last_call) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Once stopping: returns when no connection is left, or when the grace
/// period for responses in flight is over. (The io_uring transport's idle
/// connections end themselves when the stop comes.)
#[cfg(feature = "uring")]
pub(crate) async fn connections_finished(shared: &Shared) {
    let deadline = shared.conns.stop_began() + shared.cfg.shutdown_grace;
    while shared.conns.active.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

thread_local! {
    /// Connections of this worker thread that are not waiting idle between
    /// requests: a graceful stop waits for these only.
    static BUSY: Cell<usize> = const { Cell::new(0) };
}

/// Counts its connection in BUSY while it is not idle.
pub(crate) struct Busy(bool);

impl Busy {
    pub(crate) fn new() -> Busy {
        BUSY.with(|b| b.set(b.get() + 1));
        Busy(true)
    }

    pub(crate) fn idle(&mut self) {
        if self.0 {
            BUSY.with(|b| b.set(b.get() - 1));
            self.0 = false;
        }
    }

    pub(crate) fn resume(&mut self) {
        if !self.0 {
            BUSY.with(|b| b.set(b.get() + 1));
            self.0 = true;
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.idle();
    }
}
