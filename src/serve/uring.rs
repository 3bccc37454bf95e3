//! Standalone mode on io_uring (`--io-uring`, cargo feature `uring`): the
//! event loop's workers, listeners, signals and connection bound, with each
//! worker on a tokio-uring runtime and every accept, socket read and write
//! and file read an io_uring operation. `Session` decides everything, as it
//! does for the other transports.
//!
//! tokio-uring does not cancel an operation whose future is dropped: the
//! kernel finishes it, and the buffer and descriptor stay alive until then.
//! A connection given up on (a timeout, the stop) therefore shuts its socket
//! down, which ends any read or write still pending on it, so that the
//! descriptor closes at once rather than whenever the client sends again.

use std::cell::RefCell;
use std::fs::File;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Shutdown};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use io_uring::{cqueue, opcode, types};
use tokio::sync::watch;
use tokio_uring::buf::{BoundedBuf, BoundedBufMut, IoBuf};
use tokio_uring::net::{TcpListener, TcpStream, UnixStream};
use tokio_uring::{BufResult, OneshotOutputTransform, UnsubmittedOneshot};

use super::event_loop::{self, Shared, READ_CHUNK};
use super::linger_deadline;
use super::listen::Listener;
use super::Wire;
use crate::config::Config;
use crate::http::response::Chunk;
use crate::pace::Pace;
use crate::pool;
use crate::session::{Sent, Session, Step};
use crate::site::Site;
use crate::sys::{self, describe};

/// Submission queue entries of each worker's ring.
const RING_ENTRIES: u32 = 1024;
/// How much of a file one read operation moves.
const FILE_BLOCK: usize = 128 * 1024;

/// Fails with a message for the user when the kernel refuses io_uring:
/// ENOSYS without it, EPERM under a seccomp filter or
/// /proc/sys/kernel/io_uring_disabled.
pub fn check() -> Result<(), String> {
    match io_uring::IoUring::new(2) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "--io-uring: the kernel refuses io_uring: {}",
            describe(&e)
        )),
    }
}

/// Runs the workers until SIGINT or SIGTERM, as `event_loop::run` does.
/// HTTPS is not served here (main refuses it at start-up), so neither are
/// `--redirect-http`'s listeners.
pub fn run(cfg: Arc<Config>, site: Arc<Site>, listeners: Vec<Vec<Listener>>) -> io::Result<()> {
    let redirects = listeners
        .iter()
        .flatten()
        .any(|l| matches!(l, Listener::Redirect(..)));
    if redirects {
        return Err(io::Error::other(
            "--io-uring does not serve HTTPS or --redirect-http",
        ));
    }
    event_loop::run_workers(cfg, site, listeners, event_loop::Extras::default(), worker)
}

fn worker(shared: Shared, group: Vec<Listener>) {
    let mut builder = tokio_uring::builder();
    builder.entries(RING_ENTRIES);
    let Some(rt) = event_loop::start_runtime(&shared, || tokio_uring::Runtime::new(&builder))
    else {
        return;
    };
    rt.block_on(async move {
        let accepting: Vec<_> = group
            .into_iter()
            .filter_map(|l| match l {
                Listener::Tcp(l) => Some(start(TcpListener::from_std(l), &shared)),
                Listener::Unix(l) => Some(start(l, &shared)),
                Listener::Redirect(..) => None,
            })
            .collect();
        let mut stop_wait = shared.stop.clone();
        let _ = stop_wait.wait_for(|s| *s).await;
        for (listener, task) in &accepting {
            task.abort();
            // Ends the accept in flight, which would otherwise keep the
            // listener open: new connections are refused from now on.
            let _ = rustix::net::shutdown(borrow(&**listener), rustix::net::Shutdown::Both);
        }
        drop(accepting);
        shared.conns.listeners_closed();
        event_loop::connections_finished(&shared).await;
    });
}

