//! HTTP/2 connections, in both transports: ALPN `h2` over TLS, and h2c
//! with prior knowledge (a cleartext connection that opens with the
//! preface). The h2 crate does the framing, HPACK, flow control and the
//! known-attack limits; each stream's request is decided by the same
//! `session::answer` an HTTP/1.1 request is (see `stream`).

mod cgi;
mod io;
mod send;
mod stream;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use std::os::fd::{AsRawFd, BorrowedFd};

use bytes::Bytes;
use h2::Reason;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest};

pub(crate) use io::{Ready, WireIo};

use crate::config::{Config, Http2};
use crate::http::limits::MAX_HEAD_BYTES;
use crate::session::Kind;
use crate::site::Site;

/// What a client speaking HTTP/2 sends first (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Most bytes of DATA queued in h2 per stream beyond what the socket took:
/// with the stream limit, what bounds a connection's memory whatever
/// windows the client grants.
pub(super) const SEND_BUFFER: usize = 64 << 10;

/// Streams reset by the client (after we accepted them) that a connection
/// may accumulate beyond the ones it let finish before it is told to calm
/// down: Rapid Reset (CVE-2023-44487) costs us work per stream opened.
const RESET_ALLOWANCE: usize = 200;

/// How long a connection closed for a stalled client may take to get its
/// GOAWAY out before the socket just closes.
const LAST_WORDS: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether a connection that opened with `buf` speaks HTTP/2: None while
/// what arrived is still a strict prefix of the preface.
pub fn opening(buf: &[u8]) -> Option<bool> {
    if buf.starts_with(PREFACE) {
        Some(true)
    } else if PREFACE.starts_with(buf) {
        None
    } else {
        Some(false)
    }
}

/// What every stream of one connection is served with.
pub(crate) struct Served {
    pub cfg: Arc<Config>,
    pub site: Arc<Site>,
    /// Http or Https: HSTS and CGI's HTTPS=on follow it.
    pub kind: Kind,
    pub client: Arc<str>,
    /// The client's and our socket addresses (CGI's REMOTE_PORT and
    /// SERVER_PORT), read once from the connection's descriptor.
    pub sockets: (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
}

/// Serves one HTTP/2 connection until the client ends it, it fails, it
/// has been idle (no stream open) for the keep-alive timeout, or `stop`
/// (a graceful stop) has let its streams finish. The last two send GOAWAY
/// first, and wait for the streams in flight at most the shutdown grace.
pub(crate) async fn serve<T>(io: T, served: Served, stop: impl Future<Output = ()>)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let cfg = Arc::clone(&served.cfg);
    let settings = cfg.http2.unwrap_or_default();
    let handshake = builder(settings).handshake::<_, Bytes>(io);
    let Ok(Ok(mut conn)) = tokio::time::timeout(cfg.read_timeout, handshake).await else {
        return;
    };
    let served = Arc::new(served);
    let activity = Arc::new(Activity::new());
    let keepalive = cfg.keepalive_timeout;
    let timer = tokio::time::sleep(keepalive);
    tokio::pin!(timer);
    tokio::pin!(stop);
    // Set once GOAWAY has gone out: the timer is then the grace's.
    let mut closing = false;
    loop {
        let next = tokio::select! {
            next = conn.accept() => next,
            () = activity.stalled.notified(), if !closing => {
                // A stream waited the whole send timeout for the client
                // to take bytes: the client is not reading, so the
                // connection goes, as an HTTP/1.1 one would.
                closing = true;
                conn.abrupt_shutdown(Reason::NO_ERROR);
                timer.as_mut().reset((Instant::now() + cfg.shutdown_grace.min(LAST_WORDS)).into());
                continue;
            }
            () = &mut stop, if !closing => {
                closing = true;
                let now = Instant::now();
                if activity.quiet_since().is_some() {
                    // Nothing in flight: close now, as an idle HTTP/1.1
                    // connection is, rather than wait for a PING's answer.
                    conn.abrupt_shutdown(Reason::NO_ERROR);
                    timer.as_mut().reset((now + cfg.shutdown_grace.min(LAST_WORDS)).into());
                } else {
                    conn.graceful_shutdown();
                    timer.as_mut().reset((now + cfg.shutdown_grace).into());
                }
                continue;
            }
            () = &mut timer => {
                if closing {
                    return;
                }
                let now = Instant::now();
                match activity.quiet_since() {
                    Some(since) if since + keepalive <= now => {
                        // No stream open: nothing to let finish, so no
                        // two-step GOAWAY, whose PING a silent client never
                        // answers. A stream the client opened meanwhile is
                        // above the GOAWAY's last id: unprocessed, safe to
                        // retry (RFC 9113 §6.8).
                        closing = true;
                        conn.abrupt_shutdown(Reason::NO_ERROR);
                        timer.as_mut().reset((now + cfg.shutdown_grace.min(LAST_WORDS)).into());
                    }
                    Some(since) => timer.as_mut().reset((since + keepalive).into()),
                    None => timer.as_mut().reset((now + keepalive).into()),
                }
                continue;
            }
        };
        let Some(Ok((request, respond))) = next else {
            return;
        };
        if activity.abusive() {
            conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
            closing = true;
            timer
                .as_mut()
                .reset((Instant::now() + cfg.shutdown_grace).into());
            continue;
        }
        let open = Open::new(&activity);
        stream::start(request, respond, &served, closing, open);
    }
}

