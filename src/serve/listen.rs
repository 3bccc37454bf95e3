//! Standalone mode's listening sockets: TCP on every address a `--bind`
//! names (host names resolved once, at start-up), and Unix-domain sockets
//! for a reverse proxy or load balancer on the same host.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::RawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::config::{Bind, Config};
use crate::sys::{self, describe};

/// How the access log names a client that came over a Unix socket (a
/// proxy on this host), as nginx's `$remote_addr` does.
pub(crate) const UNIX_CLIENT: &str = "unix:";

/// One listening socket.
pub enum Listener {
    Tcp(std::net::TcpListener),
    Unix(UnixListener),
    /// `--redirect-http`: cleartext, every request sent to https on the port.
    Redirect(std::net::TcpListener, u16),
}

impl Listener {
    /// What the start-up line names: `127.0.0.1:8080`, `unix:/run/staticd.sock`.
    /// A socket systemd passed adds its descriptor and name (see
    /// `label`).
    pub fn name(&self) -> io::Result<String> {
        use std::os::fd::AsRawFd;
        let (addr, fd) = match self {
            Listener::Tcp(l) | Listener::Redirect(l, _) => {
                (l.local_addr()?.to_string(), l.as_raw_fd())
            }
            Listener::Unix(l) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = l.local_addr()?;
                let shown = match addr.as_abstract_name() {
                    // systemd's ListenStream=@name
                    Some(name) => format!("unix:@{}", String::from_utf8_lossy(name)),
                    None => {
                        let path = addr.as_pathname().unwrap_or(Path::new(""));
                        format!("unix:{}", path.display())
                    }
                };
                (shown, l.as_raw_fd())
            }
        };
        Ok(addr + &label(fd))
    }
}

/// What to do about a port below 1024 that only a privileged process may
/// bind: the three ways, each with what it takes.
const LOW_PORT_HINT: &str = "; ports below 1024 need privilege: start as root with \
     --user NAME (privileges are dropped after binding), or allow this binary with \
     `setcap cap_net_bind_service=+ep /path/to/staticd`, or let systemd bind it \
     (socket activation, examples/systemd)";

/// The descriptor and name of every passed socket, for the start-up lines.
static LABELS: OnceLock<Vec<(RawFd, String)>> = OnceLock::new();

/// What the `listening on` line adds for a passed socket: ` (fd 3 "web")`;
/// nothing for one staticd bound itself.
fn label(fd: RawFd) -> String {
    let labels = LABELS.get().map(Vec::as_slice).unwrap_or_default();
    match labels.iter().find(|(passed, _)| *passed == fd) {
        Some((fd, name)) => format!(" (socket activation: fd {fd} {name:?})"),
        None => String::new(),
    }
}

/// Socket activation's passed descriptors and their names, kept for the
/// start-up lines (set once, before the workers start).
pub(crate) fn remember_passed(labels: Vec<(RawFd, String)>) {
    let _ = LABELS.set(labels);
}

/// Everything bound at start-up.
pub struct Bound {
    /// One group per worker thread, each with every address.
    pub groups: Vec<Vec<Listener>>,
    /// The Unix socket files made, removed when this drops: after the
    /// workers stopped, or when the start-up fails later on.
    pub files: Vec<SocketFile>,
}

/// Binds every `--bind` (by default, every IPv4 and IPv6 address). Errors
/// name the address and the problem, ready for a one-line message.
pub fn bind(cfg: &Config) -> Result<Bound, String> {
    let mut binder = Binder {
        port: cfg.port,
        reuse_port: cfg.reuse_port,
        redirect_to: None,
        seen: Vec::new(),
        bound: Bound {
            groups: (0..cfg.threads).map(|_| Vec::new()).collect(),
            files: Vec::new(),
        },
    };
    binder.every_bind(cfg)?;
    let redirect = cfg.https.as_ref().and_then(|h| h.redirect_port);
    if let Some(port) = redirect {
        // The port clients are sent to is the one bound (--port 0 picks it).
        let https_port = binder.bound.groups[0].iter().find_map(|l| match l {
            Listener::Tcp(l) => l.local_addr().ok().map(|a| a.port()),
            _ => None,
        });
        binder.port = port;
        binder.redirect_to = Some(https_port.unwrap_or(cfg.port));
        binder.seen.clear();
        binder.every_bind(cfg)?;
    }
    Ok(binder.bound)
}

struct Binder {
    port: u16,
    /// `--reuse-port`: an address another process listens on is shared.
    reuse_port: bool,
    /// Set while binding `--redirect-http`'s listeners: the https port.
    redirect_to: Option<u16>,
    /// Addresses bound so far: a name and an address (or two names) may
    /// come to the same one, which is bound once.
    seen: Vec<SocketAddr>,
    bound: Bound,
}

impl Binder {
    /// Every `--bind` (by default, every IPv4 and IPv6 address). Unix
    /// sockets are for a proxy on this host, which has no use for a
    /// redirect to https: they are not bound for `--redirect-http`.
    fn every_bind(&mut self, cfg: &Config) -> Result<(), String> {
        if cfg.bind.is_empty() {
            self.tcp(IpAddr::V4(Ipv4Addr::UNSPECIFIED), None, false)?;
            // A machine without IPv6 still serves IPv4 by default.
            self.tcp(IpAddr::V6(Ipv6Addr::UNSPECIFIED), None, true)?;
        }
        for bind in &cfg.bind {
            match bind {
                Bind::Host(host) => self.host(host)?,
                Bind::Unix(_) if self.redirect_to.is_some() => {}
                Bind::Unix(path) => self.unix(path, cfg.unix_mode)?,
            }
        }
        Ok(())
    }

