//! Slow readers are really dropped, and hold little kernel memory while they
//! last (issue 28).
//!
//! `--min-rate` measures a response by the bytes the client *acknowledged*
//! (TCP_INFO), not the bytes the kernel accepted into the socket's send
//! buffer: on loopback that buffer grows to megabytes at once, and a reader
//! taking 100 B/s used to look like one taking kilobytes per second for as
//! long as it liked. And what may wait unsent in the kernel per connection
//! is bounded (TCP_NOTSENT_LOWAT), so one slow reader cannot pin megabytes
//! of socket buffers.
//!
//! Each test prints its figures as `slow_readers: ...` lines straight to
//! stderr, so a plain `cargo test --test slow_readers` shows them. The tests
//! of this file run one at a time. Memory is counted per socket (sock_diag),
//! so test binaries running beside cannot move the figures.

#[macro_use]
mod common;

use std::fs;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// The file the readers fetch: 50 MB, far more than any socket buffer holds.
const BIG: u64 = 50 << 20;
/// The flags of the measurement.
const FLAGS: [&str; 6] = [
    "--min-rate",
    "500",
    "--read-timeout",
    "2",
    "--send-timeout",
    "10",
];
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How soon the reader must be dropped. Its progress is what its TCP stack
/// acknowledged, and that stack takes what fits its receive buffer (about
/// 10 KB for a 4 KiB SO_RCVBUF, which the kernel doubles) whatever its
/// application reads: those bytes, taken in its first second, are credited
/// at the first reading (a quarter timeout in) and buy credit up to one
/// timeout from then. After that it acknowledges only what it reads, in
/// window updates far apart: so it is dropped about 12.5 s in (measured:
/// 13 s). Over TLS its TCP reads whole records, up to 16 KiB at a time
/// however little it decrypts (measured: 13-16 s). 1 s more for scheduling.
const DROP_BOUND: Duration = Duration::from_secs(17);
/// The slow readers' source address (the good requests come from 127.0.0.1).
const SLOW: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// How many slow readers the kernel-memory test holds open at once.
const READERS: usize = 200;
/// The most kernel TCP memory (4 KiB pages, as /proc/net/sockstat's `mem`) one
/// slow reader may hold, both ends of the loopback connection together:
/// the server's unsent queue (sys::UNSENT_LIMIT, 128 KiB, plus the skb a
/// write was filling) and what is in flight to the client's 4 KiB receive
/// buffer. Without the bound it was megabytes (700 pages and more).
const PAGES_PER_READER: f64 = 64.0;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A file of 50 MB whose every 8-byte word says where it is, so a byte out
/// of place shows.
fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    let mut f = io::BufWriter::new(fs::File::create(root.join("big.bin")).unwrap());
    for word in 0..BIG / 8 {
        f.write_all(&word.to_le_bytes()).unwrap();
    }
    f.into_inner().unwrap().sync_all().unwrap();
    root
}

