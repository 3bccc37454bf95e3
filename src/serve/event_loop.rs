//! Standalone mode: one single-threaded tokio runtime per worker thread,
//! each with its own SO_REUSEPORT listener per TCP address, so the kernel
//! spreads connections over the threads and no work moves between them.
//! (Unix sockets cannot be bound per thread: every thread accepts on one.)

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{watch, Notify};
use tokio::time::Sleep;

use super::cgi_exchange::{self, ClientIo};
use super::clients::{self, Claim, PerClient};
use super::lazy::{LazyListener, LazyTcp};
use super::listen::{Listener, UNIX_CLIENT};
use super::park::{self, Parked, PARK_AFTER};
use super::proxy_header;
use super::writer::ResponseWriter;
pub use super::Extras;
use super::{linger_deadline, Got, Wire};
use crate::complaint::{complain, Complaint};
use crate::config::Config;
use crate::log;
use crate::pace::Pace;
use crate::pool;
use crate::respond::CgiJob;
use crate::session::{Kind, Sent, Session, Step};
use crate::site::Site;
use crate::sys::{self, describe};

pub(crate) use super::READ_CHUNK;
/// How long accepting pauses when the process is out of descriptors.
const EMFILE_PAUSE: Duration = Duration::from_millis(100);
/// Once a graceful stop begins, how long an idle keep-alive connection may
/// still send a request (answered, with `Connection: close`) before it is
/// closed: a client that sent one just as the stop began must not see its
/// connection close under it. Capped by the shutdown grace.
const LAST_CALL: Duration = Duration::from_secs(1);

/// Runs the workers until SIGINT or SIGTERM, then lets in-flight responses
/// finish (up to the grace period) and returns.
pub fn run(
    cfg: Arc<Config>,
    site: Arc<Site>,
    listeners: Vec<Vec<Listener>>,
    extras: Extras,
) -> io::Result<()> {
    run_workers(cfg, site, listeners, extras, worker)
}

/// Starts one thread per listener group running `worker`, announces the
/// addresses, waits for SIGINT or SIGTERM, then tells the workers to stop
/// and waits for them. Every standalone transport starts this way.
pub(crate) fn run_workers(
    cfg: Arc<Config>,
    site: Arc<Site>,
    listeners: Vec<Vec<Listener>>,
    extras: Extras,
    worker: fn(Shared, Vec<Listener>),
) -> io::Result<()> {
    // Signal handlers first: from the first accepted connection on, SIGTERM
    // must mean a graceful stop, never the default kill.
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut stop_signals = signals.block_on(async { StopSignals::register(extras.clone()) })?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let conns = Arc::new(Connections {
        active: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        max: cfg.max_connections,
        freed: Notify::new(),
        shed: Notify::new(),
        closed_groups: AtomicUsize::new(0),
        per_client: Arc::new(PerClient::new(&cfg)),
        stop_began: std::sync::OnceLock::new(),
    });
    // Announced only when everything is ready: tests and scripts wait for it.
    let mut names = Vec::new();
    for l in listeners.first().into_iter().flatten() {
        let name = l.name()?;
        match l {
            Listener::Redirect(..) => eprintln!("staticd: redirecting to https on {name}"),
            _ => eprintln!("staticd: listening on {name}"),
        }
        names.push(name);
    }
    // From here on, log lines go through the log writer's queue: a
    // blocked log output never holds up a worker (see `log::queue`).
    log::start_writer()?;
    let grace = cfg.shutdown_grace;
    let shared = Shared {
        cfg,
        site,
        stop: stop_rx,
        conns: Arc::clone(&conns),
        extras,
    };
    let mut workers = Vec::new();
    for (i, group) in listeners.into_iter().enumerate() {
        let shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name(format!("staticd-{i}"))
            .spawn(move || worker(shared, group))?;
        workers.push(handle);
    }
    super::notify::ready(&format!("listening on {}", names.join(", ")));
    signals.block_on(stop_signals.recv());
    let _ = conns.stop_began.set(Instant::now());
    log::abandon_after(grace);
    super::notify::stopping();
    let _ = stop_tx.send(true);
    conns.wait_listeners_closed(workers.len());
    conns.stopping.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    log::finish();
    Ok(())
}

/// SIGINT and SIGTERM, both meaning: stop gracefully; and SIGHUP, which
/// reopens the access-log file and reloads the certificates.
struct StopSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    extras: Extras,
}

