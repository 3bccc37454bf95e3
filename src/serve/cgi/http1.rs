//! CGI over HTTP/1.1: the `Client` of a connection's one exchange at a
//! time, and where it runs. The request body is read from the connection
//! up to its Content-Length (what follows is the next request); the
//! response is written as the session writes any other, and a script's
//! body without a length goes in chunks, framed here.
//!
//! The exchange runs on a current-thread runtime made for it, on the thread
//! that runs it: inetd mode's own (HTTP/1.1 in inetd mode has no runtime
//! otherwise), or one of tokio's blocking pool for the event loop and
//! io_uring, on a duplicate of the connection's descriptor. That thread is
//! not a worker's: the worker goes on with its other connections, and the
//! end of a stop's grace, which drops the worker's tasks, does not drop the
//! exchange before its log line.

use std::future::poll_fn;
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Instant;

use tokio::io::Interest;

use super::{Client, Gone};
use crate::config::Config;
use crate::exchange::Context;
use crate::http::parse::BodyFraming;
use crate::http::response::{self as h1, Http1};
use crate::log;
use crate::origin::Origin;
use crate::pace::Pace;
use crate::pipeline::Sent;
use crate::respond::{CgiJob, Response};
use crate::serve::pacing;
use crate::serve::ready::{self, Descriptors, Ready};
use crate::serve::wire::{Got, Wire};
use crate::serve::writer::ResponseWriter;
use crate::session::Session;
use crate::site::Site;
use crate::sys;

/// The client side of the connection.
pub struct ClientIo<'a> {
    pub input: BorrowedFd<'a>,
    pub output: BorrowedFd<'a>,
    /// Cleartext or TLS.
    pub wire: &'a mut Wire,
}

/// Runs `job`; returns whether the connection can carry another request.
/// `input` holds what the client sent after the request head; the body is
/// taken from it (and read from the client as needed), and whatever follows
/// the body stays in it for the next request. Every log line is written
/// here, not by the transport.
pub fn run(
    job: Box<CgiJob>,
    io: ClientIo,
    input: &mut Vec<u8>,
    cfg: &Config,
    site: &Site,
    origin: &Origin,
) -> bool {
    // Asked of the descriptor only now that a script needs them.
    let origin = Origin {
        sockets: Some(origin.sockets_of(io.input)),
        ..*origin
    };
    let ctx = Context {
        cfg,
        site,
        origin: &origin,
    };
    let body_left = match job.request.framing {
        BodyFraming::Length(n) => n,
        _ => 0,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return cannot_run(&job, &e),
    };
    let ran = runtime.block_on(async {
        // SAFETY: `io`'s descriptors are borrowed for this whole call, and
        // the `Descriptors` do not outlive it.
        let fds = unsafe { Descriptors::new(io.input, io.output) }?;
        let mut client = Http1Client {
            fds,
            wire: io.wire,
            input,
            body_left,
            cfg,
            head: None,
            chunked: false,
        };
        Ok::<_, io::Error>(super::run(job, &ctx, &mut client, ready::signalled()).await)
    });
    match ran {
        // Dropping the exchange kills and reaps what is left of the
        // script: this thread may wait for it.
        Ok((keep_alive, _exchange)) => keep_alive,
        Err(e) => {
            log::diagnostic(&format!(
                "staticd: cgi: cannot watch the connection: {}\n",
                sys::describe(&e)
            ));
            false
        }
    }
}

/// No runtime for the exchange (out of descriptors): the connection ends.
fn cannot_run(job: &CgiJob, e: &io::Error) -> bool {
    let name = &job.script.script_name;
    log::diagnostic(&format!(
        "staticd: cgi {name}: cannot start: {}\n",
        sys::describe(e)
    ));
    false
}

