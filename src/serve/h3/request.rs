//! One HTTP/3 connection and its request streams. A stream's head becomes
//! [`http::fields::Fields`](crate::http::fields::Fields), then the same
//! [`parse::Request`](crate::http::parse::Request) HTTP/2's does;
//! [`pipeline::answer`] decides it,
//! [`pipeline::sent`] counts and logs it, and the head goes out as the same
//! fields HTTP/2 sends ([`ResponseFields`](crate::http::fields::ResponseFields)).
//!
//! What HTTP/3 decides of a request (its fields, the 0-RTT gate, how its
//! body is read) is [`h3session`]'s. 0-RTT: requests that arrive before the
//! handshake completes may be replays (RFC 9001 §9.2, RFC 8470); only what
//! [`h3session::replay_safe`] allows is answered at once, any other waits
//! for the handshake. A CGI answer waits too, whatever the method.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes};
use tokio::sync::Notify;

use super::send::{send, Stream};
use super::{Pending, Served};
use crate::client_name::ClientName;
use crate::h3session;
use crate::http::fields::Fields;
use crate::http::limits::MAX_HEAD_BYTES;
use crate::http::parse::{BodyFraming, ParseError};
use crate::log;
use crate::origin::{Kind, Origin, Protocol};
use crate::pipeline;
use crate::respond::{self, Answer};

/// What a connection's streams share.
pub(super) struct Conn {
    pub(super) served: Arc<Served>,
    /// Who the streams come from: its socket addresses (CGI's REMOTE_PORT,
    /// SERVER_PORT) known from the first packet.
    pub(super) origin: Origin,
    /// The handshake: [`PENDING`],
    /// [`CONFIRMED`] (requests are no longer 0-RTT) or
    /// [`FAILED`].
    handshake: AtomicU8,
    handshake_over: Notify,
    /// Request streams open: being answered or waiting for their head.
    busy: AtomicUsize,
    /// Request streams whose head came, being answered.
    answering: AtomicUsize,
    /// A stream's head did not come within `--read-timeout`.
    expired: AtomicBool,
    idle: Notify,
}

/// What the log says of QUIC's TLS: always 1.3 and h3 (quinn does not
/// tell the cipher suite or whether the session was resumed).
const QUIC_TLS: Option<log::Tls> = Some(log::Tls {
    version: log::Tls::VERSION_1_3,
    cipher_suite: None,
    resumed: None,
    proto: log::Alpn::H3,
});

const PENDING: u8 = 0;
const CONFIRMED: u8 = 1;
const FAILED: u8 = 2;

impl Conn {
    fn confirmed(&self) -> bool {
        self.handshake.load(Ordering::Acquire) == CONFIRMED
    }

    /// Waits until the handshake is over (at once if it is): true if it
    /// completed.
    async fn handshake_done(&self) -> bool {
        loop {
            let over = self.handshake_over.notified();
            match self.handshake.load(Ordering::Acquire) {
                PENDING => over.await,
                state => return state == CONFIRMED,
            }
        }
    }

    fn handshake_ended(&self, state: u8) {
        self.handshake.store(state, Ordering::Release);
        self.handshake_over.notify_waiters();
    }
}

