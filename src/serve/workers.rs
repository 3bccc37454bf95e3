//! The standalone transports' frame: one thread per listener group, the
//! signals that stop them (SIGINT, SIGTERM) or reload (SIGHUP), and what
//! every connection of the process shares.

use std::io;
use std::sync::Arc;

use super::launch::Launch;
use super::limits::Connections;
use super::listen::Listener;
use super::stop::Stop;
use super::Extras;
use crate::config::Config;
use crate::log;
use crate::site::Site;
use crate::sys::describe;

pub(crate) fn run_workers(
    cfg: Arc<Config>,
    site: Arc<Site>,
    listeners: Vec<Vec<Listener>>,
    extras: Extras,
    worker: fn(Shared, Vec<Listener>, Worker),
) -> io::Result<()> {
    // Signal handlers first: from the first accepted connection on, SIGTERM
    // must mean a graceful stop, never the default kill.
    room_for_signals()?;
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut stop_signals = signals.block_on(async { StopSignals::register(extras.clone()) })?;
    let stop = Stop::new();
    let conns = Arc::new(Connections::new(&cfg));
    let grace = cfg.shutdown_grace;
    let shared = Shared {
        cfg,
        site,
        stop: stop.clone(),
        conns: Arc::clone(&conns),
        extras,
    };
    // Every worker builds its runtime before any accepts (see `launch`).
    let launch = Arc::new(Launch::new(listeners.len()));
    let announcement = Announcement::of(listeners.first().map_or(&[], Vec::as_slice))?;
    let mut workers = Vec::new();
    for (index, group) in listeners.into_iter().enumerate() {
        let shared = shared.clone();
        let launch = Arc::clone(&launch);
        let handle = std::thread::Builder::new()
            .name(format!("staticd-{index}"))
            .spawn(move || worker(shared, group, Worker { index, launch }))?;
        workers.push(handle);
    }
    if let Err(why) = launch.built() {
        launch.open(false);
        for w in workers {
            let _ = w.join();
        }
        return Err(io::Error::other(why));
    }
    // Announced only when everything is ready: tests and scripts wait for
    // the `listening on` lines.
    announcement.print(&shared.cfg);
    // Before the workers take their sockets.
    announce_http3(&shared.extras);
    // From here on, log lines go through the log writer's queue: a
    // blocked log output never holds up a worker (see `log::queue`).
    log::start_writer()?;
    launch.open(true);
    super::notify::ready(&format!("listening on {}", announcement.names.join(", ")));
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

/// Fails with EMFILE unless the signal loop's runtime can get its
/// descriptors: tokio makes the socket pair its signal handling needs when
/// the first runtime with signals is built, and panics if it cannot. The
/// runtime's epoll, its waker, a duplicate of the epoll, the pair and a
/// duplicate of one end take six (tokio 1.x, counted with strace); eight
/// are tried and given back. Nothing else opens descriptors at this point
/// of start-up (the --metrics thread would only for a scrape that connects
/// just now).
fn room_for_signals() -> io::Result<()> {
    const NEEDED: usize = 8;
    let mut held = Vec::with_capacity(NEEDED);
    for _ in 0..NEEDED {
        held.push(rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC,
        )?);
    }
    Ok(())
}

/// What the start-up lines say of the listeners: those of one group,
/// every group having the same addresses.
struct Announcement {
    /// The TCP listeners' addresses, for the line for people.
    addrs: Vec<std::net::SocketAddr>,
    /// Each listener's name.
    names: Vec<String>,
    /// Which of them redirect to HTTPS (`--redirect-http`).
    redirects: Vec<bool>,
}

impl Announcement {
    fn of(group: &[Listener]) -> io::Result<Announcement> {
        let mut addrs = Vec::new();
        let (mut names, mut redirects) = (Vec::new(), Vec::new());
        for l in group {
            if let Listener::Tcp(l) = l {
                addrs.push(l.local_addr()?);
            }
            names.push(l.name()?);
            redirects.push(matches!(l, Listener::Redirect(..)));
        }
        Ok(Announcement {
            addrs,
            names,
            redirects,
        })
    }

    /// The line for people comes first, so that once scripts see the
    /// `listening on` lines, it is there too.
    fn print(&self, cfg: &Config) {
        if let Some(line) =
            super::announce::serving_line(&cfg.root, &self.addrs, cfg.https.is_some())
        {
            eprintln!("{line}");
        }
        if let Some(line) = super::clients::not_counted_line(cfg) {
            eprintln!("{line}");
        }
        for (name, &redirect) in self.names.iter().zip(&self.redirects) {
            if redirect {
                eprintln!("staticd: redirecting to https on {name}");
            } else {
                eprintln!("staticd: listening on {name}");
            }
        }
    }
}

/// A worker thread's place among the workers.
pub(crate) struct Worker {
    /// Which listener group (and HTTP/3 sockets) it serves.
    pub(crate) index: usize,
    launch: Arc<Launch>,
}

impl Worker {
    /// Builds the worker's runtime with `build` and waits until every
    /// worker has built its own (see [`launch`](super::launch)). None: the
    /// server does not start (the main thread says why).
    pub(crate) fn runtime<T>(&self, build: impl FnOnce() -> io::Result<T>) -> Option<T> {
        self.launch.runtime(build)
    }
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