/// Runs `job` for a connection of the event loop or io_uring, on tokio's
/// blocking pool (see the module's comment), on a duplicate of `stream`
/// (non-blocking, as the connection's is). Returns whether the connection
/// can carry another request.
pub(crate) async fn run_beside(
    (stream, wire): (BorrowedFd<'_>, &mut Wire),
    session: &mut Session,
    job: Box<CgiJob>,
    cfg: &Arc<Config>,
    site: &Arc<Site>,
) -> bool {
    let Ok(fd) = stream.try_clone_to_owned() else {
        return false;
    };
    let mut input = std::mem::take(session.input());
    let origin = *session.origin();
    let (cfg, site) = (Arc::clone(cfg), Arc::clone(site));
    // The TLS state goes with the exchange and comes back after it.
    let mut moved = std::mem::replace(wire, Wire::Clear);
    let task = tokio::task::spawn_blocking(move || {
        let io = ClientIo {
            input: fd.as_fd(),
            output: fd.as_fd(),
            wire: &mut moved,
        };
        let keep_alive = run(job, io, &mut input, &cfg, &site, &origin);
        (keep_alive, input, moved)
    });
    match task.await {
        Ok((keep_alive, input, back)) => {
            *session.input() = input;
            *wire = back;
            keep_alive
        }
        Err(_) => false,
    }
}

/// One HTTP/1.1 connection as the client of its exchange.
struct Http1Client<'a> {
    fds: Descriptors,
    wire: &'a mut Wire,
    /// The session's input (see `run`).
    input: &'a mut Vec<u8>,
    /// Request body bytes still to come.
    body_left: u64,
    cfg: &'a Config,
    /// The script's response while its body goes out: its drop writes
    /// the log line.
    head: Option<Box<Sent>>,
    /// The script's body goes in chunks.
    chunked: bool,
}

impl Client for Http1Client<'_> {
    async fn body(&mut self) -> Result<Option<Vec<u8>>, Gone> {
        if self.body_left == 0 {
            return Ok(None);
        }
        if !self.input.is_empty() {
            let n = self.body_left.min(self.input.len() as u64) as usize;
            self.body_left -= n as u64;
            return Ok(Some(self.input.drain(..n).collect()));
        }
        let (fds, wire) = (&self.fds, &mut *self.wire);
        let fd = fds.input();
        // `Wire::read` makes room for what it reads.
        let mut buf = Vec::new();
        loop {
            let read =
                poll_fn(|cx| fds.poll_io(cx, Interest::READABLE, || wire.read(fd, &mut buf)));
            match read.await {
                Ok(Got::Closed) => return Err(Gone),
                // A TLS record that carried no data.
                Ok(_) if buf.is_empty() => {}
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Gone),
            }
        }
        // Over TLS a read cannot stop at the body's end: what follows is
        // the next request, kept for the session.
        let n = self.body_left.min(buf.len() as u64) as usize;
        self.body_left -= n as u64;
        self.input.extend_from_slice(&buf[n..]);
        buf.truncate(n);
        Ok(Some(buf))
    }

    fn took(&mut self, _n: usize) {
        // TCP's own window: the body is read only as the script takes it.
    }

    async fn whole(&mut self, mut sent: Box<Sent>) -> Result<(), Gone> {
        self.send(&mut sent).await
    }

    async fn head(&mut self, mut sent: Box<Sent>, body: bool) -> Result<(), Gone> {
        self.chunked = body && chunked(&sent.response);
        let result = self.send(&mut sent).await;
        self.head = Some(sent);
        result
    }

    async fn data(&mut self, bytes: Vec<u8>) -> Result<(), Gone> {
        let (framed, payload) = frame(self.chunked, bytes);
        let (written, result) = self.send_bytes(&framed).await;
        if let Some(head) = &mut self.head {
            head.written += log::body_sent(&payload, written);
        }
        result
    }

    async fn end(&mut self, complete: bool) -> Result<(), Gone> {
        let result = match complete && self.chunked {
            true => self.send_bytes(h1::LAST_CHUNK).await.1,
            false => Ok(()),
        };
        // Its log line.
        self.head = None;
        result
    }
}

