//! A small HTTP/1.1 client over any byte stream, so that every byte of a
//! response can be checked: keep-alive, Connection: close, pipelining,
//! Content-Length, chunked, read-to-close, and bodies cut short.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub const TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug)]
pub enum Fail {
    Connect(String),
    Tls(String),
    /// The connection ended (EOF or reset) before any byte of a response.
    NoResponse(String),
    Timeout(String),
    Malformed(String),
}

impl Fail {
    pub fn label(&self) -> &'static str {
        match self {
            Fail::Connect(_) => "connect failed",
            Fail::Tls(_) => "TLS handshake failed",
            Fail::NoResponse(_) => "connection closed before a response",
            Fail::Timeout(_) => "timed out",
            Fail::Malformed(_) => "malformed response",
        }
    }
    pub fn detail(&self) -> &str {
        match self {
            Fail::Connect(s)
            | Fail::Tls(s)
            | Fail::NoResponse(s)
            | Fail::Timeout(s)
            | Fail::Malformed(s) => s,
        }
    }
}

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The whole body arrived (Content-Length, last chunk, or read to close).
    pub complete: bool,
    /// The server closes after this response.
    pub close: bool,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A TCP connection from `src` to the server, with `rcvbuf` if given.
pub async fn tcp(src: IpAddr, port: u16, rcvbuf: Option<u32>) -> Result<TcpStream, Fail> {
    let dst: SocketAddr = match src {
        IpAddr::V4(_) => (IpAddr::from([127, 0, 0, 1]), port).into(),
        IpAddr::V6(_) => (IpAddr::from(std::net::Ipv6Addr::LOCALHOST), port).into(),
    };
    let sock = match src {
        IpAddr::V4(_) => TcpSocket::new_v4(),
        IpAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(|e| Fail::Connect(format!("socket: {e}")))?;
    if let Some(n) = rcvbuf {
        sock.set_recv_buffer_size(n)
            .map_err(|e| Fail::Connect(format!("SO_RCVBUF: {e}")))?;
    }
    sock.bind((src, 0).into())
        .map_err(|e| Fail::Connect(format!("bind {src}: {e}")))?;
    let s = tokio::time::timeout(TIMEOUT, sock.connect(dst))
        .await
        .map_err(|_| Fail::Timeout("connect".into()))?
        .map_err(|e| Fail::Connect(format!("{src} -> {dst}: {e}")))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

pub struct TlsInfo {
    pub resumed: bool,
    pub cert: Option<Vec<u8>>,
    pub alpn: Option<Vec<u8>>,
}

pub async fn tls(
    tcp: TcpStream,
    config: &Arc<ClientConfig>,
) -> Result<(tokio_rustls::client::TlsStream<TcpStream>, TlsInfo), Fail> {
    let name = ServerName::try_from("localhost").expect("a valid name");
    let s = tokio::time::timeout(
        TIMEOUT,
        tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp),
    )
    .await
    .map_err(|_| Fail::Timeout("TLS handshake".into()))?
    .map_err(|e| Fail::Tls(e.to_string()))?;
    let c = s.get_ref().1;
    let info = TlsInfo {
        resumed: c.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        cert: c
            .peer_certificates()
            .and_then(|v| v.first())
            .map(|d| d.as_ref().to_vec()),
        alpn: c.alpn_protocol().map(|a| a.to_vec()),
    };
    Ok((s, info))
}

pub struct Conn {
    pub io: Box<dyn Io>,
    buf: Vec<u8>,
    /// Responses read on it so far.
    pub served: u64,
}

impl Conn {
    pub fn new(io: Box<dyn Io>) -> Conn {
        Conn {
            io,
            buf: Vec::with_capacity(16384),
            served: 0,
        }
    }

    pub async fn send(&mut self, bytes: &[u8]) -> Result<(), Fail> {
        let w = async {
            self.io.write_all(bytes).await?;
            self.io.flush().await
        };
        match tokio::time::timeout(TIMEOUT, w).await {
            Err(_) => Err(Fail::Timeout("write".into())),
            Ok(Err(e)) => Err(Fail::NoResponse(format!("write: {e}"))),
            Ok(Ok(())) => Ok(()),
        }
    }

    async fn fill(&mut self) -> std::io::Result<usize> {
        let mut chunk = [0u8; 16384];
        let n = self.io.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads one response (`head_only`: to a HEAD request).
    pub async fn response(&mut self, head_only: bool) -> Result<Resp, Fail> {
        match tokio::time::timeout(TIMEOUT, self.response_inner(head_only)).await {
            Err(_) => Err(Fail::Timeout("response".into())),
            Ok(r) => r,
        }
    }

    async fn response_inner(&mut self, head_only: bool) -> Result<Resp, Fail> {
        // The head.
        let (status, headers, head_len) = loop {
            let mut fields = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut fields);
            match r.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let headers: Vec<(String, String)> = r
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_string(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect();
                    break (r.code.unwrap_or(0), headers, n);
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => {
                    return Err(Fail::Malformed(format!(
                        "{e}: {:?}",
                        String::from_utf8_lossy(&self.buf[..self.buf.len().min(200)])
                    )))
                }
            }
            let had = self.buf.len();
            match self.fill().await {
                Ok(0) if had == 0 => return Err(Fail::NoResponse("EOF".into())),
                Err(e) if had == 0 => return Err(Fail::NoResponse(e.to_string())),
                Ok(0) => return Err(Fail::Malformed("EOF inside the head".into())),
                Err(e) => return Err(Fail::Malformed(format!("{e} inside the head"))),
                Ok(_) => {}
            }
        };
        self.buf.drain(..head_len);
        self.served += 1;
        let mut resp = Resp {
            status,
            headers,
            body: Vec::new(),
            complete: true,
            close: false,
        };
        resp.close = resp
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let length = resp
            .header("content-length")
            .and_then(|v| v.trim().parse::<usize>().ok());
        let chunked = resp
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        if head_only || status == 304 || status == 204 || (100..200).contains(&status) {
            return Ok(resp);
        }
        if chunked {
            self.chunked(&mut resp).await;
        } else if let Some(len) = length {
            while self.buf.len() < len {
                match self.fill().await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let take = self.buf.len().min(len);
            resp.body = self.buf.drain(..take).collect();
            resp.complete = take == len;
        } else {
            loop {
                match self.fill().await {
                    Ok(0) => break,
                    Err(_) => {
                        resp.complete = false;
                        break;
                    }
                    Ok(_) => {}
                }
            }
            resp.body = std::mem::take(&mut self.buf);
            resp.close = true;
        }
        if !resp.complete {
            resp.close = true;
        }
        Ok(resp)
    }

    async fn chunked(&mut self, resp: &mut Resp) {
        loop {
            // A size line.
            let line_end = loop {
                if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                    break i;
                }
                match self.fill().await {
                    Ok(0) | Err(_) => {
                        resp.complete = false;
                        return;
                    }
                    Ok(_) => {}
                }
            };
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16);
            let Ok(size) = size else {
                resp.complete = false;
                return;
            };
            self.buf.drain(..line_end + 2);
            if size == 0 {
                // Trailers (none expected) up to the empty line.
                loop {
                    if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                        let empty = i == 0;
                        self.buf.drain(..i + 2);
                        if empty {
                            return;
                        }
                        continue;
                    }
                    match self.fill().await {
                        Ok(0) | Err(_) => {
                            resp.complete = false;
                            return;
                        }
                        Ok(_) => {}
                    }
                }
            }
            while self.buf.len() < size + 2 {
                match self.fill().await {
                    Ok(0) | Err(_) => {
                        let take = self.buf.len().min(size);
                        resp.body.extend(self.buf.drain(..take));
                        resp.complete = false;
                        return;
                    }
                    Ok(_) => {}
                }
            }
            resp.body.extend(self.buf.drain(..size));
            self.buf.drain(..2);
        }
    }
}

