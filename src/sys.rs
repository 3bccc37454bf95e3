//! The system calls the standard library lacks, wrapped in one place.

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::net::SendFlags;

/// An I/O error as a short phrase without Rust's "(os error N)" suffix.
pub fn describe(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Whether an error says the process (or system) is out of descriptors or
/// memory, which passes, rather than that what was asked for failed.
pub fn out_of_resources(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        e.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM)
    )
}

/// What to change when start-up runs out of descriptors (EMFILE), said
/// after the error in its one line; empty for any other error. It holds in
/// both modes: standalone, each worker has its own listeners and event
/// loop, so --threads is the other way out; under --inetd it does not
/// apply, and the hint says so.
pub fn descriptor_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() == Some(rustix::io::Errno::MFILE.raw_os_error()) {
        true => " (raise the limit, ulimit -n, or, standalone, lower --threads: each worker thread takes a few descriptors)",
        false => "",
    }
}

/// Raises the descriptor limit to its hard maximum, as nginx's
/// worker_rlimit_nofile does: each connection needs one.
pub fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        let _ = setrlimit(Resource::Nofile, limit);
    }
}

/// Opens `rel` beneath the directory `dir` for reading. The kernel refuses
/// any resolution that would leave `dir` (`..`, absolute symlinks, symlinks
/// pointing outside), so the check cannot race with the file system.
/// O_NONBLOCK keeps a FIFO from blocking the open.
pub fn open_beneath(dir: BorrowedFd<'_>, rel: &[u8]) -> io::Result<File> {
    let path: &[u8] = if rel.is_empty() { b"." } else { rel };
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let mut attempts = 0;
    loop {
        match rustix::fs::openat2(dir, path, flags, Mode::empty(), resolve) {
            Ok(fd) => return Ok(File::from(fd)),
            // openat2 asks for a retry when a rename raced with the lookup.
            Err(rustix::io::Errno::AGAIN) if attempts < 3 => attempts += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether anything (a file, a directory, a symlink: not followed) is
/// named `rel` beneath `dir`. A path that cannot be looked up for another
/// reason than absence counts as there: nothing may take its place.
pub fn exists_beneath(dir: BorrowedFd<'_>, rel: &[u8]) -> bool {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve) {
        Ok(_) => true,
        Err(e) => !matches!(e, rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR),
    }
}

/// Opens a directory beneath `dir` as a handle for further lookups.
pub fn open_dir_beneath(dir: BorrowedFd<'_>, rel: &[u8]) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    Ok(rustix::fs::openat2(
        dir,
        rel,
        flags,
        Mode::empty(),
        resolve,
    )?)
}

/// The status of what `rel` leads to beneath `dir`, following symlinks only
/// as far as they stay beneath it (as `open_beneath` does).
pub fn stat_beneath(dir: BorrowedFd<'_>, rel: &[u8]) -> io::Result<rustix::fs::Stat> {
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let fd = rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve)?;
    Ok(rustix::fs::fstat(&fd)?)
}

/// The target of the symlink `name` in `dir` (EINVAL when it is no symlink).
pub fn read_link(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<Vec<u8>> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new())?;
    Ok(target.into_bytes())
}

/// Opens a directory to serve from.
pub fn open_dir(path: &std::path::Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(rustix::fs::open(path, flags, Mode::empty())?)
}

/// One sendfile(2) call of at most `count` bytes from `file` at `*offset`.
pub fn sendfile(
    out: BorrowedFd<'_>,
    file: &File,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    Ok(rustix::fs::sendfile(
        out,
        file.as_fd(),
        Some(offset),
        count,
    )?)
}

/// Sends on a socket; `more` tells the kernel that more data follows at
/// once, so a head is not sent as a packet of its own.
pub fn send(out: BorrowedFd<'_>, buf: &[u8], more: bool) -> io::Result<usize> {
    let mut flags = SendFlags::NOSIGNAL;
    if more {
        flags |= SendFlags::MORE;
    }
    Ok(rustix::net::send(out, buf, flags)?)
}

pub fn write(out: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::io::write(out, buf)?)
}

/// Writes several buffers in one call. (SIGPIPE is ignored, as in every
/// Rust program, so a closed socket is an EPIPE error here too.)
pub fn writev(out: BorrowedFd<'_>, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    Ok(rustix::io::writev(out, bufs)?)
}

pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    Ok(rustix::io::read(fd, buf)?)
}

/// Reads what a socket has without taking it off the queue (MSG_PEEK):
/// a reader that must stop at a boundary sees how far it can go.
pub fn peek(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    let (read, _) = rustix::net::recv(fd, buf, rustix::net::RecvFlags::PEEK)?;
    Ok(read)
}

/// Reads at least `max` bytes' room onto the end of `buf` (more if its
/// capacity already has more spare); returns how many it read. The spare
/// capacity is read into as it is, not zeroed first: a 16 KiB memset per
/// read was 1.8% of an h2c worker's time with 1 KB responses.
pub fn read_append(fd: BorrowedFd<'_>, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    buf.reserve(max);
    Ok(rustix::io::read(fd, rustix::buffer::spare_capacity(buf))?)
}

/// Whether the fd is a socket (fd 0 under tcpserver) rather than a pipe.
pub fn is_socket(fd: BorrowedFd<'_>) -> bool {
    is_file_type(fd, rustix::fs::FileType::Socket)
}

/// Whether the fd is a pipe or FIFO.
pub fn is_fifo(fd: BorrowedFd<'_>) -> bool {
    is_file_type(fd, rustix::fs::FileType::Fifo)
}

fn is_file_type(fd: BorrowedFd<'_>, kind: rustix::fs::FileType) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == kind)
}

