//! HTTP/2 connections, in every transport: ALPN `h2` over TLS, and h2c with prior knowledge (a
//! cleartext connection that opens with the preface). [`crate::h2session`] is the
//! connection's state machine (on nghttp2); this drives it: one read's bytes in, then the turn's
//! frames out in one write (`link`), CGI scripts on pipes of their own
//! (`cgi`), and the timers.

mod gather;
mod link;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use std::os::fd::BorrowedFd;

use tokio::io::{AsyncRead, AsyncWrite};

pub(crate) use crate::h2session::Served;
pub use crate::h2session::PREFACE;
pub(crate) use crate::serve::ready::Ready;
pub(crate) use link::{FdLink, IoLink, Link};

use crate::config::Config;
use crate::h2session::{Connection, Plan};
use crate::origin::{Kind, Origin, Protocol};
use crate::pace::Pace;
use crate::pool;
use crate::serve::cgi::streams::Scripts;
use crate::serve::pacing::Acks;
use crate::serve::stop::Stop;
use crate::serve::{idle, pacing, ready};
use crate::site::Site;

/// Serves one HTTP/2 connection until the client ends it, it fails, it
/// has been idle (no stream open) for the keep-alive timeout, or [`stop`](crate::serve::stop)
/// (a graceful stop) has let its streams finish. The last two send GOAWAY
/// first, and wait for the streams in flight at most the shutdown grace.
pub(crate) async fn serve(mut link: impl Link, served: Served, stop: impl Future<Output = ()>) {
    let served = Arc::new(served);
    let mut conn = Connection::new(Arc::clone(&served), Instant::now());
    let mut scripts = Scripts::new();
    tokio::pin!(stop);
    let mut stopped = false;
    let mut input = Vec::new();
    // One timer for the connection, moved as its deadline moves.
    let timer = tokio::time::sleep_until(conn.deadline().into());
    tokio::pin!(timer);
    let mut now = Instant::now();
    loop {
        // A turn: everything nghttp2 has to send, written whole.
        if conn.produce(now).is_err() {
            break;
        }
        if !conn.plan_mut().is_empty() {
            let plan = std::mem::take(conn.plan_mut());
            let written = write_plan(&mut link, &plan, &served, now).await;
            *conn.plan_mut() = plan;
            if let Err((at, discarded)) = written {
                conn.unsent(at, discarded);
                break;
            }
            conn.written();
            while let Some(event) = conn.next_event() {
                scripts.event(event, &mut conn);
            }
            now = Instant::now();
            continue;
        }
        while let Some(event) = conn.next_event() {
            scripts.event(event, &mut conn);
        }
        if conn.wants_write() {
            // What the events submitted (a script's head) goes first.
            continue;
        }
        // Nothing to write for now: a queue raised while the connection wrote drains back
        // under the bound before anything else (see `unsent`).
        if link.pause() {
            if let Err(discarded) = settle(&mut link, &served, now).await {
                conn.unsent(0, discarded);
                break;
            }
        }
        if conn.is_done() {
            break;
        }
        let deadline = tokio::time::Instant::from_std(conn.deadline());
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        // Owing nothing, it may be closed to make room at --max-connections.
        let idle = !stopped && conn.owes_nothing();
        tokio::select! {
            read = idle::unless_shed(link.read(&mut input), idle) => {
                match read {
                    Ok(true) => {
                        now = Instant::now();
                        let result = conn.receive(&input, now);
                        input.clear();
                        if result.is_err() {
                            // nghttp2's GOAWAY, if it has one, goes out
                            // before the connection closes.
                            let _ = conn.produce(now);
                            let plan = std::mem::take(conn.plan_mut());
                            let _ = write_plan(&mut link, &plan, &served, now).await;
                            break;
                        }
                        // The read buffer is the thread's, lent for a read
                        // (see `Link::read`): a waiting connection holds none.
                        pool::give(&pool::READS, std::mem::take(&mut input));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => {
                        now = Instant::now();
                        conn.shed(now);
                    }
                    _ => break,
                }
            }
            message = scripts.next() => {
                now = Instant::now();
                scripts.apply(message, &mut conn);
            }
            () = &mut timer => {
                now = Instant::now();
                if conn.tick(now) {
                    break;
                }
            }
            () = &mut stop, if !stopped => {
                stopped = true;
                now = Instant::now();
                conn.stop(now);
            }
        }
    }
    pool::give(&pool::READS, input);
    link.close().await;
}

/// Who an HTTP/1.1 connection's [`session`](crate::session) says its requests come from,
/// for the HTTP/2 streams it carries from here on (the prelude found the
/// preface): with what TLS agreed on, and the socket addresses each
/// stream's CGI script is told (a PROXY header's, else `fd`'s).
pub(crate) fn origin(
    session: &crate::session::Session,
    tls: Option<crate::log::Tls>,
    fd: BorrowedFd<'_>,
) -> Origin {
    let origin = session.origin();
    origin.into_streams(tls, origin.sockets_of(fd))
}

/// Serves one HTTP/2 connection of a standalone transport (the event loop,
/// io_uring) with what its workers share, until their graceful stop has let
/// its streams finish (see `serve`).
pub(crate) async fn serve_shared(
    link: impl Link,
    (cfg, site): (&Arc<Config>, &Arc<Site>),
    stop: &Stop,
    origin: Origin,
) {
    let served = Served {
        cfg: Arc::clone(cfg),
        site: Arc::clone(site),
        origin,
    };
    serve(link, served, stop.told()).await;
}

/// Writes a turn's plan whole. The client must take it as it would an
/// HTTP/1.1 response: within `--send-timeout` of credit at `--min-rate`,
/// counted in bytes it acknowledged (see [`serve::pacing`](crate::serve::pacing)). Err: how far
/// into the plan it went, and how many of the bytes written to the
/// connection so far the reset of a client given up on discarded (a client
/// too slow for the rate is named in the log). `now`: the time of the turn
/// that made it.
async fn write_plan(
    link: &mut impl Link,
    plan: &Plan,
    served: &Served,
    now: Instant,
) -> Result<(), (u64, u64)> {
    let (mut pace, acks) = pace(link, served, now, plan.len());
    let mut at = 0;
    while at < plan.len() {
        match pacing::paced(link.write(plan, at), acks, &mut pace).await {
            Ok(Ok(next)) => {
                pacing::written(&mut pace, next - at);
                at = next;
            }
            Ok(Err(_)) => return Err((at, 0)),
            Err(discarded) => {
                given_up(&pace, served);
                // The bytes the reset discards never went out, and they
                // may go back into turns written before this one.
                return Err((at, discarded));
            }
        }
    }
    Ok(())
}

/// Waits for a raised queue to drain (see [`Link::settle`]) as for a plan's write: the
/// client must take it within `--send-timeout` of credit at `--min-rate`. Err: it was given
/// up on, and the reset discarded that many of the bytes written.
async fn settle(link: &mut impl Link, served: &Served, now: Instant) -> Result<(), u64> {
    let most = u64::from(crate::unsent::RAISED_LIMIT);
    let (mut pace, acks) = pace(link, served, now, most);
    match pacing::paced(link.settle(), acks, &mut pace).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(0),
        Err(discarded) => {
            given_up(&pace, served);
            Err(discarded)
        }
    }
}

