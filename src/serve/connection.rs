//! One connection of the event loop: its prelude (see [`prelude`](crate::serve::prelude)), then
//! HTTP/1.1 one session step at a time, until it closes, is parked while
//! idle (see `park`), or is handed to HTTP/2.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use super::cgi::http1::run_beside;
use super::clients;
use super::http1::{Action, Http1};
use super::limits::Slot;
use super::pacing::response_failed;
use super::park::{self, Parked, PARK_AFTER};
use super::socket::{linger, read_proxy_header, read_wire, send, within, Socket};
use super::stop::{Busy, LAST_CALL};
use super::wire::Wire;
use super::workers::Shared;
use super::{idle, proxy_header};
use crate::client_name::ClientName;
use crate::origin::Kind;
use crate::pace::Pace;
use crate::pool;
use crate::session::Session;
use crate::sys;

/// How a connection's task begins.
// The size difference costs nothing: a Start is taken apart before the
// task's future is made (see `connection`), and boxing the session would
// allocate on every resumption.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Start {
    /// Just accepted, from this client.
    New(ClientName),
    /// Back from the lot of idle connections (see `park`).
    Resumed {
        session: Session,
        sniffing: bool,
        tuned: bool,
    },
}

/// Where a connection is in its life.
enum Phase {
    /// `--proxy-protocol`: the PROXY header comes first, before TLS.
    ProxyHeader,
    /// What came is a prefix of the HTTP/2 preface: the rest decides.
    Sniffing,
    /// HTTP/1.1, one session step at a time, the prelude deciding on the
    /// way from what the session's reads bring: a new connection's first
    /// wait is the session's, so a quiet new connection is parked, shed and
    /// left out of a graceful stop's wait as an idle keep-alive one is.
    Http1,
    /// Quiet long enough to be parked, until this keep-alive deadline.
    Parked(Instant),
    /// It opened with the HTTP/2 preface: h2 serves it from here.
    Http2,
    Closed,
}

/// A connection's state between its waits.
struct Connection<S> {
    stream: S,
    wire: Wire,
    kind: Kind,
    http1: Http1,
    /// Held until the connection ends, or parked with it.
    slot: Slot,
    /// TCP_NODELAY is set before the first response that keeps the
    /// connection open (a later small response must not wait for the
    /// client's delayed ACK); a connection closed after one response never
    /// needs it: close(2) pushes out what is queued.
    tuned: bool,
    busy: Busy,
    shared: Shared,
}

/// Serves one connection. A plain async block over values made beforehand
/// (not an `async fn`, whose arguments the task would hold twice), with one
/// timer reset for every wait and the step matched by reference: each value
/// is held once, so a quiet keep-alive connection is a small task.
pub(crate) fn connection<S: Socket>(
    stream: S,
    start: Start,
    (wire, kind): (Wire, Kind),
    shared: Shared,
    slot: Slot,
) -> impl Future<Output = ()> {
    let (http1, tuned) = match start {
        Start::New(client) => (Http1::new(&shared.cfg, kind, client), false),
        Start::Resumed {
            session,
            sniffing,
            tuned,
        } => (Http1::resumed(session, sniffing), tuned),
    };
    let mut conn = Connection {
        stream,
        wire,
        kind,
        http1,
        slot,
        tuned,
        busy: Busy::new(),
        shared,
    };
    async move {
        let timer = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(timer);
        let mut phase = Phase::Http1;
        loop {
            phase = match phase {
                Phase::ProxyHeader => conn.proxy_header(timer.as_mut()).await,
                Phase::Sniffing => conn.sniff(timer.as_mut()).await,
                Phase::Http1 => conn.step(timer.as_mut()).await,
                Phase::Parked(deadline) => return conn.park(deadline),
                // Boxed: HTTP/2's state held inline would make every
                // connection's task as large as an HTTP/2 one, and a
                // new connection's future is copied whole into its task.
                Phase::Http2 => return Box::pin(conn.http2()).await,
                Phase::Closed => return,
            };
        }
    }
}

impl<S: Socket> Connection<S> {
    /// Takes the PROXY header. The connection closes without one in time,
    /// with an invalid one, or when the client it names is over its bound.
    async fn proxy_header(&mut self, timer: Pin<&mut Sleep>) -> Phase {
        self.http1.proxied();
        // Waiting for it is like waiting for a first request: it does not
        // hold up a graceful stop.
        self.busy.idle();
        let deadline = Instant::now() + self.shared.cfg.read_timeout;
        let Ok(source) = within(read_proxy_header(&self.stream), deadline, timer).await else {
            return Phase::Closed;
        };
        self.busy.resume();
        let session = self.http1.session();
        proxy_header::name_client(session, self.stream.as_fd(), source);
        // The client a PROXY header named counts against its bound.
        if let Some(source) = source {
            if !self.slot.claim_for(source.ip(), &self.shared.cfg) {
                let cleartext = !self.shared.extras.tls_on();
                let max = self.shared.conns.max_per_client();
                let client = self.http1.session().client();
                clients::refuse(self.stream.as_fd(), client, cleartext, max);
                return Phase::Closed;
            }
        }
        Phase::Http1
    }

