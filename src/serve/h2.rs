//! HTTP/2 on the standalone event loop: cleartext h2c with prior
//! knowledge (a connection that opens with the HTTP/2 preface). The h2
//! crate does the framing, HPACK and flow control; each stream's request
//! goes through the same `respond` as an HTTP/1.1 request, and its answer
//! is re-encoded as HEADERS + DATA.
//!
//! A spike (issue 11): no TLS ALPN, no inetd mode, no CGI (501).

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, SendStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::event_loop::Shared;
use crate::config::Config;
use crate::http::h2 as encode;
use crate::http::limits::MAX_HEAD_BYTES;
use crate::http::response::{Chunk, Status};
use crate::log;
use crate::pool;
use crate::respond::{self, Answer, Response};
use crate::site::Site;

/// What a client speaking HTTP/2 with prior knowledge sends first
/// (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Concurrent streams per connection (issue 11's default).
const MAX_STREAMS: u32 = 128;

/// File bytes are read in blocks of this size into DATA frames.
const FILE_BLOCK: usize = 32 * 1024;

/// Whether a connection that opened with `buf` speaks HTTP/2: None while
/// what arrived is still a prefix of the preface.
pub fn opening(buf: &[u8]) -> Option<bool> {
    if buf.starts_with(PREFACE) {
        Some(true)
    } else if buf.is_empty() || PREFACE.starts_with(buf) {
        None
    } else {
        Some(false)
    }
}

/// A socket whose first bytes were already read: they are read again
/// first, so h2 sees the connection from its start.
pub struct Replay<S> {
    prefix: Vec<u8>,
    at: usize,
    io: S,
}

