//! Start-up, from a [`Config`] to serving: the checks a config must pass,
//! then, in `run`, the steps whose order is what keeps root's powers from
//! any request:
//!
//! ```text
//! bind          ports below 1024, while still privileged
//! certificates  keys usually readable by root only
//! privileges    chroot, group, user: given up before a request is read
//! metrics       the --metrics listener starts, announced first
//! site          the root, ACME's state and htpasswd files, opened as
//!               the user the server runs as, inside --chroot
//! transport     serve until stopped
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use crate::config::Config;
use crate::serve::activation::{self, Passed};
use crate::serve::{self, listen};
use crate::site::Site;
use crate::sys::describe;
use crate::{log, metrics, privileges};

/// The steps of start-up, one method each, in the order `run` takes them;
/// `Process` is the real one, the tests drive a recorder.
pub trait Steps {
    /// The listeners bound.
    type Bound;
    /// The certificates and keys read.
    type Certificates;
    /// The site opened.
    type Site;
    fn bind(&mut self, cfg: &mut Config) -> Result<Self::Bound, String>;
    fn certificates(&mut self, cfg: &Config) -> Result<Self::Certificates, String>;
    fn drop_privileges(&mut self, cfg: &Config) -> Result<(), String>;
    fn start_metrics(&mut self, cfg: &Config, bound: &mut Self::Bound) -> Result<(), String>;
    fn site(&mut self, cfg: &Config, certs: &Self::Certificates) -> Result<Self::Site, String>;
    fn transport(
        self,
        cfg: Config,
        bound: Self::Bound,
        certs: Self::Certificates,
        site: Self::Site,
    ) -> Result<(), String>;
}

/// The start-up steps in the one order that is safe (see the top of this
/// file); the first error ends it.
pub fn run<S: Steps>(mut cfg: Config, mut steps: S) -> Result<(), String> {
    let mut bound = steps.bind(&mut cfg)?;
    let certs = steps.certificates(&cfg)?;
    steps.drop_privileges(&cfg)?;
    steps.start_metrics(&cfg, &mut bound)?;
    let site = steps.site(&cfg, &certs)?;
    steps.transport(cfg, bound, certs, site)
}

