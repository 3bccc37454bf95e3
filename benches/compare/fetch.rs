//! One GET for the checks that every instance serves its files whole and
//! correct: what it brought back (`Fetched`, read over HTTP/1.1 by
//! servers.rs) and the HTTP/2 GET, with hyper on a current-thread tokio
//! runtime (h2 by ALPN over TLS, h2c with prior knowledge).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http2;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::tls;

/// A response read by `servers::get` (or over HTTP/2 by `get`).
pub struct Fetched {
    pub status: u16,
    pub content_length: Option<u64>,
    pub body: Vec<u8>,
}

/// For connecting, a handshake, or response heads.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// An HTTP/2 client connection: the request sender and the task driving it.
struct Conn {
    send: http2::SendRequest<Empty<Bytes>>,
    task: JoinHandle<()>,
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
pub fn addr_of(url: &str) -> io::Result<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    authority
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad address"))
}

/// An `https://ADDR:PORT/path` URL's parts: the address, the authority
/// as written, and the path (empty if the URL has none).
pub fn https_parts(url: &str) -> Result<(SocketAddr, &str, &str), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("not an https URL: {url}"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let addr = authority
        .parse()
        .map_err(|_| format!("not an IP address and port: {authority}"))?;
    Ok((addr, authority, path))
}

fn request(url: &str) -> io::Result<Request<Empty<Bytes>>> {
    Request::get(url)
        .body(Empty::new())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

async fn handshake<T>(io: T) -> io::Result<Conn>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let builder = http2::Builder::new(TokioExecutor::new());
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
/// and starts HTTP/2. Returns what was negotiated too.
async fn connect(addr: SocketAddr, tls: Option<&Arc<ClientConfig>>) -> io::Result<(Conn, String)> {
    let tcp = tokio::time::timeout(TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| timed_out("connect"))??;
    tcp.set_nodelay(true)?;
    let Some(config) = tls else {
        return Ok((handshake(tcp).await?, "h2c with prior knowledge".into()));
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
    Ok((handshake(stream).await?, about))
}

/// One GET over a new HTTP/2 connection, the body read whole. Returns the
/// response and what was negotiated ("TLSv1_3 ... X25519, ALPN h2", or
/// h2c).
pub fn get(url: &str, tls: Option<&Arc<ClientConfig>>) -> io::Result<(Fetched, String)> {
    let addr = addr_of(url)?;
    let rt = runtime()?;
    rt.block_on(async {
        let (mut conn, about) = connect(addr, tls).await?;
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
