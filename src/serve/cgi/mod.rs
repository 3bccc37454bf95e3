//! The one CGI driver: a script's exchange ([`crate::exchange`]) driven
//! over any protocol. The request body comes from a `Client`, goes to the
//! script's stdin; the script's stdout goes to the exchange; what the
//! exchange decides goes back to the `Client`. HTTP/1.1 ([`http1`]),
//! HTTP/2 (`serve::h2::cgi`) and HTTP/3 (`serve::h3::cgi`) each implement
//! `Client`: this module never knows which protocol carries the stream, as
//! the exchange never knows what moves its bytes.
//!
//! Every wait, on the script or on the client, is bounded by the script's
//! deadline (`--cgi-timeout`): a script held back by a client that does not
//! read is still running, and is killed at it like any other.

pub mod http1;
pub(crate) mod pipes;
#[cfg(any(feature = "http2", feature = "http3"))]
pub(crate) mod streams;

use std::future::Future;
use std::io;
use std::process::{ChildStdin, ChildStdout};

use tokio::net::unix::pipe;

use crate::exchange::{Context, Exchange, Step};
use crate::pipeline::Sent;
use crate::respond::CgiJob;

/// How much script output is read per call.
const CHUNK: usize = 16 << 10;

/// The client went away, stopped taking the response, or sent what the
/// protocol refuses: the exchange ends.
#[derive(Debug)]
pub(crate) struct Gone;

/// The client's end of one CGI exchange: where the request body comes from
/// and where the response goes, encoded for its protocol (a response sink
/// and a body source). The driver calls one method at a time, and only
/// `body` is raced (against the script and the deadline): it must lose
/// nothing when dropped before it is ready.
pub(crate) trait Client {
    /// The next piece of the request body; None once it is whole.
    fn body(&mut self) -> impl Future<Output = Result<Option<Vec<u8>>, Gone>>;
    /// The script took `n` bytes of the body, or they were dropped (the
    /// script wants no more): the client may send that much more.
    fn took(&mut self, n: usize);
    /// Sends a whole response of ours (a failure's, a local redirect's),
    /// ending the stream; dropping it writes its log line. Nothing follows.
    fn whole(&mut self, sent: Box<Sent>) -> impl Future<Output = Result<(), Gone>>;
    /// Sends the script's response head; `body`: body bytes follow. The
    /// client keeps `sent`, counts into it the script's body bytes it
    /// writes, and drops it (the log line) at `end`.
    fn head(&mut self, sent: Box<Sent>, body: bool) -> impl Future<Output = Result<(), Gone>>;
    /// Sends script body bytes, returning once the client can take more
    /// (the back-pressure that holds the script back).
    fn data(&mut self, bytes: Vec<u8>) -> impl Future<Output = Result<(), Gone>>;
    /// The body after `head` is over: `complete`, or cut (the client must
    /// see the cut: no last chunk, a reset stream). Also called when the
    /// exchange ends with nothing sent (the client went), cut.
    fn end(&mut self, complete: bool) -> impl Future<Output = Result<(), Gone>>;
}

/// Runs `job` for `client` until its response is over; `stop` ends it at
/// once when ready (inetd mode's SIGTERM). Returns whether the connection
/// can carry another request, and the exchange: dropping it kills and
/// reaps what is left of the script, which may wait a little, so the
/// caller chooses where.
pub(crate) async fn run(
    job: Box<CgiJob>,
    ctx: &Context<'_>,
    client: &mut impl Client,
    stop: impl Future<Output = ()>,
) -> (bool, Exchange) {
    let mut exchange = Exchange::start(job, ctx);
    let mut driver = Driver {
        exchange: &mut exchange,
        ctx,
        script: Script::default(),
    };
    let keep_alive = driver.drive(client, stop).await;
    (keep_alive, exchange)
}

struct Driver<'a, 'c> {
    exchange: &'a mut Exchange,
    ctx: &'a Context<'c>,
    script: Script,
}

/// The script's end: its pipes, and the body on its way to it.
#[derive(Default)]
struct Script {
    stdin: Option<pipe::Sender>,
    stdout: Option<pipe::Receiver>,
    /// Request body bytes received but not yet taken by the script.
    pending: Vec<u8>,
    /// The request body is complete (or the client is gone).
    body_done: bool,
    /// The script's output is read into this.
    out: Vec<u8>,
}