/// Serves `cfg` until stopped: the exit code, after a one-line message
/// naming the problem when there is one. `passed`: the sockets systemd
/// passed (socket activation), served instead of binding --bind and
/// --port; in --inetd mode they are closed unused.
pub fn start(cfg: Config, passed: Vec<Passed>) -> ExitCode {
    if let Err(msg) = io_uring_limits(&cfg) {
        eprintln!("staticd: {msg}");
        return ExitCode::from(2);
    }
    if let Some(path) = &cfg.log_file {
        if let Err(e) = log::open_file(path) {
            eprintln!("staticd: log file {}: {}", path.display(), describe(&e));
            return ExitCode::FAILURE;
        }
    }
    if !cfg.auth.is_empty() && cfg.https.is_none() {
        eprintln!("staticd: warning: --auth without TLS sends passwords in the clear");
    }
    match run(cfg, Process { passed }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("staticd: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// What `--io-uring` cannot do, refused (exit code 2) before anything is
/// opened: only a build without io_uring support refuses it now.
fn io_uring_limits(cfg: &Config) -> Result<(), String> {
    if cfg.io_uring && !cfg!(feature = "uring") {
        return Err(
            "--io-uring: this build has no io_uring support (build with --features uring)".into(),
        );
    }
    Ok(())
}

/// The real start-up.
struct Process {
    passed: Vec<Passed>,
}

/// The public listeners (none in --inetd mode) and `--metrics`'.
struct Listening {
    listeners: Option<listen::Bound>,
    /// HTTP/3's UDP sockets by worker (none without HTTPS, or with
    /// --no-http3).
    #[cfg(feature = "http3")]
    quic: Vec<Vec<std::net::UdpSocket>>,
    metrics: Option<metrics::Endpoint>,
}

/// The HTTPS acceptor, and ACME's certificates: served by the acceptor
/// from the first handshake on, filled in by its thread once privileges
/// are dropped.
struct Certificates {
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::Acceptor>,
    #[cfg(feature = "acme")]
    acme: Option<(crate::config::Acme, Arc<crate::acme::Issued>)>,
}

impl Steps for Process {
    type Bound = Listening;
    type Certificates = Certificates;
    type Site = Site;

    fn bind(&mut self, cfg: &mut Config) -> Result<Listening, String> {
        #[cfg(feature = "uring")]
        if cfg.io_uring {
            serve::uring::check()?;
        }
        let passed = std::mem::take(&mut self.passed);
        let listeners = if cfg.inetd {
            None
        } else if !passed.is_empty() {
            Some(activation::listeners(cfg, passed)?)
        } else {
            Some(listen::bind(cfg)?)
        };
        let metrics = cfg
            .metrics
            .map(|addr| bind_metrics(addr, cfg.reuse_port))
            .transpose()?;
        #[cfg(feature = "http3")]
        let quic = bind_http3(cfg, listeners.as_ref());
        Ok(Listening {
            listeners,
            #[cfg(feature = "http3")]
            quic,
            metrics,
        })
    }

    fn certificates(&mut self, cfg: &Config) -> Result<Certificates, String> {
        #[cfg(not(feature = "tls"))]
        let _ = cfg;
        #[cfg(feature = "acme")]
        let acme = cfg.https.as_ref().and_then(|https| {
            let settings = https.acme.clone()?;
            let issued = Arc::new(crate::acme::Issued::new(&settings.dir));
            Some((settings, issued))
        });
        #[cfg(feature = "tls")]
        let tls = match &cfg.https {
            Some(https) => {
                let mut warn = |w: String| eprintln!("staticd: warning: {w}");
                let h2 = cfg.http2.is_some();
                #[cfg(feature = "acme")]
                let managed = acme
                    .as_ref()
                    .map(|(_, issued)| Arc::clone(issued) as Arc<dyn crate::tls::Managed>);
                #[cfg(not(feature = "acme"))]
                let managed = None;
                Some(crate::tls::Acceptor::new(https, h2, managed, &mut warn)?)
            }
            None => None,
        };
        Ok(Certificates {
            #[cfg(feature = "tls")]
            tls,
            #[cfg(feature = "acme")]
            acme,
        })
    }

    fn drop_privileges(&mut self, cfg: &Config) -> Result<(), String> {
        privileges::apply(&cfg.privileges)
    }

    fn start_metrics(&mut self, cfg: &Config, bound: &mut Listening) -> Result<(), String> {
        match bound.metrics.take() {
            Some(endpoint) => start_metrics(endpoint, cfg.max_connections),
            None => Ok(()),
        }
    }

    fn site(&mut self, cfg: &Config, certs: &Certificates) -> Result<Site, String> {
        #[cfg(not(feature = "acme"))]
        let _ = certs;
        let site = Site::open(&cfg.root, &cfg.index, cfg.features.clone())?;
        #[cfg(feature = "acme")]
        let site = match &certs.acme {
            Some((settings, issued)) => {
                let vhosts = settings.vhosts.then_some(cfg.root.as_path());
                let redirect = cfg.https.as_ref().and_then(|h| h.redirect_port);
                let listeners = crate::acme::Listeners {
                    http01: redirect.is_some(),
                };
                crate::acme::start(settings, vhosts, issued, listeners)?;
                site.with_acme(issued.answers().clone())
            }
            None => site,
        };
        // The files are re-read on change from where the server then runs.
        // Without areas the guard still checks the `Basic-Auth` locks of
        // the site's `_headers`.
        #[cfg(feature = "auth")]
        let site = {
            let mut warn = |w: &str| eprintln!("staticd: {w}");
            site.with_auth(crate::auth::Auth::load(&cfg.auth, &mut warn)?)
        };
        Ok(site)
    }

    fn transport(
        self,
        cfg: Config,
        bound: Listening,
        certs: Certificates,
        site: Site,
    ) -> Result<(), String> {
        #[cfg(not(feature = "tls"))]
        let _ = certs;
        let extras = serve::Extras {
            #[cfg(feature = "tls")]
            tls: certs.tls.map(Arc::new),
            #[cfg(feature = "http3")]
            quic: Arc::new(serve::h3::Quic::new(bound.quic)),
        };
        let (cfg, site) = (Arc::new(cfg), Arc::new(site));
        let Some(listeners) = bound.listeners else {
            return serve::stdio::run(cfg, site, extras).map_err(|e| describe(&e));
        };
        // The Unix socket files go when `_files` drops: once the workers stopped.
        let listen::Bound {
            groups,
            files: _files,
        } = listeners;
        #[cfg(feature = "uring")]
        if cfg.io_uring {
            return serve::uring::run(cfg, site, groups, extras).map_err(serving_failed);
        }
        serve::event_loop::run(cfg, site, groups, extras).map_err(serving_failed)
    }
}

/// A standalone transport's error, for the one-line message. Running out
/// of descriptors while setting up (the signal loop, a thread, the log
/// writer) says so and what to change; the other errors say what failed
/// already.
fn serving_failed(e: std::io::Error) -> String {
    match crate::sys::descriptor_hint(&e) {
        "" => describe(&e),
        hint => format!("cannot start serving: {}{hint}", describe(&e)),
    }
}

/// HTTP/3's UDP sockets, with HTTPS: on each TCP address HTTPS listens on
/// (the port --port 0 picked included), one per worker, while still
/// privileged; by worker. Sets the port Alt-Svc advertises once one is
/// bound.
#[cfg(feature = "http3")]
fn bind_http3(
    cfg: &mut Config,
    listeners: Option<&listen::Bound>,
) -> Vec<Vec<std::net::UdpSocket>> {
    let Some(bound) = listeners.filter(|_| cfg.http3 && cfg.https.is_some()) else {
        return Vec::new();
    };
    let addrs: Vec<_> = bound
        .groups
        .first()
        .into_iter()
        .flatten()
        .filter_map(|l| match l {
            listen::Listener::Tcp(l) => l.local_addr().ok(),
            _ => None,
        })
        .collect();
    let sockets = serve::h3::bind(&addrs, bound.groups.len());
    cfg.alt_svc_port = sockets
        .first()
        .and_then(|group| group.first())
        .and_then(|s| s.local_addr().ok())
        .map(|a| a.port());
    sockets
}

/// `--metrics`: its port is bound with the others, while still privileged.
fn bind_metrics(addr: std::net::SocketAddr, reuse_port: bool) -> Result<metrics::Endpoint, String> {
    metrics::Endpoint::bind(addr, reuse_port).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::AddrInUse => "address already in use".to_string(),
            _ => describe(&e),
        };
        format!("cannot listen for --metrics on {addr}: {why}")
    })
}

