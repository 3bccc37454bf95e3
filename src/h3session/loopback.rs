//! An HTTP/3 [`Connection`] and a QUIC client joined in memory: quinn-proto's
//! own client endpoint on the other side, datagrams handed across without a
//! socket, and a clock that moves only when the caller moves it. The client
//! speaks HTTP/3 with staticd's own frames and QPACK encoder (a
//! static-table request needs no more) and reads every response it asked
//! for.
//!
//! It is for code that must drive a whole connection the way the driver
//! (`serve::h3`) does, but deterministically and fast: h3session::conn's
//! tests, the `h3_connection` fuzz target (fuzz/src/checks.rs) and counting
//! allocations (tests/allocations.rs). The server binary never calls it.
//!
//! It needs nothing the library does not have: the caller brings the
//! server's and the client's QUIC configurations (certificates are the
//! caller's business: rcgen in tests, a committed test certificate when
//! fuzzing) and what the connection serves.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{
    ClientConfig, ConnectionError, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig,
    Event as QuicEvent, ReadError, ServerConfig, StreamEvent, StreamId,
};

use super::conn::Connection;
use super::frames::{self, frame, Event as Read, FrameHeader, RequestReader};
use super::qpack::{self, Encoder};
use crate::pipeline::Served;

/// The client's address, as the server sees it.
pub const CLIENT: &str = "127.0.0.1:40000";
/// The server's address, as the client dials it.
pub const SERVER: &str = "127.0.0.1:443";

/// How many rounds of datagrams [`Loopback::run`] moves before it takes the
/// exchange for one that never ends (a bug on one side): far more than a
/// few responses of a few hundred KiB need.
const MAX_ROUNDS: usize = 10_000;

/// A response as the client read it.
#[derive(Debug, Default)]
pub struct Response {
    /// The fields of every field section, in order (the head's first).
    pub fields: Vec<(String, String)>,
    /// How many field sections came: the head, then any trailers.
    pub sections: usize,
    pub body: Vec<u8>,
    /// The stream ended (FIN) after it.
    pub ended: bool,
    /// The stream was reset, with this code.
    pub reset: Option<u64>,
}

impl Response {
    /// `:status`, if it came and is a number.
    pub fn status(&self) -> Option<u16> {
        self.field(":status").and_then(|s| s.parse().ok())
    }