impl<S> Replay<S> {
    pub fn new(prefix: Vec<u8>, io: S) -> Replay<S> {
        Replay { prefix, at: 0, io }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.prefix.len() {
            let n = buf.remaining().min(this.prefix.len() - this.at);
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            if this.at == this.prefix.len() {
                pool::give(&pool::READS, std::mem::take(&mut this.prefix));
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Serves one HTTP/2 connection until the client ends it, it fails, it
/// has been idle (no stream open) for the keep-alive timeout, or a
/// graceful stop has let its streams finish. The last two send GOAWAY
/// first, and wait for the streams in flight at most the shutdown grace.
pub(crate) async fn serve<S>(io: S, client: String, shared: &Shared)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(MAX_HEAD_BYTES as u32);
    let handshake = builder.handshake::<_, Bytes>(io);
    let Ok(Ok(mut conn)) = tokio::time::timeout(shared.cfg.read_timeout, handshake).await else {
        return;
    };
    let client: Arc<str> = client.into();
    let activity = Arc::new(Activity {
        streams: AtomicUsize::new(0),
        last_end: Mutex::new(Instant::now()),
    });
    let keepalive = shared.cfg.keepalive_timeout;
    let timer = tokio::time::sleep(keepalive);
    tokio::pin!(timer);
    let mut stop = shared.stop.clone();
    // Set once GOAWAY has gone out: the timer is then the grace's.
    let mut closing = false;
    loop {
        let next = tokio::select! {
            next = conn.accept() => next,
            _ = stop.wait_for(|s| *s), if !closing => {
                closing = true;
                conn.graceful_shutdown();
                timer.as_mut().reset((Instant::now() + shared.cfg.shutdown_grace).into());
                continue;
            }
            _ = &mut timer => {
                if closing {
                    return;
                }
                let now = Instant::now();
                match activity.quiet_since() {
                    Some(since) if since + keepalive <= now => {
                        closing = true;
                        conn.graceful_shutdown();
                        timer.as_mut().reset((now + shared.cfg.shutdown_grace).into());
                    }
                    Some(since) => timer.as_mut().reset((since + keepalive).into()),
                    None => timer.as_mut().reset((now + keepalive).into()),
                }
                continue;
            }
        };
        let Some(Ok((request, send))) = next else {
            return;
        };
        let (cfg, site) = (Arc::clone(&shared.cfg), Arc::clone(&shared.site));
        let (open, who) = (Open::new(&activity), Arc::clone(&client));
        tokio::spawn(async move {
            let _open = open;
            stream(request, send, who, cfg, site).await;
        });
    }
}

/// Whether a connection's streams are quiet, for its idle timeout.
struct Activity {
    streams: AtomicUsize,
    last_end: Mutex<Instant>,
}

impl Activity {
    /// Since when no stream has been open; None while one is.
    fn quiet_since(&self) -> Option<Instant> {
        if self.streams.load(Ordering::Acquire) > 0 {
            return None;
        }
        self.last_end.lock().ok().map(|t| *t)
    }
}

/// One open stream, counted in its connection's `Activity` until dropped.
struct Open(Arc<Activity>);

impl Open {
    fn new(activity: &Arc<Activity>) -> Open {
        activity.streams.fetch_add(1, Ordering::AcqRel);
        Open(Arc::clone(activity))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Ok(mut t) = self.0.last_end.lock() {
            *t = Instant::now();
        }
        self.0.streams.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One stream: the request decided as any other, the answer sent as
/// HEADERS and DATA within the peer's flow-control windows.
async fn stream(
    request: http::Request<h2::RecvStream>,
    mut send: SendResponse<Bytes>,
    client: Arc<str>,
    cfg: Arc<Config>,
    site: Arc<Site>,
) {
    // A request body is for CGI only, which is not served over h2 yet:
    // dropping it lets h2 discard the DATA.
    let (parts, _body) = request.into_parts();
    let (response, line) = match encode::request(&parts.method, &parts.uri, &parts.headers) {
        Ok(request) => {
            let response = match respond::respond(&site, &request, false) {
                Answer::Send(response) => response,
                // TODO(issue 11): CGI over h2 (the exchange is HTTP/1.1
                // bytes on a descriptor today).
                Answer::Cgi(job) => respond::cgi_failure(&job, Status::NotImplemented),
            };
            let line = log_line(&cfg, &client, Some(&request), &response);
            (response, line)
        }
        Err(e) => {
            let response = respond::refuse(e);
            let line = log_line(&cfg, &client, None, &response);
            (response, line)
        }
    };
    let Some(head) = encode::response_head(&response.head) else {
        send.send_reset(Reason::INTERNAL_ERROR);
        return;
    };
    let mut logged = Logged {
        line,
        head: head.len as u64,
        sent: 0,
    };
    let tail_len = response.head.len() - head.len;
    let total = tail_len as u64 + response.body.iter().map(Chunk::size).sum::<u64>();
    let mut fields = http::Response::new(());
    *fields.status_mut() = head.status;
    *fields.headers_mut() = head.fields;
    let Ok(mut out) = send.send_response(fields, total == 0) else {
        return;
    };
    if total > 0 {
        let mut body = Body {
            out: &mut out,
            left: total,
            sent: &mut logged.sent,
            timeout: cfg.send_timeout,
        };
        if body.send_all(&response, head.len).await.is_err() {
            out.send_reset(Reason::CANCEL);
        }
    }
}

/// The access-log line of a stream, written when the stream ends however
/// it ends, with the body bytes that went out.
struct Logged {
    line: log::Line,
    /// The length of the HTTP/1.1 head the line's body range counts from.
    head: u64,
    sent: u64,
}

impl Drop for Logged {
    fn drop(&mut self) {
        self.line.emit(self.head + self.sent);
    }
}

fn log_line(
    cfg: &Config,
    client: &str,
    request: Option<&crate::http::parse::Request>,
    response: &Response,
) -> log::Line {
    let entry = log::Entry {
        client,
        request,
        status: response.status.code(),
        body: response.body_range(),
    };
    log::format(cfg.log_format, &entry, std::time::SystemTime::now())
}

/// A response body on its way out as DATA frames.
struct Body<'a> {
    out: &'a mut SendStream<Bytes>,
    /// Bytes still to send; the frame that sends the last ends the stream.
    left: u64,
    sent: &'a mut u64,
    timeout: Duration,
}

impl Body<'_> {
    /// The body's start that rode in the head, then its chunks.
    async fn send_all(&mut self, response: &Response, head_len: usize) -> io::Result<()> {
        let tail = &response.head[head_len..];
        if !tail.is_empty() {
            self.data(Bytes::copy_from_slice(tail)).await?;
        }
        for chunk in &response.body {
            match chunk {
                Chunk::Bytes(bytes) => self.data(Bytes::copy_from_slice(bytes)).await?,
                Chunk::Shared { bytes, offset, len } => {
                    let part = &bytes[*offset..*offset + *len];
                    self.data(Bytes::copy_from_slice(part)).await?;
                }
                Chunk::File { file, offset, len } => {
                    use std::os::unix::fs::FileExt;
                    let (mut at, end) = (*offset, *offset + *len);
                    while at < end {
                        let want = (end - at).min(FILE_BLOCK as u64) as usize;
                        // TODO(issue 11): blocks from the per-thread free list.
                        let mut block = vec![0; want];
                        let n = file.read_at(&mut block, at)?;
                        if n == 0 {
                            // The file shrank under us: the stream cannot
                            // be completed honestly.
                            return Err(io::ErrorKind::UnexpectedEof.into());
                        }
                        block.truncate(n);
                        at += n as u64;
                        self.data(Bytes::from(block)).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Sends `bytes` as the stream and connection windows allow, waiting
    /// at most the send timeout each time the windows are shut.
    async fn data(&mut self, mut bytes: Bytes) -> io::Result<()> {
        self.left -= bytes.len() as u64;
        while !bytes.is_empty() {
            self.out.reserve_capacity(bytes.len());
            let capacity = poll_fn(|cx| self.out.poll_capacity(cx));
            let granted = match tokio::time::timeout(self.timeout, capacity).await {
                Ok(Some(Ok(n))) => n,
                Ok(_) => return Err(io::ErrorKind::BrokenPipe.into()),
                Err(_) => return Err(io::ErrorKind::TimedOut.into()),
            };
            if granted == 0 {
                continue;
            }
            let piece = bytes.split_to(granted.min(bytes.len()));
            let n = piece.len() as u64;
            let end = self.left == 0 && bytes.is_empty();
            self.out.send_data(piece, end).map_err(io::Error::other)?;
            *self.sent += n;
        }
        Ok(())
    }
}
