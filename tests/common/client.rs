//! hyper's HTTP/1 or HTTP/2 client connection, or an HTTP/3 one (quinn and h3), behind
//! a blocking API.
//!
//! In an HTTP/2 cell of the matrix ([`Variant`]) every harness [`Client`]
//! ([`Server::client`], [`Server::get`], [`Connector::client`]) speaks HTTP/2: with
//! prior knowledge (h2c) in cleartext, or after offering `h2` (and `http/1.1`) in ALPN
//! over TLS, where it insists that the server picked `h2`. In the HTTP/3 cell it speaks
//! HTTP/3 over QUIC to the same port number over UDP, offering ALPN `h3` ([`H3Conn`]).
//! Raw [`Conn`]s stay HTTP/1.1 (over TCP).

use super::*;

use hyper::client::conn::{http1, http2};
use hyper_util::rt::TokioExecutor;

/// Which HTTP a hyper [`Client`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Http1,
    Http2,
    /// Over QUIC: needs TLS.
    Http3,
}

/// A response received through hyper.
#[derive(Debug)]
pub struct HResponse {
    /// `HTTP/1.1` (or `HTTP/1.0`), `HTTP/2.0` or `HTTP/3.0`.
    pub version: hyper::Version,
    pub status: u16,
    /// The reason phrase the server sent; over HTTP/2 and HTTP/3, which have none, the
    /// canonical one.
    pub reason: String,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl HResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("header value is not visible ASCII"))
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect()
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn is_h2(&self) -> bool {
        self.version == hyper::Version::HTTP_2
    }

    pub fn is_h3(&self) -> bool {
        self.version == hyper::Version::HTTP_3
    }

    /// Whether it came over HTTP/2 or HTTP/3, which carry a head as fields: no reason
    /// phrase (the canonical one stands in), no connection fields, no chunked coding.
    pub fn is_multiplexed(&self) -> bool {
        self.is_h2() || self.is_h3()
    }

    /// Whether the comma-separated field `name` has `token` (case-insensitive).
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.header_all(name)
            .iter()
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// The same response as a raw [`Response`], for helpers written for those (over
    /// HTTP/2 its version is `HTTP/2.0`, over HTTP/3 `HTTP/3.0`, and its reason the
    /// canonical one).
    pub fn to_raw(&self) -> Response {
        Response {
            version: format!("{:?}", self.version),
            status: self.status,
            reason: self.reason.clone(),
            headers: self
                .headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: self.body.clone(),
        }
    }
}

enum Sender {
    Http1(http1::SendRequest<Full<Bytes>>),
    Http2(http2::SendRequest<Full<Bytes>>),
    Http3(H3Conn),
}

/// hyper's HTTP/1 or HTTP/2 client connection, or quinn's and h3's HTTP/3 one, driven
/// by a private current-thread runtime.
pub struct Client {
    rt: tokio::runtime::Runtime,
    sender: Sender,
    /// `http` or `https`: HTTP/2 and HTTP/3 requests carry it as `:scheme`.
    scheme: &'static str,
    /// The server's address, `:authority` for a request without a Host field.
    authority: String,
    local: SocketAddr,
}

impl Client {
    /// Plain HTTP/1.1 on `stream`.
    pub fn new(stream: TcpStream) -> Client {
        Client::connect(stream, None)
    }

    /// HTTP/1.1 on `stream`, over TLS with `tls` when given (the handshake is done here).
    pub fn connect(stream: TcpStream, tls: Option<&TlsClient>) -> Client {
        Client::connect_proto(stream, tls, Proto::Http1)
    }