    /// The first field of that name.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the client read of one request stream: its frames as they come,
/// since a response arrives in pieces of any size.
struct Reading {
    reader: RequestReader,
    response: Response,
}

/// Both ends and the datagrams between them (see the module's comment).
pub struct Loopback {
    /// The clock both ends are given: moved by [`Loopback::wait`] (or by
    /// hand, then [`Loopback::run`]).
    pub now: Instant,
    server_ep: Endpoint,
    client_ep: Endpoint,
    served: Arc<Served>,
    /// The server's connection, once the client's first datagram made it.
    server: Option<(ConnectionHandle, Connection)>,
    client_ch: ConnectionHandle,
    /// The client's QUIC connection: open, write, finish or reset its
    /// streams here; `run` carries what that sends.
    pub client: quinn_proto::Connection,
    /// Every request stream the client watches, by ID, with what it read.
    reading: HashMap<StreamId, Reading>,
    /// The server's control stream as the client read it.
    pub control: Vec<u8>,
    /// Why the client's connection ended, once it did.
    pub lost: Option<ConnectionError>,
    /// Called with true as the server's side (its endpoint and connection)
    /// starts work, and false as it stops: what tests/allocations.rs counts
    /// by, apart from the client's work and the datagrams' copies here.
    pub server_side: fn(bool),
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("a socket address")
}

/// An endpoint whose random choices (connection IDs, reset tokens) come
/// from a fixed seed, so that a run depends on what it is given, not on
/// the process's randomness (TLS keeps its own).
fn endpoint(server: Option<ServerConfig>, seed: u8) -> Endpoint {
    let mut config = EndpointConfig::default();
    config.rng_seed(Some([seed; 32]));
    Endpoint::new(Arc::new(config), server.map(Arc::new), true, None)
}

/// A client's TLS for HTTP/3: TLS 1.3, ALPN h3, trusting `trust` alone.
pub fn client_tls(trust: rustls::pki_types::CertificateDer<'static>) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trust).expect("a certificate to trust");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"h3".to_vec()];
    client
}

/// QUIC configurations for both ends, TLS 1.3 and ALPN h3, the server
/// with `cert` and `key`, the client trusting `cert` alone (tests bring
/// one made with rcgen).
pub fn configs(
    cert: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> (ServerConfig, ClientConfig) {
    use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .expect("the certificate and key match");
    server.alpn_protocols = vec![b"h3".to_vec()];
    let server = QuicServerConfig::try_from(server).expect("a QUIC server configuration");
    let client = QuicClientConfig::try_from(client_tls(cert)).expect("a QUIC client configuration");
    (
        ServerConfig::with_crypto(Arc::new(server)),
        ClientConfig::new(Arc::new(client)),
    )
}

impl Loopback {
    /// A client connected to a server of `served`, the handshake done
    /// (one round of [`Loopback::run`] at `now`). The client has opened no
    /// stream: see [`Loopback::send_settings`].
    pub fn connect(
        server_config: ServerConfig,
        client_config: ClientConfig,
        served: Arc<Served>,
        now: Instant,
    ) -> Loopback {
        let mut client_ep = endpoint(None, 1);
        let (client_ch, client) = client_ep
            .connect(now, client_config, addr(SERVER), "localhost")
            .expect("the client's configuration connects");
        let mut link = Loopback {
            now,
            server_ep: endpoint(Some(server_config), 2),
            client_ep,
            served,
            server: None,
            client_ch,
            client,
            reading: HashMap::new(),
            control: Vec::new(),
            lost: None,
            server_side: |_| {},
        };
        link.run();
        assert!(
            !link.client.is_handshaking(),
            "the handshake did not complete: {:?}",
            link.lost
        );
        link
    }

    /// Opens the client's control stream with an empty SETTINGS, as every
    /// HTTP/3 client does first (RFC 9114 §6.2.1), and sends it.
    pub fn send_settings(&mut self) -> StreamId {
        let id = self.client.streams().open(Dir::Uni).expect("a uni stream");
        let mut control = vec![frames::stream::CONTROL as u8];
        control.extend_from_slice(FrameHeader::new(frame::SETTINGS, 0).bytes());
        self.client
            .send_stream(id)
            .write(&control)
            .expect("room for SETTINGS");
        self.run();
        id
    }

    /// The server's connection (there is one once `connect` returned).
    pub fn server(&mut self) -> &mut Connection {
        &mut self.server.as_mut().expect("a server connection").1
    }

    /// Moves datagrams both ways, and fires the timers that are due at
    /// `now`, until nothing more happens. Time does not move here.
    pub fn run(&mut self) {
        let mut buf = Vec::new();
        for _ in 0..MAX_ROUNDS {
            self.fire_timers();
            self.client_endpoint_events();
            let to_server = self.client_datagrams(&mut buf);
            let moved = !to_server.is_empty();
            for datagram in to_server {
                self.deliver_to_server(datagram, &mut buf);
            }
            let to_client = self.server_datagrams(&mut buf);
            let moved = moved || !to_client.is_empty();
            for datagram in to_client {
                self.deliver_to_client(datagram, &mut buf);
                // Read as it comes: a reset that follows would take what
                // was left unread with it.
                self.client_events();
            }
            self.client_events();
            if !moved {
                return;
            }
        }
        panic!("the connection never went quiet");
    }

    /// Delivers the client's pending datagrams to the server only: what
    /// the server does before it hears back (a stop while a request is on
    /// its way, say) can then be set up.
    pub fn deliver_client_datagrams(&mut self) {
        let mut buf = Vec::new();
        for datagram in self.client_datagrams(&mut buf) {
            self.deliver_to_server(datagram, &mut buf);
        }
    }

    /// Moves the clock, then lets what it made due happen.
    pub fn wait(&mut self, d: Duration) {
        self.now += d;
        self.run();
    }

    /// Both ends' timers that are due, fired: the client's first, as its
    /// ACKs decide what the server may send.
    fn fire_timers(&mut self) {
        let now = self.now;
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        if let Some((_, conn)) = &mut self.server {
            (self.server_side)(true);
            if conn.deadline().is_some_and(|t| t <= now) {
                conn.tick(now);
            }
            (self.server_side)(false);
        }
    }

    /// What the client must tell its endpoint (and hear back), told.
    fn client_endpoint_events(&mut self) {
        while let Some(ev) = self.client.poll_endpoint_events() {
            if let Some(ev) = self.client_ep.handle_event(self.client_ch, ev) {
                self.client.handle_event(ev);
            }
        }
    }

    /// The datagrams the client has to send now.
    fn client_datagrams(&mut self, buf: &mut Vec<u8>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(t) = self.client.poll_transmit(self.now, 1, buf) {
            out.push(buf[..t.size].to_vec());
            buf.clear();
        }
        out
    }

    /// The datagrams the server has to send now, after telling its
    /// endpoint what the connection said (as the driver does).
    fn server_datagrams(&mut self, buf: &mut Vec<u8>) -> Vec<Vec<u8>> {
        let now = self.now;
        let mut out = Vec::new();
        let Some((ch, conn)) = &mut self.server else {
            return out;
        };
        let server_side = self.server_side;
        server_side(true);
        while let Some(ev) = conn.endpoint_event() {
            if let Some(ev) = self.server_ep.handle_event(*ch, ev) {
                conn.datagram(ev, now);
            }
        }
        while let Some(t) = conn.transmit(now, 1, buf) {
            server_side(false);
            out.push(buf[..t.size].to_vec());
            buf.clear();
            server_side(true);
        }
        server_side(false);
        out
    }

    /// One datagram through the server's endpoint: the connection it
    /// opens, or what it says to the connection.
    fn deliver_to_server(&mut self, datagram: Vec<u8>, buf: &mut Vec<u8>) {
        let now = self.now;
        // Split off a buffer of its own, as the driver's arena gives each
        // datagram: quinn-proto then splits coalesced packets without
        // another allocation.
        let data = BytesMut::from(&datagram[..]).split();
        (self.server_side)(true);
        match self
            .server_ep
            .handle(now, addr(CLIENT), None, None, data, buf)
        {
            Some(DatagramEvent::NewConnection(incoming)) => {
                let (ch, quic) = self
                    .server_ep
                    .accept(incoming, now, buf, None)
                    .expect("the server accepts");
                let conn = Connection::new(quic, Arc::clone(&self.served), now);
                self.server = Some((ch, conn));
            }
            Some(DatagramEvent::ConnectionEvent(_, ev)) => self.server().datagram(ev, now),
            Some(DatagramEvent::Response(_)) | None => {}
        }
        (self.server_side)(false);
        buf.clear();
    }

    /// One datagram through the client's endpoint to its connection.
    fn deliver_to_client(&mut self, datagram: Vec<u8>, buf: &mut Vec<u8>) {
        let data = BytesMut::from(&datagram[..]);
        let event = self
            .client_ep
            .handle(self.now, addr(SERVER), None, None, data, buf);
        if let Some(DatagramEvent::ConnectionEvent(_, ev)) = event {
            self.client.handle_event(ev);
        }
        buf.clear();
    }

    /// Reads what the client's streams received.
    fn client_events(&mut self) {
        while let Some(event) = self.client.poll() {
            match event {
                QuicEvent::ConnectionLost { reason } => self.lost = Some(reason),
                QuicEvent::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                    while let Some(id) = self.client.streams().accept(Dir::Uni) {
                        self.read_control(id);
                    }
                }
                QuicEvent::Stream(StreamEvent::Readable { id }) => match id.dir() {
                    Dir::Uni => self.read_control(id),
                    Dir::Bi => self.read_response(id),
                },
                _ => {}
            }
        }
    }

    /// The server's only unidirectional stream is its control stream.
    fn read_control(&mut self, id: StreamId) {
        let mut recv = self.client.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
            self.control.extend_from_slice(&chunk.bytes);
        }
        let _ = chunks.finalize();
    }

