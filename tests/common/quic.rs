//! The harness's HTTP/3 client: quinn (QUIC, with the harness's rustls client
//! configuration and ALPN `h3`) and h3 (hyperium's HTTP/3 and QPACK) over it, the stack
//! the server itself uses. [`Client`] drives it on its private runtime in the matrix's
//! `h3` cell ([`Proto::Http3`]); the requests and responses are hyper's (the `http`
//! crate's) types, so a test sees the same [`HResponse`] as over HTTP/1.1 and HTTP/2.

use super::*;

use hyper::body::Buf;
use rustls::client::Resumption;

/// h3's request sender over quinn: cloned for each concurrent stream.
pub type H3Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// One HTTP/3 connection: its endpoint (the client's UDP socket), the QUIC connection
/// and h3's request sender. h3's connection driver runs in a task of the runtime it
/// was made on.
pub struct H3Conn {
    pub endpoint: quinn::Endpoint,
    pub conn: quinn::Connection,
    pub sender: H3Sender,
}

impl H3Conn {
    /// Connects to `addr` over UDP (the server's HTTPS port number) with `tls`'s roots
    /// and server name, offering only ALPN `h3`, and sets up HTTP/3 (control and QPACK
    /// streams, SETTINGS). Runs on a tokio runtime: quinn's endpoint and h3's
    /// connection driver are tasks of it. No session resumption (each connection
    /// makes a full handshake): a ticket got over TCP is not offered over QUIC.
    pub async fn connect(addr: SocketAddr, tls: &TlsClient) -> io::Result<H3Conn> {
        let mut config = (*tls.config).clone();
        config.alpn_protocols = vec![b"h3".to_vec()];
        config.resumption = Resumption::disabled();
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(config))
            .map_err(io::Error::other)?;
        let bind = match addr {
            SocketAddr::V4(_) => SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
            SocketAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0)),
        };
        let mut endpoint = quinn::Endpoint::client(bind)?;
        let mut client = quinn::ClientConfig::new(Arc::new(crypto));
        // The connection's idle timeout is the lower of the two ends'. The server's
        // (`--keepalive-timeout`) is what tests mean; quinn's client default (30 s)
        // would otherwise end a connection a test holds quiet while it opens hundreds
        // of others on a loaded machine (no PING can keep it: its runtime runs only
        // while the test uses it).
        let mut transport = quinn::TransportConfig::default();
        transport.max_idle_timeout(Some(quinn::IdleTimeout::from(quinn::VarInt::from_u32(
            600_000,
        ))));
        client.transport_config(Arc::new(transport));
        endpoint.set_default_client_config(client);
        let connecting = endpoint
            .connect(addr, &server_name(&tls.name))
            .map_err(io::Error::other)?;
        let conn = tokio::time::timeout(IO_TIMEOUT, connecting)
            .await
            .map_err(|_| io::Error::other("no QUIC handshake within IO_TIMEOUT"))?
            .map_err(io::Error::other)?;
        let alpn = conn
            .handshake_data()
            .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
            .and_then(|d| d.protocol);
        if alpn.as_deref() != Some(b"h3") {
            return Err(io::Error::other(format!(
                "offered ALPN h3, the server chose {:?}",
                alpn.map(|a| String::from_utf8_lossy(&a).into_owned())
            )));
        }
        let setup = h3::client::new(h3_quinn::Connection::new(conn.clone()));
        let (mut driver, sender) = tokio::time::timeout(IO_TIMEOUT, setup)
            .await
            .map_err(|_| io::Error::other("no HTTP/3 set-up within IO_TIMEOUT"))?
            .map_err(io::Error::other)?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(H3Conn {
            endpoint,
            conn,
            sender,
        })
    }

    /// Whether the connection has ended (the server closed it, or it idled out).
    pub fn is_closed(&self) -> bool {
        self.conn.close_reason().is_some()
    }

    /// Closes the connection (H3_NO_ERROR) and lets the runtime send the close: the
    /// caller then runs the runtime a little ([`Client`]'s drop does).
    pub fn close(&self) {
        self.conn.close(quinn::VarInt::from_u32(0x100), b"");
    }
}

/// The name quinn sends as SNI and checks the certificate for.
fn server_name(name: &rustls::pki_types::ServerName<'_>) -> String {
    match name {
        rustls::pki_types::ServerName::DnsName(dns) => dns.as_ref().to_string(),
        rustls::pki_types::ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
        other => panic!("no QUIC server name for {other:?}"),
    }
}

/// Why an HTTP/3 exchange failed.
#[derive(Debug)]
pub enum H3Error {
    Stream(h3::error::StreamError),
}

impl std::fmt::Display for H3Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            H3Error::Stream(e) => write!(f, "HTTP/3 stream: {e}"),
        }
    }
}

impl From<h3::error::StreamError> for H3Error {
    fn from(e: h3::error::StreamError) -> H3Error {
        H3Error::Stream(e)
    }
}

/// The largest request body [`h3_exchange`] sends with the head, before reading the
/// response: what fits in the head's QUIC packet.
pub const INLINE_BODY: usize = 1000;

/// One request on a new stream of `sender`: the head (an absolute URI: `:scheme`,
/// `:authority`, `:path`); then, as curl and browsers send them, a small body (up to
/// [`INLINE_BODY`]) and the stream's end at once, in the head's packet; a larger body
/// while the response is read (the server may answer before reading it, and stop it);
/// then the whole response.
pub async fn h3_exchange(
    mut sender: H3Sender,
    req: hyper::Request<Full<Bytes>>,
) -> Result<(hyper::http::response::Parts, Vec<u8>), H3Error> {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    let mut stream = sender
        .send_request(hyper::Request::from_parts(parts, ()))
        .await?;
    if body.len() <= INLINE_BODY {
        if !body.is_empty() {
            stream.send_data(body).await?;
        }
        stream.finish().await?;
        return h3_response_of(&mut stream).await;
    }
    let (mut send, mut recv) = stream.split();
    // The body goes in a task of its own: a server that answers without reading it may
    // leave it unread, and the response is what the test waits for.
    tokio::spawn(async move {
        if send.send_data(body).await.is_ok() {
            let _ = send.finish().await;
        }
    });
    h3_response_of(&mut recv).await
}

/// The response on a request stream: its head, then its body to the stream's end.
pub async fn h3_response_of<S>(
    stream: &mut h3::client::RequestStream<S, Bytes>,
) -> Result<(hyper::http::response::Parts, Vec<u8>), H3Error>
where
    S: h3::quic::RecvStream,
{
    let resp = stream.recv_response().await?;
    let mut out = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await? {
        while chunk.has_remaining() {
            let bytes = chunk.chunk();
            out.extend_from_slice(bytes);
            let n = bytes.len();
            chunk.advance(n);
        }
    }
    let (parts, ()) = resp.into_parts();
    Ok((parts, out))
}