impl StopSignals {
    fn register(extras: Extras) -> io::Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            extras,
        })
    }

    /// Returns once a stop is asked for; handles SIGHUP meanwhile.
    async fn recv(&mut self) {
        loop {
            tokio::select! {
                _ = self.int.recv() => return,
                _ = self.term.recv() => return,
                _ = self.hup.recv() => {
                    super::notify::reloading();
                    if let Err(e) = log::reopen() {
                        log::diagnostic(&format!("staticd: cannot reopen the log file: {}\n", describe(&e)));
                    }
                    self.reload_certificates();
                    super::notify::reloaded();
                }
            }
        }
    }
}

impl StopSignals {
    #[cfg(feature = "tls")]
    fn reload_certificates(&self) {
        let Some(tls) = &self.extras.tls else {
            return;
        };
        let mut warn = |w: String| log::diagnostic(&format!("staticd: warning: {w}\n"));
        match tls.reload(&mut warn) {
            Ok(()) => log::diagnostic("staticd: reloaded certificates\n"),
            Err(e) => log::diagnostic(&format!(
                "staticd: reload: {e}; keeping the old certificates\n"
            )),
        }
    }

    #[cfg(not(feature = "tls"))]
    fn reload_certificates(&self) {
        let _ = &self.extras;
    }
}

/// What every connection of the process shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) cfg: Arc<Config>,
    pub(crate) site: Arc<Site>,
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) conns: Arc<Connections>,
    pub(crate) extras: Extras,
}

/// The process-wide count of open connections, bounded by
/// `--max-connections`: at the bound the oldest idle keep-alive connection
/// is closed to make room (see `take_slot`); with none idle, each worker
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
    fn claim_for(&mut self, ip: std::net::IpAddr, cfg: &Config) -> bool {
        let table = &self.conns.per_client;
        if self.claim.is_some() || !table.counts(ip, cfg) {
            return true;
        }
        self.claim = table.claim(ip);
        self.claim.is_some()
    }
}

/// How long a worker at the bound waits for a place before it asks the
/// other workers again to close an idle connection.
const SHED_AGAIN: Duration = Duration::from_millis(50);

/// The most a stop waits for the workers to close their listeners (one
/// that never started has none to close, and never says so).
const LISTENERS_CLOSING: Duration = Duration::from_secs(1);

impl Connections {
    /// A worker closed its listeners after the stop.
    pub(crate) fn listeners_closed(&self) {
        self.closed_groups.fetch_add(1, Ordering::AcqRel);
    }

