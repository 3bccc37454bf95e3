//! `--max-connections`: the process-wide count of open connections and
//! each connection's place in it (with `--max-connections-per-ip`'s
//! claim, see [`clients`](crate::serve::clients)).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use super::clients::{Claim, PerClient};
use crate::config::Config;

/// The process-wide count of open connections, bounded by `--max-connections`: at the bound the
/// oldest idle keep-alive connection is closed to make room (see
/// [`accept::place`](crate::serve::accept::place)); with none idle, each worker holds the one
/// client it accepted last unserved and accepts no more (the rest wait in the listen queue) until a
/// connection ends.
pub(crate) struct Connections {
    pub(crate) active: AtomicUsize,
    max: usize,
    freed: Notify,
    /// Asks every worker to close its oldest parked connection: a worker
    /// at the bound with none of its own parked needs another's.
    pub(crate) shed: Notify,
    /// `--max-connections-per-ip`.
    per_client: Arc<PerClient>,
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

impl Connections {
    pub(crate) fn new(cfg: &Config) -> Connections {
        Connections {
            active: AtomicUsize::new(0),
            max: cfg.max_connections,
            freed: Notify::new(),
            shed: Notify::new(),
            per_client: Arc::new(PerClient::new(cfg)),
        }
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
    /// claimed then ([`Slot::claim_for`](crate::serve::limits::Slot::claim_for)).
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
