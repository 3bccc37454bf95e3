//! The connection's state machine driven as its transport drives it, with
//! no socket and no real time: a client played with hand-made frames (HPACK
//! literals without Huffman, which need no encoder), each turn's plan read
//! back into frames, and a clock that moves only when a test moves it.

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::client_name::ClientName;
use crate::config::{Config, Features, Http2, LogFormat};
use crate::origin::{Kind, Origin, Protocol};
use crate::site::Site;
use hpack::{literal, request};

/// The black-box tests' HPACK by hand, shared.
#[allow(dead_code)]
#[path = "../../tests/common/hpack.rs"]
mod hpack;

const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const DATA: u8 = 0x0;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

/// The timeouts the tests move the clock across: all different, so that a
/// deadline taken from the wrong one shows.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
const KEEPALIVE: Duration = Duration::from_secs(5);
const GRACE: Duration = Duration::from_secs(7);

/// A file larger than the client's initial window (65,535 bytes): its
/// stream stays open until the client gives more.
const BIG: usize = 100_000;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// HEADERS with a whole request and no body.
fn get(stream: u32, method: &str, path: &str) -> Vec<u8> {
    frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        stream,
        &request(method, path),
    )
}

/// A header block of one 4,000-byte field added to the dynamic table and
/// `refs` references to it: a few bytes on the wire, `refs` × 4,038
/// decoded.
fn bomb(stream: u32, refs: usize) -> Vec<u8> {
    let mut block = request("GET", "/a.txt");
    hpack::literal_indexed(&mut block, "x-bomb", &[b'b'; 4000]);
    for _ in 0..refs {
        hpack::indexed(&mut block, hpack::FIRST_DYNAMIC);
    }
    frame(HEADERS, END_STREAM | END_HEADERS, stream, &block)
}

fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

/// One frame the server sent.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Out {
    fn u32_at(&self, at: usize) -> u32 {
        let b = &self.payload[at..at + 4];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// A RST_STREAM's or GOAWAY's error code.
    fn code(&self) -> u32 {
        match self.kind {
            GOAWAY => self.u32_at(4),
            _ => self.u32_at(0),
        }
    }

    /// A response's `:status`, where `hpack::status` reads it (the
    /// indexed static-table fields nghttp2 sends for the statuses tested).
    fn status(&self) -> Option<u16> {
        hpack::status(&self.payload)
    }
}

/// A client, a connection and the time: the transport's loop, by hand.
struct Client {
    conn: Connection,
    now: Instant,
    /// Server bytes not yet a whole frame.
    read: Vec<u8>,
    /// Every frame the server sent, in order.
    frames: Vec<Out>,
    _dir: tempfile::TempDir,
}