    /// Waits until `workers` closed their listeners. Only then do
    /// connections learn of the stop and end with `Connection: close`: a
    /// client that reconnects must reach the process taking over
    /// (--reuse-port), not a listener of this one about to close, which
    /// would reset it.
    fn wait_listeners_closed(&self, workers: usize) {
        let deadline = Instant::now() + LISTENERS_CLOSING;
        while self.closed_groups.load(Ordering::Acquire) < workers && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// When the stop began (now, if it has not).
    fn stop_began(&self) -> Instant {
        self.stop_began.get().copied().unwrap_or_else(Instant::now)
    }

    /// A place for a new connection, holding `claim` (its client's place).
    /// At the bound, idle keep-alive connections make room first, oldest
    /// first, as nginx does: this worker's own parked ones, else the other
    /// workers'. Only with none idle does the new client wait.
    pub(crate) async fn take_slot(self: &Arc<Self>, claim: Option<Claim>) -> Slot {
        let mut waited = false;
        loop {
            let freed = self.freed.notified();
            let now = self.active.load(Ordering::Acquire);
            if now < self.max
                && self
                    .active
                    .compare_exchange(now, now + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                crate::metrics::count(crate::metrics::Event::ConnectionOpened);
                return Slot {
                    conns: Arc::clone(self),
                    claim,
                };
            }
            if now >= self.max {
                let at_max = Complaint::AtMaxConnections { max: self.max };
                if park::shed_oldest() {
                    complain("-", at_max);
                    continue;
                }
                if park::shed_waiting() {
                    complain("-", at_max);
                    // Its place is free once its task has run.
                    let _ = tokio::time::timeout(SHED_AGAIN, freed).await;
                    continue;
                }
                if !std::mem::replace(&mut waited, true) {
                    crate::metrics::count(crate::metrics::Event::ConnectionAtLimit);
                }
                self.shed.notify_waiters();
                let _ = tokio::time::timeout(SHED_AGAIN, freed).await;
            }
        }
    }

    /// The claim for a new connection from `ip` (None: not counted), or
    /// Err if `ip` is over `--max-connections-per-ip`. With
    /// `--proxy-protocol` the client is known only after the header, and
    /// claimed then (`Slot::claim_for`).
    fn claim(&self, ip: Option<std::net::IpAddr>, cfg: &Config) -> Result<Option<Claim>, ()> {
        match ip {
            Some(ip) if !cfg.proxy_protocol && self.per_client.counts(ip, cfg) => {
                self.per_client.claim(ip).map(Some).ok_or(())
            }
            _ => Ok(None),
        }
    }
}

/// Builds a worker's runtime with `build`. The other workers' connections
/// may have taken every descriptor before this worker starts: then it waits
/// for one to close rather than give up, which would drop its listener and
/// reset the connections queued on it. None: it cannot start (said on stderr).
pub(crate) fn start_runtime<T>(shared: &Shared, build: impl Fn() -> io::Result<T>) -> Option<T> {
    loop {
        match build() {
            Ok(rt) => return Some(rt),
            Err(e) if out_of_resources(&e) && !shared.conns.stopping.load(Ordering::Relaxed) => {
                std::thread::sleep(EMFILE_PAUSE);
            }
            Err(e) => {
                log::diagnostic(&format!(
                    "staticd: cannot start a worker: {}\n",
                    describe(&e)
                ));
                return None;
            }
        }
    }
}

fn worker(shared: Shared, group: Vec<Listener>) {
    let build = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let Some(rt) = start_runtime(&shared, build) else {
        return;
    };
    rt.block_on(async move {
        let lot = tokio::spawn(watch_lot(shared.clone()));
        let mut accepting = Vec::new();
        for l in group {
            match start(l, &shared) {
                Ok(task) => accepting.push(task),
                Err(e) => {
                    log::diagnostic(&format!("staticd: cannot use listener: {}\n", describe(&e)))
                }
            }
        }
        let mut stop_wait = shared.stop.clone();
        let _ = stop_wait.wait_for(|s| *s).await;
        for a in &accepting {
            a.abort();
        }
        // Listeners are dropped with their tasks: no new connections.
        for a in accepting {
            let _ = a.await;
        }
        shared.conns.listeners_closed();
        let _ = lot.await;
        connections_drained(&shared).await;
    });
}

/// Watches this worker's parked connections (see `park`) until the stop,
/// turning each that wakes back into a task.
async fn watch_lot(shared: Shared) {
    let mut stop = shared.stop.clone();
    let stop = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let resume = |p: Parked| {
        let resumed = Start::Resumed {
            session: p.session,
            source: p.source,
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

/// Once stopping: returns when the responses in flight are done (or the
/// shutdown grace is over) and idle keep-alive connections have had their
/// last call; those still idle then are closed when the runtime drops
/// their tasks.
async fn connections_drained(shared: &Shared) {
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
                let client = client_name(peer);
                let claim = match shared.conns.claim(peer, &shared.cfg) {
                    Ok(claim) => claim,
                    Err(()) => {
                        let max = shared.conns.per_client.max();
                        // Only TCP clients are counted.
                        if let Some(stream) = stream.into_parked() {
                            turn_away(stream, client, cleartext, max);
                        }
                        continue;
                    }
                };
                // The place is taken after accept(2): a worker waiting on an
                // empty listener must not hold one that a client queued on
                // another worker's listener needs. At the bound, this client
                // waits here unserved, and this worker accepts no one else.
                let slot = shared.conns.take_slot(claim).await;
                let Ok(wire) = wire_for(&shared, redirect) else {
                    continue;
                };
                let start = Start::New(client);
                tokio::spawn(connection(stream, start, wire, shared.clone(), slot));
            }
            Err(e) => accept_failed(&e, &mut last_complaint).await,
        }
    }
}

/// How the log names a client: its address, or `unix:`.
pub(crate) fn client_name(peer: Option<std::net::IpAddr>) -> String {
    peer.map_or_else(|| UNIX_CLIENT.to_string(), |ip| ip.to_string())
}

/// How long a connection refused for its client's bound may take to send
/// its request, to be told why (503) rather than just closed; and how many
/// such connections a worker waits on at once (beyond, they are closed at
/// once: a flood must not hold descriptors).
const REFUSAL_WAIT: Duration = Duration::from_millis(250);
const REFUSALS_WAITING: usize = 64;

thread_local! {
    static REFUSING: Cell<usize> = const { Cell::new(0) };
}

/// Refuses a connection over its client's bound (see `clients::refuse`),
/// giving its request a moment to arrive: accept(2) returns as the
/// handshake completes, usually just before the request does.
fn turn_away(stream: std::net::TcpStream, client: String, cleartext: bool, max: usize) {
    let waiting = REFUSING.with(Cell::get);
    if !cleartext || waiting >= REFUSALS_WAITING {
        clients::refuse(stream.as_fd(), &client, cleartext, max);
        return;
    }
    // Accepted non-blocking, as tokio needs it.
    let Ok(watched) = tokio::net::TcpStream::from_std(stream) else {
        return;
    };
    REFUSING.with(|r| r.set(waiting + 1));
    tokio::spawn(async move {
        let _ = tokio::time::timeout(REFUSAL_WAIT, watched.readable()).await;
        clients::refuse(watched.as_fd(), &client, cleartext, max);
        REFUSING.with(|r| r.set(r.get() - 1));
    });
}

/// Counts a new connection against its client's bound: its claim, or None
/// when the client is over it (the connection is then refused at once, see
/// `clients::refuse`, and dropped by the caller).
#[cfg(feature = "uring")]
pub(crate) fn admit(
    shared: &Shared,
    peer: Option<std::net::IpAddr>,
    client: &str,
    fd: BorrowedFd<'_>,
    cleartext: bool,
) -> Option<Option<Claim>> {
    match shared.conns.claim(peer, &shared.cfg) {
        Ok(claim) => Some(claim),
        Err(()) => {
            let max = shared.conns.per_client.max();
            clients::refuse(fd, client, cleartext, max);
            None
        }
    }
}

/// A new connection's wire and kind: cleartext on `--redirect-http`'s
/// listeners, else as the extras say.
fn wire_for(shared: &Shared, redirect: Option<u16>) -> io::Result<(Wire, Kind)> {
    match redirect {
        Some(port) => Ok((Wire::Clear, Kind::RedirectToHttps { port })),
        None => shared.extras.wire(),
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

/// With HTTP/2, a socket must also be one h2 can be served over.
#[cfg(feature = "http2")]
use super::h2::Ready as MaybeH2;
#[cfg(not(feature = "http2"))]
trait MaybeH2 {}
#[cfg(not(feature = "http2"))]
impl<T> MaybeH2 for T {}

/// What a connection does with its socket, TCP or Unix-domain: tokio gives
/// both these methods, but no trait for them.
trait Socket: MaybeH2 + AsFd + Send + Sync + 'static {
    /// Whether an idle connection on it can be parked (see `park`).
    const PARKABLE: bool;
    /// The plain socket, out of the runtime, for parking; None if it
    /// cannot be parked.
    fn into_parked(self) -> Option<std::net::TcpStream>;
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send + '_;
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send + '_;
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize>;
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
}

macro_rules! socket {
    ($stream:ty, $parkable:expr, $into_parked:expr) => {
        impl Socket for $stream {
            const PARKABLE: bool = $parkable;
            fn into_parked(self) -> Option<std::net::TcpStream> {
                $into_parked(self)
            }
            fn readable(&self) -> impl Future<Output = io::Result<()>> + Send + '_ {
                <$stream>::readable(self)
            }
            fn writable(&self) -> impl Future<Output = io::Result<()>> + Send + '_ {
                <$stream>::writable(self)
            }
            fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
                <$stream>::try_read(self, buf)
            }
            fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
                <$stream>::try_read_buf(self, buf)
            }
            fn try_io<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                <$stream>::try_io(self, interest, f)
            }
        }
    };
}

