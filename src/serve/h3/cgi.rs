//! CGI over HTTP/3: a stream's script runs through the one CGI driver
//! ([`serve::cgi`](crate::serve::cgi)) in the stream's own task, whose
//! [`Client`] is the stream: the request body from it, the script's output
//! out as DATA frames, each sent before more output is read (so a slow
//! client holds the script back, not memory). Nothing about CGI
//! (environment, statuses, local redirects, limits, timeouts, the log line)
//! is decided a second time for HTTP/3.

use std::time::Instant;

use bytes::{Buf, Bytes};
use h3::error::Code;

use super::send::{self, Stream};
use super::Served;
use crate::config::Config;
use crate::exchange::Context;
use crate::h3session::{BodyLength, Malformed};
use crate::origin::Origin;
use crate::pace::Pace;
use crate::pipeline::{self, Sent};
use crate::respond::CgiJob;
use crate::serve::cgi::{self, Client, Gone};

/// Runs `job`'s exchange on `stream`; `early`: body bytes that came with
/// the head.
pub(super) async fn run(
    served: &Served,
    origin: &Origin,
    job: Box<CgiJob>,
    stream: Stream,
    early: Vec<u8>,
) {
    let cfg = &served.shared.cfg;
    let ctx = Context {
        cfg,
        site: &served.shared.site,
        origin,
    };
    let length = BodyLength::of(&job.request);
    let mut client = StreamClient {
        stream,
        cfg,
        client: &origin.client,
        length,
        early: Some(early).filter(|early| !early.is_empty()),
        head: None,
        pace: Pace::new(Instant::now(), cfg.send_timeout, 0),
        hsts: pipeline::hsts(cfg, origin.kind),
    };
    let (_, exchange) = cgi::run(job, &ctx, &mut client, std::future::pending()).await;
    // What is left of the script is killed and reaped, which may wait a
    // little: not on the runtime's thread.
    tokio::task::spawn_blocking(move || drop(exchange));
}

/// One request stream, as the client of its exchange.
struct StreamClient<'a> {
    stream: Stream,
    cfg: &'a Config,
    client: &'a str,
    /// The request body against its Content-Length.
    length: BodyLength,
    /// Body bytes that came with the head, not yet handed out.
    early: Option<Vec<u8>>,
    /// The script's response, once its head went out: its body bytes are
    /// counted into it, and its drop writes the log line.
    head: Option<Box<Sent>>,
    /// A script's output comes as it writes it: no rate, only the timeout
    /// without progress.
    pace: Pace,
    hsts: Option<u64>,
}

impl StreamClient<'_> {
    /// A body that does not match its Content-Length: the stream is
    /// refused.
    fn malformed(&mut self, measured: Result<(), Malformed>) -> Result<(), Gone> {
        measured.map_err(|Malformed| {
            self.stream.stop_stream(Code::H3_MESSAGE_ERROR);
            Gone
        })
    }
}

impl Client for StreamClient<'_> {
    async fn body(&mut self) -> Result<Option<Vec<u8>>, Gone> {
        if let Some(early) = self.early.take() {
            let measured = self.length.more(early.len());
            self.malformed(measured)?;
            return Ok(Some(early));
        }
        match self.stream.recv_data().await {
            Ok(Some(mut data)) => {
                let measured = self.length.more(data.remaining());
                self.malformed(measured)?;
                let mut bytes = vec![0; data.remaining()];
                data.copy_to_slice(&mut bytes);
                Ok(Some(bytes))
            }
            Ok(None) => {
                let measured = self.length.ended();
                self.malformed(measured).map(|()| None)
            }
            Err(_) => Err(Gone),
        }
    }

    fn took(&mut self, _n: usize) {
        // QUIC's flow control gives credit as the stream is read.
    }

    async fn whole(&mut self, sent: Box<Sent>) -> Result<(), Gone> {
        send::send(self.cfg, self.client, &mut self.stream, *sent).await;
        Ok(())
    }

    async fn head(&mut self, sent: Box<Sent>, _body: bool) -> Result<(), Gone> {
        let head = send::response_head(&sent, self.hsts).ok_or(Gone)?;
        self.head = Some(sent);
        self.pace = Pace::new(Instant::now(), self.cfg.send_timeout, 0);
        self.stream.send_response(head).await.map_err(|_| Gone)
    }

    async fn data(&mut self, bytes: Vec<u8>) -> Result<(), Gone> {
        let Some(sent) = self.head.as_deref_mut() else {
            return Err(Gone);
        };
        send::send_data(&mut self.stream, Bytes::from(bytes), sent, &mut self.pace)
            .await
            .map_err(|_| Gone)
    }

    async fn end(&mut self, complete: bool) -> Result<(), Gone> {
        if complete {
            let _ = self.stream.finish().await;
        } else {
            // The client must not take a cut body for whole.
            self.stream.stop_stream(Code::H3_INTERNAL_ERROR);
        }
        // Its log line.
        self.head = None;
        Ok(())
    }
}
