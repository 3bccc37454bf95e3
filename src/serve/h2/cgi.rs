//! CGI over HTTP/2: the stream drives the same CGI exchange every
//! connection does (`crate::exchange`), with the request body from its
//! DATA frames and the script's pipes on the runtime. What the exchange
//! decides goes out as HEADERS and DATA: its heads are encoded as h2 fields
//! like any other response's, so nothing about CGI (environment, statuses,
//! local redirects, limits, timeouts, the log line, HSTS) is decided a
//! second time for HTTP/2.

use std::io;
use std::process::{ChildStdin, ChildStdout};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use super::send::Body;
use super::{Open, Served};
use crate::exchange::{Context, Exchange, Step};
use crate::http::h2 as fields;
use crate::log;
use crate::pace::Pace;
use crate::respond::CgiJob;
use crate::session::{self, Protocol, Sent};

/// How much script output is read per call.
const CHUNK: usize = 16 << 10;

/// Runs `job` for one stream and sends its answer.
pub(super) async fn run(
    job: Box<CgiJob>,
    body: RecvStream,
    respond: SendResponse<Bytes>,
    served: Arc<Served>,
    mut open: Open,
) {
    let ctx = Context {
        cfg: &served.cfg,
        site: &served.site,
        client: &served.client,
        sockets: served.sockets,
        kind: served.kind,
        protocol: Protocol::Http2,
    };
    let mut stream = Stream {
        respond: Some(respond),
        out: None,
        sending: None,
        request_body: Some(body),
        stdin: None,
        stdout: None,
        pending: Bytes::new(),
    };
    let mut exchange = Exchange::start(job, &ctx);
    let result = stream.drive(&mut exchange, &ctx).await;
    // What is left of the script is killed and reaped, which may wait a
    // little: not on the runtime's thread.
    tokio::task::spawn_blocking(move || drop(exchange));
    match result {
        Ok(Ended::Whole(sent)) => {
            // One of ours (a failure's, a local redirect's): sent as any
            // other response is.
            if let Some(respond) = stream.respond.take() {
                super::send::send(*sent, respond, &served, open);
            }
            return;
        }
        Ok(Ended::Relayed) => {}
        Err(e) => {
            if let Some(out) = &mut stream.out {
                // Cut short: reset, so the client cannot take it for whole.
                out.out.send_reset(Reason::CANCEL);
            }
            match e.kind() {
                io::ErrorKind::ConnectionReset => open.was_reset(),
                io::ErrorKind::TimedOut => open.stalled(),
                _ => {}
            }
        }
    }
    // Dropping the response writes its log line.
    drop(stream.sending.take());
}

/// How the stream's part ended.
enum Ended {
    /// The script's response went out (or as much of it as there was).
    Relayed,
    /// A whole response of ours is to go out instead.
    Whole(Box<Sent>),
}

/// One stream's side of the exchange.
struct Stream {
    /// Until a head went out.
    respond: Option<SendResponse<Bytes>>,
    /// The script's body on its way, once its head went out.
    out: Option<Body>,
    /// The response going out, whose log line waits for its body.
    sending: Option<Box<Sent>>,
    /// The client's DATA, until it ends or the script stops taking it.
    request_body: Option<RecvStream>,
    stdin: Option<pipe::Sender>,
    stdout: Option<pipe::Receiver>,
    /// Request body bytes received but not yet taken by the script.
    pending: Bytes,
}

impl Stream {
    async fn drive(&mut self, exchange: &mut Exchange, ctx: &Context<'_>) -> io::Result<Ended> {
        loop {
            match exchange.step() {
                Step::Wait => self.wait(exchange, ctx).await,
                Step::Run { stdin, stdout } => self.attach(stdin, stdout)?,
                // Only ever before a head: `Done` follows.
                Step::Send(sent) => return Ok(Ended::Whole(sent)),
                Step::Head(sent) => {
                    if let Err(e) = self.head(sent, ctx) {
                        exchange.client_gone(ctx);
                        return Err(e);
                    }
                }
                Step::Body { bytes, payload } => {
                    let Some(out) = &mut self.out else { continue };
                    let before = out.pushed;
                    let result = out.data(Bytes::from(bytes)).await;
                    let pushed = out.pushed - before;
                    if let Some(sent) = &mut self.sending {
                        sent.written += log::body_sent(&payload, pushed);
                    }
                    if let Err(e) = result {
                        exchange.client_gone(ctx);
                        return Err(e);
                    }
                }
                Step::Done { complete, .. } => {
                    // HTTP/2 ends a body with the stream, never a trailer;
                    // a cut one with a reset.
                    match &mut self.out {
                        Some(out) if complete => out.finish()?,
                        Some(out) => out.out.send_reset(Reason::CANCEL),
                        None => {}
                    }
                    return Ok(Ended::Relayed);
                }
            }
        }
    }