impl Client {
    /// A connection to a site of `a.txt` and a `BIG` `big.bin`, after the
    /// client's preface and empty SETTINGS and the server's SETTINGS.
    fn new() -> Client {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "0123456789").unwrap();
        std::fs::write(dir.path().join("big.bin"), vec![7u8; BIG]).unwrap();
        let site = Site::open(dir.path(), &["index.html"], Features::default()).unwrap();
        let cfg = Config {
            log_format: LogFormat::Off,
            http2: Some(Http2::default()),
            read_timeout: READ_TIMEOUT,
            keepalive_timeout: KEEPALIVE,
            shutdown_grace: GRACE,
            ..Config::default()
        };
        let client = ClientName::new("127.0.0.1");
        let served = Served {
            cfg: Arc::new(cfg),
            site: Arc::new(site),
            origin: Origin::new(Kind::Http, client, Protocol::Http1)
                .into_streams(None, (None, None)),
        };
        let now = Instant::now();
        let mut client = Client {
            conn: Connection::new(Arc::new(served), now),
            now,
            read: Vec::new(),
            frames: Vec::new(),
            _dir: dir,
        };
        let mut opening = PREFACE.to_vec();
        opening.extend(frame(SETTINGS, 0, 0, &[]));
        client.send(&opening);
        let settings = client.take();
        assert!(
            settings.iter().any(|f| f.kind == SETTINGS && f.flags == 0),
            "{settings:?}"
        );
        client.send(&frame(SETTINGS, ACK, 0, &[]));
        client
    }

    /// The client's bytes arrive now; then the turns they call for.
    fn send(&mut self, bytes: &[u8]) {
        self.conn.receive(bytes, self.now).expect("receive");
        self.turns();
    }

    /// Writes turns until nghttp2 has nothing more to send, as the
    /// transport does (file parts read where the plan places them).
    fn turns(&mut self) {
        loop {
            self.conn.produce(self.now).expect("produce");
            let plan = self.conn.plan_mut();
            if plan.is_empty() {
                break;
            }
            let mut at = 0;
            for part in &plan.files {
                self.read.extend_from_slice(&plan.bytes[at..part.at]);
                let mut bytes = vec![0; part.len as usize];
                part.file.read_exact_at(&mut bytes, part.offset).unwrap();
                self.read.extend(bytes);
                at = part.at;
            }
            self.read.extend_from_slice(&plan.bytes[at..]);
            self.conn.written();
            while let Some(event) = self.conn.next_event() {
                assert!(matches!(event, Event::Gone(_)), "no scripts here");
            }
        }
        while self.read.len() >= 9 {
            let len = u32::from_be_bytes([0, self.read[0], self.read[1], self.read[2]]) as usize;
            if self.read.len() < 9 + len {
                break;
            }
            let head: Vec<u8> = self.read.drain(..9 + len).collect();
            self.frames.push(Out {
                kind: head[3],
                flags: head[4],
                stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
                payload: head[9..].to_vec(),
            });
        }
    }

    /// The frames sent since the last `take`.
    fn take(&mut self) -> Vec<Out> {
        std::mem::take(&mut self.frames)
    }

    /// Moves the clock to `at` and lets the connection act on it: whether
    /// it is to be closed now.
    fn tick(&mut self, at: Instant) -> bool {
        self.now = at;
        let close = self.conn.tick(at);
        self.turns();
        close
    }

    /// The connection's next deadline, the clock moved to it and acted
    /// on: the frames it sent, and whether it is to be closed.
    fn at_deadline(&mut self) -> (Vec<Out>, bool) {
        let deadline = self.conn.deadline();
        let close = self.tick(deadline);
        (self.take(), close)
    }
}

fn goaways(frames: &[Out]) -> Vec<(u32, u32)> {
    frames
        .iter()
        .filter(|f| f.kind == GOAWAY)
        .map(|f| (f.u32_at(0), f.code()))
        .collect()
}

/// The DATA payload bytes sent on `stream`, and whether one ended it.
fn body(frames: &[Out], stream: u32) -> (Vec<u8>, bool) {
    let data = frames
        .iter()
        .filter(|f| f.kind == DATA && f.stream == stream);
    let ended = data.clone().any(|f| f.flags & END_STREAM != 0);
    (data.flat_map(|f| f.payload.clone()).collect(), ended)
}

/// The connection's last GOAWAY went out: within `LAST_WORDS` it is closed.
fn closes_after_last_words(client: &mut Client) {
    let said = client.now;
    assert_eq!(client.conn.deadline(), said + LAST_WORDS);
    assert!(!client.tick(said + LAST_WORDS - Duration::from_millis(1)));
    let (frames, close) = client.at_deadline();
    assert!(close && frames.is_empty(), "{frames:?}");
}

/// The client of a `big.bin` stream 1 on its first 65,535 bytes gives
/// windows for the rest: it comes and ends the stream, and with it the
/// connection, with no GOAWAY of ours.
fn takes_the_rest_and_the_connection_ends(client: &mut Client) {
    let more = (BIG - 65_535) as u32;
    let mut updates = window_update(0, more);
    updates.extend(window_update(1, more));
    client.send(&updates);
    let frames = client.take();
    assert_eq!(body(&frames, 1), (vec![7; BIG - 65_535], true));
    assert!(goaways(&frames).is_empty(), "{frames:?}");
    assert!(client.conn.is_done());
}

