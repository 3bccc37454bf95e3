//! Idle memory per connection: what N keep-alive connections that have
//! each had one request answered, and then sit idle, add to a server's
//! resident memory.
//!
//! The harness opens them itself, one after another (connect, one GET of
//! the 1 KB file, read the whole response, keep the socket), so that no
//! SYN is ever dropped and every connection is known to have been served.
//! RSS (VmRSS summed over the server's processes) is read before the first
//! and a second after the last; the difference divided by the connections
//! still open is the number reported. Kernel socket memory (buffers,
//! struct sock, epoll entries) is not in any process's RSS and so not in
//! this number.
//!
//! Over HTTPS the same, each connection after a full TLS handshake with the
//! harness's rustls client (tls.rs): what an idle TLS session costs on top.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::procstat;
use crate::servers::{Kind, Proto, Server};
use crate::tls::{self, TlsStream};

/// staticd-inetd holds a process per connection: it is measured with this
/// many, not with 10,000 processes.
pub const INETD_CONNECTIONS: u32 = 1000;

/// Over TLS, fewer: each of its processes takes tens of milliseconds to
/// start and shake hands, and 1,000 of them one after another would take
/// longer than its keep-alive timeout (15 s), which would close the first
/// ones before the second reading.
pub const INETD_TLS_CONNECTIONS: u32 = 100;

/// How long the connections sit idle before RSS is read again.
pub const IDLE_WAIT: Duration = Duration::from_secs(1);

/// One server's result.
#[derive(Clone, Debug, Serialize)]
pub struct IdleMemory {
    pub server: String,
    /// Over TLS: each connection made a full handshake first.
    pub https: bool,
    /// HTTP/2 only (h2.rs): h2 or h2c.
    #[serde(skip_serializing_if = "Proto::is_http1")]
    pub proto: Proto,
    /// HTTP/2 only: the streams each connection holds open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    /// HTTP/2 only: response heads the server had sent, all connections
    /// together (a server may hold a request without answering it yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heads: Option<u64>,
    /// HTTP/2 only: DATA bytes the server had sent, all connections
    /// together (at most 65,535 per connection: the client's window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_bytes: Option<u64>,
    /// Connections asked for.
    pub connections: u32,
    /// Connections that got their whole response.
    pub answered: u32,
    /// Of those, still open (not closed by the server) after the wait.
    pub still_open: u32,
    /// Seconds it took to open and serve them all.
    pub open_seconds: f64,
    /// VmRSS summed over the server's processes, before and after.
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
    /// (rss_after - rss_before) / still_open.
    pub kib_per_connection: Option<f64>,
    /// The same with PSS (shared pages divided among the processes that
    /// map them): differs from RSS for servers of many processes.
    pub pss_before_kib: u64,
    pub pss_after_kib: u64,
    pub pss_kib_per_connection: Option<f64>,
    /// Why fewer connections than asked were opened, if so.
    pub error: Option<String>,
}

impl IdleMemory {
    /// A record for `connections` to `server`, nothing measured yet.
    pub fn new(server: &Server, connections: u32) -> IdleMemory {
        IdleMemory {
            server: server.name().to_string(),
            https: server.https(),
            proto: server.proto,
            streams: None,
            heads: None,
            window_bytes: None,
            connections,
            answered: 0,
            still_open: 0,
            open_seconds: 0.0,
            rss_before_kib: 0,
            rss_after_kib: 0,
            kib_per_connection: None,
            pss_before_kib: 0,
            pss_after_kib: 0,
            pss_kib_per_connection: None,
            error: None,
        }
    }

    /// Sets the per-connection numbers from the readings and `still_open`.
    pub fn divide(&mut self) {
        if self.still_open > 0 {
            let n = f64::from(self.still_open);
            let each = |before: u64, after: u64| (after as f64 - before as f64) / n;
            self.kib_per_connection = Some(each(self.rss_before_kib, self.rss_after_kib));
            self.pss_kib_per_connection = Some(each(self.pss_before_kib, self.pss_after_kib));
        }
    }
}

/// The medians of three (RSS, PSS) readings 100 ms apart (a reading can
/// land in the middle of an allocation burst).
pub fn steady_memory(pid: i32) -> (u64, u64) {
    let mut rss = [0u64; 3];
    let mut pss = [0u64; 3];
    for i in 0..3 {
        if i > 0 {
            thread::sleep(Duration::from_millis(100));
        }
        rss[i] = procstat::rss_kib(pid);
        pss[i] = procstat::pss_kib(pid);
    }
    rss.sort_unstable();
    pss.sort_unstable();
    (rss[1], pss[1])
}

