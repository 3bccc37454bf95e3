//! hyper's HTTP/1 client connection behind a blocking API.

use super::*;

/// A response received through hyper.
#[derive(Debug)]
pub struct HResponse {
    pub status: u16,
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
}

/// hyper's HTTP/1 client connection, driven by a private current-thread runtime.
pub struct Client {
    rt: tokio::runtime::Runtime,
    sender: SendRequest<Full<Bytes>>,
}

impl Client {
    /// Plain HTTP on `stream`.
    pub fn new(stream: TcpStream) -> Client {
        Client::connect(stream, None)
    }

    /// HTTP on `stream`, over TLS with `tls` when given (the handshake is done here).
    pub fn connect(stream: TcpStream, tls: Option<&TlsClient>) -> Client {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        stream.set_nonblocking(true).unwrap();
        let sender = rt
            .block_on(async {
                let tcp = tokio::net::TcpStream::from_std(stream)?;
                let Some(tls) = tls else {
                    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                        .await
                        .map_err(io::Error::other)?;
                    tokio::spawn(async move {
                        let _ = conn.await;
                    });
                    return Ok::<_, io::Error>(sender);
                };
                let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                let stream =
                    tokio::time::timeout(IO_TIMEOUT, connector.connect(tls.name.clone(), tcp))
                        .await
                        .map_err(|_| io::Error::other("no TLS handshake within IO_TIMEOUT"))??;
                let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(io::Error::other)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok(sender)
            })
            .expect("hyper handshake");
        Client { rt, sender }
    }

    pub fn send(&mut self, req: hyper::Request<Full<Bytes>>) -> HResponse {
        let sender = &mut self.sender;
        self.rt.block_on(async {
            let work = async {
                sender.ready().await?;
                let resp = sender.send_request(req).await?;
                let (parts, body) = resp.into_parts();
                let body = body.collect().await?.to_bytes().to_vec();
                Ok::<_, hyper::Error>((parts, body))
            };
            let (parts, body) = tokio::time::timeout(IO_TIMEOUT, work)
                .await
                .unwrap_or_else(|_| panic!("no response within {IO_TIMEOUT:?}"))
                .unwrap_or_else(|e| panic!("hyper: {e}"));
            let reason = parts
                .extensions
                .get::<hyper::ext::ReasonPhrase>()
                .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
                .or_else(|| parts.status.canonical_reason().map(str::to_string))
                .unwrap_or_default();
            HResponse {
                status: parts.status.as_u16(),
                reason,
                headers: parts.headers,
                body,
            }
        })
    }

    /// An HTTP/1.1 request with `Host: test` and the given extra headers, no body.
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

/// [`assert_error`] for a response received through hyper.
pub fn assert_error_h(resp: &HResponse, code: u16) {
    assert_eq!(resp.status, code, "status; response: {resp:#?}");
    assert_eq!(
        resp.body_str(),
        format!("{} {}\n", code, resp.reason),
        "error body"
    );
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
}
