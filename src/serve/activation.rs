//! Socket activation (sd_listen_fds(3)): systemd, or any manager speaking
//! its protocol (systemd-socket-activate), binds the listening sockets and
//! passes them as descriptors 3, 4, ... with LISTEN_PID, LISTEN_FDS and
//! LISTEN_FDNAMES naming them. Standalone mode then serves those instead of
//! binding --bind/--port: the socket outlives the process, so a restart
//! loses no connection (queued ones wait for the next process).

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use rustix::net::{AddressFamily, SocketType};

use super::listen::{Bound, Listener};
use crate::config::Config;
use crate::sys::describe;

/// The name (systemd's FileDescriptorName=) of a passed socket that serves
/// `--redirect-http`: every request is sent to https on the HTTPS socket's port.
pub const REDIRECT_NAME: &str = "redirect-http";

/// One socket the service manager passed, with its name (systemd's default
/// is the socket unit's name; `unknown` when none was given).
pub struct Passed {
    fd: OwnedFd,
    name: String,
}

/// Takes the sockets passed to this process: none unless LISTEN_PID is this
/// process. Clears the LISTEN_* variables (so CGI scripts do not see them)
/// and marks the descriptors close-on-exec. Runs before any thread starts:
/// it changes the environment.
pub fn take() -> Result<Vec<Passed>, String> {
    // SAFETY: main calls this first, while the process has one thread, so
    // nothing reads the environment as it changes.
    let fds = unsafe { sd_notify::listen_fds_with_names_and_unset_env() }
        .map_err(|e| format!("socket activation: {e}"))?;
    Ok(fds
        .map(|(fd, name)| Passed {
            // SAFETY: the manager passed these descriptors for this process
            // to own (LISTEN_PID named it), and nothing else took them.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            name,
        })
        .collect())
}

/// The passed sockets as the workers' listeners: each thread accepts on a
/// duplicate of every socket (one accept queue, shared as a Unix socket's
/// is). `cfg`'s --redirect-http port becomes the redirect socket's, so that
/// ACME's http-01 knows the port is open.
pub fn listeners(cfg: &mut Config, passed: Vec<Passed>) -> Result<Bound, String> {
    let kinds = passed
        .iter()
        .map(|p| kind(p).map_err(|why| format!("socket activation: {}: {why}", p.shown())))
        .collect::<Result<Vec<_>, _>>()?;
    let https_port = passed
        .iter()
        .zip(&kinds)
        .find(|(p, kind)| **kind == Kind::Tcp && p.name != REDIRECT_NAME)
        .and_then(|(p, _)| rustix::net::getsockname(&p.fd).ok())
        .and_then(|a| std::net::SocketAddr::try_from(a).ok())
        .map(|a| a.port());
    let redirect = redirect_port(cfg, &passed, &kinds)?;
    if let Some(https) = cfg.https.as_mut() {
        https.redirect_port = redirect;
    }
    let mut groups: Vec<Vec<Listener>> = (0..cfg.threads).map(|_| Vec::new()).collect();
    let mut labels = Vec::new();
    for (p, kind) in passed.into_iter().zip(kinds) {
        let shown = p.shown();
        let fail = |e: std::io::Error| format!("socket activation: {shown}: {}", describe(&e));
        rustix::io::ioctl_fionbio(&p.fd, true).map_err(|e| fail(e.into()))?;
        // As for the sockets staticd binds itself (see sys::UNSENT_LIMIT).
        crate::sys::bound_unsent(p.fd.as_fd());
        labels.push((p.fd.as_raw_fd(), p.name.clone()));
        // The first thread's listener is the passed descriptor itself (its
        // number is the one the start-up line names), the others duplicates.
        let copies = (1..groups.len())
            .map(|_| p.fd.try_clone())
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        for (group, fd) in groups.iter_mut().zip(std::iter::once(p.fd).chain(copies)) {
            group.push(match kind {
                Kind::Unix => Listener::Unix(fd.into()),
                Kind::Tcp if p.name == REDIRECT_NAME => {
                    Listener::Redirect(fd.into(), https_port.unwrap_or(443))
                }
                Kind::Tcp => Listener::Tcp(fd.into()),
            });
        }
    }
    super::listen::remember_passed(labels);
    Ok(Bound {
        groups,
        files: Vec::new(),
    })
}

/// `--redirect-http` and a socket named for it come together.
fn redirect_port(cfg: &Config, passed: &[Passed], kinds: &[Kind]) -> Result<Option<u16>, String> {
    let socket = passed
        .iter()
        .zip(kinds)
        .find(|(p, _)| p.name == REDIRECT_NAME);
    let wanted = cfg
        .https
        .as_ref()
        .is_some_and(|h| h.redirect_port.is_some());
    match socket {
        None if wanted => Err(format!(
            "--redirect-http: socket activation passed no socket named {REDIRECT_NAME} \
             (FileDescriptorName={REDIRECT_NAME} in the .socket unit)"
        )),
        None => Ok(None),
        Some(_) if cfg.https.is_none() => Err(format!(
            "socket activation: the socket named {REDIRECT_NAME} redirects to https, \
             which needs certificates (--tls-cert, --tls-dir or --acme)"
        )),
        Some((p, Kind::Tcp)) => {
            let addr = rustix::net::getsockname(&p.fd).map_err(|e| describe(&e.into()))?;
            let port = std::net::SocketAddr::try_from(addr).map(|a| a.port());
            Ok(port.ok())
        }
        Some((p, Kind::Unix)) => Err(format!(
            "socket activation: {}: a {REDIRECT_NAME} socket must be TCP",
            p.shown()
        )),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tcp,
    Unix,
}

/// What a passed socket is: only listening stream sockets, TCP or Unix, serve.
fn kind(p: &Passed) -> Result<Kind, String> {
    let why = |e: rustix::io::Errno| describe(&e.into());
    let stream = rustix::net::sockopt::socket_type(&p.fd).map_err(why)? == SocketType::STREAM;
    let listening = rustix::net::sockopt::socket_acceptconn(&p.fd).map_err(why)?;
    let family = rustix::net::sockopt::socket_domain(&p.fd).map_err(why)?;
    match family {
        _ if !stream || !listening => Err("not a listening stream socket".to_string()),
        AddressFamily::INET | AddressFamily::INET6 => Ok(Kind::Tcp),
        AddressFamily::UNIX => Ok(Kind::Unix),
        _ => Err("neither TCP nor a Unix socket".to_string()),
    }
}

impl Passed {
    /// How an error names the socket: `fd 3 ("web.socket")`.
    fn shown(&self) -> String {
        format!("fd {} ({:?})", self.fd.as_raw_fd(), self.name)
    }
}