/// Sends one GET and reads exactly one response, which must be a 200 (an
/// error of kind InvalidData if not). Unless `close`, the connection stays
/// open.
pub fn one_request(s: &mut (impl Read + Write), path: &str, close: bool) -> io::Result<()> {
    let connection = if close { "Connection: close\r\n" } else { "" };
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{connection}\r\n"
    )?;
    s.flush()?;
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    let mut want = None;
    loop {
        if want.is_none() {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                if head.split_whitespace().nth(1) != Some("200") {
                    return Err(bad(format!(
                        "status line {:?}",
                        head.lines().next().unwrap_or("")
                    )));
                }
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.trim()
                            .eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse::<usize>().ok())?
                    })
                    .ok_or_else(|| bad("no Content-Length".into()))?;
                want = Some(end + 4 + length);
            }
        }
        if let Some(w) = want {
            if buf.len() >= w {
                return Ok(());
            }
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(bad("closed before the whole response".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// An idle connection, in the clear or over TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Conn {
    /// Whether the server has closed (or reset) the connection.
    fn closed(&mut self) -> bool {
        match self {
            Conn::Plain(s) => {
                if s.set_nonblocking(true).is_err() {
                    return true;
                }
                let mut b = [0u8; 1];
                !matches!(s.peek(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
            Conn::Tls(t) => tls::peer_gone(t),
        }
    }

    fn into_socket(self) -> TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => t.sock,
        }
    }
}

/// Closes with a reset (SO_LINGER 0): no TIME_WAIT left on the harness's
/// side for 10,000 ports at a time.
fn reset(s: TcpStream) {
    linger_zero(s.as_raw_fd());
    drop(s);
}

/// Makes closing the socket `fd` send a reset (SO_LINGER 0).
pub fn linger_zero(fd: RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket the caller owns, with a correctly
    // sized struct.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Measures one server; `n` connections (fewer for staticd-inetd).
pub fn measure(server: &mut Server, size: u64, n: u32) -> IdleMemory {
    let n = match (server.kind, server.https()) {
        (Kind::StaticdInetd, false) => n.min(INETD_CONNECTIONS),
        (Kind::StaticdInetd, true) => n.min(INETD_TLS_CONNECTIONS),
        _ => n,
    };
    let url = server.url(size);
    let rest = url
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let client = server.tls_client().cloned();
    let mut r = IdleMemory::new(server, n);
    let addr: SocketAddr = match authority.parse() {
        Ok(a) => a,
        Err(_) => {
            r.error = Some(format!("bad address {authority}"));
            return r;
        }
    };
    server.settle(Duration::from_secs(2));
    let pid = server.pid();
    (r.rss_before_kib, r.pss_before_kib) = steady_memory(pid);
    let started = Instant::now();
    let mut open = Vec::with_capacity(n as usize);
    for i in 0..n {
        if crate::stop::stopping() {
            r.error = Some("interrupted".into());
            break;
        }
        let timeout = Duration::from_secs(5);
        let attempt = match &client {
            None => TcpStream::connect_timeout(&addr, timeout).and_then(|mut s| {
                s.set_read_timeout(Some(timeout))?;
                s.set_nodelay(true)?;
                one_request(&mut s, path, false)?;
                Ok(Conn::Plain(s))
            }),
            Some(config) => tls::connect(&addr, config, timeout).and_then(|mut t| {
                one_request(&mut t, path, false)?;
                Ok(Conn::Tls(Box::new(t)))
            }),
        };
        match attempt {
            Ok(s) => open.push(s),
            Err(e) => {
                r.error = Some(format!("connection {}: {e}", i + 1));
                break;
            }
        }
    }
    r.open_seconds = started.elapsed().as_secs_f64();
    r.answered = open.len() as u32;
    thread::sleep(IDLE_WAIT);
    (r.rss_after_kib, r.pss_after_kib) = steady_memory(pid);
    r.still_open = open
        .iter_mut()
        .map(|c| !c.closed())
        .filter(|&open| open)
        .count() as u32;
    r.divide();
    for c in open {
        reset(c.into_socket());
    }
    // staticd-inetd's processes end on the reset; make sure.
    server.reap_connections();
    server.settle(Duration::from_secs(2));
    r
}

/// The idle QUIC client (python3 with aioquic): opens `n` connections one
/// after another, each a handshake (ALPN h3, certificate not verified) and
/// one GET over HTTP/3 read to its end, keeps them, prints `opened K SECS`
/// (K: connections answered with a 200), waits for a line on stdin, prints
/// `open M` (M: those the server has not closed), closes them all and
/// exits. aioquic sends no PINGs of its own: an idle connection is idle.
const H3_CLIENT: &str = r#"
import asyncio, ssl, sys, time
from contextlib import AsyncExitStack
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated

class Client(QuicConnectionProtocol):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.h3 = H3Connection(self._quic)
        self.done = asyncio.get_running_loop().create_future()
        self.status = None
        self.body = 0
        self.gone = False

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.gone = True
            if not self.done.done():
                self.done.set_exception(ConnectionError(event.reason_phrase or "closed"))
        for e in self.h3.handle_event(event):
            if isinstance(e, HeadersReceived):
                for k, v in e.headers:
                    if k == b":status":
                        self.status = int(v)
            elif isinstance(e, DataReceived):
                self.body += len(e.data)
            if getattr(e, "stream_ended", False) and not self.done.done():
                self.done.set_result(self.status)

    async def get(self, authority, path):
        sid = self._quic.get_next_available_stream_id()
        self.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                   (b":authority", authority), (b":path", path)], end_stream=True)
        self.transmit()
        return await asyncio.wait_for(self.done, 10)

async def main(host, port, path, n):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE,
                               idle_timeout=120.0)
    conns = []
    start = time.monotonic()
    async with AsyncExitStack() as stack:
        for i in range(n):
            try:
                c = await stack.enter_async_context(
                    connect(host, port, configuration=config, create_protocol=Client))
                status = await c.get(f"{host}:{port}".encode(), path.encode())
                if status != 200:
                    print(f"error connection {i + 1}: status {status}", flush=True)
                    break
                conns.append(c)
            except Exception as e:
                print(f"error connection {i + 1}: {type(e).__name__} {e}", flush=True)
                break
        print(f"opened {len(conns)} {time.monotonic() - start:.3f}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        print(f"open {sum(1 for c in conns if not c.gone)}", flush=True)

host, port, path, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
asyncio.run(main(host, port, path, n))
"#;

/// Memory per idle HTTP/3 connection: as `measure`, with the connections
/// opened over QUIC by the aioquic client above (python3), on the
/// instance's port over UDP.
pub fn measure_h3(server: &mut Server, size: u64, n: u32) -> IdleMemory {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut r = IdleMemory::new(server, n);
    let url = server.url(size);
    let path = &url[url.find("://").map_or(0, |i| i + 3)..];
    let path = &path[path.find('/').unwrap_or(0)..];
    let port = server.addr().port();
    server.settle(Duration::from_secs(2));
    let pid = server.pid();
    (r.rss_before_kib, r.pss_before_kib) = steady_memory(pid);
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(H3_CLIENT)
        .arg("127.0.0.1")
        .arg(port.to_string())
        .arg(path)
        .arg(n.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::reaper::die_with_parent(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            r.error = Some(format!("python3: {e}"));
            return r;
        }
    };
    let started = Instant::now();
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut lines = io::BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut errors = Vec::new();
    let mut opened = None;
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("opened ") {
            let mut it = rest.split_whitespace();
            opened = it.next().and_then(|k| k.parse::<u32>().ok());
            r.open_seconds = it
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| started.elapsed().as_secs_f64());
            break;
        }
        errors.push(line);
    }
    let Some(opened) = opened else {
        let mut err = String::new();
        let _ = child.kill();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let _ = child.wait();
        r.error = Some(format!(
            "aioquic client: {} {}",
            errors.join("; "),
            err.lines().last().unwrap_or("")
        ));
        return r;
    };
    r.answered = opened;
    if !errors.is_empty() {
        r.error = Some(errors.join("; "));
    }
    thread::sleep(IDLE_WAIT);
    (r.rss_after_kib, r.pss_after_kib) = steady_memory(pid);
    let _ = writeln!(stdin, "check");
    let _ = stdin.flush();
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(k) = line.strip_prefix("open ") {
            r.still_open = k.trim().parse().unwrap_or(0);
            break;
        }
    }
    drop(stdin);
    // It closes them all (CONNECTION_CLOSE) and exits; give it a while.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    r.divide();
    server.settle(Duration::from_secs(2));
    r
}