fn report(what: &str) {
    let name = thread::current().name().unwrap_or("a test").to_string();
    let line = format!("slow_readers: {name}: {what}\n");
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

/// A TCP connection from 127.0.0.2 with a 4 KiB receive buffer (set before
/// connecting, so the window it offers is small from the start).
fn small_window_tcp(dest: SocketAddr) -> TcpStream {
    tcp_with_window(dest, 4096)
}

/// The TCP state of a client socket (TCP_INFO's tcpi_state): ESTABLISHED
/// until the server ends the connection (a FIN makes it CLOSE_WAIT, a
/// reset CLOSE), whatever still waits unread in the receive buffer.
fn tcp_state(tcp: &TcpStream) -> u8 {
    // SAFETY: tcp_info is plain old data; the kernel writes at most `len`
    // bytes of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            tcp.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", io::Error::last_os_error());
    info.tcpi_state
}

const TCP_ESTABLISHED: u8 = 1;

/// The measurement: one client with a 4 KiB receive buffer reading
/// 100 bytes a second of a 50 MB file, against `--min-rate 500
/// --read-timeout 2 --send-timeout 10`. Before, it was still connected after
/// 90 s (the log said 2.8 MB sent; it had read 9 KB). Now the server gives up
/// within the send timeout plus a few seconds, names it in the log, and
/// serves others meanwhile.
fn reader_of_100_bytes_a_second_is_dropped(v: Variant) {
    let _serial = serial();
    let root = site();
    let mut server = Server::builder(v, root.path())
        .args(FLAGS)
        .log_format("common")
        .start();
    let connector = server.connector();
    let tcp = small_window_tcp(connector.addr);
    let probe = tcp.try_clone().unwrap();
    let mut conn = Conn::from_stream(connector.wrap(tcp));
    let started = Instant::now();
    conn.send(request("GET", "/big.bin", &[]));
    let head = conn.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(BIG));
    let read = read_slowly_until_dropped(&mut conn, &probe, started, "an HTTP/1.1 reader");
    // The access log's line counts what the server wrote: before the
    // kernel's queue was bounded it said 2.8 MB for a reader of 9 KB.
    let sent = logged_bytes(&server, "\"GET /big.bin HTTP/1.1\" 200 ");
    report(&format!("the access log says {sent} bytes sent"));
    assert!(
        sent < 1 << 20,
        "{sent} bytes went into the kernel for a reader of {read} B"
    );
    server.assert_survived("/a.txt");
}

/// Reads 100 bytes a second from `conn` until the server ends the
/// connection (`probe`: its TCP socket), and asserts that it did within
/// `DROP_BOUND` of `started`. Returns how many bytes it read.
fn read_slowly_until_dropped(
    conn: &mut Conn,
    probe: &TcpStream,
    started: Instant,
    who: &str,
) -> u64 {
    let mut read = 0u64;
    let ended = loop {
        if tcp_state(probe) != TCP_ESTABLISHED {
            break Some(started.elapsed());
        }
        if started.elapsed() > DROP_BOUND + SEND_TIMEOUT {
            break None;
        }
        read += conn.read_once(100) as u64;
        thread::sleep(Duration::from_secs(1));
    };
    let rate = read as f64 / started.elapsed().as_secs_f64();
    report(&format!(
        "{who} of {rate:.0} B/s (read {read} B): {}",
        match ended {
            Some(t) => format!("dropped after {:.1} s", t.as_secs_f64()),
            None => "still connected".to_string(),
        }
    ));
    let ended = ended.unwrap_or_else(|| {
        panic!("still connected after {DROP_BOUND:?} + {SEND_TIMEOUT:?} (read {read} B)")
    });
    assert!(
        ended <= DROP_BOUND,
        "dropped only after {ended:?} (bound {DROP_BOUND:?})"
    );
    read
}

/// The byte count of the access log's (common format) line that holds `needle`.
fn logged_bytes(server: &Server, needle: &str) -> u64 {
    let found = |lines: &[String]| lines.iter().any(|l| l.contains(needle));
    server.stderr().wait_for(IO_TIMEOUT, found);
    let lines = server.stderr().snapshot();
    let line = lines
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no log line with {needle:?} in {lines:?}"));
    line.rsplit(' ').next().unwrap().trim().parse().unwrap()
}

/// The same over HTTP/2 (h2c, and ALPN h2 over TLS): the client opens every
/// flow-control window as wide as it goes, so only the socket holds the
/// server back, and reads 100 bytes a second. The turn's frames are
/// measured as a response is (acknowledged bytes against `--min-rate`).
#[cfg(all(feature = "http2", feature = "tls"))]
fn h2_reader_of_100_bytes_a_second_is_dropped(v: Variant) {
    let _serial = serial();
    let root = site();
    let mut server = Server::builder(v, root.path())
        .args(FLAGS)
        .log_format("common")
        .start();
    let mut connector = server.connector();
    connector.tls = connector.tls.map(|tls| tls.offering_h2());
    let tcp = small_window_tcp(connector.addr);
    let probe = tcp.try_clone().unwrap();
    let mut conn = Conn::from_stream(connector.wrap(tcp));
    let started = Instant::now();
    conn.send(h2_request("/big.bin"));
    read_slowly_until_dropped(&mut conn, &probe, started, "an HTTP/2 reader");
    server.assert_survived("/a.txt");
}

