//! CGI over HTTP/2. The script runs through the one CGI exchange every
//! connection uses (`cgi_exchange::run`, blocking code, on tokio's blocking
//! pool), which here talks HTTP/1.1 to the stream's task over a socket
//! pair: the request body goes in as HTTP/1.1 body bytes, and the answer
//! comes back as an HTTP/1.1 response whose head becomes HEADERS and the
//! rest DATA. So nothing about CGI (environment, local redirects, limits,
//! timeouts, the log line) is decided a second time for HTTP/2.

use std::cell::RefCell;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::stream::Body;
use super::{Open, Served};
use crate::http::h2 as fields;
use crate::http::limits::MAX_HEAD_BYTES;
use crate::http::parse::BodyFraming;
use crate::pace::Pace;
use crate::respond::CgiJob;
use crate::serve::cgi_exchange::{self, ClientIo};
use crate::serve::Wire;

/// Runs `job` for one stream and relays its answer.
pub(super) async fn run(
    mut job: Box<CgiJob>,
    body: RecvStream,
    mut respond: SendResponse<Bytes>,
    served: Arc<Served>,
    mut open: Open,
) {
    // The exchange then ends its answer by closing its end of the pair,
    // which is how the relay knows the body is complete.
    job.request.keep_alive = false;
    let framing = job.request.framing;
    let Ok((ours, theirs)) = pair() else {
        respond.send_reset(Reason::INTERNAL_ERROR);
        return;
    };
    let (cfg, site, client) = (
        Arc::clone(&served.cfg),
        Arc::clone(&served.site),
        served.client.to_string(),
    );
    let timeout = cfg.send_timeout;
    let exchange = tokio::task::spawn_blocking(move || {
        let wire = RefCell::new(Wire::Clear);
        let io = ClientIo {
            input: theirs.as_fd(),
            output: theirs.as_fd(),
            socket: true,
            wire: &wire,
        };
        cgi_exchange::run(job, io, &mut Vec::new(), &cfg, &site, &client);
    });
    let (from, to) = ours.into_split();
    let relayed = tokio::join!(feed(body, to, framing), relay(from, respond, timeout)).1;
    match relayed.map_err(|e| e.kind()) {
        Err(io::ErrorKind::ConnectionReset) => open.was_reset(),
        Err(io::ErrorKind::TimedOut) => open.stalled(),
        _ => {}
    }
    let _ = exchange.await;
}

/// A connected pair of non-blocking Unix sockets: ours on the runtime,
/// theirs for the blocking exchange (which waits with poll(2)).
fn pair() -> io::Result<(tokio::net::UnixStream, std::os::unix::net::UnixStream)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    theirs.set_nonblocking(true)?;
    Ok((tokio::net::UnixStream::from_std(ours)?, theirs))
}

/// Writes the stream's request body to the exchange, framed as the
/// request says (chunked when its length was not announced).
async fn feed(mut body: RecvStream, mut to: OwnedWriteHalf, framing: BodyFraming) {
    let chunked = framing == BodyFraming::Chunked;
    while let Some(Ok(data)) = body.data().await {
        let _ = body.flow_control().release_capacity(data.len());
        let written = if chunked {
            let size = format!("{:x}\r\n", data.len());
            let mut framed = Vec::with_capacity(size.len() + data.len() + 2);
            framed.extend_from_slice(size.as_bytes());
            framed.extend_from_slice(&data);
            framed.extend_from_slice(b"\r\n");
            to.write_all(&framed).await
        } else {
            to.write_all(&data).await
        };
        if written.is_err() {
            // The exchange has stopped reading: the script is done with it.
            return;
        }
    }
    if chunked {
        let _ = to.write_all(b"0\r\n\r\n").await;
    }
}

/// Reads the exchange's HTTP/1.1 answer and sends it on the stream.
async fn relay(
    mut from: OwnedReadHalf,
    mut respond: SendResponse<Bytes>,
    timeout: std::time::Duration,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let (head, bytes) = loop {
        let bytes = Bytes::from(std::mem::take(&mut buf));
        if let Some(head) = fields::response_head(&bytes) {
            break (head, bytes);
        }
        buf = bytes.into();
        if buf.len() > MAX_HEAD_BYTES || from.read_buf(&mut buf).await? == 0 {
            respond.send_reset(Reason::INTERNAL_ERROR);
            return Err(io::ErrorKind::InvalidData.into());
        }
    };
    let mut message = http::Response::new(());
    *message.status_mut() = head.status;
    *message.headers_mut() = head.fields;
    let out = respond
        .send_response(message, false)
        .map_err(|e| super::stream::stream_error(&e))?;
    // A script's output comes as it writes it: no rate, only the timeout
    // without progress.
    let mut body = Body {
        out,
        pace: Pace::new(Instant::now(), timeout, 0),
        left: u64::MAX,
        pushed: 0,
    };
    let start = bytes.slice(head.len..);
    if !start.is_empty() {
        body.data(start).await?;
    }
    loop {
        if !buf.is_empty() {
            body.data(Bytes::from(std::mem::take(&mut buf))).await?;
        }
        buf.reserve(16 << 10);
        if from.read_buf(&mut buf).await? == 0 {
            return body.finish();
        }
    }
}
