//! HTTP/2 for the comparison: the harness's own HTTP/2 client (hyper on a
//! current-thread tokio runtime), which checks the h2 and h2c instances and
//! holds the connections of the open-streams memory measurement. The load
//! of the HTTP/2 cells is h2load's (load.rs).
//!
//! Memory with open streams: N connections are opened one after another,
//! each with `streams` GETs of a large file (1 MB) that stay in flight. The
//! client's windows, per stream and per connection, are 65,535 bytes and it
//! never reads a body, so each server sends at most 64 KiB per connection
//! and then holds every stream open, waiting for a WINDOW_UPDATE that does
//! not come: what a slow client's connection with that many requests costs
//! the server. A connection counts once all its response heads (200) are
//! in. RSS is read before and a second after, as for idle connections
//! (idle.rs); kernel socket memory is not in it. A server that allows fewer
//! concurrent streams (lighttpd: 8) is measured with as many as it allows,
//! which the first connection finds out.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http2;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::idle::{self, IdleMemory};
use crate::servers::{Fetched, Kind, Server};
use crate::tls;

/// staticd-inetd holds a process per connection: measured with this many.
pub const INETD_CONNECTIONS: u32 = 100;

/// The client's initial windows (stream and connection) in the memory
/// measurement: HTTP/2's default, so a server sends this much at most.
const WINDOW: u32 = 65_535;

/// For connecting, a handshake, or response heads.
const TIMEOUT: Duration = Duration::from_secs(5);

/// How long the first connection of a memory measurement waits for its
/// last response heads before taking the server to allow fewer streams.
const PROBE_WAIT: Duration = Duration::from_secs(2);

/// An HTTP/2 client connection: the request sender and the task driving it.
struct Conn {
    send: http2::SendRequest<Empty<Bytes>>,
    task: JoinHandle<()>,
}

impl Conn {
    fn is_open(&self) -> bool {
        !self.task.is_finished() && !self.send.is_closed()
    }
}

fn runtime() -> io::Result<Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// A hyper error with its causes ("http2 error: ...: connection reset").
fn hyper_error(e: hyper::Error) -> io::Error {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    io::Error::other(text)
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what} timed out"))
}

/// "http://127.0.0.1:8080/f/1k.bin" -> its address.
fn addr_of(url: &str) -> io::Result<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    authority
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad address"))
}

fn request(url: &str) -> io::Result<Request<Empty<Bytes>>> {
    Request::get(url)
        .body(Empty::new())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

async fn handshake<T>(io: T, window: Option<u32>) -> io::Result<Conn>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = http2::Builder::new(TokioExecutor::new());
    if let Some(w) = window {
        builder
            .initial_stream_window_size(w)
            .initial_connection_window_size(w);
    }
    let (send, conn) = tokio::time::timeout(TIMEOUT, builder.handshake(TokioIo::new(io)))
        .await
        .map_err(|_| timed_out("HTTP/2 handshake"))?
        .map_err(hyper_error)?;
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Conn { send, task })
}

/// Connects (over TLS with `tls`, where the server must choose h2 by ALPN)
/// and starts HTTP/2. With `reset`, closing the socket will reset the
/// connection (no TIME_WAIT left behind). Returns what was negotiated too.
async fn connect(
    addr: SocketAddr,
    tls: Option<&Arc<ClientConfig>>,
    window: Option<u32>,
    reset: bool,
) -> io::Result<(Conn, String)> {
    let tcp = tokio::time::timeout(TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| timed_out("connect"))??;
    tcp.set_nodelay(true)?;
    if reset {
        idle::linger_zero(tcp.as_raw_fd());
    }
    let Some(config) = tls else {
        return Ok((
            handshake(tcp, window).await?,
            "h2c with prior knowledge".into(),
        ));
    };
    let name = ServerName::try_from(tls::SERVER_NAME).expect("a valid name");
    let stream = tokio::time::timeout(
        TIMEOUT,
        tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp),
    )
    .await
    .map_err(|_| timed_out("TLS handshake"))?
    .map_err(|e| io::Error::other(format!("TLS handshake offering ALPN h2 only: {e}")))?;
    let c = stream.get_ref().1;
    match c.alpn_protocol() {
        Some(b"h2") => {}
        Some(other) => {
            return Err(io::Error::other(format!(
                "the server chose {} by ALPN, not h2",
                String::from_utf8_lossy(other)
            )))
        }
        None => {
            return Err(io::Error::other(
                "the server chose no protocol by ALPN (h2 offered): no HTTP/2 over TLS",
            ))
        }
    }
    let about = format!("{}, ALPN h2", tls::describe(c));
    Ok((handshake(stream, window).await?, about))
}