/// An HTTP/2 connection's opening with a GET of `path` on stream 1: every flow-control
/// window opened as wide as it goes, so that only the socket holds the server back.
fn h2_request(path: &str) -> Vec<u8> {
    use common::h2frames::{flag, headers, hpack, setting, settings, window_update, PREFACE};
    let mut hello = PREFACE.to_vec();
    hello.extend(settings(&[(setting::INITIAL_WINDOW_SIZE, 0x7fff_ffff)]));
    hello.extend(window_update(0, 0x7fff_ffff - 65_535));
    let block = hpack::request("GET", path);
    hello.extend(headers(1, &block, flag::END_STREAM | flag::END_HEADERS));
    hello
}

/// The same flags do not touch a client that reads at full speed: the whole
/// 50 MB arrives, every byte in its place.
fn full_speed_download_completes(v: Variant) {
    let _serial = serial();
    let root = site();
    let server = Server::builder(v, root.path()).args(FLAGS).start();
    let mut conn = server.connect();
    conn.send(request("GET", "/big.bin", &[]));
    let head = conn.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(BIG));
    let started = Instant::now();
    let body = conn.take_exact(BIG as usize);
    let took = started.elapsed();
    for (i, word) in body.chunks_exact(8).enumerate() {
        let got = u64::from_le_bytes(word.try_into().unwrap());
        assert_eq!(got, i as u64, "byte {} is not the file's", i * 8);
    }
    report(&format!(
        "50 MB in {:.2} s ({:.0} MB/s)",
        took.as_secs_f64(),
        BIG as f64 / 1e6 / took.as_secs_f64()
    ));
    // Keep-alive: the connection is still good for the next request.
    let resp = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.status, 200);
}

/// A TCP connection from 127.0.0.2 with `rcvbuf` bytes of receive buffer.
fn tcp_with_window(dest: SocketAddr, rcvbuf: usize) -> TcpStream {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).expect("socket");
    sockopt::set_socket_recv_buffer_size(&fd, rcvbuf).expect("SO_RCVBUF");
    rustix::net::bind(&fd, &SocketAddr::new(SLOW, 0)).expect("bind 127.0.0.2");
    rustix::net::connect(&fd, &dest).expect("connect");
    TcpStream::from(fd)
}

/// How many readers [`readers_that_stop_after_a_fast_start_hold_at_most_the_budget`] holds.
const STALLED: usize = 40;
/// What they read at full speed before they stop: enough to be measured fast.
const FAST_START: usize = 4 << 20;
/// The budget that test gives: 16 MiB, room for four raised queues (3.875 MiB each).
const STALL_BUDGET: u64 = 16 << 20;

/// Readers that take `FAST_START` at full speed and then stop reading: each may have had its
/// unsent queue raised to 4 MiB (`--unsent-budget`), but all together hold at most the budget
/// more kernel memory than the same readers with no raise at all (`--unsent-budget 0`).
fn readers_that_stop_after_a_fast_start_hold_at_most_the_budget(v: Variant) {
    stalled_readers_hold_at_most_the_budget(v, Protocol::Http1);
}

/// The same over HTTP/2 (h2c, and ALPN h2 over TLS), whose connections' queues are raised
/// while they write turns of frames: each reader asks for the file on one stream with every
/// window open, so that only the socket holds the server back.
#[cfg(all(feature = "http2", feature = "tls"))]
fn h2_readers_that_stop_after_a_fast_start_hold_at_most_the_budget(v: Variant) {
    stalled_readers_hold_at_most_the_budget(v, Protocol::Http2);
}

/// What the stalled readers speak.
#[derive(Clone, Copy)]
enum Protocol {
    Http1,
    #[cfg_attr(not(all(feature = "http2", feature = "tls")), allow(dead_code))]
    Http2,
}