/// Starts accepting on `listener`; returns it (to shut it down at the
/// stop) and the task.
fn start<L: Accept>(
    listener: L,
    shared: &Shared,
) -> (Rc<dyn AsRawFd>, tokio::task::JoinHandle<()>) {
    let listener = Rc::new(listener);
    let task = tokio_uring::spawn(accept_loop(Rc::clone(&listener), shared.clone()));
    (listener, task)
}

/// The descriptor of something that owns one, for the `sys` helpers.
fn borrow(owner: &(impl AsRawFd + ?Sized)) -> BorrowedFd<'_> {
    // SAFETY: `owner` keeps the descriptor open for as long as the borrow.
    unsafe { BorrowedFd::borrow_raw(owner.as_raw_fd()) }
}

async fn accept_loop<L: Accept>(listener: Rc<L>, shared: Shared) {
    let mut last_complaint: Option<Instant> = None;
    loop {
        match L::next(&listener).await {
            Ok((stream, peer)) => {
                let client = event_loop::client_name(peer);
                let cleartext = !shared.extras.tls_on();
                let admitted =
                    event_loop::admit(&shared, peer, &client, borrow(&stream), cleartext);
                let Some(claim) = admitted else {
                    continue;
                };
                // As in the event loop: the place is taken after accept(2).
                let slot = shared.conns.take_slot(claim).await;
                let shared = shared.clone();
                tokio_uring::spawn(async move {
                    connection(stream, client, shared).await;
                    drop(slot);
                });
            }
            Err(e) => event_loop::accept_failed(&e, &mut last_complaint).await,
        }
    }
}

/// A listener as the accept loop sees it.
trait Accept: AsRawFd + 'static {
    type Stream: Socket;

    /// The next connection, and its client's address for the log.
    async fn next(listener: &Rc<Self>) -> io::Result<(Self::Stream, Option<IpAddr>)>;
}

impl Accept for TcpListener {
    type Stream = TcpStream;

    async fn next(listener: &Rc<Self>) -> io::Result<(TcpStream, Option<IpAddr>)> {
        let (stream, peer) = listener.accept().await?;
        Ok((stream, Some(peer.ip())))
    }
}

impl Accept for UnixListener {
    type Stream = UnixStream;

    async fn next(listener: &Rc<Self>) -> io::Result<(UnixStream, Option<IpAddr>)> {
        let fd = accept_unix(Rc::clone(listener)).await?;
        // SAFETY: accept(2) made the descriptor for this stream alone.
        let stream = unsafe { UnixStream::from_raw_fd(fd.into_raw_fd()) };
        Ok((stream, None))
    }
}

/// accept(2) on a Unix listener as an io_uring operation: tokio-uring's
/// UnixListener only binds a socket of its own, and staticd binds before it
/// gives up its privileges. The operation holds the listener open.
fn accept_unix(listener: Rc<UnixListener>) -> impl Future<Output = io::Result<OwnedFd>> {
    let sqe = opcode::Accept::new(
        types::Fd(listener.as_raw_fd()),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    )
    .flags(libc::SOCK_CLOEXEC)
    .build();
    UnsubmittedOneshot::new(listener, AcceptDone, sqe).submit()
}

struct AcceptDone;

impl OneshotOutputTransform for AcceptDone {
    type Output = io::Result<OwnedFd>;
    type StoredData = Rc<UnixListener>;

    fn transform_oneshot_output(self, _: Rc<UnixListener>, cqe: cqueue::Entry) -> Self::Output {
        let fd = cqe.result();
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd));
        }
        // SAFETY: the kernel made this descriptor for us, and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// What a connection does with its socket, TCP or Unix-domain: tokio-uring
/// gives both these methods, but no trait for them.
trait Socket: AsRawFd + 'static {
    async fn read<T: BoundedBufMut>(&self, buf: T) -> BufResult<usize, T>;
    async fn writev<T: BoundedBuf>(&self, bufs: Vec<T>) -> BufResult<usize, Vec<T>>;
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
}