impl Http1Client<'_> {
    /// Writes a decided response, counting in `sent.written` what went out.
    async fn send(&mut self, sent: &mut Sent) -> Result<(), Gone> {
        let cfg = self.cfg;
        let mut writer =
            ResponseWriter::new(&sent.wire, &sent.response.body).copying(cfg.no_sendfile);
        let pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
        let (written, result) = self.write(&mut writer, pace).await;
        sent.written = written;
        result
    }

    /// Writes bytes of the script's as they come: no rate, only the
    /// timeout without progress. Returns how many went out.
    async fn send_bytes(&mut self, bytes: &[u8]) -> (u64, Result<(), Gone>) {
        let mut writer = ResponseWriter::new(bytes, &[]);
        let pace = Pace::new(Instant::now(), self.cfg.send_timeout, 0);
        self.write(&mut writer, pace).await
    }

    /// Writes all of `writer`'s bytes, given up on when the client takes
    /// them slower than `pace` allows, or when inetd mode is asked to stop.
    /// Returns how many reached the client.
    async fn write(
        &mut self,
        writer: &mut ResponseWriter<'_>,
        mut pace: Pace,
    ) -> (u64, Result<(), Gone>) {
        let (fds, wire) = (&self.fds, &mut *self.wire);
        let fd = fds.output();
        let mut out = wire.out(fd, fds.socket());
        // A script's response has no size known ahead: acknowledgements
        // count wherever there are some (a TCP socket).
        let acks = pacing::start(&mut pace, fd, u64::MAX);
        while !writer.is_done(&out) {
            if sys::stop_requested() {
                return (writer.written(), Err(Gone));
            }
            let before = writer.written();
            let write =
                poll_fn(|cx| fds.poll_io(cx, Interest::WRITABLE, || writer.write_some(&mut out)));
            match pacing::paced(write, acks, &mut pace).await {
                Ok(Ok(_)) => pacing::written(&mut pace, writer.written() - before),
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(_)) => return (writer.written(), Err(Gone)),
                // Bytes the reset discards never reached the client.
                Err(discarded) => return (writer.written().saturating_sub(discarded), Err(Gone)),
            }
        }
        (writer.written(), Ok(()))
    }
}

/// Whether the body that follows `response`'s head goes in chunks (a
/// script's body without a length, to an HTTP/1.1 client), as its head
/// says.
fn chunked(response: &Response) -> bool {
    let conn = Http1 {
        minor_version: response.minor_version,
        close: response.close,
        hsts: None,
        alt_svc: None,
    };
    conn.chunked(&response.head)
}

/// A piece of a script's body as it goes out, in a chunk if `chunked`,
/// and where the script's own bytes are among those (for the log).
fn frame(chunked: bool, bytes: Vec<u8>) -> (Vec<u8>, Range<u64>) {
    if !chunked {
        let n = bytes.len() as u64;
        return (bytes, 0..n);
    }
    let mut framed = Vec::with_capacity(bytes.len() + 12);
    h1::push_chunk(&mut framed, &bytes);
    // The chunk's size line comes first, its CRLF last.
    let start = (framed.len() - bytes.len() - 2) as u64;
    (framed, start..start + bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::frame;

    #[test]
    fn a_chunk_frames_the_scripts_bytes_and_says_where_they_are() {
        assert_eq!(
            frame(true, b"hello".to_vec()),
            (b"5\r\nhello\r\n".to_vec(), 3..8)
        );
        let (framed, payload) = frame(true, vec![b'x'; 300]);
        assert!(framed.starts_with(b"12c\r\n") && framed.ends_with(b"x\r\n"));
        assert_eq!(payload, 5..305);
        assert_eq!(frame(false, b"hello".to_vec()), (b"hello".to_vec(), 0..5));
    }
}