fn stalled_readers_hold_at_most_the_budget(v: Variant, protocol: Protocol) {
    let _serial = serial();
    let root = site();
    let without = stalled_readers_pages(v, &root, protocol, 0, 1, |_| true);
    // A quarter more for what the kernel charges beyond the bytes themselves (each skb's
    // overhead, and the one skb a raised queue's last write may put past its limit): measured
    // per socket, the four raised queues held 2,518 to 4,028 pages more (HTTP/1.1 and HTTP/2,
    // cleartext and TLS) against the budget's 4,096. With room for all forty (a budget of
    // 1 GiB) they held 39,350 pages against 2,598 with none: 984 each, as many as nginx's.
    let bound = without + (STALL_BUDGET / 4096) as f64 * 1.25;
    // Up to three tries: how the kernel cuts the queues into skbs, and so what it charges
    // beyond the bytes, varies from run to run.
    let with = stalled_readers_pages(v, &root, protocol, STALL_BUDGET, 3, |pages| pages <= bound);
    assert!(
        with <= bound,
        "with a budget of {} pages the stalled readers hold {with} pages, {without} without \
         one: more than the budget",
        STALL_BUDGET / 4096
    );
}

/// The kernel memory (pages) that `STALLED` readers stopped after `FAST_START` bytes, and the
/// server's ends of their connections, hold with `--unsent-budget budget`: the lowest of
/// `tries`, or the first that is `enough`.
fn stalled_readers_pages(
    v: Variant,
    root: &Docroot,
    protocol: Protocol,
    budget: u64,
    tries: usize,
    enough: impl Fn(f64) -> bool,
) -> f64 {
    let server = Server::builder(v, root.path())
        .args(["--send-timeout", "120", "--min-rate", "0"])
        .args(["--max-connections-per-ip", "0"])
        .args(["--unsent-budget", &budget.to_string()])
        .start();
    let mut connector = server.connector();
    if let Protocol::Http2 = protocol {
        connector.tls = connector.tls.map(|tls| tls.offering_h2());
    }
    let open = || {
        (0..STALLED)
            .map(|_| {
                // 64 KiB (the kernel doubles it): a window a client keeps up with on loopback.
                let tcp = tcp_with_window(connector.addr, 64 << 10);
                let mut conn = Conn::from_stream(connector.wrap(tcp));
                match protocol {
                    Protocol::Http1 => {
                        conn.send(request("GET", "/big.bin", &[]));
                        assert_eq!(conn.read_head().status, 200);
                    }
                    Protocol::Http2 => conn.send(h2_request("/big.bin")),
                }
                // Over HTTP/2, frames' headers and all: as many bytes as the socket took.
                let _ = conn.take_exact(FAST_START);
                conn
            })
            .collect()
    };
    let what = format!(
        "--unsent-budget {budget}: {STALLED} readers stopped after {FAST_START} bytes{}",
        match protocol {
            Protocol::Http1 => "",
            Protocol::Http2 => " (HTTP/2)",
        }
    );
    pages_held(tries, enough, open, STALLED, &what)
}

/// The kernel memory (pages) the `count` connections `open` makes (their requests sent) hold,
/// both ends, once their responses have queued what they could: the lowest of `tries`, or the
/// first that is `enough`. Each try is reported, as `what`.
fn pages_held(
    tries: usize,
    enough: impl Fn(f64) -> bool,
    open: impl Fn() -> Vec<Conn>,
    count: usize,
    what: &str,
) -> f64 {
    let mut best = f64::MAX;
    for attempt in 1..=tries {
        let readers = open();
        // Let every response fill what the kernel lets it queue.
        thread::sleep(Duration::from_secs(3));
        let pages = pages_held_by(&readers);
        report(&format!(
            "{what}, try {attempt}: {pages:.0} pages of TCP memory ({:.1} per reader)",
            pages / count as f64
        ));
        best = best.min(pages);
        drop(readers);
        if enough(best) {
            break;
        }
    }
    best
}