    /// Reads what came of a watched request stream's response. A
    /// response that is not HTTP/3 (DATA before HEADERS, a section QPACK
    /// cannot read) is the server's bug: it panics.
    fn read_response(&mut self, id: StreamId) {
        let Some(reading) = self.reading.get_mut(&id) else {
            return;
        };
        let mut recv = self.client.recv_stream(id);
        // Not readable: the client stopped it.
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => reading.take(id, &chunk.bytes),
                Ok(None) => {
                    reading.response.ended = true;
                    break;
                }
                Err(ReadError::Reset(code)) => {
                    reading.response.reset = Some(code.into_inner());
                    break;
                }
                Err(ReadError::Blocked) => break,
            }
        }
        let _ = chunks.finalize();
    }

    /// Has the client read the response of request stream `id` (one it
    /// opened by hand).
    pub fn watch(&mut self, id: StreamId) {
        let reading = Reading {
            reader: RequestReader::new(1 << 20, Vec::new()),
            response: Response::default(),
        };
        self.reading.insert(id, reading);
    }

    /// Opens a request stream, writes `bytes` into it (as much as QUIC
    /// takes) and watches its response; finishes it if `end`. None when
    /// the server allows no more streams now. Nothing is sent before
    /// `run`.
    pub fn open_request(&mut self, bytes: &[u8], end: bool) -> Option<StreamId> {
        let id = self.client.streams().open(Dir::Bi)?;
        let _ = self.client.send_stream(id).write(bytes);
        if end {
            let _ = self.client.send_stream(id).finish();
        }
        self.watch(id);
        Some(id)
    }

    /// Opens a request stream and sends `section` (a QPACK field section)
    /// as its HEADERS frame; ends the stream if `end`. Nothing is sent
    /// before `run`.
    pub fn send_head(&mut self, section: &[u8], end: bool) -> StreamId {
        let mut out = FrameHeader::new(frame::HEADERS, section.len() as u64)
            .bytes()
            .to_vec();
        out.extend_from_slice(section);
        self.open_request(&out, end).expect("a request stream")
    }

    /// A whole request without a body, sent and answered.
    pub fn request(&mut self, method: &str, path: &str) -> StreamId {
        let id = self.send_head(&section(method, path), true);
        self.run();
        id
    }

    /// What the client read of watched stream `id`.
    pub fn response(&self, id: StreamId) -> &Response {
        &self.reading[&id].response
    }

    /// Every watched stream's response so far.
    pub fn responses(&self) -> impl Iterator<Item = (StreamId, &Response)> {
        self.reading.iter().map(|(&id, r)| (id, &r.response))
    }

    /// How the server closed the client's connection: its HTTP/3 code.
    /// Panics if it ended otherwise (a QUIC error, a timeout).
    pub fn closed_with(&self) -> Option<u64> {
        match self.lost.as_ref()? {
            ConnectionError::ApplicationClosed(close) => Some(close.error_code.into_inner()),
            other => panic!("closed otherwise: {other:?}"),
        }
    }

    /// Whether the server's next deadline, if any, is still ahead: a past
    /// one would spin a driver's loop.
    pub fn nothing_due(&mut self) -> bool {
        let now = self.now;
        self.server().deadline().is_none_or(|d| d > now)
    }
}