    /// `proto` on `stream`, over TLS with `tls` when given. HTTP/2 over TLS offers `h2`
    /// and `http/1.1` in ALPN and panics unless the server chose `h2`.
    pub fn connect_proto(stream: TcpStream, tls: Option<&TlsClient>, proto: Proto) -> Client {
        assert_ne!(
            proto,
            Proto::Http3,
            "HTTP/3 is not over TCP: Client::connect_h3"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let authority = stream.peer_addr().unwrap().to_string();
        let local = stream.local_addr().unwrap();
        stream.set_nonblocking(true).unwrap();
        let sender = rt
            .block_on(async {
                let tcp = tokio::net::TcpStream::from_std(stream)?;
                let Some(tls) = tls else {
                    return handshake(TokioIo::new(tcp), proto).await;
                };
                let tls = match proto {
                    Proto::Http2 => tls.offering_h2(),
                    _ => tls.clone(),
                };
                let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                let stream =
                    tokio::time::timeout(IO_TIMEOUT, connector.connect(tls.name.clone(), tcp))
                        .await
                        .map_err(|_| io::Error::other("no TLS handshake within IO_TIMEOUT"))??;
                if proto == Proto::Http2 {
                    let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                    if alpn.as_deref() != Some(b"h2") {
                        return Err(io::Error::other(format!(
                            "offered ALPN h2 and http/1.1, the server chose {:?}",
                            alpn.map(|a| String::from_utf8_lossy(&a).into_owned())
                        )));
                    }
                }
                handshake(TokioIo::new(stream), proto).await
            })
            .unwrap_or_else(|e| panic!("hyper {proto:?} handshake: {e}"));
        Client {
            rt,
            sender,
            scheme: if tls.is_some() { "https" } else { "http" },
            authority,
            local,
        }
    }

    /// HTTP/3 over QUIC to `addr` (a server's HTTPS address: the same port number over
    /// UDP) with `tls`'s roots and name, offering ALPN `h3` only; panics unless the
    /// handshake and HTTP/3's set-up succeed.
    pub fn connect_h3(addr: SocketAddr, tls: &TlsClient) -> Client {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let conn = rt
            .block_on(H3Conn::connect(addr, tls))
            .unwrap_or_else(|e| panic!("HTTP/3 connection to {addr}: {e}"));
        let local = conn.endpoint.local_addr().unwrap();
        Client {
            rt,
            sender: Sender::Http3(conn),
            scheme: "https",
            authority: addr.to_string(),
            local,
        }
    }

    /// The client's end of the connection (over HTTP/3, its UDP socket's address).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn proto(&self) -> Proto {
        match self.sender {
            Sender::Http1(_) => Proto::Http1,
            Sender::Http2(_) => Proto::Http2,
            Sender::Http3(_) => Proto::Http3,
        }
    }

    pub fn is_h2(&self) -> bool {
        self.proto() == Proto::Http2
    }

    pub fn is_h3(&self) -> bool {
        self.proto() == Proto::Http3
    }

    /// HTTP/2 or HTTP/3: a head as fields, many requests at once on one connection.
    pub fn is_multiplexed(&self) -> bool {
        self.is_h2() || self.is_h3()
    }

    /// Sends `req` as it is over HTTP/1.1. Over HTTP/2 and HTTP/3 an origin-form target
    /// becomes `:scheme`, `:authority` and `:path`, the way curl and browsers send it:
    /// the authority is the request's Host field (which is then not sent), else the
    /// server's address.
    pub fn send(&mut self, req: hyper::Request<Full<Bytes>>) -> HResponse {
        let req = match self.sender {
            Sender::Http1(_) => req,
            Sender::Http2(_) | Sender::Http3(_) => self.absolute(req),
        };
        if let Sender::Http3(conn) = &self.sender {
            let sender = conn.sender.clone();
            return self.rt.block_on(async move {
                let (parts, body) = tokio::time::timeout(IO_TIMEOUT, h3_exchange(sender, req))
                    .await
                    .unwrap_or_else(|_| panic!("no response within {IO_TIMEOUT:?}"))
                    .unwrap_or_else(|e| panic!("{e} ({e:?})"));
                h3_response(parts, body)
            });
        }
        let sender = &mut self.sender;
        self.rt.block_on(async {
            let work = async {
                let resp = match sender {
                    Sender::Http1(s) => {
                        s.ready().await?;
                        s.send_request(req).await?
                    }
                    Sender::Http2(s) => {
                        s.ready().await?;
                        s.send_request(req).await?
                    }
                    Sender::Http3(_) => unreachable!("sent above"),
                };
                let (parts, body) = resp.into_parts();
                let body = body.collect().await?.to_bytes().to_vec();
                Ok::<_, hyper::Error>((parts, body))
            };
            let (parts, body) = tokio::time::timeout(IO_TIMEOUT, work)
                .await
                .unwrap_or_else(|_| panic!("no response within {IO_TIMEOUT:?}"))
                .unwrap_or_else(|e| panic!("hyper: {e} ({e:?})"));
            let reason = parts
                .extensions
                .get::<hyper::ext::ReasonPhrase>()
                .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
                .or_else(|| parts.status.canonical_reason().map(str::to_string))
                .unwrap_or_default();
            HResponse {
                version: parts.version,
                status: parts.status.as_u16(),
                reason,
                headers: parts.headers,
                body,
            }
        })
    }