/// The pace a wait of the connection's writer (for `size` bytes at most) is measured by,
/// from `now`, and the socket whose acknowledged bytes measure it (see
/// [`serve::pacing`](crate::serve::pacing)).
fn pace(link: &impl Link, served: &Served, now: Instant, size: u64) -> (Pace, Option<Acks>) {
    let cfg = &served.cfg;
    let mut pace = Pace::new(now, cfg.send_timeout, cfg.min_rate);
    let acks = link
        .socket()
        .and_then(|fd| pacing::start(&mut pace, fd, size));
    (pace, acks)
}

/// The client was given up on: named in the log if it was too slow for `--min-rate`.
fn given_up(pace: &Pace, served: &Served) {
    let e = std::io::ErrorKind::TimedOut.into();
    pacing::response_failed(&e, pace, &served.origin.client, &served.cfg);
}

/// Serves one cleartext HTTP/2 connection over any byte stream, until the
/// client ends it: for the fuzz target, which drives the server from
/// memory. `io` must begin with the preface.
pub async fn serve_stream<T>(io: T, cfg: Arc<Config>, site: Arc<Site>)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let client = crate::client_name::ClientName::new("127.0.0.1");
    let origin = Origin::new(Kind::Http, client, Protocol::Http1).into_streams(None, (None, None));
    let served = Served { cfg, site, origin };
    serve(IoLink::new(io, Vec::new()), served, std::future::pending()).await;
}

/// inetd mode's HTTP/2: the one connection on stdin/stdout, served on a
/// runtime made for it (HTTP/1.1 in inetd mode needs none). `read` is what
/// was read already, the preface at least. SIGTERM and SIGINT are a
/// graceful stop, as in the event loop.
pub(crate) fn serve_stdio(
    served: Served,
    wire: crate::serve::wire::Wire,
    read: Vec<u8>,
    (input, output): (BorrowedFd<'_>, BorrowedFd<'_>),
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let copy = served.cfg.no_sendfile;
    runtime.block_on(async {
        // SAFETY: fds 0 and 1 stay open, on the same files, for the life
        // of the process (inetd mode never closes or replaces them).
        let stdio = unsafe { ready::Descriptors::new(input, output) }?;
        serve(
            FdLink::new(stdio, wire, read, copy),
            served,
            ready::signalled(),
        )
        .await;
        Ok(())
    })
}
