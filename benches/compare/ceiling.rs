//! The ceiling: the least work an HTTP/1.1 server can do for these
//! requests. It never parses a request and never touches a file: it finds
//! the end of each request head (`\r\n\r\n`) and writes a prebuilt
//! response of the cell's size (bodies of 256 KB and more by sendfile(2)
//! from a memfd, so that it copies no more than a server sending a file
//! does). What it reaches is what the loopback, the kernel and the load
//! client allow on this machine.
//!
//! It runs in its own process (the bench binary started again with
//! `--serve-ceiling`) so that its CPU time and memory are measured like
//! every other server's: one epoll loop per core, each with its own
//! SO_REUSEPORT listener on every port, one port per response size.

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::thread;

/// The hidden command-line flag that runs the ceiling instead of the harness.
pub const FLAG: &str = "--serve-ceiling";

/// Bodies at least this large go out by sendfile(2) from memory (a memfd),
/// as the real servers send files; smaller responses are one write.
const SENDFILE_FROM: u64 = 256 * 1000;

/// A canned response, in a keep-alive and a close variant.
struct Canned {
    keep_alive: Vec<u8>,
    close: Vec<u8>,
    /// For large bodies: the heads above hold no body; it is sent from here.
    body: Option<(RawFd, u64)>,
}

impl Canned {
    fn new(size: u64) -> io::Result<Canned> {
        let body = vec![b'x'; size as usize];
        let large = size >= SENDFILE_FROM;
        let response = |connection: &str| {
            let mut r = format!(
                "HTTP/1.1 200 OK\r\nServer: ceiling\r\nContent-Type: application/octet-stream\r\n\
                 Content-Length: {size}\r\nConnection: {connection}\r\n\r\n"
            )
            .into_bytes();
            if !large {
                r.extend_from_slice(&body);
            }
            r
        };
        let memfd = if large {
            Some((memfd_with(&body)?, size))
        } else {
            None
        };
        Ok(Canned {
            keep_alive: response("keep-alive"),
            close: response("close"),
            body: memfd,
        })
    }
}

fn memfd_with(bytes: &[u8]) -> io::Result<RawFd> {
    // SAFETY: memfd_create takes a NUL-terminated name; the descriptor is
    // written through and kept for the life of the process.
    unsafe {
        let fd = check(libc::memfd_create(
            c"ceiling-body".as_ptr(),
            libc::MFD_CLOEXEC,
        ))?;
        let mut done = 0;
        while done < bytes.len() {
            let n = libc::write(fd, bytes[done..].as_ptr().cast(), bytes.len() - done);
            if n <= 0 {
                return Err(io::Error::last_os_error());
            }
            done += n as usize;
        }
        Ok(fd)
    }
}

/// Arguments after `--serve-ceiling`: `THREADS PORT:SIZE[,PORT:SIZE...]`.
pub fn main(args: &[String]) -> ! {
    let parsed = (|| {
        let threads: usize = args.first()?.parse().ok()?;
        let ports = args
            .get(1)?
            .split(',')
            .map(|pair| {
                let (port, size) = pair.split_once(':')?;
                Some((port.parse::<u16>().ok()?, size.parse::<u64>().ok()?))
            })
            .collect::<Option<Vec<_>>>()?;
        Some((threads.max(1), ports))
    })();
    let Some((threads, ports)) = parsed else {
        eprintln!("ceiling: usage: {FLAG} THREADS PORT:SIZE[,PORT:SIZE...]");
        std::process::exit(2);
    };
    let canned = match ports
        .iter()
        .map(|&(_, s)| Canned::new(s))
        .collect::<io::Result<Vec<_>>>()
    {
        Ok(c) => Vec::leak(c),
        Err(e) => {
            eprintln!("ceiling: cannot build responses: {e}");
            std::process::exit(1);
        }
    };
    let canned: &'static [Canned] = canned;
    let mut loops = Vec::new();
    for _ in 0..threads {
        let listeners = match ports
            .iter()
            .map(|&(p, _)| listen(p))
            .collect::<io::Result<Vec<_>>>()
        {
            Ok(l) => l,
            Err(e) => {
                eprintln!("ceiling: cannot listen: {e}");
                std::process::exit(1);
            }
        };
        loops.push(thread::spawn(move || {
            if let Err(e) = event_loop(&listeners, canned) {
                eprintln!("ceiling: {e}");
                std::process::exit(1);
            }
        }));
    }
    for l in loops {
        let _ = l.join();
    }
    std::process::exit(0)
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn listen(port: u16) -> io::Result<RawFd> {
    // SAFETY: plain socket syscalls on a descriptor this function owns; the
    // address struct is fully initialised before use.
    unsafe {
        let fd = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let one: libc::c_int = 1;
        for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
            check(libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            ))?;
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        check(libc::bind(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ))?;
        check(libc::listen(fd, 4096))?;
        Ok(fd)
    }
}