    /// Sends all of `reqs` at once, as concurrent streams over HTTP/2 and HTTP/3 (one
    /// after the other over HTTP/1.1), and returns the responses in the same order.
    pub fn send_all(&mut self, reqs: Vec<hyper::Request<Full<Bytes>>>) -> Vec<HResponse> {
        if let Sender::Http3(conn) = &self.sender {
            let reqs: Vec<_> = reqs.into_iter().map(|r| self.absolute(r)).collect();
            let sender = conn.sender.clone();
            return self.rt.block_on(async move {
                let mut set = tokio::task::JoinSet::new();
                for (i, req) in reqs.into_iter().enumerate() {
                    let sender = sender.clone();
                    set.spawn(async move { (i, h3_exchange(sender, req).await) });
                }
                let all = tokio::time::timeout(IO_TIMEOUT, set.join_all())
                    .await
                    .unwrap_or_else(|_| panic!("no responses within {IO_TIMEOUT:?}"));
                let mut out: Vec<_> = all
                    .into_iter()
                    .map(|(i, r)| (i, r.unwrap_or_else(|e| panic!("request {i}: {e} ({e:?})"))))
                    .collect();
                out.sort_by_key(|(i, _)| *i);
                out.into_iter()
                    .map(|(_, (parts, body))| h3_response(parts, body))
                    .collect()
            });
        }
        let Sender::Http2(sender) = &self.sender else {
            return reqs.into_iter().map(|r| self.send(r)).collect();
        };
        let reqs: Vec<_> = reqs.into_iter().map(|r| self.absolute(r)).collect();
        let sender = sender.clone();
        self.rt.block_on(async move {
            let mut set = tokio::task::JoinSet::new();
            for (i, req) in reqs.into_iter().enumerate() {
                let mut sender = sender.clone();
                set.spawn(async move {
                    sender.ready().await?;
                    let resp = sender.send_request(req).await?;
                    let (parts, body) = resp.into_parts();
                    let body = body.collect().await?.to_bytes().to_vec();
                    Ok::<_, hyper::Error>((i, parts, body))
                });
            }
            let all = tokio::time::timeout(IO_TIMEOUT, set.join_all())
                .await
                .unwrap_or_else(|_| panic!("no responses within {IO_TIMEOUT:?}"));
            let mut out: Vec<_> = all
                .into_iter()
                .map(|r| r.unwrap_or_else(|e| panic!("hyper: {e} ({e:?})")))
                .collect();
            out.sort_by_key(|(i, _, _)| *i);
            out.into_iter()
                .map(|(_, parts, body)| {
                    let version = parts.version;
                    response_of(version, parts, body)
                })
                .collect()
        })
    }

