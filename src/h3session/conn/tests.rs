//! The connection driven as a driver would, with no socket and no real
//! time: quinn-proto's own client endpoint on the other side, datagrams
//! handed across in memory, a clock that moves only when a test moves it,
//! and HTTP/3 on the client's side written with staticd's own frames and
//! QPACK encoder (a static-table request needs no more).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig};

use super::*;
use crate::client_name::ClientName;
use crate::config::{Config, Features, LogFormat};
use crate::h3session::frames::{frame, FrameHeader};
use crate::origin::{Kind, Origin, Protocol};
use crate::site::Site;

const READ_TIMEOUT: Duration = Duration::from_secs(2);
const KEEPALIVE: Duration = Duration::from_secs(5);
const BIG: usize = 300_000;

const CLIENT: &str = "127.0.0.1:40000";
const SERVER: &str = "127.0.0.1:443";

/// A response as the client read it.
#[derive(Debug, Default)]
struct Response {
    fields: Vec<(String, String)>,
    body: Vec<u8>,
    /// The stream ended (FIN) after it.
    ended: bool,
    /// The stream was reset, with this code.
    reset: Option<u64>,
}

impl Response {
    fn status(&self) -> Option<u16> {
        self.field(":status").and_then(|s| s.parse().ok())
    }

    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the client read of one request stream.
struct Reading {
    reader: RequestReader,
    response: Response,
}

/// Both ends and the datagrams between them.
struct Net {
    now: Instant,
    server_ep: Endpoint,
    client_ep: Endpoint,
    served: Arc<Served>,
    server: Option<(ConnectionHandle, Connection)>,
    client_ch: ConnectionHandle,
    client: quinn_proto::Connection,
    /// Every stream the client opened, by ID, with what it read.
    reading: HashMap<StreamId, Reading>,
    /// The server's control stream as the client read it.
    control: Vec<u8>,
    /// Why the client's connection ended, once it did.
    lost: Option<quinn_proto::ConnectionError>,
    _dir: tempfile::TempDir,
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn tls() -> (quinn_proto::ServerConfig, quinn_proto::ClientConfig) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = certified.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    server.alpn_protocols = vec![b"h3".to_vec()];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"h3".to_vec()];
    let server = QuicServerConfig::try_from(server).unwrap();
    let client = QuicClientConfig::try_from(client).unwrap();
    (
        quinn_proto::ServerConfig::with_crypto(Arc::new(server)),
        quinn_proto::ClientConfig::new(Arc::new(client)),
    )
}