/// Serves one connection: the handshake, then each request stream in a
/// task of its own, until the client closes, the connection idles out
/// (`--keepalive-timeout` without a stream open, whatever QUIC PINGs keep
/// QUIC's own idle timer from doing), a stream's head has not come within
/// `--read-timeout` while none is being answered, or a stop has let its
/// streams finish.
pub(super) async fn connection(
    connecting: quinn::Connecting,
    served: &Arc<Served>,
    pending: Pending,
    client: ClientName,
    sockets: (Option<SocketAddr>, Option<SocketAddr>),
) {
    let cfg = &served.shared.cfg;
    // 0-RTT and 0.5-RTT: the connection is usable before the handshake
    // completes; `confirmed` says when it has.
    let (quic, zero_rtt) = match connecting.into_0rtt() {
        Ok((quic, accepted)) => (quic, Some(accepted)),
        Err(connecting) => match tokio::time::timeout(cfg.read_timeout, connecting).await {
            Ok(Ok(quic)) => (quic, None),
            _ => return,
        },
    };
    let conn = Arc::new(Conn {
        served: Arc::clone(served),
        origin: Origin {
            tls: QUIC_TLS,
            sockets: Some(sockets),
            ..Origin::new(Kind::Https, client, Protocol::Fields)
        },
        handshake: AtomicU8::new(if zero_rtt.is_some() {
            PENDING
        } else {
            CONFIRMED
        }),
        handshake_over: Notify::new(),
        busy: AtomicUsize::new(0),
        answering: AtomicUsize::new(0),
        expired: AtomicBool::new(false),
        idle: Notify::new(),
    });
    if let Some(zero_rtt) = zero_rtt {
        let conn = Arc::clone(&conn);
        let read_timeout = cfg.read_timeout;
        let quic = quic.clone();
        tokio::spawn(async move {
            // Counted as a handshake in progress until it is over.
            let _pending = pending;
            // It resolves when the handshake completes or fails (its value
            // says whether 0-RTT was accepted, not which).
            let over = tokio::time::timeout(read_timeout, zero_rtt).await;
            if over.is_ok() && quic.close_reason().is_none() {
                conn.handshake_ended(CONFIRMED);
            } else {
                // A handshake that never completes (a replayed flight):
                // its early requests never get past the gate.
                quic.close(super::code::varint(super::code::NO_ERROR), b"");
                conn.handshake_ended(FAILED);
            }
        });
    } else {
        drop(pending);
    }
    let h3 = h3::server::builder()
        .max_field_section_size(MAX_HEAD_BYTES as u64)
        .build::<_, Bytes>(super::quic::Connection::new(
            quic.clone(),
            MAX_HEAD_BYTES as u64,
        ))
        .await;
    let Ok(mut h3) = h3 else {
        return;
    };
    let stop = &served.shared.stop;
    let mut stopping = false;
    loop {
        let idle = conn.idle.notified();
        if conn.expired.swap(false, Ordering::AcqRel) && conn.answering.load(Ordering::Acquire) == 0
        {
            // Its only work was heads that never came: closed as an HTTP/1.1
            // connection with a partial head is (GOAWAY, then the close).
            let _ = h3.shutdown(0).await;
            break;
        }
        let open = conn.busy.load(Ordering::Acquire) > 0;
        let resolver = tokio::select! {
            accepted = h3.accept() => match accepted {
                Ok(Some(resolver)) => resolver,
                // The client's GOAWAY and its last stream done, or closed.
                Ok(None) | Err(_) => break,
            },
            () = stop.told(), if !stopping => {
                stopping = true;
                // GOAWAY: no stream after those already open; h3 then ends
                // `accept` once they are done.
                if h3.shutdown(0).await.is_err() {
                    break;
                }
                continue;
            }
            () = tokio::time::sleep(cfg.keepalive_timeout), if !open && !stopping => {
                let _ = h3.shutdown(0).await;
                break;
            }
            () = idle, if open => continue,
        };
        conn.busy.fetch_add(1, Ordering::AcqRel);
        let conn = Arc::clone(&conn);
        let read_timeout = cfg.read_timeout;
        tokio::spawn(async move {
            // The stream is accepted at its first byte; its HEADERS frame
            // must be whole within `--read-timeout` of it.
            match tokio::time::timeout(read_timeout, resolver.resolve_request()).await {
                Ok(Ok((head, stream))) => {
                    conn.answering.fetch_add(1, Ordering::AcqRel);
                    answer(&conn, head, stream).await;
                    conn.answering.fetch_sub(1, Ordering::AcqRel);
                }
                Ok(Err(_)) => {}
                // Dropped unanswered, the stream is reset with
                // H3_REQUEST_REJECTED (`quic`): nothing was done for it.
                Err(_) => conn.expired.store(true, Ordering::Release),
            }
            conn.busy.fetch_sub(1, Ordering::AcqRel);
            conn.idle.notify_waiters();
        });
    }
    // Streams still going get the rest of the grace, then the close.
    if stopping {
        let deadline = served.shared.stop.began() + cfg.shutdown_grace;
        while conn.busy.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            let idle = conn.idle.notified();
            let _ = tokio::time::timeout_at(deadline.into(), idle).await;
        }
        // A stream is done once its last bytes are handed to QUIC, not once
        // the client has them: closing now would discard what a slow client
        // has yet to receive (up to the send window; aioquic on a loaded
        // machine lost the last MiB of 4). The client closes once it has
        // everything, having had GOAWAY; the grace bounds the wait.
        let _ = tokio::time::timeout_at(deadline.into(), quic.closed()).await;
    }
    quic.close(super::code::varint(super::code::NO_ERROR), b"");
}