    /// Waits up to `timeout` for the server to end the connection (over HTTP/2, a GOAWAY
    /// and close; over HTTP/3, QUIC's CONNECTION_CLOSE or its idle timeout); whether it
    /// did.
    pub fn wait_closed(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let closed = match &self.sender {
                Sender::Http1(s) => s.is_closed(),
                Sender::Http2(s) => s.is_closed(),
                Sender::Http3(c) => c.is_closed(),
            };
            if closed || Instant::now() >= deadline {
                return closed;
            }
            // Let the connection task see what arrived.
            self.rt
                .block_on(async { tokio::time::sleep(Duration::from_millis(20)).await });
        }
    }

    fn absolute(&self, mut req: hyper::Request<Full<Bytes>>) -> hyper::Request<Full<Bytes>> {
        if req.uri().scheme().is_some() {
            // An absolute-form target's authority wins over Host in HTTP/1.1 (RFC 9112
            // §3.2.2). hyper's HTTP/2 sends both; HTTP/3 has a request carry no Host
            // that differs from `:authority` (RFC 9114 §4.3.1) and h3 refuses one, so
            // over HTTP/3 the Host goes and `:authority` carries the winner.
            if self.is_h3() {
                req.headers_mut().remove(hyper::header::HOST);
            }
            return req;
        }
        let authority = match req.headers_mut().remove(hyper::header::HOST) {
            Some(host) => host
                .to_str()
                .unwrap_or_else(|_| panic!("Host {host:?} cannot be an :authority"))
                .to_string(),
            None => self.authority.clone(),
        };
        let path = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let uri = hyper::Uri::builder()
            .scheme(self.scheme)
            .authority(authority.as_str())
            .path_and_query(path.as_str())
            .build()
            .unwrap_or_else(|e| {
                panic!("{authority:?} {path:?} cannot be an absolute URI for HTTP/2 or HTTP/3: {e}")
            });
        *req.uri_mut() = uri;
        req
    }

    /// A request with `Host: test` (over HTTP/2 and HTTP/3, `:authority` `test`) and the
    /// given extra
    /// headers, no body.
    pub fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)]) -> HResponse {
        let mut builder = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "test");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        self.send(builder.body(Full::new(Bytes::new())).unwrap())
    }

    pub fn get(&mut self, path: &str) -> HResponse {
        self.request("GET", path, &[])
    }
}

async fn handshake<T>(io: TokioIo<T>, proto: Proto) -> io::Result<Sender>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    match proto {
        Proto::Http1 => {
            let (sender, conn) = http1::handshake(io).await.map_err(io::Error::other)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Sender::Http1(sender))
        }
        Proto::Http2 => {
            let handshake = http2::handshake(TokioExecutor::new(), io);
            let (sender, conn) = tokio::time::timeout(IO_TIMEOUT, handshake)
                .await
                .map_err(|_| io::Error::other("no HTTP/2 handshake within IO_TIMEOUT"))?
                .map_err(io::Error::other)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Sender::Http2(sender))
        }
        Proto::Http3 => unreachable!("HTTP/3 is not over TCP"),
    }
}

impl Drop for Client {
    /// Over HTTP/3, closes the connection and runs the runtime a few turns so that
    /// QUIC's CONNECTION_CLOSE goes out (a TCP connection's FIN goes out by itself): the
    /// server then counts the connection gone at once, not after its idle timeout.
    fn drop(&mut self) {
        if let Sender::Http3(conn) = &self.sender {
            conn.close();
            self.rt.block_on(async {
                for _ in 0..16 {
                    tokio::task::yield_now().await;
                }
            });
        }
    }
}

/// An HTTP/3 response as [`HResponse`]: version `HTTP/3.0`, the canonical reason.
fn h3_response(parts: hyper::http::response::Parts, body: Vec<u8>) -> HResponse {
    response_of(hyper::Version::HTTP_3, parts, body)
}

/// A response of a protocol without reason phrases (HTTP/2, HTTP/3) as [`HResponse`],
/// with the canonical reason.
fn response_of(
    version: hyper::Version,
    parts: hyper::http::response::Parts,
    body: Vec<u8>,
) -> HResponse {
    HResponse {
        version,
        status: parts.status.as_u16(),
        reason: parts
            .status
            .canonical_reason()
            .unwrap_or_default()
            .to_string(),
        headers: parts.headers,
        body,
    }
}