socket!(LazyTcp, true, |s: LazyTcp| s.into_std().ok());
// Unix-socket clients are local processes, usually few: never parked.
socket!(UnixStream, false, |_| None);

/// After accept(2) failed. Out of descriptors, the pending connection stays
/// queued: pause instead of spinning on the same error, and close what the
/// open-file cache holds. Other errors concern one connection only.
pub(crate) async fn accept_failed(e: &io::Error, last_complaint: &mut Option<Instant>) {
    if !out_of_resources(e) {
        return;
    }
    crate::site::cache::clear();
    if last_complaint.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
        log::diagnostic(&format!("staticd: accept: {} (pausing)\n", describe(e)));
        *last_complaint = Some(Instant::now());
    }
    tokio::time::sleep(EMFILE_PAUSE).await;
}

fn out_of_resources(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        e.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM)
    )
}

/// How a connection's task begins.
enum Start {
    /// Just accepted, from this client.
    New(String),
    /// Back from the lot of idle connections (see `park`).
    Resumed {
        session: Session,
        source: Option<std::net::SocketAddr>,
        sniffing: bool,
        tuned: bool,
    },
}

/// Serves one connection. A plain async block over values made beforehand
/// (not an `async fn`, whose arguments the task would hold twice), with one
/// timer reset for every wait and the step matched by reference: each value
/// is held once, so a quiet keep-alive connection is a small task.
fn connection<S: Socket>(
    stream: S,
    start: Start,
    (mut wire, kind): (Wire, Kind),
    shared: Shared,
    slot: Slot,
) -> impl Future<Output = ()> {
    // A connection that opens with the HTTP/2 preface (after ALPN h2, or
    // h2c with prior knowledge) is handed to `h2` once the first bytes tell.
    let h2_possible = shared.cfg.http2.is_some() && matches!(kind, Kind::Http | Kind::Https);
    let (mut session, resumed) = match start {
        Start::New(client) => (Session::with_kind(client, kind), None),
        Start::Resumed {
            session,
            source,
            sniffing,
            tuned,
        } => (session, Some((source, sniffing, tuned))),
    };
    #[cfg_attr(not(feature = "http2"), allow(unused_mut, unused_variables))]
    let mut sniffing = resumed.map_or(h2_possible, |(_, sniffing, _)| sniffing);
    async move {
        // Held until the connection ends, or parked with it.
        let mut slot = slot;
        let timer = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(timer);
        let mut busy = Busy::new();
        // --proxy-protocol: the header comes first, before TLS.
        let source = match (resumed, shared.cfg.proxy_protocol) {
            (Some((source, _, _)), _) => source,
            (None, true) => {
                // Waiting for it is like waiting for a first request: it
                // does not hold up a graceful stop.
                busy.idle();
                let deadline = Instant::now() + shared.cfg.read_timeout;
                match within(proxy_header(&stream), deadline, timer.as_mut()).await {
                    Ok(source) => {
                        busy.resume();
                        source
                    }
                    Err(_) => return,
                }
            }
            (None, false) => None,
        };
        if resumed.is_none() {
            proxy_header::name_client(&mut session, source);
            // The client a PROXY header named counts against its bound.
            if let Some(source) = source {
                if !slot.claim_for(source.ip(), &shared.cfg) {
                    let cleartext = !shared.extras.tls_on();
                    let max = shared.conns.per_client.max();
                    clients::refuse(stream.as_fd(), session.client(), cleartext, max);
                    return;
                }
            }
        }
        // TCP_NODELAY is set before the first response that keeps the
        // connection open (a later small response must not wait for the
        // client's delayed ACK); a connection closed after one response
        // never needs it: close(2) pushes out what is queued.
        let mut tuned = resumed.is_some_and(|(_, _, tuned)| tuned);
        // Set when the connection has been quiet long enough to be parked:
        // its keep-alive deadline.
        let mut park_until = None;
        loop {
            #[cfg(feature = "http2")]
            if sniffing && !session.input().is_empty() {
                match super::h2::opening(session.input()) {
                    Some(true) => {
                        sys::tune_connection(stream.as_fd());
                        let read = std::mem::take(session.input());
                        let served = super::h2::Served {
                            cfg: Arc::clone(&shared.cfg),
                            site: Arc::clone(&shared.site),
                            kind,
                            client: session.client().into(),
                            sockets: proxy_header::sockets(stream.as_fd(), source),
                        };
                        let io = super::h2::WireIo::new(stream, wire, read);
                        let mut stop = shared.stop.clone();
                        let stop = async move {
                            let _ = stop.wait_for(|stop| *stop).await;
                        };
                        super::h2::serve(io, served, stop).await;
                        return;
                    }
                    Some(false) => sniffing = false,
                    None => {
                        // A prefix of the preface: the rest decides.
                        let deadline = Instant::now() + shared.cfg.read_timeout;
                        let read = read_wire(&stream, &mut wire, session.input());
                        match within(read, deadline, timer.as_mut()).await {
                            Ok(Got::Bytes) => continue,
                            _ => return,
                        }
                    }
                }
            }
            let stopping = shared.conns.stopping.load(Ordering::Relaxed);
            let mut step = session.step(&shared.cfg, &shared.site, stopping);
            match &mut step {
                Step::Read { deadline, idle } => {
                    let mut deadline = *deadline;
                    // Quiet for PARK_AFTER: parked instead of waiting on.
                    let park_at = Instant::now() + PARK_AFTER;
                    let parkable = S::PARKABLE
                        && *idle
                        && !stopping
                        && matches!(wire, Wire::Clear)
                        && park_at < deadline
                        && park::open();
                    if *idle {
                        // Nothing buffered: hold no buffer while the client
                        // is quiet; and a quiet connection does not hold up
                        // a graceful stop (see `worker`), unless the stop
                        // began: then this is its last call, waited for.
                        pool::give(&pool::READS, std::mem::take(session.input()));
                        match stopping {
                            false => busy.idle(),
                            true => deadline = deadline.min(Instant::now() + LAST_CALL),
                        }
                    }
                    let read = read_wire(&stream, &mut wire, session.input());
                    // Idle, it may be closed to make room at --max-connections.
                    let read = park::unless_shed(read, *idle && !stopping);
                    let wait_until = if parkable { park_at } else { deadline };
                    let read = within(read, wait_until, timer.as_mut()).await;
                    busy.resume();
                    match read {
                        Ok(Got::Bytes) => {}
                        Err(e) if parkable && e.kind() == io::ErrorKind::TimedOut => {
                            park_until = Some(deadline);
                            break;
                        }
                        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                            session.read_timed_out(&shared.cfg);
                            break;
                        }
                        Ok(Got::Cleartext) => {
                            session.https_required();
                            #[cfg(feature = "http2")]
                            {
                                sniffing = false;
                            }
                        }
                        Ok(Got::Closed) | Err(_) => break,
                    }
                }
                Step::Send(sent) => {
                    if !tuned && !sent.response.close {
                        sys::tune_connection(stream.as_fd());
                        tuned = true;
                    }
                    let cfg = &shared.cfg;
                    let mut pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
                    let out = &mut wire;
                    let copy = cfg.no_sendfile;
                    let result = send(&stream, out, sent, copy, timer.as_mut(), &mut pace).await;
                    // `step` writes the log line when dropped: after this
                    // arm, or with the task if the stop's grace runs out.
                    if let Err(e) = result {
                        super::response_failed(&e, &pace, session.client(), cfg);
                        return;
                    }
                }
                Step::Cgi(_) => {
                    let Step::Cgi(mut job) = std::mem::replace(&mut step, Step::Close) else {
                        unreachable!("matched as Cgi just above")
                    };
                    proxy_header::give_source(&mut job, stream.as_fd(), source);
                    let (cfg, site) = (&shared.cfg, &shared.site);
                    let io = (stream.as_fd(), &mut wire);
                    let keep_alive = run_cgi(io, &mut session, job, cfg, site).await;
                    session.cgi_finished(keep_alive);
                }
                Step::Close => {
                    wire.close(stream.as_fd());
                    // With nothing unread, close(2) alone ends it cleanly;
                    // otherwise the client's bytes in flight would meet a
                    // reset that can destroy the last response, so the
                    // write side closes first and the rest is read away.
                    if session.unread_input() {
                        sys::shutdown_write(stream.as_fd());
                        linger(&stream, timer.as_mut()).await;
                    }
                    return;
                }
            }
        }
        if let Some(deadline) = park_until {
            let Some(stream) = stream.into_parked() else {
                return;
            };
            park::park(Parked {
                stream,
                session,
                kind,
                slot,
                source,
                deadline,
                sniffing,
                tuned,
            });
        }
    }
}