impl Driver<'_, '_> {
    async fn drive(&mut self, client: &mut impl Client, stop: impl Future<Output = ()>) -> bool {
        tokio::pin!(stop);
        // Whether everything sent so far reached the client.
        let mut delivered = true;
        // A whole response ended the stream: nothing is left to end.
        let mut whole = false;
        loop {
            let sent = match self.exchange.step() {
                Step::Wait => {
                    self.wait(client, stop.as_mut()).await;
                    Ok(())
                }
                Step::Run { stdin, stdout } => {
                    if self.script.attach(stdin, stdout).is_err() {
                        self.exchange.client_gone(self.ctx);
                    }
                    Ok(())
                }
                Step::Send(sent) => {
                    whole = true;
                    self.bounded(client.whole(sent)).await
                }
                Step::Head { sent, body } => self.bounded(client.head(sent, body)).await,
                Step::Body(bytes) => self.bounded(client.data(bytes)).await,
                Step::Done {
                    complete,
                    keep_alive,
                } => {
                    if !whole {
                        delivered &= client.end(complete).await.is_ok();
                    }
                    return keep_alive && delivered;
                }
            };
            if sent.is_err() {
                delivered = false;
                self.exchange.client_gone(self.ctx);
            }
        }
    }

    /// Runs a send to the client until the script's deadline, which then
    /// passes (the script is killed, the response cut).
    async fn bounded(&mut self, send: impl Future<Output = Result<(), Gone>>) -> Result<(), Gone> {
        let Some(deadline) = self.exchange.deadline() else {
            return send.await;
        };
        match tokio::time::timeout_at(deadline.into(), send).await {
            Ok(sent) => sent,
            Err(_) => {
                self.exchange.timed_out(self.ctx);
                // What the client has is cut: it cannot carry on.
                Err(Gone)
            }
        }
    }

    /// Waits for the script's output, the request body or the script's
    /// room for it, the deadline or the stop, and hands what came to the
    /// exchange.
    async fn wait(
        &mut self,
        client: &mut impl Client,
        stop: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) {
        let (exchange, ctx, script) = (&mut *self.exchange, self.ctx, &mut self.script);
        let Some(deadline) = exchange.deadline() else {
            // No script and no step: nothing will come. Not reached while
            // the exchange works as it should; ending is the safe answer.
            return exchange.client_gone(ctx);
        };
        let feeding = script.stdin.is_some() && !script.pending.is_empty();
        let receiving = !script.body_done && script.pending.is_empty();
        let reading = script.stdout.is_some();
        if script.out.is_empty() {
            script.out.resize(CHUNK, 0);
        }
        tokio::select! {
            n = pipes::read(&mut script.stdout, &mut script.out), if reading => {
                let n = n.unwrap_or(0);
                if n == 0 {
                    script.stdout = None;
                    script.stdin = None;
                }
                exchange.output(&script.out[..n], n == 0, ctx);
            }
            body = client.body(), if receiving => match body {
                Ok(Some(bytes)) => {
                    exchange.take_body(bytes.len());
                    if script.stdin.is_some() {
                        script.pending = bytes;
                    } else {
                        // No script input (yet, or any more): the bytes go
                        // nowhere, and the client's window comes back.
                        client.took(bytes.len());
                    }
                }
                Ok(None) => {
                    // The body is complete: the script sees its end.
                    script.body_done = true;
                    script.stdin = None;
                }
                Err(Gone) => {
                    script.body_done = true;
                    exchange.client_gone(ctx);
                }
            },
            written = pipes::write(&mut script.stdin, &script.pending), if feeding => {
                let n = match written {
                    Ok(n) => n,
                    // The script closed its input early: it wants no more.
                    Err(_) => {
                        script.stdin = None;
                        script.pending.len()
                    }
                };
                script.pending.drain(..n);
                client.took(n);
            }
            () = tokio::time::sleep_until(deadline.into()) => exchange.timed_out(ctx),
            () = stop => exchange.client_gone(ctx),
        }
    }
}

impl Script {
    /// Takes a script's pipes (a local redirect's script replaces the
    /// last's).
    fn attach(&mut self, stdin: Option<ChildStdin>, stdout: ChildStdout) -> io::Result<()> {
        let (stdin, stdout) = pipes::attach(stdin, stdout)?;
        // A body already whole (or none) leaves the script's input closed.
        self.stdin = stdin.filter(|_| !self.body_done);
        self.stdout = Some(stdout);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