/// Serves one cleartext HTTP/2 connection over any byte stream, until the
/// client ends it: for the fuzz target, which drives the server from
/// memory. `io` must begin with the preface.
pub async fn serve_stream<T>(io: T, cfg: Arc<Config>, site: Arc<Site>)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let served = Served {
        cfg,
        site,
        kind: Kind::Http,
        client: Arc::from("127.0.0.1"),
        sockets: (None, None),
    };
    serve(io, served, std::future::pending()).await;
}

/// inetd mode's HTTP/2: the one connection on stdin/stdout, served on a
/// runtime made for it (HTTP/1.1 in inetd mode needs none). `read` is what
/// was read already, the preface at least. SIGTERM and SIGINT are a
/// graceful stop, as in the event loop.
pub(crate) fn serve_stdio(
    served: Served,
    wire: crate::serve::Wire,
    read: Vec<u8>,
    (input, output): (BorrowedFd<'_>, BorrowedFd<'_>),
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    runtime.block_on(async {
        let stdio = io::Stdio::new(input, output)?;
        serve(WireIo::new(stdio, wire, read), served, signalled()).await;
        Ok(())
    })
}

/// Resolves once SIGTERM or SIGINT asked the process to stop (the pipe
/// `sys::stop_on_signals` made turns readable); never if there is none.
async fn signalled() {
    let watched = crate::sys::stop_fd().and_then(|fd| {
        // SAFETY: the stop pipe stays open for the life of the process.
        unsafe { AsyncFd::register_with_interest(io::Fd(fd.as_raw_fd()), Interest::READABLE) }.ok()
    });
    match watched {
        Some(pipe) => {
            let _ = pipe.readable().await;
        }
        None => std::future::pending().await,
    }
}

/// h2's settings for a connection: our stream limit, the HTTP/1.1 head
/// limit for a header list (which also bounds CONTINUATION floods and
/// HPACK bombs), and a bounded send buffer per stream.
fn builder(settings: Http2) -> h2::server::Builder {
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(settings.max_streams)
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .max_send_buffer_size(SEND_BUFFER);
    builder
}

/// What a connection's streams are doing: for its idle timeout, and to
/// tell a Rapid Reset attack from a client that cancels now and then.
struct Activity {
    /// A stream's send timeout ran out.
    stalled: tokio::sync::Notify,
    open: AtomicUsize,
    finished: AtomicUsize,
    reset: AtomicUsize,
    /// When the last stream ended, or the connection began.
    last_end: Mutex<Instant>,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            stalled: tokio::sync::Notify::new(),
            open: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            reset: AtomicUsize::new(0),
            last_end: Mutex::new(Instant::now()),
        }
    }

    /// Since when no stream has been open; None while one is.
    fn quiet_since(&self) -> Option<Instant> {
        if self.open.load(Ordering::Acquire) > 0 {
            return None;
        }
        self.last_end.lock().ok().map(|t| *t)
    }

    /// The client resets streams far more than it lets them finish.
    fn abusive(&self) -> bool {
        let reset = self.reset.load(Ordering::Acquire);
        reset > RESET_ALLOWANCE && reset > 2 * self.finished.load(Ordering::Acquire)
    }
}

/// One open stream, counted in its connection's `Activity` until dropped.
pub(crate) struct Open {
    activity: Arc<Activity>,
    /// Set when the client reset the stream before it finished.
    reset: bool,
}

impl Open {
    fn new(activity: &Arc<Activity>) -> Open {
        activity.open.fetch_add(1, Ordering::AcqRel);
        Open {
            activity: Arc::clone(activity),
            reset: false,
        }
    }

    /// The client reset this stream before its response was complete.
    pub(crate) fn was_reset(&mut self) {
        self.reset = true;
    }

    /// The client took nothing for the send timeout: the connection ends.
    pub(crate) fn stalled(&self) {
        self.activity.stalled.notify_one();
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Ok(mut t) = self.activity.last_end.lock() {
            *t = Instant::now();
        }
        let count = match self.reset {
            true => &self.activity.reset,
            false => &self.activity.finished,
        };
        count.fetch_add(1, Ordering::AcqRel);
        self.activity.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_tells_the_preface_from_http1() {
        assert_eq!(opening(b""), None);
        assert_eq!(opening(b"PRI * HTTP/2.0\r\n\r\n"), None);
        assert_eq!(opening(PREFACE), Some(true));
        assert_eq!(opening(b"GET / HTTP/1.1\r\n"), Some(false));
        assert_eq!(opening(b"PRI * HTTP/1.1\r\n"), Some(false));
    }
}