/// The kernel memory, in 4 KiB pages, held by the TCP sockets of `readers` (from 127.0.0.2)
/// and by the server's ends of their connections: what each has charged to TCP memory
/// (/proc/net/sockstat's `mem`), its receive and send queues and what it has reserved ahead.
/// Counted per socket over sock_diag, so that it is theirs alone: the whole kernel's figure
/// moved by thousands of pages either way while other test binaries ran beside.
fn pages_held_by(readers: &[Conn]) -> f64 {
    let ports: Vec<u16> = readers
        .iter()
        .map(|conn| conn.stream().local_addr().unwrap().port())
        .collect();
    let ours = |end: SocketAddr| end.ip() == SLOW && ports.contains(&end.port());
    let bytes: u64 = sock_diag::tcp4_sockets()
        .into_iter()
        .filter(|socket| ours(socket.local) || ours(socket.peer))
        .map(|socket| socket.charged)
        .sum();
    bytes as f64 / 4096.0
}

/// The kernel's table of IPv4 TCP sockets, each with the memory it holds, read over
/// NETLINK_SOCK_DIAG as `ss -tm` does (linux/inet_diag.h, linux/sock_diag.h).
mod sock_diag {
    use std::net::{Ipv4Addr, SocketAddr};

    use rustix::net::{netlink, AddressFamily, RecvFlags, SendFlags, SocketType};

    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLM_F_REQUEST: u16 = 0x1;
    const NLM_F_DUMP: u16 = 0x300;
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;
    const NLMSG_HEADER: usize = 16;
    /// struct inet_diag_req_v2, the dump's request after its header.
    const INET_DIAG_REQ_V2: usize = 56;
    /// struct inet_diag_msg, before its attributes.
    const INET_DIAG_MSG: usize = 72;
    const INET_DIAG_SKMEMINFO: u16 = 7;
    /// Indices into SKMEMINFO's array of u32 (SK_MEMINFO_*).
    const RMEM_ALLOC: usize = 0;
    const FWD_ALLOC: usize = 4;
    const WMEM_QUEUED: usize = 5;

    pub struct Socket {
        pub local: SocketAddr,
        pub peer: SocketAddr,
        /// Bytes charged to TCP memory: received and queued data, and the reserve ahead.
        pub charged: u64,
    }