#[test]
fn a_get_is_answered_with_headers_then_data_that_ends_the_stream() {
    let mut client = Client::new();
    client.send(&get(1, "GET", "/a.txt"));
    let frames = client.take();
    let head = frames.iter().position(|f| f.kind == HEADERS).unwrap();
    assert_eq!(frames[head].stream, 1);
    assert_eq!(frames[head].status(), Some(200), "{frames:?}");
    assert_eq!(frames[head].flags & END_STREAM, 0, "a body follows");
    let first_data = frames.iter().position(|f| f.kind == DATA).unwrap();
    assert!(head < first_data);
    assert_eq!(body(&frames, 1), (b"0123456789".to_vec(), true));
    // Answered and closed: the connection owes nothing, and is not done.
    assert!(client.conn.owes_nothing());
    assert!(!client.conn.is_done());
}

#[test]
fn a_head_gets_headers_that_end_the_stream_and_no_data() {
    let mut client = Client::new();
    client.send(&get(1, "HEAD", "/a.txt"));
    let frames = client.take();
    let head = frames.iter().find(|f| f.kind == HEADERS).unwrap();
    assert_eq!(head.status(), Some(200));
    assert_eq!(head.flags & END_STREAM, END_STREAM, "{frames:?}");
    assert!(!frames.iter().any(|f| f.kind == DATA), "{frames:?}");
}

#[test]
fn a_missing_file_is_a_404_with_its_body() {
    let mut client = Client::new();
    client.send(&get(1, "GET", "/nope"));
    let frames = client.take();
    let head = frames.iter().find(|f| f.kind == HEADERS).unwrap();
    assert_eq!(head.status(), Some(404), "{frames:?}");
    assert_eq!(body(&frames, 1), (b"404 Not Found\n".to_vec(), true));
}

/// Nothing happens just before `at`; at `at`, GOAWAY(NO_ERROR) with
/// `last`, no answer, and the close `LAST_WORDS` later.
fn says_goaway_at(client: &mut Client, at: Instant, last: u32) {
    assert_eq!(client.conn.deadline(), at);
    assert!(!client.tick(at - Duration::from_millis(1)));
    assert!(client.take().is_empty());
    let (frames, close) = client.at_deadline();
    assert!(!close);
    assert_eq!(goaways(&frames), [(last, code::NO_ERROR)], "{frames:?}");
    assert!(!frames.iter().any(|f| f.kind == HEADERS), "{frames:?}");
    closes_after_last_words(client);
}

#[test]
fn a_header_block_that_never_ends_is_closed_at_the_read_timeout() {
    let mut client = Client::new();
    // HEADERS without END_HEADERS, and no CONTINUATION ever, a second in:
    // its stream holds the connection past the idle deadline.
    let begun = client.now + Duration::from_secs(1);
    client.now = begun;
    client.send(&frame(HEADERS, END_STREAM, 1, &request("GET", "/a.txt")));
    assert!(!client.tick(begun + Duration::from_millis(1500)));
    assert!(client.take().is_empty());
    assert!(client.conn.owes_nothing(), "its head is still arriving");
    // Nothing was done for stream 1: the GOAWAY's last id is 0, so a
    // client that was merely slow may send it again (nghttp2's own count
    // would have named it processed once its HEADERS began).
    says_goaway_at(&mut client, begun + READ_TIMEOUT, 0);
}

#[test]
fn a_connection_that_never_asks_is_closed_at_the_first_stream_deadline() {
    let mut client = Client::new();
    // Before its first stream: the read timeout, shorter than keep-alive.
    let at = client.now + READ_TIMEOUT;
    says_goaway_at(&mut client, at, 0);
}

#[test]
fn an_idle_connection_gets_goaway_at_the_keepalive_timeout() {
    let mut client = Client::new();
    client.now += Duration::from_secs(1);
    client.send(&get(1, "GET", "/a.txt"));
    client.take();
    // After a stream: the keep-alive timeout, from when the last ended.
    let at = client.now + KEEPALIVE;
    says_goaway_at(&mut client, at, 1);
}

