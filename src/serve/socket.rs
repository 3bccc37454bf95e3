//! The event loop's socket I/O: reading into a connection's buffer (through
//! TLS when the wire has it), writing a response, lingering before close,
//! each wait on the connection's one timer, for TCP and Unix sockets alike.

use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use tokio::io::Interest;
use tokio::net::UnixStream;
use tokio::time::Sleep;

use super::lazy::LazyTcp;
use super::linger_deadline;
use super::pacing::{account, give_up};
use super::proxy_header;
use super::wire::{lend_read_buffer, return_unused_read_buffer, Got, Wire, READ_CHUNK};
use super::writer::{ResponseWriter, TURN};
use crate::http::response::Chunk;
use crate::pace::Pace;
use crate::pipeline::Sent;
use crate::pool;
use crate::unsent::Queue;

/// With HTTP/2, a socket must also be one h2 can be served over.
#[cfg(feature = "http2")]
pub(crate) use super::h2::Ready as MaybeH2;
#[cfg(not(feature = "http2"))]
pub(crate) trait MaybeH2 {}
#[cfg(not(feature = "http2"))]
impl<T> MaybeH2 for T {}

/// What a connection does with its socket, TCP or Unix-domain: tokio gives
/// both these methods, but no trait for them.
pub(crate) trait Socket: MaybeH2 + AsFd + Send + Sync + 'static {
    /// Whether an idle connection on it can be parked (see [`park`](crate::serve::park)).
    const PARKABLE: bool;
    /// The plain socket, out of the runtime, for parking; None if it
    /// cannot be parked.
    fn into_parked(self) -> Option<std::net::TcpStream>;
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send + '_;
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send + '_;
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize>;
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
}

macro_rules! socket {
    ($stream:ty, $parkable:expr, $into_parked:expr) => {
        impl Socket for $stream {
            const PARKABLE: bool = $parkable;
            fn into_parked(self) -> Option<std::net::TcpStream> {
                $into_parked(self)
            }
            fn readable(&self) -> impl Future<Output = io::Result<()>> + Send + '_ {
                <$stream>::readable(self)
            }
            fn writable(&self) -> impl Future<Output = io::Result<()>> + Send + '_ {
                <$stream>::writable(self)
            }
            fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
                <$stream>::try_read(self, buf)
            }
            fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
                <$stream>::try_read_buf(self, buf)
            }
            fn try_io<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                <$stream>::try_io(self, interest, f)
            }
        }
    };
}

socket!(LazyTcp, true, |s: LazyTcp| s.into_std().ok());
// Unix-socket clients are local processes, usually few: never parked.
socket!(UnixStream, false, |_| None);

