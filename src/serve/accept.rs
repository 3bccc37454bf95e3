//! Admission of an accepted connection, shared by the standalone
//! transports: its client's bound (`--max-connections-per-ip`), its place
//! under `--max-connections`, and what a failed accept(2) means.

use std::cell::Cell;
use std::io;
use std::os::fd::AsFd;
#[cfg(feature = "uring")]
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::clients::{self, Claim};
use super::limits::{Connections, Slot};
use super::listen::UNIX_CLIENT;
use super::wire::Wire;
use super::workers::Shared;
use super::{idle, park};
use crate::client_name::ClientName;
use crate::complaint::{complain, Complaint};
use crate::log;
use crate::origin::Kind;
use crate::sys::describe;

/// How long accepting pauses when the process is out of descriptors.
const EMFILE_PAUSE: Duration = Duration::from_millis(100);

/// How long a worker at the bound waits for a place before it asks the
/// other workers again to close an idle connection.
const SHED_AGAIN: Duration = Duration::from_millis(50);

/// How the log names a client: its address, or `unix:`.
pub(crate) fn client_name(peer: Option<std::net::IpAddr>) -> ClientName {
    peer.map_or_else(|| ClientName::new(UNIX_CLIENT), ClientName::ip)
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

/// Refuses a connection over its client's bound (see
/// [`clients::refuse`]), giving its request a moment to arrive:
/// accept(2) returns as the handshake completes, usually just before the request does.
pub(crate) fn turn_away(
    stream: std::net::TcpStream,
    client: ClientName,
    cleartext: bool,
    max: usize,
) {
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
/// [`clients::refuse`], and dropped by the caller).
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
            let max = shared.conns.max_per_client();
            clients::refuse(fd, client, cleartext, max);
            None
        }
    }
}

/// A new connection's wire and kind: cleartext on `--redirect-http`'s
/// listeners, else as the extras say.
pub(crate) fn wire_for(shared: &Shared, redirect: Option<u16>) -> io::Result<(Wire, Kind)> {
    match redirect {
        Some(port) => Ok((Wire::Clear, Kind::RedirectToHttps { port })),
        None => shared.extras.wire(),
    }
}

/// A place for a new connection, holding `claim` (its client's place).
/// At the bound, idle keep-alive connections make room first, oldest
/// first, as nginx does: this worker's own parked ones, else the other
/// workers'. Only with none idle does the new client wait.
pub(crate) async fn place(conns: &Arc<Connections>, mut claim: Option<Claim>) -> Slot {
    let mut waited = false;
    loop {
        let freed = conns.freed();
        claim = match conns.try_take(claim) {
            Ok(slot) => return slot,
            Err(claim) => claim,
        };
        let at_max = Complaint::AtMaxConnections { max: conns.max() };
        if park::shed_oldest() {
            complain("-", at_max);
            continue;
        }
        if idle::shed_waiting() {
            complain("-", at_max);
            // Its place is free once its task has run.
            let _ = tokio::time::timeout(SHED_AGAIN, freed).await;
            continue;
        }
        if !std::mem::replace(&mut waited, true) {
            crate::metrics::count(crate::metrics::Event::ConnectionAtLimit);
        }
        conns.shed.notify_waiters();
        let _ = tokio::time::timeout(SHED_AGAIN, freed).await;
    }
}

/// After accept(2) failed. Out of descriptors, the pending connection stays
/// queued: pause instead of spinning on the same error, and close what the
/// open-file cache holds. Other errors concern one connection only.
pub(crate) async fn accept_failed(e: &io::Error, last_complaint: &mut Option<Instant>) {
    if !crate::sys::out_of_resources(e) {
        return;
    }
    crate::site::cache::clear();
    if last_complaint.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
        log::diagnostic(&format!("staticd: accept: {} (pausing)\n", describe(e)));
        *last_complaint = Some(Instant::now());
    }
    tokio::time::sleep(EMFILE_PAUSE).await;
}