/// One connection: unanswered request heads and how far the current
/// response has been written.
struct Conn {
    canned: &'static Canned,
    input: Vec<u8>,
    /// Where the search for the next `\r\n\r\n` resumes.
    scanned: usize,
    /// One entry per request head found: does its response close?
    queue: std::collections::VecDeque<bool>,
    /// Bytes of the front response already written.
    written: usize,
    /// The peer sent FIN.
    eof: bool,
}

const LISTENER: u64 = 1 << 63;

fn event_loop(listeners: &[RawFd], canned: &'static [Canned]) -> io::Result<()> {
    // SAFETY: epoll_create1 returns a new descriptor or -1.
    let ep = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    for (i, &fd) in listeners.iter().enumerate() {
        add(ep, fd, libc::EPOLLIN as u32, LISTENER | i as u64)?;
    }
    let mut conns: HashMap<RawFd, Conn> = HashMap::new();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: `events` outlives the call and its length is passed.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for ev in &events[..n as usize] {
            let token = ev.u64;
            if token & LISTENER != 0 {
                let i = (token & !LISTENER) as usize;
                accept_all(ep, listeners[i], &canned[i], &mut conns);
                continue;
            }
            let fd = token as RawFd;
            let done = match conns.get_mut(&fd) {
                Some(conn) => !serve(fd, conn, &mut buf),
                None => false,
            };
            if done {
                conns.remove(&fd);
                // SAFETY: fd is ours and is forgotten with its Conn.
                unsafe { libc::close(fd) };
            }
        }
    }
}

fn add(ep: RawFd, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: `ev` is a valid epoll_event for the duration of the call.
    check(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) }).map(drop)
}

fn accept_all(
    ep: RawFd,
    listener: RawFd,
    canned: &'static Canned,
    conns: &mut HashMap<RawFd, Conn>,
) {
    loop {
        // SAFETY: accept4 with null address pointers is valid.
        let fd = unsafe {
            libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 {
            return;
        }
        let one: libc::c_int = 1;
        // SAFETY: setsockopt reads one c_int from a valid pointer.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        let events = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
        if add(ep, fd, events, fd as u64).is_err() {
            // SAFETY: fd was just accepted and is not registered anywhere.
            unsafe { libc::close(fd) };
            continue;
        }
        conns.insert(
            fd,
            Conn {
                canned,
                input: Vec::new(),
                scanned: 0,
                queue: Default::default(),
                written: 0,
                eof: false,
            },
        );
    }
}

/// Reads what is there, queues a response per complete head and writes
/// until the socket is full. False: close the connection.
fn serve(fd: RawFd, conn: &mut Conn, buf: &mut [u8]) -> bool {
    // Edge-triggered: drain the socket.
    while !conn.eof {
        // SAFETY: reads into a buffer of the length passed.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => conn.eof = true,
            n if n > 0 => conn.input.extend_from_slice(&buf[..n as usize]),
            _ if would_block() => break,
            _ => return false,
        }
    }
    // A head that asks to close ends the connection: ignore what follows it.
    while conn.queue.back() != Some(&true) {
        let Some(at) = find(&conn.input[conn.scanned..], b"\r\n\r\n") else {
            conn.scanned = conn.input.len().saturating_sub(3);
            break;
        };
        let end = conn.scanned + at + 4;
        conn.queue.push_back(wants_close(&conn.input[..end]));
        conn.input.drain(..end);
        conn.scanned = 0;
    }
    while let Some(&close) = conn.queue.front() {
        let canned = conn.canned;
        let head = if close {
            &canned.close
        } else {
            &canned.keep_alive
        };
        let (body_fd, body_len) = canned.body.unwrap_or((-1, 0));
        let total = head.len() + body_len as usize;
        let n = if conn.written < head.len() {
            let more = if body_len > 0 { libc::MSG_MORE } else { 0 };
            let rest = &head[conn.written..];
            // SAFETY: sends from a live buffer of the length passed.
            unsafe {
                libc::send(
                    fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL | more,
                )
            }
        } else {
            let mut offset = (conn.written - head.len()) as libc::off_t;
            // SAFETY: both descriptors are open; offset is a local.
            unsafe { libc::sendfile(fd, body_fd, &mut offset, total - conn.written) }
        };
        if n < 0 {
            return would_block();
        }
        conn.written += n as usize;
        if conn.written == total {
            conn.written = 0;
            conn.queue.pop_front();
            if close {
                return false;
            }
        }
    }
    !(conn.eof && conn.queue.is_empty())
}

fn would_block() -> bool {
    io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// No parsing, only a look for the words that decide it: "close" anywhere,
/// or HTTP/1.0 (ab's default) without "keep-alive".
fn wants_close(head: &[u8]) -> bool {
    let first_line = &head[..find(head, b"\r\n").unwrap_or(head.len())];
    contains_ignore_case(head, b"close")
        || (first_line.ends_with(b"HTTP/1.0") && !contains_ignore_case(head, b"keep-alive"))
}