macro_rules! socket {
    ($stream:ty) => {
        impl Socket for $stream {
            async fn read<T: BoundedBufMut>(&self, buf: T) -> BufResult<usize, T> {
                <$stream>::read(self, buf).await
            }
            async fn writev<T: BoundedBuf>(&self, bufs: Vec<T>) -> BufResult<usize, Vec<T>> {
                <$stream>::writev(self, bufs).await
            }
            fn shutdown(&self, how: Shutdown) -> io::Result<()> {
                <$stream>::shutdown(self, how)
            }
        }
    };
}

socket!(TcpStream);
socket!(UnixStream);

async fn connection(stream: impl Socket, client: String, shared: Shared) {
    let Shared {
        cfg,
        site,
        mut stop,
        ..
    } = shared;
    sys::tune_connection(borrow(&stream));
    let mut session = Session::new(client);
    serve(&stream, &mut session, &cfg, &site, &mut stop).await;
    let _ = stream.shutdown(Shutdown::Both);
}

/// Drives the session exactly as `event_loop::connection` does.
async fn serve(
    stream: &impl Socket,
    session: &mut Session,
    cfg: &Arc<Config>,
    site: &Arc<Site>,
    stop: &mut watch::Receiver<bool>,
) {
    loop {
        let stopping = *stop.borrow();
        match session.step(cfg, site, stopping) {
            Step::Read { deadline, idle } => {
                // A read in flight needs its buffer, so unlike the event
                // loop an idle connection keeps one.
                let read = read_some(stream, session.input());
                // Idle, it may be closed to make room at --max-connections.
                let read = super::park::unless_shed(read, idle && !stopping);
                let timed = tokio::time::timeout_at(deadline.into(), read);
                let outcome = if idle {
                    tokio::select! {
                        r = timed => r,
                        _ = stop.wait_for(|s| *s) => return,
                    }
                } else {
                    timed.await
                };
                match outcome {
                    Ok(Ok(true)) => {}
                    Err(_) => {
                        session.read_timed_out(cfg);
                        return;
                    }
                    _ => return,
                }
            }
            Step::Send(mut sent) => {
                // Dropping `sent` writes its log line: after this arm, or
                // with the task if the stop's grace runs out.
                let mut pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
                if let Err(e) = send(stream, &mut sent, &mut pace).await {
                    super::response_failed(&e, &pace, session.client(), cfg);
                    return;
                }
            }
            Step::Cgi(job) => {
                // The exchange runs blocking code that waits with poll(2).
                sys::set_nonblocking(borrow(stream));
                let io = (borrow(stream), &mut Wire::Clear);
                let keep_alive = event_loop::run_cgi(io, session, job, cfg, site).await;
                session.cgi_finished(keep_alive);
            }
            Step::Close => {
                sys::shutdown_write(borrow(stream));
                if session.unread_input() {
                    linger(stream).await;
                }
                return;
            }
        }
    }
}

/// Reads what is there into the spare capacity of `input`. False: the
/// client closed or failed.
async fn read_some(stream: &impl Socket, input: &mut Vec<u8>) -> io::Result<bool> {
    let mut buf = std::mem::take(input);
    if buf.capacity() == 0 {
        buf = pool::take(&pool::READS);
    }
    buf.reserve(READ_CHUNK);
    let filled = buf.len();
    let (result, buf) = stream.read(buf.slice(filled..)).await;
    *input = buf.into_inner();
    Ok(result? > 0)
}

async fn linger(stream: &impl Socket) {
    let _ = tokio::time::timeout_at(linger_deadline().into(), async {
        let mut scratch = Vec::with_capacity(4096);
        loop {
            let (result, buf) = stream.read(scratch).await;
            scratch = buf;
            scratch.clear();
            if !matches!(result, Ok(n) if n > 0) {
                return;
            }
        }
    })
    .await;
}