/// Waits until `fd` is readable (or writable). Returns false on timeout,
/// and at once when a stop was asked for (see `stop_on_signals`).
pub fn wait(fd: BorrowedFd<'_>, writable: bool, timeout: Duration) -> io::Result<bool> {
    let flags = if writable {
        PollFlags::OUT
    } else {
        PollFlags::IN
    };
    let stop = stop_fd();
    let mut fds = [
        PollFd::new(&fd, flags),
        PollFd::new(stop.as_ref().unwrap_or(&fd), PollFlags::IN),
    ];
    let watched = if stop.is_some() { 2 } else { 1 };
    let ts = rustix::time::Timespec {
        tv_sec: timeout.as_secs() as _,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    loop {
        match rustix::event::poll(&mut fds[..watched], Some(&ts)) {
            Ok(n) => return Ok(n > 0 && !stop_requested()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// The read end of the stop pipe (-1 until `stop_on_signals`).
static STOP_READ: AtomicI32 = AtomicI32::new(-1);
/// Its write end, for the signal handler.
static STOP_WRITE: AtomicI32 = AtomicI32::new(-1);
/// Set by the handler, for what no poll watches (a write blocked on a pipe).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Makes SIGTERM and SIGINT a request to stop rather than death (inetd
/// mode, where a process killed in the middle of a response would never
/// write its access-log line). The handler sets a flag and makes a pipe
/// readable; every wait polls that pipe too, so a signal ends the wait in
/// progress whichever thread it lands on, and any later one at once.
pub fn stop_on_signals() -> io::Result<()> {
    let mut ends = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    STOP_READ.store(ends[0], Ordering::Release);
    STOP_WRITE.store(ends[1], Ordering::Release);
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction is valid; the handler only touches
        // atomics, errno and write(2), all async-signal-safe. Without
        // SA_RESTART, a write blocked on a full pipe (output that is not a
        // socket) ends with EINTR as well.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOPPING.store(true, Ordering::Release);
    let fd = STOP_WRITE.load(Ordering::Acquire);
    // SAFETY: async-signal-safe calls only; errno is put back for the code
    // the signal interrupted. The pipe is non-blocking: once full, it is
    // readable enough.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        libc::write(fd, [1u8].as_ptr().cast(), 1);
        *errno = saved;
    }
}

/// Starts a helper thread with SIGTERM and SIGINT blocked in it (a thread
/// inherits its creator's signal mask): a stop signal must land on the
/// serving thread, whose blocking write it interrupts, not on a thread
/// that merely copies a script's stderr.
pub fn spawn_helper<F>(name: &str, f: F) -> io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    // SAFETY: the sets are initialised by sigemptyset before use, and
    // pthread_sigmask only changes this thread's mask, restored below.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTERM);
        libc::sigaddset(&mut block, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        let spawned = std::thread::Builder::new().name(name.to_string()).spawn(f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned
    }
}

/// Lowers the calling thread's scheduling priority to nice `n` (on Linux
/// the nice value is a thread's, not the process's): background work then
/// gets the cores only when the threads serving requests leave them.
/// Best effort: a failure leaves the thread as it was.
pub fn lower_priority(n: i32) {
    let _ = rustix::process::setpriority_process(None, n);
}

/// Whether a stop was asked for (see `stop_on_signals`).
pub fn stop_requested() -> bool {
    STOPPING.load(Ordering::Acquire)
}

/// The descriptor that turns readable when a stop is asked for, for the
/// waits that poll several descriptors; None unless `stop_on_signals` ran.
pub fn stop_fd() -> Option<BorrowedFd<'static>> {
    let fd = STOP_READ.load(Ordering::Acquire);
    // SAFETY: the pipe is never closed once made.
    (fd >= 0).then(|| unsafe { BorrowedFd::borrow_raw(fd) })
}

/// Socket settings for a served connection: no Nagle delay on small
/// responses (heads are held back with MSG_MORE instead).
pub fn tune_connection(fd: BorrowedFd<'_>) {
    // Failure only costs latency; a pipe or Unix socket simply refuses.
    let _ = rustix::net::sockopt::set_tcp_nodelay(fd, true);
}

/// How much of a response may wait unsent in the kernel per connection
/// (TCP_NOTSENT_LOWAT). Without a bound the kernel grows a socket's send
/// buffer to megabytes (on loopback at once: its first window is ten 64 KiB
/// segments), so a client that reads 100 bytes a second holds megabytes of
/// kernel memory, and the writes it accepted look like progress. With it,
/// the socket reports room (and send(2)/sendfile(2) take bytes) only while
/// less than this waits unsent; bytes in flight are bounded by the peer's
/// window. A fast reader drains the queue as it is written and never notices.
pub const UNSENT_LIMIT: u32 = 128 << 10;

/// Bounds what waits unsent in `fd`'s send queue to [`UNSENT_LIMIT`]. Set
/// on listening sockets, it is inherited by every accepted connection (the kernel copies the
/// listener's TCP settings), so it costs no call per connection.
pub fn bound_unsent(fd: BorrowedFd<'_>) {
    // A pipe or Unix socket refuses, and has no autotuned buffer to bound.
    let _ = set_unsent_limit(fd, UNSENT_LIMIT);
}

/// Sets what may wait unsent in `fd`'s send queue (TCP_NOTSENT_LOWAT) to
/// `bytes`. Lowering it takes back nothing already queued: the socket only
/// reports room again once less than the new limit waits.
pub fn set_unsent_limit(fd: BorrowedFd<'_>, bytes: u32) -> io::Result<()> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, bytes)
}

/// Whether `fd` has room for a write now, by poll(2) with no wait (or is in error or hung
/// up: a write would say so at once). On a TCP socket that is full, the same call arms the
/// kernel's wake-up for when it has room again (it sets SOCK_NOSPACE), so an edge-triggered
/// watch that waits next is woken then: a check by TCP_INFO or an ioctl would not.
pub fn writable_now(fd: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
    let now = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let done = PollFlags::OUT | PollFlags::ERR | PollFlags::HUP;
    loop {
        match rustix::event::poll(&mut fds, Some(&now)) {
            Ok(n) => return n > 0 && fds[0].revents().intersects(done),
            Err(rustix::io::Errno::INTR) => continue,
            // An error here is one the next write reports.
            Err(_) => return true,
        }
    }
}

/// Bytes of physical memory (sysconf), or None where it cannot be read.
pub fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf reads a system value; it has no memory effects.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| pages as u64 * size as u64)
}

/// How long the kernel holds a new connection that has sent nothing
/// (TCP_DEFER_ACCEPT), in seconds: it is handed to accept(2) when its first
/// bytes arrive, or after this with none (then the header timeout runs as
/// for any connection). HTTP clients speak first, so a connection usually
/// comes with its request: the first read finds it, and the socket is never
/// registered with epoll only to be woken for it. That was a quarter of the
/// server's CPU per connection with `Connection: close`
/// (benches/compare/results/2026-12-06-defer). h2o sets the same second on
/// every listener; nginx has it as `listen ... deferred`.
pub const DEFER_ACCEPT_SECS: i32 = 1;

/// Sets [`DEFER_ACCEPT_SECS`] on a TCP listener staticd binds. A socket
/// systemd passes keeps what its unit says (`DeferAcceptSec=`, as in
/// examples/systemd/staticd-activated.socket). Failure costs only the saving.
fn defer_accept(fd: BorrowedFd<'_>) {
    let _ = setsockopt_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_DEFER_ACCEPT,
        DEFER_ACCEPT_SECS,
    );
}

