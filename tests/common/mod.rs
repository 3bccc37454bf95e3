//! Test harness: start the real `staticd` binary in either mode and talk HTTP to it.
//!
//! * [`Docroot`] builds a document root in a temp dir.
//! * [`Server`] runs `staticd` standalone (one process, ephemeral port) or inetd-style
//!   (a test-owned listener; every accepted socket is handed to a fresh `staticd --inetd`
//!   as both stdin and stdout, the way tcpserver does it). Either way it has an address
//!   to connect to, so behavioural tests run unchanged against both modes.
//! * [`Variant`] is one cell of the protocol matrix (mode x wire x HTTP version x
//!   transport); `Server::start(variant, ..)` starts a server of that cell, and
//!   [`matrix!`] generates a test's cells at compile time (`NAME::standalone::h2_tls`).
//!   A [`Mode`] alone is its `h1` cell; [`both_modes!`] runs a test taking a `Mode`.
//! * [`Conn`] is a raw TCP client with a strict little response reader; [`Client`] wraps
//!   hyper's HTTP/1 or HTTP/2 client connection, or an HTTP/3 one (quinn and h3,
//!   [`H3Conn`]), behind a blocking API (HTTP/2 in the HTTP/2 cells, HTTP/3 in the
//!   HTTP/3 cell).
//! * Over TLS: [`Pki`] makes certificates (rcgen) and rustls client configurations;
//!   [`Stream`] is plain TCP or rustls over TCP, under both [`Conn`] and the helpers
//!   that hand out connections ([`Server::connect`], [`Server::client`], a
//!   [`Connector`] for other threads). In a TLS cell every server the harness starts
//!   gets the harness's certificate and every harness client speaks TLS to it;
//!   `Builder::plain` opts a server out, `Builder::tls_files` and `Builder::tls_client`
//!   opt one in.
//!
//! Every read is bounded by [`IO_TIMEOUT`]; every child process is killed on drop.

// Each test crate uses a different subset of this module and its re-exports.
#![allow(dead_code, unused_imports)]

// Shared by the submodules below through `use super::*`.
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// Upper bound for any single wait in the tests (a read, a process start, an exit).
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Upper bound for an outside server's start-up that compiles or spawns helpers
/// (varnishd compiles its VCL with gcc first): about 2 s on an idle machine, over
/// 10 s with both cores busy. Reached only by a hang; the wait ends at the event.
pub const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Environment variables through which a superserver tells `staticd` the client address.
const CLIENT_ADDRESS_VARS: [&str; 5] = [
    "TCPREMOTEIP",
    "TCPREMOTEPORT",
    "TCPREMOTEADDR",
    "REMOTE_HOST",
    "REMOTE_PORT",
];

/// The staticd binary the tests run. Where other users cannot reach the one
/// cargo built (a checkout in root's home, mode 0700), tests that run it as
/// nobody could not exec it: then it is a link (or copy) of it in the temp
/// directory, made once and shared by every test binary of the build.
pub fn staticd_bin() -> &'static str {
    static REACHABLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    REACHABLE.get_or_init(|| {
        let built = Path::new(env!("CARGO_BIN_EXE_staticd"));
        match reachable_by_all(built) {
            true => built.display().to_string(),
            false => reachable_copy(built).display().to_string(),
        }
    })
}

/// Whether every user may exec (or enter) `path`: it and every directory
/// above it have the x bit for others.
pub fn reachable_by_all(path: &Path) -> bool {
    path.ancestors().all(|p| {
        p.as_os_str().is_empty()
            || fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0)
    })
}

/// `built` under the temp directory, keyed by its size and modification
/// time (a rebuilt binary gets a new one): a hard link where the temp
/// directory is on the same file system, else a copy. Made under a name of
/// this process's, then renamed, so concurrent test binaries never run a
/// half-written file.
fn reachable_copy(built: &Path) -> PathBuf {
    let meta = fs::metadata(built).expect("the staticd binary");
    let stamp = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir()
        .join("staticd-test-bin")
        .join(format!("{}-{stamp}", meta.len()));
    let target = dir.join("staticd");
    if target.exists() {
        return target;
    }
    fs::create_dir_all(&dir).expect("create the directory of the reachable binary");
    for d in [dir.parent().unwrap(), &dir] {
        let _ = fs::set_permissions(d, fs::Permissions::from_mode(0o755));
    }
    let partial = dir.join(format!("staticd.{}", std::process::id()));
    if fs::hard_link(built, &partial).is_err() {
        fs::copy(built, &partial).expect("copy the staticd binary");
    }
    fs::set_permissions(&partial, fs::Permissions::from_mode(0o755)).unwrap();
    fs::rename(&partial, &target).expect("rename the reachable binary");
    remove_stale_copies(dir.parent().unwrap(), &dir);
    target
}

/// Earlier builds' links and copies: a link whose build was replaced keeps the old
/// binary's blocks (about 140 MB for a debug build) alive. One is removed once nothing
/// else links to it (its build is gone, or it is a copy) and it is over an hour old, by
/// when the test run that made it has ended.
fn remove_stale_copies(parent: &Path, keep: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(meta) = fs::metadata(dir.join("staticd")) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(3600));
        if dir != keep && meta.nlink() == 1 && old {
            let _ = fs::remove_dir_all(&dir);
        }
    }
}

/// Runs each listed `fn(Mode)` as two tests, `NAME::standalone` and `NAME::inetd`: for
/// tests that hold in cleartext HTTP/1.1 only (the matrix's `h1` cell). [`matrix!`]
/// runs a `fn(Variant)` in more cells.
#[macro_export]
macro_rules! both_modes {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn standalone() {
                    super::$name($crate::common::Mode::Standalone)
                }
                #[test]
                fn inetd() {
                    super::$name($crate::common::Mode::Inetd)
                }
            }
        )*
    };
}

mod client;
mod docroot;
pub mod h2frames;
pub mod hpack;
mod multipart;
mod parked;
mod pebble;
mod process;
mod quic;
mod raw;
mod server;
mod site;
mod stream;
mod tls;
mod tools;
mod variant;

pub use client::*;
pub use docroot::*;
pub use multipart::*;
pub use parked::*;
pub use pebble::*;
pub use process::*;
pub use quic::*;
pub use raw::*;
pub use server::*;
pub use site::*;
pub use stream::*;
pub use tls::*;
pub use tools::*;
pub use variant::*;
