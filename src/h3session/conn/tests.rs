//! The connection driven as a driver would, with no socket and no real
//! time: the in-memory QUIC pair of [`loopback`](crate::h3session::loopback)
//! (quinn-proto's own client endpoint on the other side, datagrams handed
//! across in memory, a clock that moves only when a test moves it), over a
//! root of `a.txt` and a `BIG` `big.bin`, with certificates from rcgen.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::client_name::ClientName;
use crate::config::{Config, Features, LogFormat};
use crate::h3session::loopback::{section, Loopback};
use crate::origin::{Kind, Origin, Protocol};
use crate::site::Site;

const READ_TIMEOUT: Duration = Duration::from_secs(2);
const KEEPALIVE: Duration = Duration::from_secs(5);
const BIG: usize = 300_000;

/// The loopback pair, and the root it serves (removed when dropped).
struct Net {
    link: Loopback,
    _dir: tempfile::TempDir,
}

impl Deref for Net {
    type Target = Loopback;
    fn deref(&self) -> &Loopback {
        &self.link
    }
}

impl DerefMut for Net {
    fn deref_mut(&mut self) -> &mut Loopback {
        &mut self.link
    }
}

fn tls() -> (quinn_proto::ServerConfig, quinn_proto::ClientConfig) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = certified.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    crate::h3session::loopback::configs(cert, key)
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
        let now = Instant::now();
        let mut link = Loopback::connect(server_config, client_config, served, now);
        link.send_settings();
        Net { link, _dir: dir }
    }
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
    let id = net.open_request(&[0x01, 0x20, 0x00, 0x00], false).unwrap();
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
        assert!(self.nothing_due(), "due {:?} ago", next.map(|d| now - d));
    }
}
