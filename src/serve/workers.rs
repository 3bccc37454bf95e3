//! The standalone transports' frame: one thread per listener group, the
//! signals that stop them (SIGINT, SIGTERM) or reload (SIGHUP), and what
//! every connection of the process shares.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::limits::Connections;
use super::listen::Listener;
use super::stop::Stop;
use super::Extras;
use crate::config::Config;
use crate::log;
use crate::site::Site;
use crate::sys::{self, describe};

/// How long accepting (or starting a worker) pauses when the process is
/// out of descriptors.
pub(crate) const EMFILE_PAUSE: Duration = Duration::from_millis(100);

pub(crate) fn run_workers(
    cfg: Arc<Config>,
    site: Arc<Site>,
    listeners: Vec<Vec<Listener>>,
    extras: Extras,
    worker: fn(Shared, Vec<Listener>, usize),
) -> io::Result<()> {
    // Signal handlers first: from the first accepted connection on, SIGTERM
    // must mean a graceful stop, never the default kill.
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut stop_signals = signals.block_on(async { StopSignals::register(extras.clone()) })?;
    let stop = Stop::new();
    let conns = Arc::new(Connections::new(&cfg));
    // Announced only when everything is ready: tests and scripts wait for
    // the `listening on` lines. The line for people comes first, so that
    // once they see those, this one is there too.
    let mut addrs = Vec::new();
    for l in listeners.first().into_iter().flatten() {
        if let Listener::Tcp(l) = l {
            addrs.push(l.local_addr()?);
        }
    }
    if let Some(line) = super::announce::serving_line(&cfg.root, &addrs, cfg.https.is_some()) {
        eprintln!("{line}");
    }
    if let Some(line) = super::clients::not_counted_line(&cfg) {
        eprintln!("{line}");
    }
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
        stop: stop.clone(),
        conns: Arc::clone(&conns),
        extras,
    };
    // Before the workers take their sockets.
    announce_http3(&shared.extras);
    let mut workers = Vec::new();
    for (i, group) in listeners.into_iter().enumerate() {
        let shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name(format!("staticd-{i}"))
            .spawn(move || worker(shared, group, i))?;
        workers.push(handle);
    }
    super::notify::ready(&format!("listening on {}", names.join(", ")));
    signals.block_on(stop_signals.recv());
    crate::respond::draining_begins();
    log::abandon_after(grace);
    super::notify::stopping();
    stop.begin(grace);
    for w in workers {
        let _ = w.join();
    }
    log::finish();
    Ok(())
}

/// Starts HTTP/3 on worker `index`'s UDP sockets, on its runtime (see
/// [`h3`](super::h3)); the tasks, for the worker to wait for once its TCP
/// connections are done. None without HTTP/3.
pub(crate) fn start_http3(shared: &Shared, index: usize) -> Vec<tokio::task::JoinHandle<()>> {
    #[cfg(feature = "http3")]
    {
        let Some(tls) = shared.extras.tls.clone() else {
            return Vec::new();
        };
        let h3 = super::h3::Shared {
            cfg: Arc::clone(&shared.cfg),
            site: Arc::clone(&shared.site),
            stop: shared.stop.clone(),
            conns: Arc::clone(&shared.conns),
            tls,
        };
        super::h3::serve_on_worker(h3, &shared.extras.quic, index)
    }
    #[cfg(not(feature = "http3"))]
    {
        let _ = (shared, index);
        Vec::new()
    }
}

/// Says on which addresses HTTP/3 is served.
fn announce_http3(extras: &Extras) {
    #[cfg(feature = "http3")]
    for addr in extras.quic.addrs() {
        eprintln!("staticd: HTTP/3 on {addr} (UDP)");
    }
    #[cfg(not(feature = "http3"))]
    let _ = extras;
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
    pub(crate) stop: Stop,
    pub(crate) conns: Arc<Connections>,
    pub(crate) extras: Extras,
}

/// Builds a worker's runtime with `build`. The other workers' connections
/// may have taken every descriptor before this worker starts: then it waits
/// for one to close rather than give up, which would drop its listener and
/// reset the connections queued on it. None: it cannot start (said on stderr).
pub(crate) fn start_runtime<T>(shared: &Shared, build: impl Fn() -> io::Result<T>) -> Option<T> {
    loop {
        match build() {
            Ok(rt) => return Some(rt),
            Err(e) if sys::out_of_resources(&e) && !shared.stop.stopping() => {
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
