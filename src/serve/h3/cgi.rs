//! CGI over HTTP/3: a stream's script runs the same CGI exchange every
//! connection does (`crate::exchange`), driven in the stream's own task:
//! the request body from the stream to the script's input, its output out
//! as DATA frames, each step sent before more output is read (so a slow
//! client holds the script back, not memory). Nothing about CGI
//! (environment, statuses, local redirects, limits, timeouts, the log
//! line) is decided a second time for HTTP/3.

use std::io;
use std::net::SocketAddr;
use std::process::{ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use h3::error::Code;
use tokio::net::unix::pipe;

use super::send::{self, Stream};
use super::Served;
use crate::exchange::{Context, Exchange, Step};
use crate::http::parse::BodyFraming;
use crate::pace::Pace;
use crate::respond::CgiJob;
use crate::serve::script_pipes;
use crate::session::{self, Kind, Protocol, Sent};

/// How much script output is read per call.
const CHUNK: usize = 16 << 10;

/// Runs `job`'s exchange on `stream`; `early`: body bytes that came with
/// the head.
pub(super) async fn run(
    served: &Served,
    client: &str,
    sockets: (Option<SocketAddr>, Option<SocketAddr>),
    job: Box<CgiJob>,
    mut stream: Stream,
    early: Vec<u8>,
) {
    let shared = &served.shared;
    let ctx = Context {
        cfg: &shared.cfg,
        site: &shared.site,
        client,
        sockets,
        kind: Kind::Https,
        protocol: Protocol::Fields,
    };
    // RFC 9114 §4.1.2: a body longer or shorter than its Content-Length
    // makes the request malformed (nghttp2 checks this for HTTP/2).
    let length = match job.request.framing {
        BodyFraming::Length(n) => Some(n),
        _ => None,
    };
    let mut exchange = Exchange::start(job, &ctx);
    let mut script = Script {
        received: 0,
        length,
        stdin: None,
        stdout: None,
        pending: early,
        body_done: false,
        out: vec![0; CHUNK],
        head: None,
        pace: Pace::new(Instant::now(), shared.cfg.send_timeout, 0),
        send_timeout: shared.cfg.send_timeout,
        hsts: session::hsts(&shared.cfg, Kind::Https),
    };
    if script.overruns(script.pending.len()) {
        // The body that came with the head is already too long.
        stream.stop_stream(Code::H3_MESSAGE_ERROR);
        exchange.client_gone(&ctx);
    } else {
        script.drive(&mut exchange, &ctx, &mut stream).await;
    }
    // What is left of the script is killed and reaped, which may wait a
    // little: not on the runtime's thread.
    tokio::task::spawn_blocking(move || drop(exchange));
}

/// One stream's script and what is on its way.
struct Script {
    /// Request body bytes received so far, and what Content-Length said.
    received: u64,
    length: Option<u64>,
    stdin: Option<pipe::Sender>,
    stdout: Option<pipe::Receiver>,
    /// Request body bytes received but not yet taken by the script.
    pending: Vec<u8>,
    /// The request body is complete (or no longer wanted).
    body_done: bool,
    /// The script's output is read into this.
    out: Vec<u8>,
    /// The script's response, once its head went out: its body bytes are
    /// counted into it, and its drop writes the log line.
    head: Option<Box<Sent>>,
    /// A script's output comes as it writes it: no rate, only the timeout
    /// without progress.
    pace: Pace,
    send_timeout: Duration,
    hsts: Option<u64>,
}

impl Script {
    async fn drive(&mut self, exchange: &mut Exchange, ctx: &Context<'_>, stream: &mut Stream) {
        loop {
            let gone = match exchange.step() {
                Step::Wait => self.wait(exchange, ctx, stream).await.is_err(),
                Step::Run { stdin, stdout } => self.attach(stdin, stdout).is_err(),
                // Only ever before a head: `Done` follows.
                Step::Send(sent) => {
                    send::send(ctx.cfg, ctx.client, stream, *sent).await;
                    return;
                }
                Step::Head(sent) => self.head(sent, stream).await.is_err(),
                Step::Body { bytes, payload } => {
                    let len = payload.end - payload.start;
                    self.body(Bytes::from(bytes), len, stream).await.is_err()
                }
                Step::Done { complete, .. } => {
                    if complete {
                        let _ = stream.finish().await;
                    } else {
                        // The client must not take a cut body for whole.
                        stream.stop_stream(Code::H3_INTERNAL_ERROR);
                    }
                    return;
                }
            };
            if gone {
                exchange.client_gone(ctx);
            }
        }
    }

    async fn head(&mut self, sent: Box<Sent>, stream: &mut Stream) -> Result<(), ()> {
        let head = send::response_head(&sent, self.hsts).ok_or(())?;
        self.head = Some(sent);
        self.pace = Pace::new(Instant::now(), self.send_timeout, 0);
        stream.send_response(head).await.map_err(|_| ())
    }

    async fn body(&mut self, bytes: Bytes, payload: u64, stream: &mut Stream) -> Result<(), ()> {
        let Some(sent) = self.head.as_deref_mut() else {
            return Err(());
        };
        let before = sent.written;
        send::send_data(stream, bytes, sent, &mut self.pace)
            .await
            .map_err(|_| ())?;
        // Only the script's own bytes count as body.
        sent.written = before + payload;
        Ok(())
    }

    /// Counts `n` more body bytes: whether the body is now longer than
    /// its Content-Length.
    fn overruns(&mut self, n: usize) -> bool {
        self.received += n as u64;
        self.length.is_some_and(|length| self.received > length)
    }

    /// Takes a script's pipes (a local redirect's script replaces the
    /// last's).
    fn attach(&mut self, stdin: Option<ChildStdin>, stdout: ChildStdout) -> io::Result<()> {
        let (stdin, stdout) = script_pipes::attach(stdin, stdout)?;
        self.stdin = stdin;
        self.stdout = Some(stdout);
        Ok(())
    }

    /// Waits for the script's output, the request body or the script's
    /// room for it, or the deadline, and hands what came to the exchange.
    /// Err: the stream is gone.
    async fn wait(
        &mut self,
        exchange: &mut Exchange,
        ctx: &Context<'_>,
        stream: &mut Stream,
    ) -> Result<(), ()> {
        let Some(deadline) = exchange.deadline() else {
            exchange.client_gone(ctx);
            return Ok(());
        };
        let feeding = self.stdin.is_some();
        let receiving = !self.body_done && self.pending.is_empty();
        let reading = self.stdout.is_some();
        tokio::select! {
            n = script_pipes::read(&mut self.stdout, &mut self.out), if reading => {
                let n = n.unwrap_or(0);
                if n == 0 {
                    self.stdout = None;
                    self.stdin = None;
                }
                exchange.output(&self.out[..n], n == 0, ctx);
            }
            data = stream.recv_data(), if receiving => match data {
                Ok(Some(data)) if self.overruns(data.remaining()) => {
                    stream.stop_stream(Code::H3_MESSAGE_ERROR);
                    return Err(());
                }
                Ok(Some(mut data)) if feeding => {
                    self.pending.resize(data.remaining(), 0);
                    data.copy_to_slice(&mut self.pending);
                }
                // No script input (any more): the bytes go nowhere.
                Ok(Some(_)) => {}
                Ok(None) if self.length.is_some_and(|n| self.received < n) => {
                    stream.stop_stream(Code::H3_MESSAGE_ERROR);
                    return Err(());
                }
                Ok(None) => {
                    // The body is complete: the script sees its end.
                    self.body_done = true;
                    self.stdin = None;
                }
                Err(_) => return Err(()),
            },
            written = script_pipes::write(&mut self.stdin, &self.pending), if feeding && !self.pending.is_empty() => {
                match written {
                    Ok(n) => {
                        self.pending.drain(..n);
                    }
                    // The script closed its input early: it wants no more.
                    Err(_) => {
                        self.pending.clear();
                        self.stdin = None;
                    }
                }
            }
            () = tokio::time::sleep_until(deadline.into()) => exchange.timed_out(ctx),
        }
        Ok(())
    }
}