/// Writes a whole response: the head and in-memory chunks as they are,
/// files a block at a time through a buffer, each write gathering all that
/// is ready (so a head leaves with the first block of its file), counting
/// in `sent.written` what went out. A client that takes it slower than
/// `pace` allows is given up on; a file that shrank ends the connection
/// after what was read of it, never padded.
async fn send(stream: &impl Socket, sent: &mut Sent, pace: &mut Pace) -> io::Result<()> {
    let Sent {
        response,
        wire,
        written,
        ..
    } = sent;
    let mut out = Outgoing {
        pieces: Vec::new(),
        head: None,
        pace,
        written,
    };
    out.pieces
        .push(Piece::new(Held::Head(std::mem::take(wire))));
    let mut body = std::mem::take(&mut response.body);
    let result = out.send_body(stream, &mut body).await;
    // Back where `Sent`'s and `Response`'s Drop hand them to the free lists.
    response.body = body;
    if let Some(head) = out.head.take() {
        *wire = head;
    }
    result
}

/// What is ready to go out, in order.
struct Outgoing<'a> {
    pieces: Vec<Piece>,
    /// The response head once written, to be reused.
    head: Option<Vec<u8>>,
    pace: &'a mut Pace,
    /// Bytes of the response written so far.
    written: &'a mut u64,
}

impl Outgoing<'_> {
    async fn send_body(&mut self, stream: &impl Socket, body: &mut Vec<Chunk>) -> io::Result<()> {
        for chunk in body.drain(..) {
            match chunk {
                Chunk::Bytes(bytes) => self.pieces.push(Piece::new(Held::Bytes(bytes))),
                Chunk::Static(bytes) => self.pieces.push(Piece::new(Held::Static(bytes))),
                Chunk::Shared { bytes, offset, len } => self.pieces.push(Piece {
                    held: Held::Shared(bytes),
                    start: offset,
                    end: offset + len,
                }),
                Chunk::File { file, offset, len } => {
                    self.send_file(stream, &file, offset, len).await?;
                }
            }
        }
        self.flush(stream).await
    }

    async fn send_file(
        &mut self,
        stream: &impl Socket,
        file: &Arc<File>,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let want = (end - at).min(FILE_BLOCK as u64) as usize;
            let (result, block) = read_at(Arc::clone(file), blocks::take(), at, want).await;
            match result {
                Ok(0) => {
                    blocks::give(block);
                    self.flush(stream).await?;
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being sent",
                    ));
                }
                Ok(n) => {
                    at += n as u64;
                    self.pieces.push(Piece::new(Held::Block(block)));
                    self.flush(stream).await?;
                }
                Err(e) => {
                    blocks::give(block);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Writes every piece, with as few operations as the socket allows.
    async fn flush(&mut self, stream: &impl Socket) -> io::Result<()> {
        while !self.pieces.is_empty() {
            let write = stream.writev(std::mem::take(&mut self.pieces));
            let deadline = self.pace.deadline().into();
            let (result, mut pieces) = match tokio::time::timeout_at(deadline, write).await {
                Ok(done) => done,
                Err(_) => return Err(io::ErrorKind::TimedOut.into()),
            };
            let mut n = match result {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) => return Err(e),
            };
            *self.written += n as u64;
            self.pace.progress(Instant::now(), n as u64);
            let mut finished = 0;
            for piece in &mut pieces {
                let len = piece.end - piece.start;
                if n < len {
                    piece.start += n;
                    break;
                }
                n -= len;
                finished += 1;
            }
            for piece in pieces.drain(..finished) {
                match piece.held {
                    Held::Head(head) => self.head = Some(head),
                    Held::Block(block) => blocks::give(block),
                    Held::Bytes(_) | Held::Shared(_) | Held::Static(_) => {}
                }
            }
            self.pieces = pieces;
        }
        Ok(())
    }
}