    pub fn tcp4_sockets() -> Vec<Socket> {
        let fd = rustix::net::socket(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            Some(netlink::SOCK_DIAG),
        )
        .expect("a NETLINK_SOCK_DIAG socket");
        rustix::net::send(&fd, &dump_request(), SendFlags::empty()).expect("sock_diag request");
        let mut sockets = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let (len, _) =
                rustix::net::recv(&fd, &mut buf[..], RecvFlags::empty()).expect("sock_diag answer");
            let mut messages = &buf[..len];
            while messages.len() >= NLMSG_HEADER {
                let size = u32_at(messages, 0) as usize;
                match u16_at(messages, 4) {
                    NLMSG_DONE => return sockets,
                    NLMSG_ERROR => panic!("sock_diag refused the dump"),
                    _ => sockets.push(socket(&messages[NLMSG_HEADER..size])),
                }
                messages = &messages[align(size).min(messages.len())..];
            }
        }
    }

    /// Every IPv4 TCP socket in every state, with its memory (SKMEMINFO).
    fn dump_request() -> Vec<u8> {
        let mut req = Vec::with_capacity(NLMSG_HEADER + INET_DIAG_REQ_V2);
        req.extend(((NLMSG_HEADER + INET_DIAG_REQ_V2) as u32).to_ne_bytes());
        req.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        req.extend((NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        req.extend(1u32.to_ne_bytes()); // sequence
        req.extend(0u32.to_ne_bytes()); // port id: the kernel fills it in

        // struct inet_diag_req_v2: family, protocol, extensions wanted, padding, states,
        // then a zeroed inet_diag_sockid (any address, any port).
        let skmeminfo = 1 << (INET_DIAG_SKMEMINFO - 1);
        req.extend([libc::AF_INET as u8, libc::IPPROTO_TCP as u8, skmeminfo, 0]);
        req.extend(u32::MAX.to_ne_bytes());
        req.extend([0u8; 48]);
        req
    }

    /// One struct inet_diag_msg and its attributes.
    fn socket(msg: &[u8]) -> Socket {
        let end = |at: usize| Ipv4Addr::new(msg[at], msg[at + 1], msg[at + 2], msg[at + 3]);
        let port = |at: usize| u16::from_be_bytes([msg[at], msg[at + 1]]);
        let local = SocketAddr::new(end(8).into(), port(4));
        let peer = SocketAddr::new(end(24).into(), port(6));
        let mut charged = 0;
        let mut attrs = &msg[INET_DIAG_MSG.min(msg.len())..];
        while attrs.len() >= 4 {
            let len = u16_at(attrs, 0) as usize;
            let kind = u16_at(attrs, 2);
            if kind == INET_DIAG_SKMEMINFO {
                let meminfo = |i: usize| u64::from(u32_at(attrs, 4 + 4 * i));
                charged = meminfo(RMEM_ALLOC) + meminfo(WMEM_QUEUED) + meminfo(FWD_ALLOC);
            }
            attrs = &attrs[align(len.max(4)).min(attrs.len())..];
        }
        Socket {
            local,
            peer,
            charged,
        }
    }

    fn u16_at(bytes: &[u8], at: usize) -> u16 {
        u16::from_ne_bytes([bytes[at], bytes[at + 1]])
    }

    fn u32_at(bytes: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    /// Netlink messages and attributes start on 4-byte boundaries.
    fn align(len: usize) -> usize {
        (len + 3) & !3
    }
}

/// 200 slow readers (4 KiB receive buffers, reading nothing while measured)
/// and the server's ends of their connections hold at most `PAGES_PER_READER`
/// pages of kernel TCP memory each (the lowest of up to three tries counts:
/// what the kernel charges beyond the bytes varies from run to run).
fn slow_readers_hold_little_kernel_memory(v: Variant) {
    let _serial = serial();
    let root = site();
    // Generous timeouts: the readers must still be there when measured.
    let server = Server::builder(v, root.path())
        .args(["--send-timeout", "120", "--min-rate", "0"])
        .args(["--max-connections-per-ip", "0"])
        .start();
    let connector = server.connector();
    let open = || {
        let mut readers: Vec<Conn> = (0..READERS)
            .map(|_| {
                let tcp = small_window_tcp(connector.addr);
                let mut conn = Conn::from_stream(connector.wrap(tcp));
                conn.send(request("GET", "/big.bin", &[]));
                conn
            })
            .collect();
        for conn in &mut readers {
            assert_eq!(conn.read_head().status, 200);
        }
        readers
    };
    let per_reader = |pages: f64| pages / READERS as f64;
    let what = format!("{READERS} slow readers");
    let enough = |pages| per_reader(pages) <= PAGES_PER_READER;
    let best = per_reader(pages_held(3, enough, open, READERS, &what));
    assert!(
        best <= PAGES_PER_READER,
        "each slow reader holds {best:.1} pages of kernel TCP memory (bound {PAGES_PER_READER})"
    );
}

matrix!([h1, tls, uring] both_modes:
    reader_of_100_bytes_a_second_is_dropped,
    full_speed_download_completes,
    slow_readers_hold_little_kernel_memory,
);

// inetd mode never raises a queue (see `--unsent-budget`).
matrix!([h1, tls, uring] standalone:
    readers_that_stop_after_a_fast_start_hold_at_most_the_budget,
);

// A slow HTTP/3 reader (QUIC flow control, not TCP's window) is in tests/http3_attacks.rs.
matrix!([h2c, h2_tls] both_modes: h2_reader_of_100_bytes_a_second_is_dropped);
// Over the event loop: inetd mode never raises a queue.
matrix!([h2c, h2_tls] standalone:
    h2_readers_that_stop_after_a_fast_start_hold_at_most_the_budget,
);
