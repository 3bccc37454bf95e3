//! `--max-connections`: the process-wide count of open connections and
//! each connection's place in it (with `--max-connections-per-ip`'s
//! claim, see `clients`), and the flags a graceful stop sets on it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use super::clients::{Claim, PerClient};
use crate::config::Config;

/// The process-wide count of open connections, bounded by
/// `--max-connections`: at the bound the oldest idle keep-alive connection
/// is closed to make room (see `accept::place`); with none idle, each worker
/// holds the one client it accepted last unserved and accepts no more (the
/// rest wait in the listen queue) until a connection ends.
pub(crate) struct Connections {
    pub(crate) active: AtomicUsize,
    /// Set when a graceful stop begins: a flag every request can read
    /// without touching a lock.
    pub(crate) stopping: AtomicBool,
    max: usize,
    freed: Notify,
    /// Asks every worker to close its oldest parked connection: a worker
    /// at the bound with none of its own parked needs another's.
    pub(crate) shed: Notify,
    /// Workers that closed their listeners since the stop began.
    closed_groups: AtomicUsize,
    /// `--max-connections-per-ip`.
    per_client: Arc<PerClient>,
    /// When the stop began: the shutdown grace counts from it, however
    /// long a worker took to notice (held up by a full log queue, say).
    stop_began: std::sync::OnceLock<Instant>,
}

/// One counted connection; dropping it frees the place, and its client's.
pub(crate) struct Slot {
    conns: Arc<Connections>,
    /// Its place among its client's connections, when they are counted.
    claim: Option<Claim>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        crate::metrics::count(crate::metrics::Event::ConnectionClosed);
        self.conns.active.fetch_sub(1, Ordering::AcqRel);
        self.conns.freed.notify_waiters();
    }
}

impl Slot {
    /// Counts the connection as `ip`'s, once a PROXY header named it: false
    /// if `ip` already has the most connections allowed.
    pub(crate) fn claim_for(&mut self, ip: std::net::IpAddr, cfg: &Config) -> bool {
        let table = &self.conns.per_client;
        if self.claim.is_some() || !table.counts(ip, cfg) {
            return true;
        }
        self.claim = table.claim(ip);
        self.claim.is_some()
    }
}

/// The most a stop waits for the workers to close their listeners (one
/// that never started has none to close, and never says so).
const LISTENERS_CLOSING: Duration = Duration::from_secs(1);

impl Connections {
    pub(crate) fn new(cfg: &Config) -> Connections {
        Connections {
            active: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            max: cfg.max_connections,
            freed: Notify::new(),
            shed: Notify::new(),
            closed_groups: AtomicUsize::new(0),
            per_client: Arc::new(PerClient::new(cfg)),
            stop_began: std::sync::OnceLock::new(),
        }
    }

    /// A stop began, now.
    pub(crate) fn stop_begins(&self) {
        let _ = self.stop_began.set(Instant::now());
    }

    /// A worker closed its listeners after the stop.
    pub(crate) fn listeners_closed(&self) {
        self.closed_groups.fetch_add(1, Ordering::AcqRel);
    }

    /// Waits until `workers` closed their listeners. Only then do
    /// connections learn of the stop and end with `Connection: close`: a
    /// client that reconnects must reach the process taking over
    /// (--reuse-port), not a listener of this one about to close, which
    /// would reset it.
    pub(crate) fn wait_listeners_closed(&self, workers: usize) {
        let deadline = Instant::now() + LISTENERS_CLOSING;
        while self.closed_groups.load(Ordering::Acquire) < workers && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// When the stop began (now, if it has not).
    pub(crate) fn stop_began(&self) -> Instant {
        self.stop_began.get().copied().unwrap_or_else(Instant::now)
    }

    /// A place for a new connection, holding `claim` (its client's
    /// place); the claim back when every place is taken.
    pub(crate) fn try_take(self: &Arc<Self>, claim: Option<Claim>) -> Result<Slot, Option<Claim>> {
        loop {
            let now = self.active.load(Ordering::Acquire);
            if now >= self.max {
                return Err(claim);
            }
            if self
                .active
                .compare_exchange(now, now + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                crate::metrics::count(crate::metrics::Event::ConnectionOpened);
                return Ok(Slot {
                    conns: Arc::clone(self),
                    claim,
                });
            }
        }
    }

    /// Resolves once a connection ends after this call; create it before
    /// `try_take`, so that a place freed in between is not missed.
    pub(crate) fn freed(&self) -> Notified<'_> {
        self.freed.notified()
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// `--max-connections-per-ip`'s bound.
    pub(crate) fn max_per_client(&self) -> usize {
        self.per_client.max()
    }

    /// The claim for a new connection from `ip` (None: not counted), or
    /// Err if `ip` is over `--max-connections-per-ip`. With
    /// `--proxy-protocol` the client is known only after the header, and
    /// claimed then (`Slot::claim_for`).
    pub(crate) fn claim(
        &self,
        ip: Option<std::net::IpAddr>,
        cfg: &Config,
    ) -> Result<Option<Claim>, ()> {
        match ip {
            Some(ip) if !cfg.proxy_protocol && self.per_client.counts(ip, cfg) => {
                self.per_client.claim(ip).map(Some).ok_or(())
            }
            _ => Ok(None),
        }
    }
}
