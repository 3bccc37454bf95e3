//! Readiness notification (sd_notify(3)) for a `Type=notify` service:
//! READY=1 once the listeners accept, RELOADING=1 and READY=1 around a
//! SIGHUP reload, STOPPING=1 when a graceful stop begins, with a STATUS=
//! line for `systemctl status`. Silent when NOTIFY_SOCKET is not set.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::OnceLock;

use sd_notify::NotifyState;

/// The manager's socket, connected once at start-up: before --chroot hides
/// its path, and before the environment is shared with threads.
static SOCKET: OnceLock<UnixDatagram> = OnceLock::new();

/// Connects to NOTIFY_SOCKET, if set, and clears it so CGI scripts do not
/// see it. Runs before any thread starts: it changes the environment. A
/// socket that cannot be reached (a variable left over in a shell) is a
/// warning: serving matters more than telling.
pub fn init() {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    std::env::remove_var("NOTIFY_SOCKET");
    match connect(path.as_bytes()) {
        Ok(socket) => {
            let _ = SOCKET.set(socket);
        }
        Err(e) => eprintln!(
            "staticd: warning: NOTIFY_SOCKET {}: cannot connect: {}",
            path.to_string_lossy(),
            crate::sys::describe(&e)
        ),
    }
}

/// A datagram socket connected to `path`: a file, or with a leading `@` a
/// name in the abstract namespace (as sd_notify(3) reads it).
fn connect(path: &[u8]) -> io::Result<UnixDatagram> {
    let addr = match path.strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name)?,
        None => SocketAddr::from_pathname(std::ffi::OsStr::from_bytes(path))?,
    };
    let socket = UnixDatagram::unbound()?;
    socket.connect_addr(&addr)?;
    Ok(socket)
}

/// The listeners accept: `status` says on what.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A SIGHUP reload begins. systemd 253 and later want the time with it
/// (Type=notify-reload), to match this message to the reload it asked for.
pub fn reloading() {
    let mut states = vec![NotifyState::Reloading];
    states.extend(NotifyState::monotonic_usec_now().ok());
    send(&states);
}

/// The reload is done.
pub fn reloaded() {
    send(&[NotifyState::Ready]);
}

/// A graceful stop begins: in-flight responses finish, then the process exits.
pub fn stopping() {
    send(&[
        NotifyState::Stopping,
        NotifyState::Status("stopping: finishing the responses in flight"),
    ]);
}

/// One datagram, one state per line. A lost notification is the manager's
/// problem to time out on, not a reason to stop serving: errors are ignored.
fn send(states: &[NotifyState]) {
    let Some(socket) = SOCKET.get() else {
        return;
    };
    let message: String = states.iter().map(|s| format!("{s}\n")).collect();
    let _ = socket.send(message.as_bytes());
}