impl Net {
    /// A client connected (handshake done) to a server of `a.txt` and a
    /// `BIG` `big.bin`, with its control stream and SETTINGS sent.
    fn new() -> Net {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "0123456789").unwrap();
        let big: Vec<u8> = (0..BIG).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("big.bin"), big).unwrap();
        let site = Site::open(dir.path(), &["index.html"], Features::default()).unwrap();
        let cfg = Config {
            log_format: LogFormat::Off,
            read_timeout: READ_TIMEOUT,
            keepalive_timeout: KEEPALIVE,
            ..Config::default()
        };
        let served = Arc::new(Served {
            cfg: Arc::new(cfg),
            site: Arc::new(site),
            origin: Origin::new(Kind::Https, ClientName::new("127.0.0.1"), Protocol::Fields),
        });
        let (server_config, client_config) = tls();
        let endpoint = Arc::new(EndpointConfig::default());
        let server_ep = Endpoint::new(
            Arc::clone(&endpoint),
            Some(Arc::new(server_config)),
            true,
            None,
        );
        let mut client_ep = Endpoint::new(endpoint, None, true, None);
        let now = Instant::now();
        let (client_ch, client) = client_ep
            .connect(now, client_config, addr(SERVER), "localhost")
            .unwrap();
        let mut net = Net {
            now,
            server_ep,
            client_ep,
            served,
            server: None,
            client_ch,
            client,
            reading: HashMap::new(),
            control: Vec::new(),
            lost: None,
            _dir: dir,
        };
        net.run();
        assert!(
            !net.client.is_handshaking(),
            "the handshake did not complete"
        );
        let id = net.client.streams().open(Dir::Uni).unwrap();
        let mut control = vec![frames::stream::CONTROL as u8];
        control.extend_from_slice(FrameHeader::new(frame::SETTINGS, 0).bytes());
        net.client.send_stream(id).write(&control).unwrap();
        net.run();
        net
    }

    fn server(&mut self) -> &mut Connection {
        &mut self.server.as_mut().expect("a server connection").1
    }

    /// Moves datagrams both ways, and fires timers that are due, until
    /// nothing more happens.
    fn run(&mut self) {
        let mut buf = Vec::new();
        for _ in 0..10_000 {
            let mut moved = false;
            let now = self.now;
            if self.client.poll_timeout().is_some_and(|t| t <= now) {
                self.client.handle_timeout(now);
            }
            if let Some((_, conn)) = &mut self.server {
                if conn.deadline().is_some_and(|t| t <= now) {
                    conn.tick(now);
                }
            }
            while let Some(ev) = self.client.poll_endpoint_events() {
                if let Some(ev) = self.client_ep.handle_event(self.client_ch, ev) {
                    self.client.handle_event(ev);
                }
            }
            let mut to_server = Vec::new();
            while let Some(t) = self.client.poll_transmit(now, 1, &mut buf) {
                to_server.push(buf[..t.size].to_vec());
                buf.clear();
            }
            for datagram in to_server {
                moved = true;
                self.deliver_to_server(datagram, &mut buf);
            }
            let mut to_client = Vec::new();
            if let Some((ch, conn)) = &mut self.server {
                while let Some(ev) = conn.endpoint_event() {
                    if let Some(ev) = self.server_ep.handle_event(*ch, ev) {
                        conn.datagram(ev, now);
                    }
                }
                while let Some(t) = conn.transmit(now, 1, &mut buf) {
                    to_client.push(buf[..t.size].to_vec());
                    buf.clear();
                }
            }
            for datagram in to_client {
                moved = true;
                let data = BytesMut::from(&datagram[..]);
                if let Some(DatagramEvent::ConnectionEvent(_, ev)) =
                    self.client_ep
                        .handle(now, addr(SERVER), None, None, data, &mut buf)
                {
                    self.client.handle_event(ev);
                }
                buf.clear();
            }
            self.client_events();
            if !moved {
                return;
            }
        }
        panic!("the connection never went quiet");
    }

    fn deliver_to_server(&mut self, datagram: Vec<u8>, buf: &mut Vec<u8>) {
        let now = self.now;
        let data = BytesMut::from(&datagram[..]);
        match self
            .server_ep
            .handle(now, addr(CLIENT), None, None, data, buf)
        {
            Some(DatagramEvent::NewConnection(incoming)) => {
                let (ch, quic) = self.server_ep.accept(incoming, now, buf, None).unwrap();
                self.server = Some((ch, Connection::new(quic, Arc::clone(&self.served), now)));
            }
            Some(DatagramEvent::ConnectionEvent(_, ev)) => self.server().datagram(ev, now),
            Some(DatagramEvent::Response(_)) | None => {}
        }
        buf.clear();
    }

    /// Reads what the client's streams received.
    fn client_events(&mut self) {
        while let Some(event) = self.client.poll() {
            if let QuicEvent::ConnectionLost { reason } = &event {
                self.lost = Some(reason.clone());
            }
            if let QuicEvent::Stream(StreamEvent::Opened { dir: Dir::Uni }) = event {
                while let Some(id) = self.client.streams().accept(Dir::Uni) {
                    self.read_control(id);
                }
            }
            if let QuicEvent::Stream(StreamEvent::Readable { id }) = event {
                match id.dir() {
                    Dir::Uni => self.read_control(id),
                    Dir::Bi => self.read_response(id),
                }
            }
        }
    }

    fn read_control(&mut self, id: StreamId) {
        let mut recv = self.client.recv_stream(id);
        let mut chunks = recv.read(true).unwrap();
        while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
            self.control.extend_from_slice(&chunk.bytes);
        }
        let _ = chunks.finalize();
    }

    fn read_response(&mut self, id: StreamId) {
        let Some(reading) = self.reading.get_mut(&id) else {
            return;
        };
        let mut recv = self.client.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    let piece = &chunk.bytes[..];
                    let mut at = 0;
                    loop {
                        let (next, event) = reading.reader.read(piece, at).unwrap();
                        at = next;
                        match event {
                            None => break,
                            Some(Read::Headers) | Some(Read::Trailers) => {
                                qpack::decode(reading.reader.section(), |n, v| {
                                    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                                    reading.response.fields.push((text(n), text(v)));
                                    Ok::<(), ()>(())
                                })
                                .unwrap();
                            }
                            Some(Read::Data(range)) => {
                                reading.response.body.extend_from_slice(&piece[range])
                            }
                        }
                    }
                }
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

    /// Opens a request stream and sends `section` (a QPACK field section)
    /// as its HEADERS frame; ends the stream if `end`.
    fn send_head(&mut self, section: &[u8], end: bool) -> StreamId {
        let id = self.client.streams().open(Dir::Bi).unwrap();
        let mut out = FrameHeader::new(frame::HEADERS, section.len() as u64)
            .bytes()
            .to_vec();
        out.extend_from_slice(section);
        self.client.send_stream(id).write(&out).unwrap();
        if end {
            self.client.send_stream(id).finish().unwrap();
        }
        let reading = Reading {
            reader: RequestReader::new(1 << 20, Vec::new()),
            response: Response::default(),
        };
        self.reading.insert(id, reading);
        id
    }

    /// A whole request without a body.
    fn request(&mut self, method: &str, path: &str) -> StreamId {
        let section = section(method, path);
        let id = self.send_head(&section, true);
        self.run();
        id
    }

    fn response(&self, id: StreamId) -> &Response {
        &self.reading[&id].response
    }

    /// Moves the clock, then lets what it made due happen.
    fn wait(&mut self, d: Duration) {
        self.now += d;
        self.run();
    }

    /// How the client's connection was closed by the server: its code.
    fn closed_with(&self) -> Option<u64> {
        match self.lost.as_ref()? {
            quinn_proto::ConnectionError::ApplicationClosed(close) => {
                Some(close.error_code.into_inner())
            }
            other => panic!("closed otherwise: {other:?}"),
        }
    }
}

