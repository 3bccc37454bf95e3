//! CGI for the standalone transports: the exchange inetd mode runs
//! blocking, run on tokio's blocking pool so that the worker goes on.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use super::cgi_exchange::{self, ClientIo};
use super::Wire;
use crate::config::Config;
use crate::respond::CgiJob;
use crate::session::Session;
use crate::site::Site;

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