/// [`assert_error`] for a response received through hyper. Over HTTP/2 and HTTP/3, which
/// carry no reason phrase, the body's phrase is only checked to be there.
pub fn assert_error_h(resp: &HResponse, code: u16) {
    assert_eq!(resp.status, code, "status; response: {resp:#?}");
    let body = resp.body_str();
    if resp.is_multiplexed() {
        assert_error_body_h2(&body, code);
    } else {
        assert_eq!(body, format!("{} {}\n", code, resp.reason), "error body");
    }
    assert_eq!(
        resp.header("content-length"),
        Some(resp.body.len().to_string().as_str()),
        "error Content-Length"
    );
    assert_eq!(
        resp.header("content-type").map(str::to_ascii_lowercase),
        Some("text/plain; charset=utf-8".to_string()),
        "error Content-Type"
    );
    assert!(resp.header("date").is_some(), "Date header");
    assert_eq!(resp.header("server"), Some("staticd"), "Server header");
    if resp.is_multiplexed() {
        assert_no_connection_fields(resp);
    }
}

/// An error body over HTTP/2 or HTTP/3, which carry no reason phrase to compare it with: `<code>
/// <some phrase>\n`.
pub fn assert_error_body_h2(body: &str, code: u16) {
    let phrase = body
        .strip_prefix(&format!("{code} "))
        .and_then(|rest| rest.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("error body {body:?} is not `{code} <reason>\\n`"));
    assert!(
        !phrase.is_empty() && !phrase.contains(['\r', '\n']),
        "error body {body:?}"
    );
}

/// The request written as HTTP/1.1 text in `raw` (head and any Content-Length body) as
/// hyper sends it over HTTP/2 (and the harness over HTTP/3): the same method, target and
/// fields, the Host as `:authority`, without HTTP/1.1's connection fields. None for an HTTP/1.0 request,
/// which has no HTTP/2 form worth testing (no Host, no persistence by default).
pub fn to_h2_request(raw: &[u8]) -> Option<hyper::Request<Full<Bytes>>> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut fields);
    let head_len = match parsed.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        other => panic!(
            "not a complete HTTP/1.1 request head ({other:?}): {:?}",
            String::from_utf8_lossy(raw)
        ),
    };
    if parsed.version != Some(1) {
        return None;
    }
    let mut builder = hyper::Request::builder()
        .method(parsed.method.unwrap())
        .uri(parsed.path.unwrap());
    let mut length = 0;
    for field in parsed.headers.iter() {
        let name = field.name.to_ascii_lowercase();
        match name.as_str() {
            "connection" | "keep-alive" | "te" | "upgrade" | "proxy-connection" => continue,
            "transfer-encoding" => panic!(
                "a chunked request has no HTTP/2 form: send it on a raw Conn (HTTP/1.1 only)"
            ),
            "content-length" => {
                length = std::str::from_utf8(field.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .expect("numeric Content-Length");
            }
            _ => {}
        }
        builder = builder.header(field.name, field.value);
    }
    let body = &raw[head_len..];
    assert_eq!(
        body.len(),
        length,
        "the request's body is not its Content-Length"
    );
    Some(
        builder
            .body(Full::new(Bytes::copy_from_slice(body)))
            .expect("a request hyper can send"),
    )
}

/// HTTP/2 and HTTP/3 responses must not carry HTTP/1.1 connection fields (RFC 9113
/// §8.2.2, RFC 9114 §4.2).
pub fn assert_no_connection_fields(resp: &HResponse) {
    for name in [
        "connection",
        "keep-alive",
        "transfer-encoding",
        "upgrade",
        "proxy-connection",
    ] {
        assert!(
            resp.header(name).is_none(),
            "{name} in an {:?} response: {resp:#?}",
            resp.version
        );
    }
}
