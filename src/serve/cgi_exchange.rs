//! Driving one CGI exchange (`crate::exchange`) over blocking descriptors:
//! the request body goes to the script's stdin, its output to the
//! exchange, and what the exchange decides to the client.
//!
//! This is plain blocking code around poll(2), shared by both HTTP/1.1
//! transports: inetd mode calls it directly, the event loop on tokio's
//! blocking pool. It decides nothing: it moves bytes and does the
//! exchange's steps.

use std::cell::RefCell;
use std::os::fd::{AsFd, BorrowedFd};
use std::process::{ChildStdin, ChildStdout};
use std::time::Instant;

use rustix::event::{PollFd, PollFlags};

use super::writer::{send_blocking, send_bytes_blocking, Out, ResponseWriter};
use super::{Got, Wire};
use crate::config::Config;
use crate::exchange::{Context, Exchange, Step};
use crate::log;
use crate::pace::Pace;
use crate::respond::CgiJob;
use crate::session::{Kind, Protocol, Sent};
use crate::site::Site;
use crate::sys;

/// How much script output or request body is moved per call.
const CHUNK: usize = 16 * 1024;

/// The client side of the connection.
#[derive(Clone, Copy)]
pub struct ClientIo<'a> {
    pub input: BorrowedFd<'a>,
    pub output: BorrowedFd<'a>,
    /// `output` is a socket (send(2) with MSG_MORE works).
    pub socket: bool,
    /// Cleartext or TLS; borrowed for each read or write.
    pub wire: &'a RefCell<Wire>,
}

impl ClientIo<'_> {
    /// Writes `bytes` as they come (script output), waiting as needed.
    fn send_bytes(&self, bytes: Vec<u8>, cfg: &Config) -> (u64, std::io::Result<()>) {
        let mut wire = self.wire.borrow_mut();
        send_bytes_blocking(
            &mut wire.out(self.output, self.socket),
            bytes,
            cfg.send_timeout,
        )
    }

    /// Writes a decided response, waiting as needed, counting in
    /// `sent.written` what went out; returns whether all of it did.
    fn send_response(&self, sent: &mut Sent, cfg: &Config) -> bool {
        let mut wire = self.wire.borrow_mut();
        let mut out: Out = wire.out(self.output, self.socket);
        let mut writer =
            ResponseWriter::new(&sent.wire, &sent.response.body).copying(cfg.no_sendfile);
        let mut pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
        let ok = send_blocking(&mut out, &mut writer, &mut pace).is_ok();
        sent.written = writer.written();
        ok
    }
}

/// Runs `job`; returns whether the connection can carry another request.
/// `input` holds what the client sent after the request head; the body is
/// taken from it (and read from the client as needed), and whatever follows
/// the body stays in it for the next request. Every log line is written
/// here, not by the transport, so that it is written even if the
/// transport's task is gone by then (the stop's grace ran out while the
/// script ran).
pub fn run(
    job: Box<CgiJob>,
    io: ClientIo,
    input: &mut Vec<u8>,
    cfg: &Config,
    site: &Site,
    client: &str,
) -> bool {
    let sockets = job
        .sockets
        .unwrap_or_else(|| (sys::peer_addr(io.input), sys::local_addr(io.input)));
    let kind = if job.https { Kind::Https } else { Kind::Http };
    let ctx = Context {
        cfg,
        site,
        client,
        sockets,
        kind,
        protocol: Protocol::Http1,
    };
    let mut exchange = Exchange::start(job, &ctx);
    let mut pump = Pump {
        io,
        stdin: None,
        stdout: None,
        pending: Vec::new(),
        input,
        sending: None,
    };
    let arrived = exchange.take_body(pump.input.len());
    pump.pending.extend(pump.input.drain(..arrived));
    // Whether everything sent so far reached the client.
    let mut delivered = true;
    loop {
        match exchange.step() {
            Step::Wait => pump.wait(&mut exchange, &ctx),
            Step::Run { stdin, stdout } => pump.attach(stdin, stdout, &exchange),
            Step::Send(mut sent) | Step::Head(mut sent) => {
                delivered &= io.send_response(&mut sent, cfg);
                pump.sending = Some(sent);
                if !delivered {
                    exchange.client_gone(&ctx);
                }
            }
            Step::Body { bytes, payload } => {
                let (written, result) = io.send_bytes(bytes, cfg);
                if let Some(sent) = &mut pump.sending {
                    sent.written += log::body_sent(&payload, written);
                }
                if result.is_err() {
                    delivered = false;
                    exchange.client_gone(&ctx);
                }
            }
            // A cut body (not `complete`) ends with the connection, without
            // a trailer: `keep_alive` is false then.
            Step::Done {
                trailer,
                keep_alive,
                ..
            } => {
                delivered &= trailer.is_empty() || io.send_bytes(trailer.to_vec(), cfg).1.is_ok();
                // Dropping the response writes its log line.
                drop(pump.sending.take());
                return keep_alive && delivered;
            }
        }
    }
}

