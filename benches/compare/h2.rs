//! HTTP/2 for the comparison: the harness's own HTTP/2 clients. hyper (on
//! a current-thread tokio runtime) checks that the h2 and h2c instances
//! serve every file whole and correct; a few frames spoken by hand hold the
//! connections of the memory measurement. The load of the HTTP/2 cells is
//! h2load's (load.rs).
//!
//! Memory with open streams: N connections are opened one after another,
//! each with 10 GETs of a large file (1 MB) in flight, or as many as the
//! server allows at once (lighttpd: 8). The client keeps HTTP/2's default
//! windows (65,535 bytes, per stream and per connection) and never opens
//! them, so each server sends at most 64 KiB per connection and then holds
//! its streams, waiting for a WINDOW_UPDATE that does not come: what a slow
//! client's connection with that many requests costs the server. A
//! connection counts once the server has filled its window. RSS is read
//! before and a second after, as for idle connections (idle.rs); kernel
//! socket memory is not in it. The response heads that came in are
//! counted too: a server may hold requests without answering any of them
//! yet (nginx over TLS answers the first stream only).

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rustls::ClientConfig;

use crate::fetch::{addr_of, TIMEOUT};
use crate::idle::{self, IdleMemory};
use crate::servers::{Kind, Server};
use crate::tls;

/// staticd-inetd holds a process per connection: measured with this many.
pub const INETD_CONNECTIONS: u32 = 100;

/// The client end of one connection of the memory measurement: a few
/// frames of HTTP/2 spoken by hand, so that the harness knows what the
/// server said (its stream limit, how much it sent) and never opens a
/// window. It only counts response heads (a HEADERS frame on a stream) and
/// DATA bytes, answers SETTINGS and PING, and takes GOAWAY or RST_STREAM as
/// an error.
struct Raw {
    sock: Sock,
    /// Bytes read and not yet parsed into whole frames.
    buf: Vec<u8>,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS, once its SETTINGS came.
    settings: Option<Option<u32>>,
    heads: u32,
    data: u64,
    closed: bool,
}

enum Sock {
    Plain(std::net::TcpStream),
    Tls(Box<tls::TlsStream>),
}

impl Sock {
    fn tcp(&self) -> &std::net::TcpStream {
        match self {
            Sock::Plain(s) => s,
            Sock::Tls(t) => &t.sock,
        }
    }
}

impl io::Read for Sock {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Plain(s) => s.read(b),
            Sock::Tls(t) => t.read(b),
        }
    }
}

impl io::Write for Sock {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Plain(s) => s.write(b),
            Sock::Tls(t) => t.write(b),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sock::Plain(s) => s.flush(),
            Sock::Tls(t) => t.flush(),
        }
    }
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const ACK: u8 = 1;
const END_STREAM_HEADERS: u8 = 0x5;

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// An HPACK string literal, not Huffman-coded (7-bit prefix length).
fn hpack_string(out: &mut Vec<u8>, s: &str) {
    let mut n = s.len();
    if n < 127 {
        out.push(n as u8);
    } else {
        out.push(127);
        n -= 127;
        while n >= 128 {
            out.push((n % 128) as u8 | 0x80);
            n /= 128;
        }
        out.push(n as u8);
    }
    out.extend_from_slice(s.as_bytes());
}

/// GET `path`: :method GET and :scheme from the static table, :path and
/// :authority as literals without indexing (names from the static table).
fn get_headers(tls: bool, authority: &str, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, if tls { 0x87 } else { 0x86 }, 0x04];
    hpack_string(&mut block, path);
    block.push(0x01);
    hpack_string(&mut block, authority);
    block
}

