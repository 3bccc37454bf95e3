//! A graceful stop (SIGTERM, SIGINT) in the order a rolling restart needs
//! ([`Stop`]), and its end: which connections it waits for (those not
//! idle between requests, counted per worker by [`Busy`]), and for how
//! long.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::limits::Connections;

/// The one stop signal of a standalone process, read by every transport
/// and protocol. It comes in two steps, in this order:
/// 1. the listeners close (`listeners_must_close`): no new connection;
/// 2. once every listener group that started (`listening`) said it closed
///    them (`listeners_closed`), connections are told (`stopping`,
///    `told`): HTTP/1.1 answers with `Connection: close`, HTTP/2 and
///    HTTP/3 send GOAWAY, idle connections close.
///
/// The order matters to a client that reconnects after a GOAWAY or a
/// `Connection: close`: under `--reuse-port` it must reach the process
/// taking over, not a listener of this one about to close, which would
/// reset it.
#[derive(Clone)]
pub(crate) struct Stop {
    shared: Arc<StopState>,
    step: watch::Receiver<StopStep>,
}

struct StopState {
    step: watch::Sender<StopStep>,
    /// Step 2 reached: a flag every request can read without a lock.
    told: AtomicBool,
    /// Listener groups (workers) that listen, and those that closed
    /// theirs since the stop began.
    listening_groups: AtomicUsize,
    closed_groups: AtomicUsize,
    /// When the stop began: the shutdown grace counts from it, however
    /// long a worker took to notice (held up by a full log queue, say).
    began: OnceLock<Instant>,
    /// When connections were told: an idle one's last call counts from it.
    told_at: OnceLock<Instant>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum StopStep {
    Serving,
    ClosingListeners,
    Told,
}

impl Stop {
    pub(crate) fn new() -> Stop {
        let (step, rx) = watch::channel(StopStep::Serving);
        let shared = StopState {
            step,
            told: AtomicBool::new(false),
            listening_groups: AtomicUsize::new(0),
            closed_groups: AtomicUsize::new(0),
            began: OnceLock::new(),
            told_at: OnceLock::new(),
        };
        Stop {
            shared: Arc::new(shared),
            step: rx,
        }
    }

    /// The stop, from the thread that caught the signal: the listeners
    /// close, and once every group that listens said so, connections are
    /// told. A worker busy with a long task (a listing of a huge
    /// directory, say) closes its listeners late, and the others' clients
    /// wait for it; never longer than `grace`, the shutdown grace.
    pub(crate) fn begin(&self, grace: Duration) {
        let began = Instant::now();
        let _ = self.shared.began.set(began);
        self.shared.step.send_replace(StopStep::ClosingListeners);
        let state = &self.shared;
        while state.closed_groups.load(Ordering::Acquire)
            < state.listening_groups.load(Ordering::Acquire)
            && began.elapsed() < grace
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = self.shared.told_at.set(Instant::now());
        self.shared.told.store(true, Ordering::Release);
        self.shared.step.send_replace(StopStep::Told);
    }

    /// Resolves once the stop began: time to close the listeners. Wait for
    /// it in a task of its own, not in the future a worker's runtime blocks
    /// on: tokio's current-thread runtime polls that future only when its
    /// run queue is empty or every `event_interval` (61) tasks, which a
    /// worker busy with long requests (listings of huge directories) makes
    /// seconds, while a woken task waits only for the tasks ahead of it.
    /// Connections are told once every listener closed: this is how long
    /// their GOAWAY and `Connection: close` wait.
    pub(crate) async fn listeners_must_close(&self) {
        let mut step = self.step.clone();
        let _ = step.wait_for(|s| *s >= StopStep::ClosingListeners).await;
    }

    /// A worker (listener group) opened its listeners: the stop waits
    /// for it to close them.
    pub(crate) fn listening(&self) {
        self.shared.listening_groups.fetch_add(1, Ordering::AcqRel);
    }

    /// A worker (listener group) closed its listeners after the stop.
    pub(crate) fn listeners_closed(&self) {
        self.shared.closed_groups.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether connections were told of the stop.
    pub(crate) fn stopping(&self) -> bool {
        self.shared.told.load(Ordering::Acquire)
    }

    /// Resolves once connections are told of the stop (see [`Stop`]).
    pub(crate) async fn told(&self) {
        let mut step = self.step.clone();
        let _ = step.wait_for(|s| *s == StopStep::Told).await;
    }

    /// When connections were told of the stop (now, if they were not).
    pub(crate) fn told_at(&self) -> Instant {
        self.shared
            .told_at
            .get()
            .copied()
            .unwrap_or_else(Instant::now)
    }

    /// When the stop began (now, if it has not).
    pub(crate) fn began(&self) -> Instant {
        self.shared
            .began
            .get()
            .copied()
            .unwrap_or_else(Instant::now)
    }
}

/// Once connections are told of a graceful stop, how long an idle
/// keep-alive connection may still send a request (answered, with
/// `Connection: close`) before it is closed: a client that sent one just
/// as the stop began must not see its connection close under it. Counted
/// from when they are told, not from the signal: a worker slow to close
/// its listeners must not eat it. Capped by the shutdown grace.
pub(crate) const LAST_CALL: Duration = Duration::from_secs(1);

/// Once stopping: returns when the responses in flight are done (or the
/// shutdown grace is over) and idle keep-alive connections have had their
/// last call; those still idle then are closed when the runtime drops
/// their tasks.
pub(crate) async fn connections_drained(stop: &Stop, conns: &Connections, grace: Duration) {
    let start = stop.began();
    let last_call = stop.told_at() + LAST_CALL.min(grace);
    loop {
        let now = Instant::now();
        let busy = BUSY.with(Cell::get) > 0;
        let open = conns.active.load(Ordering::Acquire) > 0;
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
pub(crate) async fn connections_finished(stop: &Stop, conns: &Connections, grace: Duration) {
    let deadline = stop.began() + grace;
    while conns.active.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
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