fn setsockopt_int(fd: BorrowedFd<'_>, level: i32, name: i32, value: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the option value is a live c_int of the length given.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes closing `fd` reset the connection (SO_LINGER with a zero
/// timeout) instead of leaving the kernel to deliver what is queued: for a
/// client given up on as too slow, whose queued bytes would otherwise hold
/// kernel memory for as long as it takes them (nginx's
/// `reset_timedout_connection`).
pub fn reset_on_close(fd: BorrowedFd<'_>) {
    let _ = rustix::net::sockopt::set_socket_linger(fd, Some(Duration::ZERO));
}

/// Bytes written to `fd` that the peer has not acknowledged yet, sent or
/// not (SIOCOUTQ); 0 for anything but a socket.
pub fn unacked(fd: BorrowedFd<'_>) -> u64 {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int into `n`.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if rc == 0 {
        n.max(0) as u64
    } else {
        0
    }
}

/// Bytes of this TCP connection the peer has acknowledged so far
/// (TCP_INFO's `tcpi_bytes_acked`, RFC 4898's ThruOctetsAcked): what it
/// really took, as opposed to what the kernel accepted from us. None for
/// anything but a TCP socket.
pub fn bytes_acked(fd: BorrowedFd<'_>) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: tcp_info is plain old data; zeroed is a valid value of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `info` and says how
    // many in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    // A kernel older than 4.1 writes less and leaves the field out.
    let end = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8;
    (rc == 0 && len as usize >= end).then_some(info.tcpi_bytes_acked)
}

/// Makes writes (and reads) on `fd` return at once instead of blocking:
/// waiting is then poll(2)'s job, with the send timeout as its bound.
pub fn set_nonblocking(fd: BorrowedFd<'_>) {
    let _ = rustix::io::ioctl_fionbio(fd, true);
}

pub fn shutdown_write(fd: BorrowedFd<'_>) {
    let _ = rustix::net::shutdown(fd, rustix::net::Shutdown::Write);
}

pub fn peer_addr(fd: BorrowedFd<'_>) -> Option<SocketAddr> {
    let any = rustix::net::getpeername(fd).ok()??;
    SocketAddr::try_from(any).ok()
}

/// The local IP address and port of a TCP socket.
pub fn local_addr(fd: BorrowedFd<'_>) -> Option<SocketAddr> {
    let any = rustix::net::getsockname(fd).ok()?;
    SocketAddr::try_from(any).ok()
}

/// The peer's and the local address of a connected socket (None for one
/// that has no IP address: a Unix socket, a pipe).
pub fn socket_addrs(fd: BorrowedFd<'_>) -> (Option<SocketAddr>, Option<SocketAddr>) {
    (peer_addr(fd), local_addr(fd))
}

/// A listening Unix-domain stream socket at `path`, with permissions
/// `mode`. The file is made with that mode by bind(2) itself, under a umask
/// set for the purpose: a chmod by path afterwards would follow a symlink
/// that someone with write access to the directory swapped in meanwhile.
/// The umask is the process's, so this runs at start-up, before any thread.
pub fn unix_listener(path: &Path, mode: u32) -> io::Result<UnixListener> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let addr = SocketAddrUnix::new(path)?;
    let flags = SocketFlags::CLOEXEC | SocketFlags::NONBLOCK;
    let fd = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)?;
    // A socket file starts from 0777; the umask takes away the rest.
    let mask = Mode::from_raw_mode(!mode & 0o777);
    let previous = rustix::process::umask(mask);
    let bound = rustix::net::bind(&fd, &addr);
    rustix::process::umask(previous);
    bound?;
    if let Err(e) = rustix::net::listen(&fd, 4096) {
        let _ = std::fs::remove_file(path);
        return Err(e.into());
    }
    Ok(UnixListener::from(fd))
}