impl Raw {
    /// Connects (TLS with ALPN h2 with `tls`), sends the preface and an
    /// empty SETTINGS (the default windows: 65,535 bytes), and waits for
    /// the server's SETTINGS.
    fn connect(addr: &SocketAddr, tls: Option<&Arc<ClientConfig>>) -> io::Result<Raw> {
        let sock = match tls {
            None => {
                let s = std::net::TcpStream::connect_timeout(addr, TIMEOUT)?;
                s.set_read_timeout(Some(TIMEOUT))?;
                s.set_write_timeout(Some(TIMEOUT))?;
                s.set_nodelay(true)?;
                Sock::Plain(s)
            }
            Some(config) => {
                let t = tls::connect(addr, config, TIMEOUT)?;
                if t.conn.alpn_protocol() != Some(b"h2") {
                    return Err(io::Error::other("the server did not choose h2 by ALPN"));
                }
                Sock::Tls(Box::new(t))
            }
        };
        idle::linger_zero(sock.tcp().as_raw_fd());
        let mut raw = Raw {
            sock,
            buf: Vec::with_capacity(16 * 1024),
            settings: None,
            heads: 0,
            data: 0,
            closed: false,
        };
        let mut out = PREFACE.to_vec();
        frame(&mut out, SETTINGS, 0, 0, &[]);
        raw.send(&out)?;
        while raw.settings.is_none() {
            raw.pump()?;
        }
        Ok(raw)
    }

    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write as _;
        self.sock.write_all(bytes)?;
        self.sock.flush()
    }

    /// One read; the whole frames in it handled. Err on the server's
    /// GOAWAY, RST_STREAM or close (WouldBlock when non-blocking and there
    /// is nothing).
    fn pump(&mut self) -> io::Result<()> {
        use std::io::Read as _;
        let mut chunk = [0u8; 16 * 1024];
        let n = match self.sock.read(&mut chunk) {
            Ok(0) => {
                self.closed = true;
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                ));
            }
            Ok(n) => n,
            Err(e) => {
                if e.kind() != io::ErrorKind::WouldBlock {
                    self.closed = true;
                }
                return Err(e);
            }
        };
        self.buf.extend_from_slice(&chunk[..n]);
        let mut at = 0;
        let mut reply = Vec::new();
        while self.buf.len() - at >= 9 {
            let h = &self.buf[at..at + 9];
            let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
            let (kind, flags) = (h[3], h[4]);
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            if self.buf.len() - at < 9 + len {
                break;
            }
            let payload = &self.buf[at + 9..at + 9 + len];
            match kind {
                DATA => self.data += len as u64,
                HEADERS if stream % 2 == 1 => {
                    // The first byte of the block, past padding and
                    // priority: 0x88 is :status 200 from the static
                    // table; 0x89..=0x8e are the table's other statuses.
                    let mut skip = 0;
                    if flags & 0x8 != 0 {
                        skip += 1;
                    }
                    if flags & 0x20 != 0 {
                        skip += 5;
                    }
                    match payload.get(skip) {
                        Some(&b) if (0x89..=0x8e).contains(&b) => {
                            let status = ["204", "206", "304", "400", "404", "500"];
                            self.closed = true;
                            return Err(io::Error::other(format!(
                                "status {}",
                                status[(b - 0x89) as usize]
                            )));
                        }
                        _ => self.heads += 1,
                    }
                }
                SETTINGS if flags & ACK == 0 => {
                    let mut limit = None;
                    for pair in payload.chunks_exact(6) {
                        if u16::from_be_bytes([pair[0], pair[1]]) == 3 {
                            limit = Some(u32::from_be_bytes([pair[2], pair[3], pair[4], pair[5]]));
                        }
                    }
                    if self.settings.is_none() {
                        self.settings = Some(limit);
                    }
                    frame(&mut reply, SETTINGS, ACK, 0, &[]);
                }
                PING if flags & ACK == 0 => frame(&mut reply, PING, ACK, 0, payload),
                GOAWAY | RST_STREAM => {
                    self.closed = true;
                    return Err(io::Error::other(if kind == GOAWAY {
                        "the server sent GOAWAY"
                    } else {
                        "the server reset a stream"
                    }));
                }
                _ => {}
            }
            at += 9 + len;
        }
        self.buf.drain(..at);
        if !reply.is_empty() {
            self.send(&reply)?;
        }
        Ok(())
    }

    /// Takes in whatever has come, without waiting; false once the server
    /// has closed or given up on the connection.
    fn drain(&mut self) -> bool {
        if self.closed || self.sock.tcp().set_nonblocking(true).is_err() {
            return false;
        }
        loop {
            match self.pump() {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
    }
}

/// One connection of the memory measurement: up to `streams` GETs of
/// `path` (as many as the server allows at once), read until the first
/// response head. The server goes on filling the window (65,535 bytes; a
/// server may stop a little short of it: lighttpd at 65,500) while the
/// other connections are opened; the idle second before the reading lets
/// the last ones finish.
fn open_streams(
    addr: &SocketAddr,
    tls: Option<&Arc<ClientConfig>>,
    path: &str,
    streams: u32,
) -> io::Result<(Raw, u32)> {
    let mut raw = Raw::connect(addr, tls)?;
    let allowed = raw.settings.flatten().unwrap_or(u32::MAX);
    let k = streams.min(allowed);
    if k == 0 {
        // Asked for none (the connection alone), or the server allows none.
        return if streams == 0 {
            Ok((raw, 0))
        } else {
            Err(io::Error::other("the server allows no stream"))
        };
    }
    let block = get_headers(tls.is_some(), &addr.to_string(), path);
    let mut out = Vec::new();
    for i in 0..k {
        frame(&mut out, HEADERS, END_STREAM_HEADERS, 1 + 2 * i, &block);
    }
    raw.send(&out)?;
    while raw.heads == 0 {
        raw.pump()?;
    }
    Ok((raw, k))
}

/// Measures one HTTP/2 instance: `n` connections (staticd-inetd at most
/// INETD_CONNECTIONS), each with `streams` GETs of the `size` file in
/// flight (fewer if the server allows fewer at once).
pub fn measure(server: &mut Server, size: u64, n: u32, streams: u32) -> IdleMemory {
    let n = if server.kind == Kind::StaticdInetd {
        n.min(INETD_CONNECTIONS)
    } else {
        n
    };
    let mut r = IdleMemory::new(server, n);
    r.streams = Some(streams);
    let url = server.url(size);
    let tls = server.tls_client().cloned();
    let addr = match addr_of(&url) {
        Ok(a) => a,
        Err(e) => {
            r.error = Some(e.to_string());
            return r;
        }
    };
    let path = url
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let path = &path[path.find('/').unwrap_or(path.len())..];
    server.settle(Duration::from_secs(2));
    let pid = server.pid();
    (r.rss_before_kib, r.pss_before_kib) = idle::steady_memory(pid);
    let started = Instant::now();
    let mut open = Vec::with_capacity(n as usize);
    let mut per_connection = streams;
    for i in 0..n {
        if crate::stop::stopping() {
            r.error = Some("interrupted".into());
            break;
        }
        match open_streams(&addr, tls.as_ref(), path, streams) {
            Ok((raw, k)) => {
                per_connection = per_connection.min(k);
                open.push(raw);
            }
            Err(e) => {
                r.error = Some(format!("connection {}: {e}", i + 1));
                break;
            }
        }
    }
    r.streams = Some(per_connection);
    r.open_seconds = started.elapsed().as_secs_f64();
    r.answered = open.len() as u32;
    thread::sleep(idle::IDLE_WAIT);
    // What the servers sent meanwhile is taken in (and PINGs answered)
    // before the reading.
    for c in &mut open {
        c.drain();
    }
    (r.rss_after_kib, r.pss_after_kib) = idle::steady_memory(pid);
    r.still_open = open.iter_mut().map(Raw::drain).filter(|&o| o).count() as u32;
    r.heads = Some(open.iter().map(|c| u64::from(c.heads)).sum());
    r.window_bytes = Some(open.iter().map(|c| c.data).sum());
    r.divide();
    // SO_LINGER 0: every socket resets as it closes.
    drop(open);
    server.reap_connections();
    server.settle(Duration::from_secs(2));
    r
}