/// Moves bytes between the client, the script's stdin and its stdout.
struct Pump<'a> {
    io: ClientIo<'a>,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    /// Request body bytes read but not yet taken by the script.
    pending: Vec<u8>,
    /// The session's input: what follows the body (the next request).
    input: &'a mut Vec<u8>,
    /// The response going out, whose log line waits for its body.
    sending: Option<Box<Sent>>,
}

impl Pump<'_> {
    /// Takes a script's pipes (a local redirect's script replaces the
    /// last's).
    fn attach(&mut self, stdin: Option<ChildStdin>, stdout: ChildStdout, exchange: &Exchange) {
        for fd in [stdin.as_ref().map(|s| s.as_fd()), Some(stdout.as_fd())]
            .into_iter()
            .flatten()
        {
            // A full pipe must not block the whole exchange.
            let _ = rustix::io::ioctl_fionbio(fd, true);
        }
        let body_done = exchange.body_left() == 0 && self.pending.is_empty();
        self.stdin = stdin.filter(|_| !body_done);
        self.stdout = Some(stdout);
    }

    /// Waits for whichever of the script's output, its input and the
    /// client has work (or the deadline, or a stop), and hands what came
    /// to the exchange.
    fn wait(&mut self, exchange: &mut Exchange, ctx: &Context) {
        let Some(deadline) = exchange.deadline() else {
            // No script and no step: nothing will come. Not reached while
            // the exchange works as it should; ending is the safe answer.
            return exchange.client_gone(ctx);
        };
        let now = Instant::now();
        if now >= deadline {
            return exchange.timed_out(ctx);
        }
        let want_stdin = self.stdin.is_some() && !self.pending.is_empty();
        let want_client =
            self.stdin.is_some() && self.pending.is_empty() && exchange.body_left() > 0;
        let mut fds = Vec::with_capacity(4);
        if let Some(out) = &self.stdout {
            fds.push(PollFd::new(out, PollFlags::IN));
        }
        if let (true, Some(stdin)) = (want_stdin, &self.stdin) {
            fds.push(PollFd::new(stdin, PollFlags::OUT));
        }
        if want_client {
            fds.push(PollFd::from_borrowed_fd(self.io.input, PollFlags::IN));
        }
        if let Some(stop) = sys::stop_fd() {
            fds.push(PollFd::from_borrowed_fd(stop, PollFlags::IN));
        }
        let timeout = deadline - now;
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return exchange.client_gone(ctx),
        }
        if sys::stop_requested() {
            return exchange.client_gone(ctx);
        }
        let ready: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
        drop(fds);
        let stdout_ready = ready.first().copied().unwrap_or(false);
        let mut i = 1;
        if want_stdin {
            if ready.get(i).copied().unwrap_or(false) {
                self.feed_script(exchange);
            }
            i += 1;
        }
        if want_client && ready.get(i).copied().unwrap_or(false) && !self.read_body(exchange) {
            return exchange.client_gone(ctx);
        }
        if stdout_ready {
            self.read_output(exchange, ctx);
        }
    }

    /// Hands pending body bytes to the script.
    fn feed_script(&mut self, exchange: &Exchange) {
        let Some(stdin) = &self.stdin else { return };
        match rustix::io::write(stdin, &self.pending) {
            Ok(n) => {
                self.pending.drain(..n);
            }
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
            // The script closed its input early: it wants no more.
            Err(_) => {
                self.stdin = None;
                self.pending.clear();
            }
        }
        if self.pending.is_empty() && exchange.body_left() == 0 {
            self.stdin = None;
        }
    }

    /// Reads more of the request body, never past its end: what follows is
    /// the next request. False: the client is gone.
    fn read_body(&mut self, exchange: &mut Exchange) -> bool {
        let mut buf = Vec::with_capacity(CHUNK);
        let read = self.io.wire.borrow_mut().read(self.io.input, &mut buf);
        match read {
            Ok(Got::Closed) => false,
            Ok(_) => {
                // Over TLS a read cannot stop at the body's end: what
                // follows is the next request, kept for the session.
                let n = exchange.take_body(buf.len());
                self.pending.extend(buf.drain(..n));
                self.input.extend_from_slice(&buf);
                true
            }
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ),
        }
    }

    fn read_output(&mut self, exchange: &mut Exchange, ctx: &Context) {
        let Some(stdout) = &self.stdout else { return };
        let mut buf = vec![0u8; CHUNK];
        let n = match rustix::io::read(stdout, &mut buf) {
            Ok(n) => n,
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return,
            Err(_) => 0,
        };
        if n == 0 {
            self.stdout = None;
            self.stdin = None;
        }
        exchange.output(&buf[..n], n == 0, ctx);
    }
}
