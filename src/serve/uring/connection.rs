//! One connection on io_uring: its prelude (see [`prelude`](crate::serve::prelude)), then HTTP/1.1
//! one session step at a time, or HTTP/2 (see [`h2io`](crate::serve::uring::h2io)), until it
//! closes.

use std::net::Shutdown;
use std::time::Instant;

use super::socket::{self, borrow, Socket};
use crate::client_name::ClientName;
use crate::origin::Kind;
use crate::pace::Pace;
use crate::serve::cgi::http1::run_beside;
use crate::serve::http1::{Action, Http1};
use crate::serve::limits::Slot;
use crate::serve::wire::Wire;
use crate::serve::workers::Shared;
use crate::serve::{clients, idle, proxy_header};
use crate::sys;

/// Where a connection is in its life (as on the event loop, but never
/// parked: see `connection::Phase`).
enum Phase {
    /// `--proxy-protocol`: the PROXY header comes first, before TLS.
    ProxyHeader,
    /// What came is a prefix of the HTTP/2 preface: the rest decides.
    Sniffing,
    /// HTTP/1.1, one session step at a time, the prelude deciding on the
    /// way from what the session's reads bring.
    Http1,
    /// It opened with the HTTP/2 preface: h2 serves it from here.
    Http2,
    Closed,
}

/// Serves one connection, holding `slot` (its place, claimed for the
/// client a PROXY header names) until it ends.
pub(super) async fn connection(
    stream: impl Socket,
    client: ClientName,
    (wire, kind): (Wire, Kind),
    shared: Shared,
    slot: &mut Slot,
) {
    sys::tune_connection(borrow(&stream));
    let mut conn = Connection {
        wire,
        http1: Http1::new(&shared.cfg, kind, client),
        shared,
    };
    let mut phase = Phase::Http1;
    loop {
        phase = match phase {
            Phase::ProxyHeader => conn.proxy_header(&stream, slot).await,
            Phase::Sniffing => conn.sniff(&stream).await,
            Phase::Http1 => conn.step(&stream).await,
            Phase::Http2 => return conn.http2(stream).await,
            Phase::Closed => break,
        };
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// A connection's state between its operations.
struct Connection {
    wire: Wire,
    http1: Http1,
    shared: Shared,
}

impl Connection {
    /// Takes the PROXY header. The connection closes without one in time,
    /// with an invalid one, or when the client it names is over its bound.
    async fn proxy_header(&mut self, stream: &impl Socket, slot: &mut Slot) -> Phase {
        self.http1.proxied();
        let read_timeout = self.shared.cfg.read_timeout;
        let input = self.http1.session().input();
        let read = socket::read_proxy_header(stream, &mut self.wire, input);
        let Ok(Ok((source, got))) = tokio::time::timeout(read_timeout, read).await else {
            return Phase::Closed;
        };
        proxy_header::name_client(self.http1.session(), borrow(stream), source);
        // What came after the header, if anything.
        self.http1.brought(got);
        // The client a PROXY header named counts against its bound.
        if let Some(source) = source {
            if !slot.claim_for(source.ip(), &self.shared.cfg) {
                let cleartext = !self.shared.extras.tls_on();
                let max = self.shared.conns.max_per_client();
                let client = self.http1.session().client();
                clients::refuse(borrow(stream), client, cleartext, max);
                return Phase::Closed;
            }
        }
        Phase::Http1
    }

    /// Reads the rest of what may be the HTTP/2 preface.
    async fn sniff(&mut self, stream: &impl Socket) -> Phase {
        let read = socket::read_wire(stream, &mut self.wire, self.http1.session().input());
        match tokio::time::timeout(self.shared.cfg.read_timeout, read).await {
            Ok(Ok(got)) if self.http1.brought(got) => Phase::Http1,
            _ => Phase::Closed,
        }
    }

    /// What the connection does next (see [`http1`](crate::serve::http1)),
    /// done.
    async fn step(&mut self, stream: &impl Socket) -> Phase {
        let (cfg, site) = (&self.shared.cfg, &self.shared.site);
        let stop = &self.shared.stop;
        let stopping = stop.stopping();
        match self.http1.next(cfg, site, stopping, &self.wire) {
            Action::ProxyHeader => return Phase::ProxyHeader,
            Action::Sniff => return Phase::Sniffing,
            Action::Http2 => return Phase::Http2,
            Action::Read { deadline, idle } => {
                // A read in flight needs its buffer, so unlike the event
                // loop an idle connection keeps one.
                let input = self.http1.session().input();
                let read = socket::read_wire(stream, &mut self.wire, input);
                // Idle, it may be closed to make room at --max-connections.
                let read = idle::unless_shed(read, idle && !stopping);
                let timed = tokio::time::timeout_at(deadline.into(), read);
                let outcome = if idle {
                    tokio::select! {
                        r = timed => r,
                        () = stop.told() => return Phase::Closed,
                    }
                } else {
                    timed.await
                };
                match outcome {
                    Ok(Ok(got)) if self.http1.brought(got) => {}
                    Err(_) => {
                        self.http1.timed_out(cfg);
                        return Phase::Closed;
                    }
                    Ok(_) => return Phase::Closed,
                }
            }
            Action::Send(mut sent) => {
                // Dropping `sent` writes its log line: after this arm, or
                // with the task if the stop's grace runs out.
                let mut pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
                if let Err(e) = socket::send(stream, &mut self.wire, &mut sent, &mut pace).await {
                    let client = self.http1.session().client();
                    crate::serve::pacing::response_failed(&e, &pace, client, cfg);
                    return Phase::Closed;
                }
            }
            Action::Cgi(job) => {
                // The exchange runs beside, on a duplicate of the socket
                // that its own runtime watches (made non-blocking there).
                let io = (borrow(stream), &mut self.wire);
                let keep_alive = run_beside(io, self.http1.session(), job, cfg, site).await;
                self.http1.cgi_finished(keep_alive);
            }
            Action::Close { linger } => {
                socket::close(stream, &mut self.wire).await;
                sys::shutdown_write(borrow(stream));
                if linger {
                    socket::linger(stream).await;
                }
                return Phase::Closed;
            }
        }
        Phase::Http1
    }

    /// Serves the connection as HTTP/2 from the bytes read so far.
    #[cfg(feature = "http2")]
    async fn http2(mut self, stream: impl Socket) {
        use crate::serve::h2;
        let session = self.http1.session();
        let read = std::mem::take(session.input());
        let origin = h2::origin(session, self.wire.tls_summary(), borrow(&stream));
        let stream = std::rc::Rc::new(stream);
        let io = super::h2io::UringIo::new(std::rc::Rc::clone(&stream), self.wire, read);
        let link = h2::IoLink::new(io, Vec::new());
        let shared = &self.shared;
        h2::serve_shared(link, (&shared.cfg, &shared.site), &shared.stop, origin).await;
        let _ = stream.shutdown(Shutdown::Both);
    }

    /// Without HTTP/2 built in, the prelude never asks for it.
    #[cfg(not(feature = "http2"))]
    async fn http2(self, _: impl Socket) {
        unreachable!("the prelude sniffs for HTTP/2 only when it is built in")
    }
}