impl Reading {
    /// One piece of a response stream, through the frame reader: field
    /// sections decoded, DATA kept.
    fn take(&mut self, id: StreamId, piece: &[u8]) {
        let mut at = 0;
        loop {
            let read = self.reader.read(piece, at);
            let (next, event) = read.unwrap_or_else(|v| panic!("{id}: not a response: {v:?}"));
            at = next;
            match event {
                None => return,
                Some(Read::Headers) | Some(Read::Trailers) => self.decode(id),
                Some(Read::Data(range)) => self.response.body.extend_from_slice(&piece[range]),
            }
        }
    }

    /// The field section just read, into the response's fields.
    fn decode(&mut self, id: StreamId) {
        let fields = &mut self.response.fields;
        let decoded = qpack::decode(self.reader.section(), |n, v| {
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            fields.push((text(n), text(v)));
            Ok::<(), ()>(())
        });
        decoded.unwrap_or_else(|e| panic!("{id}: a field section QPACK cannot read: {e:?}"));
        self.response.sections += 1;
    }
}

/// A request's field section: a static-table request for `path`.
pub fn section(method: &str, path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    Encoder::start(&mut out);
    Encoder::field(&mut out, b":method", method.as_bytes());
    Encoder::field(&mut out, b":scheme", b"https");
    Encoder::field(&mut out, b":authority", b"localhost");
    Encoder::field(&mut out, b":path", path.as_bytes());
    out
}