/// Decodes a body by its Content-Encoding.
pub fn decode(coding: Option<&str>, body: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding.map(|c| c.trim().to_ascii_lowercase()).as_deref() {
        None | Some("identity") => return Ok(body.to_vec()),
        Some("gzip") => flate2::read::GzDecoder::new(body)
            .read_to_end(&mut out)
            .map(|_| ())
            .map_err(|e| format!("gzip: {e}"))?,
        Some("br") => brotli::Decompressor::new(body, 4096)
            .read_to_end(&mut out)
            .map(|_| ())
            .map_err(|e| format!("br: {e}"))?,
        Some("zstd") => {
            out = zstd::stream::decode_all(body).map_err(|e| format!("zstd: {e}"))?;
        }
        Some(other) => return Err(format!("unknown coding {other}")),
    }
    Ok(out)
}

/// The parts of a multipart/byteranges body: (first, last, total, bytes).
/// One part of a range response: first, last, total, bytes.
pub type Part = (u64, u64, u64, Vec<u8>);

pub fn multipart(content_type: &str, body: &[u8]) -> Result<Vec<Part>, String> {
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .ok_or("no boundary")?
        .trim_matches('"');
    let delim = format!("--{boundary}");
    let mut at = 0;
    let mut parts = Vec::new();
    loop {
        // Optional CRLF, then the delimiter.
        if body[at..].starts_with(b"\r\n") {
            at += 2;
        }
        if !body[at..].starts_with(delim.as_bytes()) {
            return Err(format!("no delimiter at {at}"));
        }
        at += delim.len();
        if body[at..].starts_with(b"--") {
            return Ok(parts);
        }
        if !body[at..].starts_with(b"\r\n") {
            return Err("no CRLF after the delimiter".into());
        }
        at += 2;
        let end = body[at..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("part head not ended")?;
        let head = String::from_utf8_lossy(&body[at..at + end]).into_owned();
        at += end + 4;
        let range = head
            .lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.trim()
                    .eq_ignore_ascii_case("content-range")
                    .then(|| v.trim().to_string())
            })
            .ok_or("part without Content-Range")?;
        let (first, last, total) = content_range(&range).ok_or("bad Content-Range")?;
        let len = (last - first + 1) as usize;
        if body.len() < at + len {
            return Err("part cut short".into());
        }
        parts.push((first, last, total, body[at..at + len].to_vec()));
        at += len;
    }
}

/// `bytes FIRST-LAST/TOTAL`.
pub fn content_range(v: &str) -> Option<(u64, u64, u64)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?, total.parse().ok()?))
}