/// Whether a server accepts on the Unix socket at `path`: connecting is
/// refused on a socket file its server left behind. Non-blocking, so that a
/// live server with a full backlog cannot hold up the start.
pub fn unix_socket_in_use(path: &Path) -> io::Result<bool> {
    use rustix::io::Errno;
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let addr = SocketAddrUnix::new(path)?;
    let flags = SocketFlags::CLOEXEC | SocketFlags::NONBLOCK;
    let fd = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)?;
    match rustix::net::connect(&fd, &addr) {
        // EAGAIN: the backlog is full, of a live server.
        Ok(()) | Err(Errno::AGAIN) => Ok(true),
        Err(Errno::CONNREFUSED | Errno::NOENT) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A listening TCP socket. `reuse_port` lets every worker thread have its
/// own listener on the same address, so the kernel spreads connections
/// across threads without waking them all.
pub fn listener(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::TcpListener> {
    let fd = bound_socket(addr, reuse_port, rustix::net::SocketFlags::NONBLOCK)?;
    bound_unsent(fd.as_fd());
    defer_accept(fd.as_fd());
    rustix::net::listen(&fd, 4096)?;
    Ok(std::net::TcpListener::from(fd))
}

/// Whether the port is free for a plain bind: SO_REUSEPORT listeners would
/// happily share a port with another staticd, so this probe comes first.
pub fn check_port_free(addr: SocketAddr) -> io::Result<()> {
    bound_socket(addr, false, rustix::net::SocketFlags::empty()).map(drop)
}

/// A TCP socket bound to `addr`; an IPv6 one serves IPv6 only, so that
/// `0.0.0.0` and `[::]` can be bound side by side.
fn bound_socket(
    addr: SocketAddr,
    reuse_port: bool,
    flags: rustix::net::SocketFlags,
) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => rustix::net::AddressFamily::INET,
        SocketAddr::V6(_) => rustix::net::AddressFamily::INET6,
    };
    let flags = flags | rustix::net::SocketFlags::CLOEXEC;
    let fd = rustix::net::socket_with(family, rustix::net::SocketType::STREAM, flags, None)?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true)?;
    if reuse_port {
        rustix::net::sockopt::set_socket_reuseport(&fd, true)?;
    }
    if addr.is_ipv6() {
        rustix::net::sockopt::set_ipv6_v6only(&fd, true)?;
    }
    rustix::net::bind(&fd, &addr)?;
    Ok(fd)
}

/// Gives the heap's free pages back to the kernel (glibc's malloc_trim):
/// free memory between live allocations stays resident otherwise. A no-op
/// where the C library has no such call.
pub fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and only rearranges the heap
    // under malloc's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `SO_ATTACH_REUSEPORT_CBPF` (Linux 4.5), as asm-generic/socket.h numbers
/// it (every architecture staticd is built for: not MIPS, PA-RISC or
/// SPARC, which number it otherwise).
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// Steers each datagram that reaches `fd`'s SO_REUSEPORT group to the
/// socket of index (first byte of its QUIC destination connection ID) mod
/// `sockets`, whatever the sender's address: a QUIC connection's packets
/// then reach the socket whose endpoint issued its connection IDs (which
/// name it so, `serve::h3`), even after the client's address or port
/// changes. The ID starts at byte 1 of a short-header packet and at byte 6
/// of a long-header one (RFC 9000 §17.2, §17.3). A datagram too short to
/// hold the byte goes to socket 0. The kernel falls back to its own hash
/// if a program returns an index past the group.
pub fn steer_quic_by_connection_id(fd: BorrowedFd<'_>, sockets: u32) -> io::Result<()> {
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let load_byte = libc::BPF_LD | libc::BPF_B | libc::BPF_ABS;
    let mut program = [
        // 0: A = the first byte; its top bit marks a long header.
        op(load_byte, 0, 0, 0),
        // 1: long header? to 4, else on to 2.
        op(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, 2, 0, 0x80),
        // 2: short header: the ID's first byte is the packet's second.
        op(load_byte, 0, 0, 1),
        // 3: on to 5.
        op(libc::BPF_JMP | libc::BPF_JA, 0, 0, 1),
        // 4: long header: flags, version (4), the ID's length, the ID.
        op(load_byte, 0, 0, 6),
        // 5: A %= sockets.
        op(
            libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K,
            0,
            0,
            sockets.max(1),
        ),
        // 6: that socket.
        op(libc::BPF_RET | libc::BPF_A, 0, 0, 0),
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `program`, whose length it gives, both
    // alive for the call; the kernel copies the program and keeps no
    // pointer to either.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
