//! One connection on io_uring: its prelude (see `prelude`), then HTTP/1.1
//! one session step at a time, or HTTP/2 (see `h2io`), until it closes.

use std::net::{Shutdown, SocketAddr};
use std::time::Instant;

use super::socket::{self, borrow, Socket};
use crate::client_name::ClientName;
use crate::pace::Pace;
use crate::serve::cgi_task::run_cgi;
use crate::serve::limits::Slot;
use crate::serve::prelude::{Next, Prelude};
use crate::serve::workers::Shared;
use crate::serve::{clients, idle, proxy_header, Got, Wire};
use crate::session::{Kind, Session, Step};
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
        #[cfg(feature = "http2")]
        kind,
        session: Session::with_kind(client, kind),
        prelude: Prelude::new(&shared.cfg, kind),
        source: None,
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
    /// What HTTP/2 is told it speaks (HSTS and CGI's HTTPS=on follow it).
    #[cfg(feature = "http2")]
    kind: Kind,
    session: Session,
    prelude: Prelude,
    /// The client a PROXY header named.
    source: Option<SocketAddr>,
    shared: Shared,
}

impl Connection {
    /// Takes the PROXY header. The connection closes without one in time,
    /// with an invalid one, or when the client it names is over its bound.
    async fn proxy_header(&mut self, stream: &impl Socket, slot: &mut Slot) -> Phase {
        self.prelude.proxied();
        let read_timeout = self.shared.cfg.read_timeout;
        let read = socket::read_proxy_header(stream, &mut self.wire, self.session.input());
        let Ok(Ok((source, got))) = tokio::time::timeout(read_timeout, read).await else {
            return Phase::Closed;
        };
        self.source = source;
        proxy_header::name_client(&mut self.session, source);
        if got == Got::Cleartext {
            self.cleartext();
        }
        // The client a PROXY header named counts against its bound.
        if let Some(source) = source {
            if !slot.claim_for(source.ip(), &self.shared.cfg) {
                let cleartext = !self.shared.extras.tls_on();
                let max = self.shared.conns.max_per_client();
                clients::refuse(borrow(stream), self.session.client(), cleartext, max);
                return Phase::Closed;
            }
        }
        Phase::Http1
    }

    /// Reads the rest of what may be the HTTP/2 preface.
    async fn sniff(&mut self, stream: &impl Socket) -> Phase {
        let read = socket::read_wire(stream, &mut self.wire, self.session.input());
        match tokio::time::timeout(self.shared.cfg.read_timeout, read).await {
            Ok(Ok(Got::Bytes)) => Phase::Http1,
            _ => Phase::Closed,
        }
    }

    /// Cleartext came on a TLS port.
    fn cleartext(&mut self) {
        if self.prelude.cleartext() == Next::HttpsRequired {
            self.session.https_required();
        }
    }

    /// What the prelude says of the bytes so far, then one step of the
    /// HTTP/1.1 session.
    async fn step(&mut self, stream: &impl Socket) -> Phase {
        match self.prelude.next(self.session.input(), self.wire.alpn_h2()) {
            Next::ProxyHeader => return Phase::ProxyHeader,
            Next::Read => return Phase::Sniffing,
            Next::Http2 => return Phase::Http2,
            Next::Http1 | Next::HttpsRequired => {}
        }
        let (cfg, site) = (&self.shared.cfg, &self.shared.site);
        let mut stop = self.shared.stop.clone();
        let stopping = *stop.borrow();
        self.session.note_tls(|| self.wire.tls_summary());
        match self.session.step(cfg, site, stopping) {
            Step::Read { deadline, idle } => {
                // A read in flight needs its buffer, so unlike the event
                // loop an idle connection keeps one.
                let read = socket::read_wire(stream, &mut self.wire, self.session.input());
                // Idle, it may be closed to make room at --max-connections.
                let read = idle::unless_shed(read, idle && !stopping);
                let timed = tokio::time::timeout_at(deadline.into(), read);
                let outcome = if idle {
                    tokio::select! {
                        r = timed => r,
                        _ = stop.wait_for(|s| *s) => return Phase::Closed,
                    }
                } else {
                    timed.await
                };
                match outcome {
                    Ok(Ok(Got::Bytes)) => {}
                    Ok(Ok(Got::Cleartext)) => self.cleartext(),
                    Err(_) => {
                        self.session.read_timed_out(cfg);
                        return Phase::Closed;
                    }
                    Ok(Ok(Got::Closed) | Err(_)) => return Phase::Closed,
                }
            }
            Step::Send(mut sent) => {
                // Dropping `sent` writes its log line: after this arm, or
                // with the task if the stop's grace runs out.
                let mut pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
                if let Err(e) = socket::send(stream, &mut self.wire, &mut sent, &mut pace).await {
                    crate::serve::response_failed(&e, &pace, self.session.client(), cfg);
                    return Phase::Closed;
                }
            }
            Step::Cgi(mut job) => {
                proxy_header::give_source(&mut job, borrow(stream), self.source);
                // The exchange runs blocking code that waits with poll(2).
                sys::set_nonblocking(borrow(stream));
                let io = (borrow(stream), &mut self.wire);
                let keep_alive = run_cgi(io, &mut self.session, job, cfg, site).await;
                self.session.cgi_finished(keep_alive);
            }
            Step::Close => {
                socket::close(stream, &mut self.wire).await;
                sys::shutdown_write(borrow(stream));
                if self.session.unread_input() {
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
        let read = std::mem::take(self.session.input());
        let sockets = proxy_header::sockets(borrow(&stream), self.source);
        let stream = std::rc::Rc::new(stream);
        let tls = self.wire.tls_summary();
        let io = super::h2io::UringIo::new(std::rc::Rc::clone(&stream), self.wire, read);
        let link = h2::IoLink::new(io, Vec::new());
        let client = self.session.client();
        h2::serve_shared(link, &self.shared, (self.kind, tls), client, sockets).await;
        let _ = stream.shutdown(Shutdown::Both);
    }

    /// Without HTTP/2 built in, the prelude never asks for it.
    #[cfg(not(feature = "http2"))]
    async fn http2(self, _: impl Socket) {
        unreachable!("the prelude sniffs for HTTP/2 only when it is built in")
    }
}