#[test]
fn a_graceful_stop_sends_goaway_and_lets_the_stream_in_flight_finish() {
    let mut client = Client::new();
    client.send(&get(1, "GET", "/big.bin"));
    let frames = client.take();
    // The client's window holds 65,535 bytes of it: the stream waits.
    assert_eq!(body(&frames, 1), (vec![7; 65_535], false));
    assert!(!client.conn.owes_nothing());
    let stopped = client.now;
    client.conn.stop(stopped);
    client.turns();
    let frames = client.take();
    assert_eq!(goaways(&frames), [(1, code::NO_ERROR)], "{frames:?}");
    assert!(!client.conn.is_done(), "stream 1 is still owed");
    assert_eq!(client.conn.deadline(), stopped + GRACE);
    // The client takes the rest: the stream ends, and so does the
    // connection, with no second GOAWAY.
    takes_the_rest_and_the_connection_ends(&mut client);
}

#[test]
fn a_graceful_stop_with_nothing_in_flight_closes_after_its_goaway() {
    let mut client = Client::new();
    client.send(&get(1, "GET", "/a.txt"));
    client.take();
    client.conn.stop(client.now);
    client.turns();
    assert_eq!(goaways(&client.take()), [(1, code::NO_ERROR)]);
    closes_after_last_words(&mut client);
}

/// Opens `rounds` streams one read at a time, each made to end in a reset
/// by `stream_bytes`, until the server says GOAWAY: the round it did, and
/// its code.
fn resets_until_goaway(rounds: u32, stream_bytes: impl Fn(u32) -> Vec<u8>) -> (u32, u32) {
    let mut client = Client::new();
    for round in 1..=rounds {
        client.send(&stream_bytes(2 * round - 1));
        if let Some(&(_, code)) = goaways(&client.take()).first() {
            return (round, code);
        }
    }
    panic!("no GOAWAY after {rounds} resets");
}

#[test]
fn rapid_reset_is_told_to_calm_down_past_the_allowance() {
    // Each stream opened and reset by the client in the same read.
    let (round, code) = resets_until_goaway(400, |id| {
        let mut bytes = get(id, "GET", "/a.txt");
        bytes.extend(frame(RST_STREAM, 0, id, &code::CANCEL.to_be_bytes()));
        bytes
    });
    assert_eq!(code, code::ENHANCE_YOUR_CALM);
    // The reset that goes over the allowance is counted in the read after.
    assert_eq!(round as usize, RESET_ALLOWANCE + 1);
}

#[test]
fn made_you_reset_is_told_to_calm_down_past_the_allowance() {
    // Each stream reset by the server for the client's error: a
    // WINDOW_UPDATE that overflows its window (FLOW_CONTROL_ERROR).
    let (round, code) = resets_until_goaway(400, |id| {
        let mut bytes = get(id, "GET", "/a.txt");
        bytes.extend(window_update(id, 0x7fff_ffff));
        bytes
    });
    assert_eq!(code, code::ENHANCE_YOUR_CALM);
    // Reset as the round's turn is written, counted in the next read.
    assert_eq!(round as usize, RESET_ALLOWANCE + 2);
}

#[test]
fn resets_among_as_many_finished_streams_are_no_attack() {
    let mut client = Client::new();
    for round in 1..=2 * RESET_ALLOWANCE as u32 {
        let id = 4 * round - 3;
        let mut bytes = get(id, "GET", "/a.txt");
        bytes.extend(get(id + 2, "GET", "/a.txt"));
        bytes.extend(frame(RST_STREAM, 0, id + 2, &code::CANCEL.to_be_bytes()));
        client.send(&bytes);
        let frames = client.take();
        assert!(goaways(&frames).is_empty(), "round {round}: {frames:?}");
    }
}

