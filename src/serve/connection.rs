//! One connection of the event loop: its prelude (see `prelude`), then
//! HTTP/1.1 one session step at a time, until it closes, is parked while
//! idle (see `park`), or is handed to HTTP/2.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use super::cgi_task::run_cgi;
use super::clients;
use super::limits::Slot;
use super::park::{self, Parked, PARK_AFTER};
use super::prelude::{Next, Prelude};
use super::socket::{linger, read_proxy_header, read_wire, send, within, Socket};
use super::stop::{Busy, LAST_CALL};
use super::workers::Shared;
use super::{idle, proxy_header, Got, Wire};
use crate::client_name::ClientName;
use crate::pace::Pace;
use crate::pool;
use crate::session::{Kind, Session, Step};
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
        source: Option<SocketAddr>,
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
    session: Session,
    /// Held until the connection ends, or parked with it.
    slot: Slot,
    prelude: Prelude,
    /// The client a PROXY header named.
    source: Option<SocketAddr>,
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
    let (session, prelude, source, tuned) = match start {
        Start::New(client) => {
            let prelude = Prelude::new(&shared.cfg, kind);
            (Session::with_kind(client, kind), prelude, None, false)
        }
        Start::Resumed {
            session,
            source,
            sniffing,
            tuned,
        } => (session, Prelude::resumed(sniffing), source, tuned),
    };
    let mut conn = Connection {
        stream,
        wire,
        kind,
        session,
        slot,
        prelude,
        source,
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
                Phase::Http2 => return conn.http2().await,
                Phase::Closed => return,
            };
        }
    }
}

impl<S: Socket> Connection<S> {
    /// Takes the PROXY header. The connection closes without one in time,
    /// with an invalid one, or when the client it names is over its bound.
    async fn proxy_header(&mut self, timer: Pin<&mut Sleep>) -> Phase {
        self.prelude.proxied();
        // Waiting for it is like waiting for a first request: it does not
        // hold up a graceful stop.
        self.busy.idle();
        let deadline = Instant::now() + self.shared.cfg.read_timeout;
        let Ok(source) = within(read_proxy_header(&self.stream), deadline, timer).await else {
            return Phase::Closed;
        };
        self.busy.resume();
        self.source = source;
        proxy_header::name_client(&mut self.session, source);
        // The client a PROXY header named counts against its bound.
        if let Some(source) = source {
            if !self.slot.claim_for(source.ip(), &self.shared.cfg) {
                let cleartext = !self.shared.extras.tls_on();
                let max = self.shared.conns.max_per_client();
                clients::refuse(self.stream.as_fd(), self.session.client(), cleartext, max);
                return Phase::Closed;
            }
        }
        Phase::Http1
    }

    /// Reads the rest of what may be the HTTP/2 preface.
    async fn sniff(&mut self, timer: Pin<&mut Sleep>) -> Phase {
        let deadline = Instant::now() + self.shared.cfg.read_timeout;
        let read = read_wire(&self.stream, &mut self.wire, self.session.input());
        match within(read, deadline, timer).await {
            Ok(Got::Bytes) => Phase::Http1,
            _ => Phase::Closed,
        }
    }

    /// What the prelude says of the bytes so far, then one step of the
    /// HTTP/1.1 session.
    async fn step(&mut self, mut timer: Pin<&mut Sleep>) -> Phase {
        match self.prelude.next(self.session.input(), self.wire.alpn_h2()) {
            Next::ProxyHeader => return Phase::ProxyHeader,
            Next::Read => return Phase::Sniffing,
            Next::Http2 => return Phase::Http2,
            Next::Http1 | Next::HttpsRequired => {}
        }
        let shared = &self.shared;
        let stopping = shared.conns.stopping.load(Ordering::Relaxed);
        self.session.note_tls(|| self.wire.tls_summary());
        let mut step = self.session.step(&shared.cfg, &shared.site, stopping);
        match &mut step {
            Step::Read { deadline, idle } => {
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
                    pool::give(&pool::READS, std::mem::take(self.session.input()));
                    match stopping {
                        false => self.busy.idle(),
                        true => deadline = deadline.min(Instant::now() + LAST_CALL),
                    }
                }
                let read = read_wire(&self.stream, &mut self.wire, self.session.input());
                // Idle, it may be closed to make room at --max-connections.
                let read = idle::unless_shed(read, *idle && !stopping);
                let wait_until = if parkable { park_at } else { deadline };
                let read = within(read, wait_until, timer.as_mut()).await;
                self.busy.resume();
                match read {
                    Ok(Got::Bytes) => {}
                    Err(e) if parkable && e.kind() == io::ErrorKind::TimedOut => {
                        return Phase::Parked(deadline);
                    }
                    Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                        self.session.read_timed_out(&shared.cfg);
                        return Phase::Closed;
                    }
                    Ok(Got::Cleartext) => {
                        if self.prelude.cleartext() == Next::HttpsRequired {
                            self.session.https_required();
                        }
                    }
                    Ok(Got::Closed) | Err(_) => return Phase::Closed,
                }
            }
            Step::Send(sent) => {
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
                    super::response_failed(&e, &pace, self.session.client(), cfg);
                    return Phase::Closed;
                }
            }
            Step::Cgi(_) => {
                let Step::Cgi(mut job) = std::mem::replace(&mut step, Step::Close) else {
                    unreachable!("matched as Cgi just above")
                };
                proxy_header::give_source(&mut job, self.stream.as_fd(), self.source);
                let (cfg, site) = (&shared.cfg, &shared.site);
                let io = (self.stream.as_fd(), &mut self.wire);
                let keep_alive = run_cgi(io, &mut self.session, job, cfg, site).await;
                self.session.cgi_finished(keep_alive);
            }
            Step::Close => {
                self.wire.close(self.stream.as_fd());
                // With nothing unread, close(2) alone ends it cleanly;
                // otherwise the client's bytes in flight would meet a reset
                // that can destroy the last response, so the write side
                // closes first and the rest is read away.
                if self.session.unread_input() {
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
        park::park(Parked {
            stream,
            session: self.session,
            kind: self.kind,
            slot: self.slot,
            source: self.source,
            deadline,
            sniffing: self.prelude.sniffing(),
            tuned: self.tuned,
        });
    }

    /// Serves the connection as HTTP/2 from the bytes read so far.
    #[cfg(feature = "http2")]
    async fn http2(mut self) {
        use super::h2;
        sys::tune_connection(self.stream.as_fd());
        let read = std::mem::take(self.session.input());
        let sockets = proxy_header::sockets(self.stream.as_fd(), self.source);
        let copy = self.shared.cfg.no_sendfile;
        let tls = self.wire.tls_summary();
        let link = h2::FdLink::new(self.stream, self.wire, read, copy);
        let client = self.session.client();
        h2::serve_shared(link, &self.shared, (self.kind, tls), client, sockets).await;
    }

    /// Without HTTP/2 built in, the prelude never asks for it.
    #[cfg(not(feature = "http2"))]
    async fn http2(self) {
        unreachable!("the prelude sniffs for HTTP/2 only when it is built in")
    }
}