/// One GET over a new HTTP/2 connection, the body read whole. Returns the
/// response and what was negotiated ("TLSv1_3 ... X25519, ALPN h2", or
/// h2c).
pub fn get(url: &str, tls: Option<&Arc<ClientConfig>>) -> io::Result<(Fetched, String)> {
    let addr = addr_of(url)?;
    let rt = runtime()?;
    rt.block_on(async {
        let (mut conn, about) = connect(addr, tls, None, false).await?;
        let fetch = async {
            let response = conn
                .send
                .send_request(request(url)?)
                .await
                .map_err(hyper_error)?;
            let status = response.status().as_u16();
            let content_length = response
                .headers()
                .get(hyper::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse().ok());
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(hyper_error)?
                .to_bytes()
                .to_vec();
            Ok::<_, io::Error>(Fetched {
                status,
                content_length,
                body,
            })
        };
        let fetched = tokio::time::timeout(Duration::from_secs(10), fetch)
            .await
            .map_err(|_| timed_out("response"))??;
        conn.task.abort();
        Ok((fetched, about))
    })
}

/// One connection of the memory measurement with `streams` GETs of `url`
/// in flight, their response heads in and their bodies unread. `wait` is
/// how long to wait for the heads; with `probing`, heads that do not come
/// in that time are taken as the server's limit rather than an error.
async fn open_streams(
    addr: SocketAddr,
    tls: Option<&Arc<ClientConfig>>,
    url: &str,
    streams: u32,
    wait: Duration,
    probing: bool,
) -> io::Result<(Conn, Vec<Response<Incoming>>)> {
    let (mut conn, _) = connect(addr, tls, Some(WINDOW), true).await?;
    let mut pending = Vec::with_capacity(streams as usize);
    for _ in 0..streams {
        pending.push(conn.send.send_request(request(url)?));
    }
    let deadline = tokio::time::Instant::now() + wait;
    let mut heads = Vec::with_capacity(pending.len());
    for p in pending {
        match tokio::time::timeout_at(deadline, p).await {
            Ok(Ok(r)) if r.status() == 200 => heads.push(r),
            Ok(Ok(r)) => {
                return Err(io::Error::other(format!("status {}", r.status())));
            }
            Ok(Err(e)) => return Err(hyper_error(e)),
            Err(_) if probing => break,
            Err(_) => {
                return Err(timed_out(&format!(
                    "response head {} of {streams}",
                    heads.len() + 1
                )))
            }
        }
    }
    Ok((conn, heads))
}

/// Measures one HTTP/2 instance: `n` connections (staticd-inetd at most
/// INETD_CONNECTIONS), each with `streams` GETs of the `size` file open.
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
    let (addr, rt) = match (addr_of(&url), runtime()) {
        (Ok(a), Ok(rt)) => (a, rt),
        (Err(e), _) | (_, Err(e)) => {
            r.error = Some(e.to_string());
            return r;
        }
    };
    server.settle(Duration::from_secs(2));
    let pid = server.pid();
    (r.rss_before_kib, r.pss_before_kib) = idle::steady_memory(pid);
    let started = Instant::now();
    let mut per_connection = streams;
    let mut open = Vec::with_capacity(n as usize);
    while (open.len() as u32) < n {
        if crate::stopping() {
            r.error = Some("interrupted".into());
            break;
        }
        let probing = open.is_empty() && per_connection == streams;
        let wait = if probing { PROBE_WAIT } else { TIMEOUT };
        match rt.block_on(open_streams(
            addr,
            tls.as_ref(),
            &url,
            per_connection,
            wait,
            probing,
        )) {
            Ok((_, heads)) if heads.is_empty() => {
                r.error = Some("connection 1: no response head".into());
                break;
            }
            // The server allows fewer streams: this connection goes (its
            // extra requests are queued in it) and all are opened with
            // as many as it allows.
            Ok((_, heads)) if (heads.len() as u32) < per_connection => {
                per_connection = heads.len() as u32;
            }
            Ok(c) => open.push(c),
            Err(e) => {
                r.error = Some(format!("connection {}: {e}", open.len() + 1));
                break;
            }
        }
    }
    r.streams = Some(per_connection);
    r.open_seconds = started.elapsed().as_secs_f64();
    r.answered = open.len() as u32;
    // Idle, with the client's connection tasks running (SETTINGS acks,
    // PINGs, whatever the server sends).
    rt.block_on(async { tokio::time::sleep(idle::IDLE_WAIT).await });
    (r.rss_after_kib, r.pss_after_kib) = idle::steady_memory(pid);
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(20)).await });
    r.still_open = open.iter().filter(|(c, _)| c.is_open()).count() as u32;
    r.divide();
    // The sockets reset as the runtime drops its tasks.
    drop(open);
    drop(rt);
    server.reap_connections();
    server.settle(Duration::from_secs(2));
    r
}