#[test]
fn an_hpack_bomb_costs_its_stream_and_the_second_the_connection() {
    let mut client = Client::new();
    // 40 references: 161 KB decoded, over `BOMB_BYTES`.
    client.send(&bomb(1, 40));
    let frames = client.take();
    let reset: Vec<_> = frames.iter().filter(|f| f.kind == RST_STREAM).collect();
    assert_eq!(reset.len(), 1, "{frames:?}");
    assert_eq!(
        (reset[0].stream, reset[0].code()),
        (1, code::ENHANCE_YOUR_CALM)
    );
    assert!(goaways(&frames).is_empty(), "the first is forgiven");
    assert!(!frames.iter().any(|f| f.kind == HEADERS), "{frames:?}");
    // Under the limit, the same table makes an ordinary request.
    client.send(&bomb(3, 2));
    let frames = client.take();
    let head = frames.iter().find(|f| f.kind == HEADERS).unwrap();
    assert_eq!((head.stream, head.status()), (3, Some(200)));
    client.send(&bomb(5, 40));
    let frames = client.take();
    // The bomb's stream was not processed: the last id is the request's.
    assert_eq!(
        goaways(&frames),
        [(3, code::ENHANCE_YOUR_CALM)],
        "{frames:?}"
    );
    assert!(!frames.iter().any(|f| f.kind == HEADERS), "{frames:?}");
    // Nothing more is read from it.
    client.send(&get(7, "GET", "/a.txt"));
    assert!(client.take().is_empty());
    closes_after_last_words(&mut client);
}

#[test]
fn the_clients_goaway_lets_the_stream_in_flight_finish_then_ends() {
    let mut client = Client::new();
    client.send(&get(1, "GET", "/big.bin"));
    assert_eq!(body(&client.take(), 1).0.len(), 65_535);
    // Last stream 0: the server pushed nothing (its ids would be even).
    let mut goaway = 0u32.to_be_bytes().to_vec();
    goaway.extend(code::NO_ERROR.to_be_bytes());
    client.send(&frame(GOAWAY, 0, 0, &goaway));
    assert!(client.take().is_empty(), "nothing to answer");
    assert!(!client.conn.is_done(), "stream 1 is still owed");
    // The client said its last: no GOAWAY of ours is needed to end it.
    takes_the_rest_and_the_connection_ends(&mut client);
}

#[test]
fn a_malformed_request_ends_the_connection_not_its_stream() {
    // A body shorter than its content-length, or an upper-case field name:
    // nghttp2 (1.68) makes either a connection error, so neither is a
    // stream reset a client could repeat (MadeYouReset).
    let mut short = request("POST", "/a.txt");
    literal(&mut short, "content-length", b"5");
    let mut short = frame(HEADERS, END_HEADERS, 1, &short);
    short.extend(frame(DATA, END_STREAM, 1, b"ab"));
    let mut upper = request("GET", "/a.txt");
    literal(&mut upper, "X-Upper", b"1");
    let upper = frame(HEADERS, END_STREAM | END_HEADERS, 1, &upper);
    for bytes in [short, upper] {
        let mut client = Client::new();
        client.send(&bytes);
        let frames = client.take();
        assert_eq!(goaways(&frames), [(1, code::PROTOCOL_ERROR)], "{frames:?}");
        assert!(!frames.iter().any(|f| f.kind == HEADERS), "{frames:?}");
        assert!(client.conn.is_done());
    }
}

#[test]
fn a_connection_shed_for_room_says_goaway_and_closes() {
    let mut client = Client::new();
    client.send(&get(1, "GET", "/a.txt"));
    // A head still arriving: nothing is owed for it yet.
    client.send(&frame(HEADERS, END_STREAM, 3, &request("GET", "/a.txt")));
    client.take();
    assert!(client.conn.owes_nothing());
    client.conn.shed(client.now);
    client.turns();
    let frames = client.take();
    // Stream 1 was answered; stream 3's head was still arriving: above
    // the last id, the client may send it again elsewhere.
    assert_eq!(goaways(&frames), [(1, code::NO_ERROR)], "{frames:?}");
    assert!(!client.conn.owes_nothing(), "closing");
    closes_after_last_words(&mut client);
}