    /// Reads the rest of what may be the HTTP/2 preface.
    async fn sniff(&mut self, timer: Pin<&mut Sleep>) -> Phase {
        let deadline = Instant::now() + self.shared.cfg.read_timeout;
        let read = read_wire(&self.stream, &mut self.wire, self.http1.session().input());
        match within(read, deadline, timer).await {
            Ok(got) if self.http1.brought(got) => Phase::Http1,
            _ => Phase::Closed,
        }
    }

    /// What the connection does next (see [`http1`](crate::serve::http1)),
    /// done.
    async fn step(&mut self, mut timer: Pin<&mut Sleep>) -> Phase {
        let shared = &self.shared;
        let stopping = shared.stop.stopping();
        let mut action = self
            .http1
            .next(&shared.cfg, &shared.site, stopping, &self.wire);
        match &mut action {
            Action::ProxyHeader => return Phase::ProxyHeader,
            Action::Sniff => return Phase::Sniffing,
            Action::Http2 => return Phase::Http2,
            Action::Read { deadline, idle } => {
                let mut deadline = *deadline;
                // Quiet for PARK_AFTER: parked instead of waited on.
                let park_at = Instant::now() + PARK_AFTER;
                let parkable = S::PARKABLE
                    && *idle
                    && !stopping
                    && matches!(self.wire, Wire::Clear)
                    && park_at < deadline
                    && park::open();
                if *idle {
                    // Nothing buffered: hold no buffer while the client is
                    // quiet; and a quiet connection does not hold up a
                    // graceful stop (see `stop`), unless the stop began:
                    // then this is its last call, waited for.
                    pool::give(&pool::READS, std::mem::take(self.http1.session().input()));
                    match stopping {
                        false => self.busy.idle(),
                        true => deadline = deadline.min(Instant::now() + LAST_CALL),
                    }
                }
                let read = read_wire(&self.stream, &mut self.wire, self.http1.session().input());
                // Idle, it may be closed to make room at --max-connections.
                let read = idle::unless_shed(read, *idle && !stopping);
                let wait_until = if parkable { park_at } else { deadline };
                let read = within(read, wait_until, timer.as_mut()).await;
                self.busy.resume();
                match read {
                    Ok(got) if self.http1.brought(got) => {}
                    Err(e) if parkable && e.kind() == io::ErrorKind::TimedOut => {
                        return Phase::Parked(deadline);
                    }
                    Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                        self.http1.timed_out(&shared.cfg);
                        return Phase::Closed;
                    }
                    Ok(_) | Err(_) => return Phase::Closed,
                }
            }
            Action::Send(sent) => {
                if !self.tuned && !sent.response.close {
                    sys::tune_connection(self.stream.as_fd());
                    self.tuned = true;
                }
                let cfg = &shared.cfg;
                let mut pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
                let out = &mut self.wire;
                let copy = cfg.no_sendfile;
                let result = send(&self.stream, out, sent, copy, timer, &mut pace).await;
                // `step` writes the log line when dropped: after this arm,
                // or with the task if the stop's grace runs out.
                if let Err(e) = result {
                    response_failed(&e, &pace, self.http1.session().client(), cfg);
                    return Phase::Closed;
                }
            }
            Action::Cgi(_) => {
                let Action::Cgi(job) = std::mem::replace(&mut action, Action::Http2) else {
                    unreachable!("matched as Cgi just above")
                };
                let (cfg, site) = (&shared.cfg, &shared.site);
                let io = (self.stream.as_fd(), &mut self.wire);
                let keep_alive = run_beside(io, self.http1.session(), job, cfg, site).await;
                self.http1.cgi_finished(keep_alive);
            }
            Action::Close { linger: unread } => {
                self.wire.close(self.stream.as_fd());
                // With nothing unread, close(2) alone ends it cleanly.
                if *unread {
                    sys::shutdown_write(self.stream.as_fd());
                    linger(&self.stream, timer).await;
                }
                return Phase::Closed;
            }
        }
        Phase::Http1
    }

    /// Parks the quiet connection until `deadline` (see `park`).
    fn park(self, deadline: Instant) {
        let Some(stream) = self.stream.into_parked() else {
            return;
        };
        let sniffing = self.http1.sniffing();
        park::park(Parked {
            stream,
            session: self.http1.into_session(),
            kind: self.kind,
            slot: self.slot,
            deadline,
            sniffing,
            tuned: self.tuned,
        });
    }

    /// Serves the connection as HTTP/2 from the bytes read so far.
    #[cfg(feature = "http2")]
    async fn http2(mut self) {
        use super::h2;
        sys::tune_connection(self.stream.as_fd());
        let session = self.http1.session();
        let read = std::mem::take(session.input());
        let origin = h2::origin(session, self.wire.tls_summary(), self.stream.as_fd());
        let copy = self.shared.cfg.no_sendfile;
        let link = h2::FdLink::new(self.stream, self.wire, read, copy);
        let shared = &self.shared;
        h2::serve_shared(link, (&shared.cfg, &shared.site), &shared.stop, origin).await;
    }

    /// Without HTTP/2 built in, the prelude never asks for it.
    #[cfg(not(feature = "http2"))]
    async fn http2(self) {
        unreachable!("the prelude sniffs for HTTP/2 only when it is built in")
    }
}