/// Reads the PROXY protocol header (see `proxy_header`): the client it
/// names, if any.
async fn proxy_header(stream: &impl Socket) -> io::Result<Option<std::net::SocketAddr>> {
    let mut reader = proxy_header::HeaderReader::new(true);
    loop {
        stream.readable().await?;
        match stream.try_io(Interest::READABLE, || reader.advance(stream.as_fd())) {
            Ok(Some(source)) => return Ok(source),
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

thread_local! {
    /// Connections of this worker thread that are not waiting idle between
    /// requests: a graceful stop waits for these only.
    static BUSY: Cell<usize> = const { Cell::new(0) };
}

/// Counts its connection in BUSY while it is not idle.
struct Busy(bool);

impl Busy {
    fn new() -> Busy {
        BUSY.with(|b| b.set(b.get() + 1));
        Busy(true)
    }

    fn idle(&mut self) {
        if self.0 {
            BUSY.with(|b| b.set(b.get() - 1));
            self.0 = false;
        }
    }

    fn resume(&mut self) {
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

/// Runs a CGI exchange on tokio's blocking pool: it is the same blocking
/// code inetd mode uses, on a duplicate of the connection's descriptor
/// (which must be non-blocking: the exchange waits with poll(2)).
/// Returns whether the connection can carry another request.
pub(crate) async fn run_cgi(
    (stream, wire): (BorrowedFd<'_>, &mut Wire),
    session: &mut Session,
    job: Box<CgiJob>,
    cfg: &Arc<Config>,
    site: &Arc<Site>,
) -> bool {
    let Ok(fd) = stream.try_clone_to_owned() else {
        return false;
    };
    let mut input = std::mem::take(session.input());
    let client = session.client().to_string();
    let (cfg, site) = (Arc::clone(cfg), Arc::clone(site));
    // The TLS state goes with the exchange and comes back after it.
    let moved = std::cell::RefCell::new(std::mem::replace(wire, Wire::Clear));
    let task = tokio::task::spawn_blocking(move || {
        let io = ClientIo {
            input: fd.as_fd(),
            output: fd.as_fd(),
            socket: true,
            wire: &moved,
        };
        let keep_alive = cgi_exchange::run(job, io, &mut input, &cfg, &site, &client);
        (keep_alive, input, moved.into_inner())
    });
    match task.await {
        Ok((keep_alive, input, back)) => {
            *session.input() = input;
            *wire = back;
            keep_alive
        }
        Err(_) => false,
    }
}

/// Runs `op` until `deadline`, on the connection's timer. The timer is set
/// only once `op` has to wait: a request that is already there (the first
/// one on a new connection, usually) costs no timer at all, and setting a
/// new timer can cost tokio a wake-up write.
async fn within<T>(
    op: impl Future<Output = io::Result<T>>,
    deadline: Instant,
    mut timer: Pin<&mut Sleep>,
) -> io::Result<T> {
    let mut op = std::pin::pin!(op);
    let mut armed = false;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = op.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if !armed {
            timer.as_mut().reset(deadline.into());
            armed = true;
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::ErrorKind::TimedOut.into())),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Reads what is there, through TLS when the wire has it: handshake
/// messages go out before each wait, and a read that only moved the
/// handshake along is not the end of the wait.
async fn read_wire(stream: &impl Socket, wire: &mut Wire, buf: &mut Vec<u8>) -> io::Result<Got> {
    if matches!(wire, Wire::Clear) {
        let got = read_some(stream, buf).await?;
        return Ok(if got { Got::Bytes } else { Got::Closed });
    }
    // The first pass reads without waiting: a socket not yet watched by
    // the runtime (see `lazy`) is tried as it is; a watched one answers
    // WouldBlock at once unless it is known to be readable.
    let mut wait = false;
    loop {
        flush_wire(stream, wire).await?;
        if std::mem::replace(&mut wait, true) {
            stream.readable().await?;
        }
        let borrowed = lend_read_buffer(buf);
        let before = buf.len();
        let read = stream.try_io(Interest::READABLE, || wire.read(stream.as_fd(), buf));
        let grew = buf.len() > before;
        if wire.drained() {
            // As in `read_some`: the next read waits for epoll instead of
            // costing a recv(2) that finds nothing.
            forget_readable(stream);
        }
        return_unused_read_buffer(buf, borrowed, grew);
        match read {
            Ok(Got::Bytes) if !grew => {}
            Ok(got) => return Ok(got),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                // The alert TLS queued for the client, if the socket takes it.
                let _ = wire.out(stream.as_fd(), true).flush();
                return Err(e);
            }
        }
    }
}

/// Writes what TLS has waiting (handshake messages, tickets, alerts).
async fn flush_wire(stream: &impl Socket, wire: &mut Wire) -> io::Result<()> {
    let mut out = wire.out(stream.as_fd(), true);
    while out.pending() {
        match stream.try_io(Interest::WRITABLE, || out.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads what is there. False: the client closed or failed.
async fn read_some(stream: &impl Socket, buf: &mut Vec<u8>) -> io::Result<bool> {
    // The first pass reads without waiting, as in `read_wire`: a request
    // that is already there costs no trip through the poller.
    let mut wait = false;
    loop {
        if std::mem::replace(&mut wait, true) {
            stream.readable().await?;
        }
        let borrowed = lend_read_buffer(buf);
        // Reads into spare capacity: no zero-filling, and a buffer that
        // already has room is reused as it is.
        buf.reserve(READ_CHUNK);
        let spare = buf.capacity() - buf.len();
        let read = stream.try_read_buf(buf);
        if matches!(read, Ok(n) if n > 0 && n < spare) {
            // A short read emptied the socket: forget its readiness now, so
            // the next read waits for epoll instead of costing a recv(2)
            // that finds nothing. (tokio keeps readiness that arrived since
            // it was last looked at.)
            forget_readable(stream);
        }
        return_unused_read_buffer(buf, borrowed, matches!(read, Ok(n) if n > 0));
        match read {
            Ok(n) => return Ok(n > 0),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Gives a quiet connection's empty `buf` a buffer from the free list for
/// one read; true if it did.
fn lend_read_buffer(buf: &mut Vec<u8>) -> bool {
    let lend = buf.capacity() == 0;
    if lend {
        *buf = pool::take(&pool::READS);
    }
    lend
}

/// After a read into a lent buffer that brought nothing (woken with nothing
/// to read, as a new connection is at first): the buffer goes straight back
/// instead of staying with a connection that may now be quiet for long.
fn return_unused_read_buffer(buf: &mut Vec<u8>, lent: bool, brought: bool) {
    if lent && !brought {
        pool::give(&pool::READS, std::mem::take(buf));
    }
}

/// Clears the socket's read readiness, after a short read emptied it.
fn forget_readable(stream: &impl Socket) {
    let _ = stream.try_io(Interest::READABLE, || {
        Err::<(), _>(io::ErrorKind::WouldBlock.into())
    });
}

/// Writes a whole response, counting in `sent.written` what went out; a
/// client that takes it slower than `pace` allows is given up on. `timer`
/// is the connection's one timer.
async fn send(
    stream: &impl Socket,
    wire: &mut Wire,
    sent: &mut Sent,
    copy: bool,
    mut timer: Pin<&mut Sleep>,
    pace: &mut Pace,
) -> io::Result<()> {
    let mut out = wire.out(stream.as_fd(), true);
    let mut writer = ResponseWriter::new(&sent.wire, &sent.response.body).copying(copy);
    // The pace learns of progress only when a write would wait: a response
    // the socket takes at once costs no reading beyond the one at its start.
    let mut paced = 0;
    while !writer.is_done(&out) {
        match stream.try_io(Interest::WRITABLE, || writer.write_some(&mut out)) {
            Ok(_) => sent.written = writer.written(),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                pace.progress(Instant::now(), sent.written - paced);
                paced = sent.written;
                within(stream.writable(), pace.deadline(), timer.as_mut()).await?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads and drops what the client still sends until it closes or the
/// linger time is over; `timer` is the connection's one timer.
async fn linger(stream: &impl Socket, mut timer: Pin<&mut Sleep>) {
    let deadline = linger_deadline();
    // From the free list, not the stack: a buffer here would make every
    // connection's task that much bigger.
    let mut scratch = pool::take(&pool::READS);
    scratch.resize(READ_CHUNK, 0);
    loop {
        // Checked here as well: for a client that never stops sending,
        // the wait below is always ready and never reaches its timer.
        if Instant::now() >= deadline {
            break;
        }
        if within(stream.readable(), deadline, timer.as_mut())
            .await
            .is_err()
        {
            break;
        }
        match stream.try_read(&mut scratch) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    pool::give(&pool::READS, scratch);
}