/// Serves `--metrics` from now on, announced before the public ports are.
fn start_metrics(endpoint: metrics::Endpoint, max: usize) -> Result<(), String> {
    let addr = endpoint.local_addr().map_err(|e| describe(&e))?;
    endpoint
        .start(max)
        .map_err(|e| format!("--metrics: {}", describe(&e)))?;
    eprintln!("staticd: metrics on http://{addr}/metrics");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Notes each step; fails the one named in `fail`.
    struct Recorder {
        steps: Vec<&'static str>,
        fail: Option<&'static str>,
    }

    impl Recorder {
        fn step(&mut self, name: &'static str) -> Result<(), String> {
            self.steps.push(name);
            match self.fail == Some(name) {
                true => Err(format!("{name} failed")),
                false => Ok(()),
            }
        }
    }

    impl Steps for &mut Recorder {
        type Bound = ();
        type Certificates = ();
        type Site = ();
        fn bind(&mut self, _: &mut Config) -> Result<(), String> {
            self.step("bind")
        }
        fn certificates(&mut self, _: &Config) -> Result<(), String> {
            self.step("certificates")
        }
        fn drop_privileges(&mut self, _: &Config) -> Result<(), String> {
            self.step("drop privileges")
        }
        fn start_metrics(&mut self, _: &Config, _: &mut ()) -> Result<(), String> {
            self.step("metrics")
        }
        fn site(&mut self, _: &Config, _: &()) -> Result<(), String> {
            self.step("site")
        }
        fn transport(self, _: Config, _: (), _: (), _: ()) -> Result<(), String> {
            self.step("transport")
        }
    }

    fn steps_until(fail: Option<&'static str>) -> (Vec<&'static str>, Result<(), String>) {
        let mut recorder = Recorder {
            steps: Vec::new(),
            fail,
        };
        let outcome = run(Config::default(), &mut recorder);
        (recorder.steps, outcome)
    }

    #[test]
    fn privileges_go_after_binding_and_certificates_and_before_the_site() {
        let (steps, outcome) = steps_until(None);
        assert_eq!(outcome, Ok(()));
        assert_eq!(
            steps,
            [
                "bind",
                "certificates",
                "drop privileges",
                "metrics",
                "site",
                "transport"
            ]
        );
    }

    #[test]
    fn a_failed_step_ends_start_up() {
        let (steps, outcome) = steps_until(Some("certificates"));
        assert_eq!(outcome, Err("certificates failed".to_string()));
        assert_eq!(steps, ["bind", "certificates"]);
        let (steps, _) = steps_until(Some("drop privileges"));
        assert_eq!(steps, ["bind", "certificates", "drop privileges"]);
    }

    #[test]
    fn io_uring_refusals() {
        let mut cfg = Config {
            http2: Some(crate::config::Http2::default()),
            ..Config::default()
        };
        assert_eq!(io_uring_limits(&cfg), Ok(()));
        cfg.io_uring = true;
        if cfg!(feature = "uring") {
            // io_uring serves HTTP/2 and --proxy-protocol like the event
            // loop (451404d): nothing is refused.
            assert_eq!(io_uring_limits(&cfg), Ok(()));
            cfg.proxy_protocol = true;
            assert_eq!(io_uring_limits(&cfg), Ok(()));
        } else {
            let refused = io_uring_limits(&cfg).unwrap_err();
            assert!(refused.contains("--features uring"), "{refused}");
        }
    }
}