/// A request's field section: a static-table request for `path`.
fn section(method: &str, path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    Encoder::start(&mut out);
    Encoder::field(&mut out, b":method", method.as_bytes());
    Encoder::field(&mut out, b":scheme", b"https");
    Encoder::field(&mut out, b":authority", b"localhost");
    Encoder::field(&mut out, b":path", path.as_bytes());
    out
}

#[test]
fn a_get_is_answered_with_the_file_and_staticds_settings_come_first() {
    let mut net = Net::new();
    let id = net.request("GET", "/a.txt");
    let response = net.response(id);
    assert_eq!(response.status(), Some(200), "{response:?}");
    assert_eq!(response.field("content-length"), Some("10"));
    assert_eq!(response.body, b"0123456789");
    assert!(response.ended);
    // The control stream: its type, then SETTINGS with the field section
    // limit.
    let mut reader = ControlReader::default();
    let mut said = Vec::new();
    assert_eq!(net.control.first(), Some(&0x00));
    reader.read(&net.control[1..], |c| said.push(c)).unwrap();
    let limit = Some(MAX_HEAD_BYTES as u64);
    assert_eq!(
        said,
        [frames::Control::Settings(frames::Settings {
            max_field_section: limit
        })]
    );
}

#[test]
fn a_large_file_arrives_whole_across_flow_control() {
    let mut net = Net::new();
    let id = net.request("GET", "/big.bin");
    let response = net.response(id);
    assert_eq!(response.status(), Some(200));
    let want: Vec<u8> = (0..BIG).map(|i| (i % 251) as u8).collect();
    assert_eq!(response.body.len(), BIG);
    assert!(response.body == want, "the body differs");
    assert!(response.ended);
}

#[test]
fn head_and_missing_files_and_several_streams_at_once() {
    let mut net = Net::new();
    let head = net.send_head(&section("HEAD", "/a.txt"), true);
    let missing = net.send_head(&section("GET", "/nothing"), true);
    let get = net.send_head(&section("GET", "/a.txt"), true);
    net.run();
    assert_eq!(net.response(head).status(), Some(200));
    assert!(net.response(head).body.is_empty());
    assert_eq!(net.response(missing).status(), Some(404));
    assert_eq!(net.response(get).body, b"0123456789");
}

#[test]
fn a_dynamic_table_reference_closes_the_connection() {
    let mut net = Net::new();
    // Required Insert Count 1: a dynamic entry staticd never allowed.
    net.send_head(&[0x02, 0x00, 0x80], true);
    net.run();
    assert_eq!(net.closed_with(), Some(qpack::code::DECOMPRESSION_FAILED));
}

