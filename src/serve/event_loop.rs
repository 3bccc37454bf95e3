//! Standalone mode: one single-threaded tokio runtime per worker thread,
//! each with its own SO_REUSEPORT listener per TCP address, so the kernel
//! spreads connections over the threads and no work moves between them.
//! (Unix sockets cannot be bound per thread: every thread accepts on one.)
//! Readiness through epoll; idle keep-alive connections parked (see `park`).

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use tokio::net::{UnixListener, UnixStream};

use super::accept;
use super::connection::{connection, Start};
use super::lazy::{LazyListener, LazyTcp};
use super::listen::Listener;
use super::park::{self, Parked};
use super::socket::Socket;
use super::wire::Wire;
use super::workers::{self, Shared, Worker};
use super::{stop, Extras};
use crate::config::Config;
use crate::log;
use crate::site::Site;
use crate::sys::describe;

/// Runs the workers until SIGINT or SIGTERM, then lets in-flight responses
/// finish (up to the grace period) and returns.
pub fn run(
    cfg: Arc<Config>,
    site: Arc<Site>,
    listeners: Vec<Vec<Listener>>,
    extras: Extras,
) -> io::Result<()> {
    // Raised unsent queues are the event loop's alone (see `unsent`).
    crate::unsent::set_budget(
        cfg.unsent_budget
            .unwrap_or_else(crate::unsent::default_budget),
    );
    workers::run_workers(cfg, site, listeners, extras, worker)
}

fn worker(shared: Shared, group: Vec<Listener>, place: Worker) {
    let build = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let Some(rt) = place.runtime(build) else {
        return;
    };
    rt.block_on(async move {
        let h3 = workers::start_http3(&shared, place.index);
        let lot = tokio::spawn(watch_lot(shared.clone()));
        // A task of its own (see `Stop::listeners_must_close`).
        let _ = tokio::spawn(accept_until_stop(group, shared.clone())).await;
        let _ = lot.await;
        stop::connections_drained(&shared.stop, &shared.conns, shared.cfg.shutdown_grace).await;
        // HTTP/3's connections end within the same grace.
        for task in h3 {
            let _ = task.await;
        }
    });
}

/// Accepts on `group`'s listeners until the stop, then closes them.
async fn accept_until_stop(group: Vec<Listener>, shared: Shared) {
    let mut accepting = Vec::new();
    for l in group {
        match start(l, &shared) {
            Ok(task) => accepting.push(task),
            Err(e) => log::diagnostic(&format!("staticd: cannot use listener: {}\n", describe(&e))),
        }
    }
    shared.stop.listening();
    shared.stop.listeners_must_close().await;
    for a in &accepting {
        a.abort();
    }
    // Listeners are dropped with their tasks: no new connections.
    for a in accepting {
        let _ = a.await;
    }
    shared.stop.listeners_closed();
}

/// Watches this worker's parked connections (see [`park`]) until the stop,
/// turning each that wakes back into a task.
async fn watch_lot(shared: Shared) {
    let stop = shared.stop.clone();
    let stop = async move { stop.told().await };
    let resume = |p: Parked| {
        let resumed = Start::Resumed {
            session: p.session,
            sniffing: p.sniffing,
            tuned: p.tuned,
        };
        let stream = LazyTcp::new(p.stream);
        let wire = (Wire::Clear, p.kind);
        tokio::spawn(connection(stream, resumed, wire, shared.clone(), p.slot));
    };
    let shed = (&shared.conns.shed, shared.cfg.max_connections);
    if let Err(e) = park::watch(stop, shed, resume).await {
        // Without a lot, idle connections simply stay tasks.
        log::diagnostic(&format!(
            "staticd: cannot park idle connections: {}\n",
            describe(&e)
        ));
    }
}

/// Starts accepting on `listener`, on this thread's runtime.
fn start(listener: Listener, shared: &Shared) -> io::Result<tokio::task::JoinHandle<()>> {
    let shared = shared.clone();
    Ok(match listener {
        Listener::Tcp(l) => tokio::spawn(accept_loop(LazyListener::new(l)?, shared, None)),
        Listener::Unix(l) => tokio::spawn(accept_loop(UnixListener::from_std(l)?, shared, None)),
        Listener::Redirect(l, https_port) => {
            let l = LazyListener::new(l)?;
            tokio::spawn(accept_loop(l, shared, Some(https_port)))
        }
    })
}

/// `redirect`: the listener is `--redirect-http`'s, and this is the port
/// its clients are sent to.
async fn accept_loop(listener: impl Accept, shared: Shared, redirect: Option<u16>) {
    let mut last_complaint: Option<Instant> = None;
    let cleartext = redirect.is_some() || !shared.extras.tls_on();
    loop {
        match listener.next().await {
            Ok((stream, peer)) => {
                let client = accept::client_name(peer);
                let claim = match shared.conns.claim(peer, &shared.cfg) {
                    Ok(claim) => claim,
                    Err(()) => {
                        let max = shared.conns.max_per_client();
                        // Only TCP clients are counted.
                        if let Some(stream) = stream.into_parked() {
                            accept::turn_away(stream, client, cleartext, max);
                        }
                        continue;
                    }
                };
                // The place is taken after accept(2): a worker waiting on an
                // empty listener must not hold one that a client queued on
                // another worker's listener needs. At the bound, this client
                // waits here unserved, and this worker accepts no one else.
                let slot = accept::place(&shared.conns, claim).await;
                let Ok(wire) = accept::wire_for(&shared, redirect) else {
                    continue;
                };
                let start = Start::New(client);
                tokio::spawn(connection(stream, start, wire, shared.clone(), slot));
            }
            Err(e) => accept::accept_failed(&e, &mut last_complaint).await,
        }
    }
}

/// A listener as the accept loop sees it.
trait Accept: Send + 'static {
    type Stream: Socket;

    /// The next connection, and its client's address (None: a Unix socket).
    fn next(
        &self,
    ) -> impl Future<Output = io::Result<(Self::Stream, Option<std::net::IpAddr>)>> + Send + '_;
}

impl Accept for LazyListener {
    type Stream = LazyTcp;

    async fn next(&self) -> io::Result<(LazyTcp, Option<std::net::IpAddr>)> {
        let (stream, peer) = self.accept().await?;
        Ok((stream, Some(peer.ip())))
    }
}

impl Accept for UnixListener {
    type Stream = UnixStream;

    async fn next(&self) -> io::Result<(UnixStream, Option<std::net::IpAddr>)> {
        let (stream, _) = self.accept().await?;
        Ok((stream, None))
    }
}