    /// Takes a script's pipes (a local redirect's script replaces the
    /// last's).
    fn attach(&mut self, stdin: Option<ChildStdin>, stdout: ChildStdout) -> io::Result<()> {
        self.stdin = match stdin {
            Some(stdin) => Some(pipe::Sender::from_owned_fd(stdin.into())?),
            None => None,
        };
        self.stdout = Some(pipe::Receiver::from_owned_fd(stdout.into())?);
        Ok(())
    }

    /// The script's head as HEADERS; its body follows as DATA.
    fn head(&mut self, sent: Box<Sent>, ctx: &Context) -> io::Result<()> {
        let respond = self.respond.as_mut().ok_or(io::ErrorKind::InvalidInput)?;
        let hsts = session::hsts(ctx.cfg, ctx.kind);
        let Some((status, fields)) = fields::response_fields(&sent.response.head, hsts) else {
            // A status HTTP/2 cannot carry (a script's over 999).
            respond.send_reset(Reason::INTERNAL_ERROR);
            return Err(io::ErrorKind::InvalidData.into());
        };
        let mut message = http::Response::new(());
        *message.status_mut() = status;
        *message.headers_mut() = fields;
        let out = respond
            .send_response(message, false)
            .map_err(|e| super::send::stream_error(&e))?;
        // A script's output comes as it writes it: no rate, only the
        // timeout without progress.
        self.out = Some(Body {
            out,
            pace: Pace::new(Instant::now(), ctx.cfg.send_timeout, 0),
            left: u64::MAX,
            pushed: 0,
        });
        self.sending = Some(sent);
        Ok(())
    }

    /// Waits for the script's output, the request body or the script's
    /// room for it, or the deadline, and hands what came to the exchange.
    async fn wait(&mut self, exchange: &mut Exchange, ctx: &Context<'_>) {
        let Some(deadline) = exchange.deadline() else {
            return exchange.client_gone(ctx);
        };
        let mut buf = vec![0u8; CHUNK];
        let feeding = self.stdin.is_some();
        let receiving = feeding && self.pending.is_empty() && self.request_body.is_some();
        tokio::select! {
            read = read(&mut self.stdout, &mut buf) => {
                let n = read.unwrap_or(0);
                if n == 0 {
                    self.stdout = None;
                    self.stdin = None;
                }
                exchange.output(&buf[..n], n == 0, ctx);
            }
            data = next_data(&mut self.request_body), if receiving => match data {
                Some(data) => self.pending = data,
                None => {
                    // The body is complete: the script sees its end.
                    self.request_body = None;
                    self.stdin = None;
                }
            },
            written = write(&mut self.stdin, &self.pending), if feeding && !self.pending.is_empty() => {
                match written {
                    Ok(n) => {
                        let _ = self.pending.split_to(n);
                    }
                    // The script closed its input early: it wants no more.
                    Err(_) => {
                        self.stdin = None;
                        self.request_body = None;
                    }
                }
            }
            () = tokio::time::sleep_until(deadline.into()) => exchange.timed_out(ctx),
        }
    }
}

/// Reads the script's output; never ready without one.
async fn read(stdout: &mut Option<pipe::Receiver>, buf: &mut [u8]) -> io::Result<usize> {
    match stdout {
        Some(stdout) => stdout.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Writes to the script's input; never ready without one.
async fn write(stdin: &mut Option<pipe::Sender>, bytes: &[u8]) -> io::Result<usize> {
    match stdin {
        Some(stdin) => stdin.write(bytes).await,
        None => std::future::pending().await,
    }
}

/// The next DATA of the request body, its flow-control window given back;
/// None at its end (or when the client reset the stream).
async fn next_data(body: &mut Option<RecvStream>) -> Option<Bytes> {
    let body = body.as_mut()?;
    match body.data().await {
        Some(Ok(data)) => {
            let _ = body.flow_control().release_capacity(data.len());
            Some(data)
        }
        _ => None,
    }
}