/// Answers one request stream.
async fn answer(conn: &Conn, head: http::Request<()>, mut stream: Stream) {
    let served = &conn.served;
    let (cfg, site) = (&served.shared.cfg, &served.shared.site);
    let mut fields = Fields::default();
    let request = match push_fields(&head, &mut fields) {
        Ok(()) => h3session::request(&fields),
        Err(e) => Err(e),
    };
    let mut request = match request {
        Ok(request) => request,
        Err(e) => {
            let sent = pipeline::sent(cfg, &conn.origin, None, respond::refuse(e));
            send(cfg, &conn.origin.client, &mut stream, sent).await;
            return;
        }
    };
    let (has_body, early) = match peek_body(&mut stream) {
        // No length, and the stream's end not here yet: wait for it, or
        // for body bytes, rather than take a GET for a chunked upload.
        None if request.framing == BodyFraming::None => {
            await_body(&mut stream, cfg.read_timeout).await
        }
        None => (true, Vec::new()),
        Some(peeked) => peeked,
    };
    if has_body {
        h3session::body_follows(&mut request);
    }
    if !conn.confirmed() && !h3session::replay_safe(&request) && !conn.handshake_done().await {
        return;
    }
    let stopping = served.shared.stop.stopping();
    match pipeline::answer(conn.origin.kind, site, &request, stopping) {
        Answer::Send(response) => {
            let sent = pipeline::sent(cfg, &conn.origin, Some(&request), response);
            // A body nothing reads is left unread: quinn asks the client to
            // stop sending it when the stream is dropped. (h3-quinn cannot
            // stop a stream a read is pending on, as `peek_body`'s may be.)
            send(cfg, &conn.origin.client, &mut stream, sent).await;
        }
        Answer::Cgi(job) => {
            if !conn.handshake_done().await {
                return;
            }
            super::cgi::run(&conn.served, &conn.origin, job, stream, early).await;
        }
    }
}

/// Whether the request has a body (the stream did not end with its
/// head), and what of it has arrived with the head; None if neither has
/// arrived yet. h3 tells only by reading, so this reads once without
/// waiting.
fn peek_body(stream: &mut Stream) -> Option<(bool, Vec<u8>)> {
    use std::task::{Context, Poll, Waker};
    let mut cx = Context::from_waker(Waker::noop());
    match stream.poll_recv_data(&mut cx) {
        Poll::Ready(read) => Some(body_start(read)),
        Poll::Pending => None,
    }
}

/// As `peek_body`, waiting up to `limit` for the stream's end or its
/// first body bytes.
async fn await_body(stream: &mut Stream, limit: std::time::Duration) -> (bool, Vec<u8>) {
    match tokio::time::timeout(limit, stream.recv_data()).await {
        Ok(read) => body_start(read),
        Err(_) => (true, Vec::new()),
    }
}

/// What a first read of the body says: the stream's end (no body), its
/// first bytes, or an error (a body, none of it usable).
fn body_start<E>(read: Result<Option<impl Buf>, E>) -> (bool, Vec<u8>) {
    match read {
        Ok(None) => (false, Vec::new()),
        Ok(Some(mut data)) => {
            let mut bytes = vec![0; data.remaining()];
            data.copy_to_slice(&mut bytes);
            (true, bytes)
        }
        Err(_) => (true, Vec::new()),
    }
}

/// The request's pseudo-fields and fields, as HTTP/2's arrive: h3 gives
/// the pseudo-fields as a URI.
fn push_fields(head: &http::Request<()>, fields: &mut Fields) -> Result<(), ParseError> {
    let uri = head.uri();
    let mut push = |name: &[u8], value: &[u8]| h3session::push_field(fields, name, value);
    push(b":method", head.method().as_str().as_bytes())?;
    if let Some(scheme) = uri.scheme_str() {
        push(b":scheme", scheme.as_bytes())?;
    }
    if let Some(authority) = uri.authority() {
        push(b":authority", authority.as_str().as_bytes())?;
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    push(b":path", path.as_bytes())?;
    for (name, value) in head.headers() {
        push(name.as_str().as_bytes(), value.as_bytes())?;
    }
    Ok(())
}