#[test]
fn a_head_that_never_ends_is_refused_and_the_connection_closed() {
    let mut net = Net::new();
    // HEADERS declared longer than what comes.
    let id = net.client.streams().open(Dir::Bi).unwrap();
    net.client
        .send_stream(id)
        .write(&[0x01, 0x20, 0x00, 0x00])
        .unwrap();
    let reading = Reading {
        reader: RequestReader::new(1 << 20, Vec::new()),
        response: Response::default(),
    };
    net.reading.insert(id, reading);
    net.run();
    assert_eq!(net.closed_with(), None);
    net.wait(READ_TIMEOUT);
    assert_eq!(net.response(id).reset, Some(code::REQUEST_REJECTED));
    // GOAWAY, then the close once it had time to arrive.
    assert_eq!(net.closed_with(), None);
    assert!(net.control.windows(2).any(|w| w == [0x07, 0x01]));
    net.assert_nothing_due();
    net.wait(LAST_WORDS);
    assert_eq!(net.closed_with(), Some(code::NO_ERROR));
}

#[test]
fn an_idle_connection_closes_at_the_keepalive_timeout() {
    let mut net = Net::new();
    let id = net.request("GET", "/a.txt");
    assert_eq!(net.response(id).status(), Some(200));
    // The client's delayed ACK (25 ms): the stream is over once the
    // response is acknowledged, and the keep-alive timeout counts from it.
    net.wait(Duration::from_millis(50));
    net.wait(KEEPALIVE - Duration::from_millis(100));
    assert_eq!(net.closed_with(), None);
    net.wait(Duration::from_millis(200));
    // GOAWAY first on the control stream (after SETTINGS, type 0x7), the
    // close once it had time to arrive.
    let goaway = net.control.windows(2).any(|w| w == [0x07, 0x01]);
    assert!(goaway, "{:?}", net.control);
    assert_eq!(net.closed_with(), None);
    // Nothing is due until the close: a past deadline would spin the
    // driver's loop for the whole of the last words.
    net.assert_nothing_due();
    net.wait(LAST_WORDS);
    assert_eq!(net.closed_with(), Some(code::NO_ERROR));
    net.assert_nothing_due();
}

#[test]
fn a_stop_lets_open_streams_finish_then_closes() {
    let mut net = Net::new();
    // A large response in flight when the stop comes.
    let id = net.send_head(&section("GET", "/big.bin"), true);
    let (now, by) = (net.now, net.now + Duration::from_secs(10));
    net.deliver_client_datagrams();
    net.server().stop(now, by);
    // A stream opened after the GOAWAY's ID is refused, unprocessed.
    let late = net.send_head(&section("GET", "/a.txt"), true);
    net.run();
    let response = net.response(id);
    assert_eq!(response.body.len(), BIG);
    assert!(response.ended);
    assert_eq!(net.response(late).reset, Some(code::REQUEST_REJECTED));
    assert_eq!(net.closed_with(), Some(code::NO_ERROR));
}

#[test]
fn a_client_that_sends_goaway_is_closed_once_its_streams_are_done() {
    let mut net = Net::new();
    let id = net.send_head(&section("GET", "/big.bin"), true);
    net.deliver_client_datagrams();
    // GOAWAY on the client's control stream (its first uni stream), while
    // the response is on its way.
    let control = StreamId::new(quinn_proto::Side::Client, Dir::Uni, 0);
    let goaway = frames::goaway(0);
    net.client.send_stream(control).write(&goaway).unwrap();
    net.run();
    let response = net.response(id);
    assert_eq!(response.body.len(), BIG);
    assert!(response.ended);
    // Closed at once, not at the keep-alive timeout.
    assert_eq!(net.closed_with(), Some(code::NO_ERROR));
}

impl Net {
    /// The server's next deadline, if any, is still ahead.
    fn assert_nothing_due(&mut self) {
        let now = self.now;
        let next = self.server().deadline();
        assert!(
            next.is_none_or(|d| d > now),
            "due {:?} ago",
            next.map(|d| now - d)
        );
    }

    /// Delivers the client's pending datagrams to the server only.
    fn deliver_client_datagrams(&mut self) {
        let mut buf = Vec::new();
        let now = self.now;
        let mut to_server = Vec::new();
        while let Some(t) = self.client.poll_transmit(now, 1, &mut buf) {
            to_server.push(buf[..t.size].to_vec());
            buf.clear();
        }
        for datagram in to_server {
            self.deliver_to_server(datagram, &mut buf);
        }
    }
}