    /// Every address `host` resolves to. The IPv6 ones of a name may be
    /// missing on this machine (`localhost` has `::1` in /etc/hosts even
    /// without IPv6), as long as some address of it is bound.
    fn host(&mut self, host: &str) -> Result<(), String> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.tcp(ip, None, false).map(drop);
        }
        let ips = resolve(host, self.port)?;
        let mut any = false;
        for &ip in &ips {
            any |= self.tcp(ip, Some(host), true)?;
        }
        if !any {
            // Not one address of the name is available: say why for the first.
            self.tcp(ips[0], Some(host), false)?;
        }
        Ok(())
    }

    /// Binds `ip` on every thread unless it is bound already. With
    /// `ipv6_optional`, an IPv6 address this machine cannot have is skipped:
    /// false then.
    fn tcp(&mut self, ip: IpAddr, name: Option<&str>, ipv6_optional: bool) -> Result<bool, String> {
        let addr = SocketAddr::new(ip, self.port);
        if self.seen.contains(&addr) {
            return Ok(true);
        }
        match bind_group(addr, self.bound.groups.len(), self.reuse_port) {
            Ok(group) => {
                self.seen.push(addr);
                for (thread, l) in self.bound.groups.iter_mut().zip(group) {
                    thread.push(match self.redirect_to {
                        Some(port) => Listener::Redirect(l, port),
                        None => Listener::Tcp(l),
                    });
                }
                Ok(true)
            }
            Err(e) if ipv6_optional && ip.is_ipv6() && ipv6_unavailable(&e) => Ok(false),
            Err(e) => {
                let shown = match name {
                    Some(name) => format!("{name} ({addr})"),
                    None => addr.to_string(),
                };
                let hint = match e.kind() {
                    io::ErrorKind::PermissionDenied if addr.port() < 1024 => LOW_PORT_HINT,
                    _ => sys::descriptor_hint(&e),
                };
                Err(format!("cannot listen on {shown}: {}{hint}", why(&e)))
            }
        }
    }

    /// One socket that every thread accepts on: a Unix socket cannot be
    /// bound once per thread as SO_REUSEPORT lets TCP be, and sharing one
    /// spreads the proxy's connections over the threads all the same.
    fn unix(&mut self, path: &Path, mode: u32) -> Result<(), String> {
        let fail = |why: String| format!("cannot listen on unix:{}: {why}", path.display());
        if self.bound.files.iter().any(|f| f.path == path) {
            return Ok(());
        }
        make_way(path).map_err(fail)?;
        let listener = sys::unix_listener(path, mode).map_err(|e| fail(why(&e)))?;
        let file = SocketFile::new(path).map_err(|e| fail(describe(&e)))?;
        self.bound.files.push(file);
        for thread in &mut self.bound.groups {
            let copy = listener.try_clone().map_err(|e| fail(describe(&e)))?;
            thread.push(Listener::Unix(copy));
        }
        Ok(())
    }
}

/// The addresses a host name stands for, each once; never none.
fn resolve(host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
    let resolved = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve --bind {host}: {}", describe(&e)))?;
    let mut ips: Vec<IpAddr> = Vec::new();
    for addr in resolved {
        if !ips.contains(&addr.ip()) {
            ips.push(addr.ip());
        }
    }
    if ips.is_empty() {
        return Err(format!("cannot resolve --bind {host}: no address"));
    }
    Ok(ips)
}

/// `count` listeners sharing one address through SO_REUSEPORT; with
/// `share`, also with another process's (which must run as the same user:
/// the kernel's rule for SO_REUSEPORT).
fn bind_group(
    addr: SocketAddr,
    count: usize,
    share: bool,
) -> io::Result<Vec<std::net::TcpListener>> {
    if addr.port() != 0 && !share {
        sys::check_port_free(addr)?;
    }
    let first = sys::listener(addr, true)?;
    let addr = first.local_addr()?;
    let mut group = vec![first];
    for _ in 1..count {
        group.push(sys::listener(addr, true)?);
    }
    Ok(group)
}

fn ipv6_unavailable(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        e.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::AFNOSUPPORT | Errno::ADDRNOTAVAIL | Errno::PROTONOSUPPORT)
    )
}

fn why(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::AddrInUse {
        "address already in use".to_string()
    } else {
        describe(e)
    }
}

/// Clears the way for a socket at `path`. A socket file nobody accepts on
/// is left over from a server that did not stop cleanly, and goes; a live
/// one, or anything that is not a socket, stays and is an error.
fn make_way(path: &Path) -> Result<(), String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(describe(&e)),
    };
    if !meta.file_type().is_socket() {
        return Err("the path exists and is not a socket".to_string());
    }
    match sys::unix_socket_in_use(path) {
        Ok(true) => Err("address already in use (a server accepts on it)".to_string()),
        Ok(false) => match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(format!("cannot remove the stale socket: {}", describe(&e)))
            }
            _ => Ok(()),
        },
        Err(e) => Err(describe(&e)),
    }
}

/// A socket file this process made, removed when dropped (as nginx does at
/// exit) if the path still names that very file: after --chroot it may name
/// another, and once the listener is closed a new server may have replaced
/// it. Removal that fails (no permission left after --user) is harmless:
/// the next start replaces the stale socket.
pub struct SocketFile {
    path: PathBuf,
    /// Device and inode of the socket file.
    id: (u64, u64),
}

impl SocketFile {
    fn new(path: &Path) -> io::Result<SocketFile> {
        let meta = std::fs::symlink_metadata(path)?;
        Ok(SocketFile {
            path: path.to_path_buf(),
            id: (meta.dev(), meta.ino()),
        })
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let same = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|meta| (meta.dev(), meta.ino()) == self.id);
        if same {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