/// Bytes to write, from `start` to `end` of what is held.
struct Piece {
    held: Held,
    start: usize,
    end: usize,
}

enum Held {
    Head(Vec<u8>),
    Bytes(Vec<u8>),
    /// A file's bytes read into a buffer of `blocks`.
    Block(Vec<u8>),
    Shared(Arc<[u8]>),
    Static(&'static [u8]),
}

impl Piece {
    fn new(held: Held) -> Piece {
        let end = match &held {
            Held::Head(v) | Held::Bytes(v) | Held::Block(v) => v.len(),
            Held::Shared(bytes) => bytes.len(),
            Held::Static(bytes) => bytes.len(),
        };
        Piece {
            held,
            start: 0,
            end,
        }
    }

    fn bytes(&self) -> &[u8] {
        let all: &[u8] = match &self.held {
            Held::Head(v) | Held::Bytes(v) | Held::Block(v) => v,
            Held::Shared(bytes) => bytes,
            Held::Static(bytes) => bytes,
        };
        &all[self.start..self.end]
    }
}

// SAFETY: the bytes live on the heap (a Vec's buffer or an Arc's
// allocation), so the pointer stays valid when the Piece moves, and nothing
// changes them while an operation holds the Piece.
unsafe impl IoBuf for Piece {
    fn stable_ptr(&self) -> *const u8 {
        self.bytes().as_ptr()
    }

    fn bytes_init(&self) -> usize {
        self.end - self.start
    }

    fn bytes_total(&self) -> usize {
        self.end - self.start
    }
}

/// Reads up to `len` bytes of `file` at `at` into the spare capacity of
/// `buf`: a pread(2) as an io_uring operation, which tokio-uring offers only
/// for files it owns.
fn read_at(
    file: Arc<File>,
    mut buf: Vec<u8>,
    at: u64,
    len: usize,
) -> impl Future<Output = (io::Result<usize>, Vec<u8>)> {
    let len = len.min(buf.capacity() - buf.len()).min(u32::MAX as usize);
    let sqe = opcode::Read::new(
        types::Fd(file.as_raw_fd()),
        buf.spare_capacity_mut().as_mut_ptr().cast(),
        len as u32,
    )
    .offset(at)
    .build();
    UnsubmittedOneshot::new(ReadAt { _file: file, buf }, ReadDone, sqe).submit()
}

/// What a file read holds while the kernel works: the file stays open and
/// the buffer alive even if the read's future is dropped.
struct ReadAt {
    _file: Arc<File>,
    buf: Vec<u8>,
}

struct ReadDone;

impl OneshotOutputTransform for ReadDone {
    type Output = (io::Result<usize>, Vec<u8>);
    type StoredData = ReadAt;

    fn transform_oneshot_output(self, data: ReadAt, cqe: cqueue::Entry) -> Self::Output {
        let mut buf = data.buf;
        let result = cqe.result();
        if result < 0 {
            return (Err(io::Error::from_raw_os_error(-result)), buf);
        }
        let n = result as usize;
        // SAFETY: the kernel wrote `n` bytes into the spare capacity, and
        // `read_at` asked for no more than that capacity.
        unsafe { buf.set_len(buf.len() + n) };
        (Ok(n), buf)
    }
}

/// File blocks, kept per thread for the next read.
mod blocks {
    use super::*;

    /// Blocks kept for reuse per thread; more are freed.
    const KEEP: usize = 16;

    thread_local! {
        static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn take() -> Vec<u8> {
        FREE.with(|f| f.borrow_mut().pop())
            .unwrap_or_else(|| Vec::with_capacity(FILE_BLOCK))
    }

    pub(super) fn give(mut block: Vec<u8>) {
        block.clear();
        FREE.with(|f| {
            let mut free = f.borrow_mut();
            if free.len() < KEEP {
                free.push(block);
            }
        });
    }
}