/// Reads the PROXY protocol header (see [`proxy_header`]): the client
/// it names, if any.
pub(crate) async fn read_proxy_header(
    stream: &impl Socket,
) -> io::Result<Option<std::net::SocketAddr>> {
    let mut reader = proxy_header::HeaderReader::new(true);
    loop {
        stream.readable().await?;
        match stream.try_io(Interest::READABLE, || reader.advance(stream.as_fd())) {
            Ok(Some(source)) => return Ok(source),
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Runs `op` until `deadline`, on the connection's timer. The timer is set
/// only once `op` has to wait: a request that is already there (the first
/// one on a new connection, usually) costs no timer at all, and setting a
/// new timer can cost tokio a wake-up write.
pub(crate) async fn within<T>(
    op: impl Future<Output = io::Result<T>>,
    deadline: Instant,
    mut timer: Pin<&mut Sleep>,
) -> io::Result<T> {
    let mut op = std::pin::pin!(op);
    let mut armed = false;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = op.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if !armed {
            timer.as_mut().reset(deadline.into());
            armed = true;
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::ErrorKind::TimedOut.into())),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Reads what is there, through TLS when the wire has it: handshake
/// messages go out before each wait, and a read that only moved the
/// handshake along is not the end of the wait.
pub(crate) async fn read_wire(
    stream: &impl Socket,
    wire: &mut Wire,
    buf: &mut Vec<u8>,
) -> io::Result<Got> {
    if matches!(wire, Wire::Clear) {
        let got = read_some(stream, buf).await?;
        return Ok(if got { Got::Bytes } else { Got::Closed });
    }
    // The first pass reads without waiting: a socket not yet watched by
    // the runtime (see `lazy`) is tried as it is; a watched one answers
    // WouldBlock at once unless it is known to be readable.
    let mut wait = false;
    loop {
        flush_wire(stream, wire).await?;
        if std::mem::replace(&mut wait, true) {
            stream.readable().await?;
        }
        let borrowed = lend_read_buffer(buf);
        let before = buf.len();
        let read = stream.try_io(Interest::READABLE, || wire.read(stream.as_fd(), buf));
        let grew = buf.len() > before;
        if wire.drained() {
            // As in `read_some`: the next read waits for epoll instead of
            // costing a recv(2) that finds nothing.
            forget_readable(stream);
        }
        return_unused_read_buffer(buf, borrowed, grew);
        match read {
            Ok(Got::Bytes) if !grew => {}
            Ok(got) => return Ok(got),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                // The alert TLS queued for the client, if the socket takes it.
                let _ = wire.out(stream.as_fd(), true).flush();
                return Err(e);
            }
        }
    }
}

/// Writes what TLS has waiting (handshake messages, tickets, alerts).
async fn flush_wire(stream: &impl Socket, wire: &mut Wire) -> io::Result<()> {
    let mut out = wire.out(stream.as_fd(), true);
    while out.pending() {
        match stream.try_io(Interest::WRITABLE, || out.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads what is there. False: the client closed or failed.
async fn read_some(stream: &impl Socket, buf: &mut Vec<u8>) -> io::Result<bool> {
    // The first pass reads without waiting, as in `read_wire`: a request
    // that is already there costs no trip through the poller.
    let mut wait = false;
    loop {
        if std::mem::replace(&mut wait, true) {
            stream.readable().await?;
        }
        let borrowed = lend_read_buffer(buf);
        // Reads into spare capacity: no zero-filling, and a buffer that
        // already has room is reused as it is.
        buf.reserve(READ_CHUNK);
        let spare = buf.capacity() - buf.len();
        let read = stream.try_read_buf(buf);
        if matches!(read, Ok(n) if n > 0 && n < spare) {
            // A short read emptied the socket: forget its readiness now, so
            // the next read waits for epoll instead of costing a recv(2)
            // that finds nothing. (tokio keeps readiness that arrived since
            // it was last looked at.)
            forget_readable(stream);
        }
        return_unused_read_buffer(buf, borrowed, matches!(read, Ok(n) if n > 0));
        match read {
            Ok(n) => return Ok(n > 0),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Clears the socket's read readiness, after a short read emptied it.
fn forget_readable(stream: &impl Socket) {
    let _ = stream.try_io(Interest::READABLE, || {
        Err::<(), _>(io::ErrorKind::WouldBlock.into())
    });
}

/// Writes a whole response, counting in `sent.written` what went out; a
/// client that takes it slower than [`pace`](crate::pace) allows is given up on. `timer`
/// is the connection's one timer. A client that takes it fast may have its unsent queue
/// raised meanwhile ([`unsent`](crate::unsent)); the response then ends only once that queue
/// has drained back under the bound.
pub(crate) async fn send(
    stream: &impl Socket,
    wire: &mut Wire,
    sent: &mut Sent,
    copy: bool,
    mut timer: Pin<&mut Sleep>,
    pace: &mut Pace,
) -> io::Result<()> {
    let mut out = wire.out(stream.as_fd(), true);
    let mut writer = ResponseWriter::new(&sent.wire, &sent.response.body)
        .copying(copy)
        .in_turns();
    // The pace learns of progress only when a write would wait (see
    // `pacing`): a response the socket takes at once costs no reading.
    let mut paced = 0;
    let fd = stream.as_fd();
    let size = sent.wire.len() as u64 + Chunk::total(&sent.response.body);
    let mut queue = Queue::new(fd, size, Instant::now());
    // The limit was raised just now: the socket has room, though tokio, told it was full,
    // would wait for word of it.
    let mut raised = false;
    // What this connection wrote since its turn began: at a TURN, the loop's other
    // connections go first (see writer::TURN).
    let mut turn = 0;
    // One wait for all three reasons (the write's, the turn's end, and the drain's once a
    // raised queue's response is written): one await point keeps the task's future small.
    loop {
        let writing = !writer.is_done(&out);
        if writing {
            let wrote = match std::mem::take(&mut raised) {
                true => writer.write_some(&mut out),
                false => stream.try_io(Interest::WRITABLE, || writer.write_some(&mut out)),
            };
            match wrote {
                Ok(n) => {
                    sent.written = writer.written();
                    turn += n as u64;
                    if turn < TURN {
                        continue;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if queue.blocked(fd, Instant::now()) {
                        raised = true;
                        continue;
                    }
                }
                Err(e) => return Err(e),
            }
        } else if queue.holds() {
            // The budget's share goes back once what it paid for has left the kernel.
            queue.lower(fd);
            if stream
                .try_io(Interest::WRITABLE, || Queue::drained(fd))
                .is_ok()
            {
                queue.release();
                break;
            }
        } else {
            break;
        }
        let waited = (&mut *pace, &mut paced, timer.as_mut());
        let yielded = std::mem::take(&mut turn) >= TURN;
        wait_writable(stream, &mut sent.written, waited, yielded).await?;
        if writing && !yielded {
            queue.woke(fd, Instant::now());
        }
    }
    Ok(())
}

/// Waits until `stream` has room for a write, within [`pace`](crate::pace)'s
/// deadlines, reading the client's progress at each of its checks (`paced`: what of
/// the response's `written` bytes it was told of); a client that took too little is given
/// up on (TimedOut, and what the reset discards is taken off `written`). With `turn_over`,
/// only lets the loop's other tasks run first.
async fn wait_writable(
    stream: &impl Socket,
    written: &mut u64,
    (pace, paced, mut timer): (&mut Pace, &mut u64, Pin<&mut Sleep>),
    turn_over: bool,
) -> io::Result<()> {
    if turn_over {
        // The socket may still have room: this only lets the others write first. (tokio's
        // yield resumes the task after the loop next polls for readiness, so connections that
        // became writable meanwhile write in this round too: 1 MB keep-alive, 50 clients,
        // 5,000-5,400 responses/s with a plain wake-up, 5,600-6,050 with tokio's.)
        tokio::task::yield_now().await;
        return Ok(());
    }
    let fd = stream.as_fd();
    // Whether a wait ran out: a reading of the client's progress is due.
    let mut due = false;
    loop {
        let now = Instant::now();
        if !account(pace, fd, now, (*written, paced), due) {
            *written = written.saturating_sub(give_up(fd));
            return Err(io::ErrorKind::TimedOut.into());
        }
        match within(stream.writable(), pace.check_at(now), timer.as_mut()).await {
            Err(e) if e.kind() == io::ErrorKind::TimedOut => due = true,
            ready => return ready,
        }
    }
}

/// Reads and drops what the client still sends until it closes or the
/// linger time is over; `timer` is the connection's one timer.
pub(crate) async fn linger(stream: &impl Socket, mut timer: Pin<&mut Sleep>) {
    let deadline = linger_deadline();
    // From the free list, not the stack: a buffer here would make every
    // connection's task that much bigger.
    let mut scratch = pool::take(&pool::READS);
    scratch.resize(READ_CHUNK, 0);
    loop {
        // Checked here as well: for a client that never stops sending,
        // the wait below is always ready and never reaches its timer.
        if Instant::now() >= deadline {
            break;
        }
        if within(stream.readable(), deadline, timer.as_mut())
            .await
            .is_err()
        {
            break;
        }
        match stream.try_read(&mut scratch) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    pool::give(&pool::READS, scratch);
}
