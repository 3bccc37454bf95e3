//! One HTTP/3 connection as a state machine over quinn-proto's QUIC
//! connection (itself sans-IO): datagrams in ([`Connection::datagram`]),
//! datagrams out ([`Connection::transmit`]), timers ([`Connection::deadline`],
//! [`Connection::tick`]), and no socket. The driver (the server's own loop)
//! owns the UDP socket and quinn-proto's `Endpoint`, and moves what they say
//! between them and this.
//!
//! HTTP/3 itself is here: staticd's control stream and SETTINGS, the
//! client's control and QPACK streams ([`frames`], [`qpack`]), and each
//! request stream: its HEADERS decoded with the static table only, the
//! request decided by the same [`pipeline::answer`] HTTP/1.1 and HTTP/2
//! use, its response encoded from the same
//! [`ResponseFields`] and written into
//! the stream as DATA frames, files read a block at a time as QUIC takes
//! them. 0-RTT requests are answered at once only when
//! [`replay_safe`](super::replay_safe); others wait for the handshake.
//!
//! A script's request is handed to the driver ([`Event`]), as h2session
//! does: the driver runs the script (`serve::cgi::streams`) and feeds its
//! steps back in (`cgi_head`, `cgi_data`, `cgi_end`, `cgi_whole`), taking
//! the request body with `take_body`.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::{
    ConnectionEvent, Dir, EndpointEvent, Event as QuicEvent, ReadError, StreamEvent, StreamId,
    Transmit, VarInt, WriteError,
};

use super::frames::{self, code, ControlReader, Event as Read, RequestReader, Violation};
use super::qpack::{self, DecoderStream, Encoder, EncoderStream};
use super::BodyLength;
use crate::complaint::{complain, Complaint};
use crate::exchange::CGI_QUEUE;
use crate::http::fields::{Fields, ResponseFields};
use crate::http::limits::MAX_HEAD_BYTES;
use crate::http::parse::{BodyFraming, ParseError};
use crate::http::response::{self, Chunk};
use crate::pace::Pace;
use crate::pipeline::{self, Sent, Served};
use crate::pool::{self, FreeList};
use crate::respond::{self, Answer};

/// How much of a body one DATA frame carries: a few QUIC packets' worth,
/// read from a file with one pread(2). With its frame header's room, a
/// staged block fills 64 KiB: the most a pooled buffer keeps.
const BLOCK: usize = (64 << 10) - HEADER_ROOM;

/// Room kept before a block for its DATA frame header.
const HEADER_ROOM: usize = 2 * frames::VARINT_MAX_LEN;

thread_local! {
    /// Request streams' field sections as they gather (see pool.rs: a
    /// warm stream allocates none).
    static SECTIONS: FreeList<Vec<u8>> = const { FreeList::new() };
    /// Responses' staged frames: a HEADERS frame, or a DATA frame and its
    /// block.
    static STAGED: FreeList<Vec<u8>> = const { FreeList::new() };
}

/// How long a connection that sent its last GOAWAY (idle, or a head that
/// never came) waits before it closes: time for the GOAWAY, and any stream
/// reset with it, to reach the client, rather than be discarded with the
/// close (as over HTTP/2).
const LAST_WORDS: Duration = Duration::from_secs(1);

/// What the driver has to act on: a script's stream, as over HTTP/2.
pub type Event = crate::exchange::StreamEvent<StreamId>;

/// One client's connection (see the module's comment).
pub struct Connection {
    quic: quinn_proto::Connection,
    served: Arc<Served>,
    /// Request streams, by QUIC stream.
    requests: HashMap<StreamId, Request>,
    /// The client's unidirectional streams, by QUIC stream.
    uni: HashMap<StreamId, Uni>,
    /// staticd's control stream, once opened.
    control: Option<StreamId>,
    /// The QUIC handshake completed: requests are no longer 0-RTT.
    confirmed: bool,
    /// While it has not, it must by then (`--read-timeout` from the first
    /// packet): a replayed 0-RTT flight never completes one.
    handshake_by: Option<Instant>,
    /// The lowest client stream ID not yet seen (what a GOAWAY names).
    next_request: u64,
    /// A GOAWAY went out: streams from this ID on are refused.
    goaway: Option<u64>,
    /// When the last request stream closed (or the connection opened): the
    /// keep-alive timeout counts from it while none is open.
    idle_since: Instant,
    /// A stop's deadline: streams still going then are cut.
    stop_by: Option<Instant>,
    /// The last GOAWAY went out: the connection closes then.
    closing_at: Option<Instant>,
    /// The client sent GOAWAY: it is closing down, and the connection
    /// closes as soon as no stream is open.
    client_leaving: bool,
    /// Scratch for one response head's field section.
    section: Vec<u8>,
    events: VecDeque<Event>,
    /// The time the driver last passed in (for the driver's CGI calls,
    /// which carry none).
    now: Instant,
}

/// A client's unidirectional stream, by its type (RFC 9114 §6.2).
enum Uni {
    /// Its type, not yet whole.
    Type(Vec<u8>),
    Control(ControlReader),
    Encoder(EncoderStream),
    Decoder(DecoderStream),
    /// Of a type staticd does not speak: stopped, its bytes dropped.
    Ignored,
}

/// One request stream.
struct Request {
    reader: RequestReader,
    /// Its head must be whole by then (`--read-timeout` from its opening).
    head_by: Option<Instant>,
    fields: Fields,
    /// Why its head cannot be a request (too large), answered as decided.
    refused: Option<ParseError>,
    /// The stream's end came (FIN): no more body.
    ended: bool,
    /// The body measured against its Content-Length, once the request is
    /// decided (RFC 9114 §4.1.2: longer or shorter is malformed).
    length: Option<BodyLength>,
    /// Whether a body follows was waited for (see [`Phase::Undecided`]).
    waited: bool,
    /// Body read and kept: until the request is decided (a script may
    /// want it), then for its script to take. At most [`CGI_QUEUE`].
    body: Vec<u8>,
    /// A script's stream: its side of the exchange.
    script: Option<Box<Script>>,
    phase: Phase,
}

impl Request {
    /// When this stream next needs the clock: its head's deadline, the
    /// wait for whether a body follows, its response's pace (while QUIC
    /// holds back what is staged), or the acknowledgement of all of it.
    /// `Connection::deadline` and `tick` both go by it.
    fn deadline(&self) -> Option<Instant> {
        let phase = match &self.phase {
            Phase::Sending(out) if out.at < out.staged.len() => Some(out.pace.deadline()),
            Phase::Flushing { by } | Phase::Undecided { by } => Some(*by),
            _ => None,
        };
        match (self.head_by, phase) {
            (Some(head), Some(phase)) => Some(head.min(phase)),
            (head, phase) => head.or(phase),
        }
    }

    /// Whether body bytes that arrive are kept (for a script, or a
    /// request not yet decided) rather than dropped.
    fn keeps_body(&self) -> bool {
        self.script.is_some()
            || matches!(
                self.phase,
                Phase::Head | Phase::Early | Phase::Undecided { .. }
            )
    }
}

/// A script's output as it comes.
#[derive(Default)]
struct Script {
    /// Output not yet staged.
    output: std::collections::VecDeque<Vec<u8>>,
    /// The output's end: whole (true) or cut (false).
    end: Option<bool>,
}

enum Phase {
    /// Its HEADERS frame is on its way.
    Head,
    /// Its head came as 0-RTT data, and its request may not be answered
    /// before the handshake completes.
    Early,
    /// Its head came without a Content-Length and without the stream's
    /// end: whether a body follows is waited for (until `by`), rather than
    /// take a GET whose FIN is a packet behind for a chunked upload.
    Undecided { by: Instant },
    /// Its response is being written.
    Sending(Box<Outgoing>),
    /// A script's, before its response's head (the driver's).
    Cgi,
    /// All of the response is QUIC's: the stream stays until the client
    /// has acknowledged it (what a stop or the keep-alive timeout waits
    /// for), or until `by`, should it never.
    Flushing { by: Instant },
}

/// A response on its way into a stream.
struct Outgoing {
    /// Its log line goes when this is dropped.
    sent: Sent,
    /// Bytes staged for the stream (a HEADERS frame, or a DATA frame and
    /// its block) from `at` on: what QUIC has not taken yet.
    staged: Vec<u8>,
    at: usize,
    /// Body bytes in `staged` (counted as written once QUIC took them all).
    staged_body: u64,
    /// Of which a script's output (credit for it once QUIC took them).
    staged_script: usize,
    /// A response that has no body (a script's 204 or 304): script
    /// output is dropped.
    no_body: bool,
    /// The body's chunks still to stage, the next at `next`, within it
    /// from `offset`.
    body: Vec<Chunk>,
    next: usize,
    offset: u64,
    pace: Pace,
}

/// Its buffers go back to this thread's lists.
impl Drop for Outgoing {
    fn drop(&mut self) {
        pool::give(&STAGED, std::mem::take(&mut self.staged));
        pool::give(&response::BODIES, std::mem::take(&mut self.body));
    }
}

/// Its field section's buffer goes back to this thread's list.
impl Drop for Request {
    fn drop(&mut self) {
        pool::give(&SECTIONS, self.reader.take_section());
    }
}

/// The connection must close: with this HTTP/3 code.
fn close_code(violation: Violation) -> u64 {
    match violation {
        Violation::Connection(code) | Violation::Stream(code) => code,
    }
}

fn varint(code: u64) -> VarInt {
    VarInt::from_u64(code).unwrap_or(VarInt::MAX)
}

impl Connection {
    /// A connection just accepted by the endpoint; `now` starts its
    /// keep-alive timeout.
    pub fn new(quic: quinn_proto::Connection, served: Arc<Served>, now: Instant) -> Connection {
        let confirmed = !quic.is_handshaking();
        let handshake_by = (!confirmed).then(|| now + served.cfg.read_timeout);
        let mut conn = Connection {
            quic,
            served,
            requests: HashMap::new(),
            uni: HashMap::new(),
            control: None,
            confirmed,
            handshake_by,
            next_request: 0,
            goaway: None,
            idle_since: now,
            stop_by: None,
            closing_at: None,
            client_leaving: false,
            section: Vec::new(),
            events: VecDeque::new(),
            now,
        };
        conn.open_control();
        conn
    }

    /// What the connection's streams are served with.
    pub fn served(&self) -> &Arc<Served> {
        &self.served
    }

    /// The underlying QUIC connection (its stats, its addresses).
    pub fn quic(&self) -> &quinn_proto::Connection {
        &self.quic
    }

    /// A datagram (or an endpoint's word) for this connection, then
    /// whatever it made happen.
    pub fn datagram(&mut self, event: ConnectionEvent, now: Instant) {
        self.now = now;
        self.quic.handle_event(event);
        self.drive(now);
    }

    /// What the endpoint must hear of this connection (connection IDs
    /// retired or issued, its end).
    pub fn endpoint_event(&mut self) -> Option<EndpointEvent> {
        self.quic.poll_endpoint_events()
    }

    /// The next datagram(s) to send, into `buf`.
    pub fn transmit(
        &mut self,
        now: Instant,
        max_datagrams: usize,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        self.quic.poll_transmit(now, max_datagrams, buf)
    }

    /// A driver's event (a script to run), if any.
    pub fn next_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether the connection is over: closed and drained, nothing more
    /// to send or receive.
    pub fn is_drained(&self) -> bool {
        self.quic.is_drained()
    }

    /// When `tick` must run next.
    pub fn deadline(&mut self) -> Option<Instant> {
        if self.quic.is_closed() {
            // Closing or draining: only QUIC's own timers are left.
            return self.quic.poll_timeout();
        }
        let cfg = &self.served.cfg;
        let mut at = self.quic.poll_timeout();
        let mut earliest = |t: Option<Instant>| {
            if let Some(t) = t {
                at = Some(at.map_or(t, |a| a.min(t)));
            }
        };
        for r in self.requests.values() {
            earliest(r.deadline());
        }
        if self.requests.is_empty() && self.closing_at.is_none() {
            earliest(Some(self.idle_since + cfg.keepalive_timeout));
        }
        earliest(self.stop_by);
        earliest(self.closing_at);
        earliest(self.handshake_by);
        at
    }

    /// Time passed: QUIC's timers, heads that did not come in time,
    /// responses the client stopped taking, the keep-alive timeout and a
    /// stop's grace.
    pub fn tick(&mut self, now: Instant) {
        self.now = now;
        if self.quic.poll_timeout().is_some_and(|t| t <= now) {
            self.quic.handle_timeout(now);
        }
        let cfg = Arc::clone(&self.served.cfg);
        let due: Vec<StreamId> = self
            .requests
            .iter()
            .filter(|(_, r)| r.deadline().is_some_and(|t| t <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.expire(id, now);
        }
        let idle_out = self.idle_since + cfg.keepalive_timeout;
        if self.requests.is_empty() && idle_out <= now {
            self.close_soon(now);
        }
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        let late = due(self.handshake_by);
        if (due(self.stop_by) || due(self.closing_at) || late) && !self.quic.is_closed() {
            self.close(now, code::NO_ERROR);
        }
        self.drive(now);
    }

    /// Stream `id`'s deadline passed (see [`Request::deadline`]).
    fn expire(&mut self, id: StreamId, now: Instant) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        if request.head_by.is_some_and(|t| t <= now) {
            // A head that never came: refused unprocessed (safe to retry).
            self.refuse(id, code::REQUEST_REJECTED);
            if !self.answering() {
                // Its only work was heads that never came: closed as an
                // HTTP/1.1 connection with a partial head is.
                self.close_soon(now);
            }
            return;
        }
        match &request.phase {
            Phase::Undecided { .. } => {
                // Neither a body nor the end came: taken as a body to come.
                request.waited = true;
                self.decide(id, now);
            }
            // Never acknowledged: QUIC keeps what it holds until the close.
            Phase::Flushing { .. } => self.finished(id, now),
            Phase::Sending(out) => {
                if out.pace.too_slow() {
                    let rate = self.served.cfg.min_rate;
                    complain(&self.served.origin.client, Complaint::SlowResponse { rate });
                }
                self.refuse(id, code::REQUEST_CANCELLED);
            }
            Phase::Head | Phase::Early | Phase::Cgi => {}
        }
    }

    /// A graceful stop: GOAWAY, streams open finish within `grace` of
    /// `began`, then the close. An idle connection closes now.
    pub fn stop(&mut self, now: Instant, by: Instant) {
        self.now = now;
        self.stop_by = Some(by);
        self.send_goaway();
        if self.requests.is_empty() {
            self.close_soon(now);
        }
        self.drive(now);
    }

    /// Moves what arrived of `id`'s request body for its script into
    /// `into`, and reads more from the stream; true once the body is
    /// complete and all taken.
    pub fn take_body(&mut self, id: StreamId, into: &mut Vec<u8>) -> bool {
        let Some(request) = self.requests.get_mut(&id) else {
            return true;
        };
        into.append(&mut request.body);
        let ended = request.ended;
        if !ended {
            // Room again: what QUIC holds of it comes in.
            let now = self.now;
            self.readable(id, now);
        }
        self.requests
            .get(&id)
            .is_none_or(|r| r.ended && r.body.is_empty())
    }

    /// The script took `n` bytes of its body: QUIC gave the client its
    /// credit already, as the stream was read.
    pub fn consumed(&mut self, _id: StreamId, _n: usize) {}

    /// A script's response head; its body follows with `cgi_data`.
    pub fn cgi_head(&mut self, id: StreamId, sent: Sent) {
        let now = self.now;
        self.respond(id, sent, now);
    }

    /// A whole response of ours for a script's stream (a failure's, a
    /// local redirect's), sent as any other.
    pub fn cgi_whole(&mut self, id: StreamId, sent: Sent) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        request.script = None;
        request.body = Vec::new();
        let now = self.now;
        self.respond(id, sent, now);
        self.readable(id, now);
    }

    /// More of a script's output, for its response's body.
    pub fn cgi_data(&mut self, id: StreamId, bytes: &[u8]) {
        let Some(script) = self.requests.get_mut(&id).and_then(|r| r.script.as_mut()) else {
            return;
        };
        script.output.push_back(bytes.to_vec());
        let now = self.now;
        self.pump(id, now);
    }

    /// The end of a script's output: whole, or cut (the stream is reset,
    /// so that the client never takes it for whole).
    pub fn cgi_end(&mut self, id: StreamId, complete: bool) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        let headed = !matches!(request.phase, Phase::Cgi);
        let Some(script) = request.script.as_mut() else {
            return;
        };
        script.end = Some(complete);
        if !headed {
            self.refuse(id, code::INTERNAL_ERROR);
            return;
        }
        let now = self.now;
        self.pump(id, now);
    }

    /// Closes the connection now (a stop's grace is over): GOAWAY, and
    /// QUIC's close with H3_NO_ERROR; what is still unsent is dropped.
    pub fn close_now(&mut self, now: Instant) {
        self.now = now;
        if !self.quic.is_closed() {
            self.close(now, code::NO_ERROR);
        }
    }

    /// Whether any request is being answered (its head came).
    fn answering(&self) -> bool {
        self.requests
            .values()
            .any(|r| !matches!(r.phase, Phase::Head))
    }

    /// GOAWAY now, the close after [`LAST_WORDS`] (sooner in a stop's
    /// grace, never later).
    fn close_soon(&mut self, now: Instant) {
        if self.closing_at.is_some() || self.quic.is_closed() {
            return;
        }
        self.send_goaway();
        self.closing_at = Some(now + LAST_WORDS);
    }

    /// Closes the connection with an HTTP/3 code, GOAWAY first if it is
    /// a clean close.
    fn close(&mut self, now: Instant, code: u64) {
        if code == code::NO_ERROR {
            self.send_goaway();
        }
        self.forget_all();
        self.quic.close(now, varint(code), bytes::Bytes::new());
    }

    /// Tells the client that no stream past those it opened will be
    /// served (RFC 9114 §5.2).
    fn send_goaway(&mut self) {
        if self.goaway.is_some() {
            return;
        }
        self.goaway = Some(self.next_request);
        if let Some(id) = self.control {
            let frame = frames::goaway(self.next_request);
            // The control stream is never flow-blocked for a few bytes
            // (its credit is the client's initial window); a GOAWAY that
            // does not fit is left out, and the close says the rest.
            let _ = self.quic.send_stream(id).write(&frame);
        }
    }

    /// Opens staticd's control stream with its SETTINGS (RFC 9114 §6.2.1).
    fn open_control(&mut self) {
        let Some(id) = self.quic.streams().open(Dir::Uni) else {
            return;
        };
        let preface = frames::control_stream_preface(MAX_HEAD_BYTES as u64);
        let _ = self.quic.send_stream(id).write(&preface);
        self.control = Some(id);
    }

    /// Everything QUIC has to say, acted on; then the streams that can
    /// make progress, made to.
    fn drive(&mut self, now: Instant) {
        while let Some(event) = self.quic.poll() {
            match event {
                QuicEvent::Connected => {
                    self.confirmed = true;
                    self.handshake_by = None;
                    let early: Vec<StreamId> = self
                        .requests
                        .iter()
                        .filter(|(_, r)| matches!(r.phase, Phase::Early))
                        .map(|(&id, _)| id)
                        .collect();
                    for id in early {
                        self.decide(id, now);
                    }
                }
                QuicEvent::ConnectionLost { .. } => self.forget_all(),
                QuicEvent::Stream(StreamEvent::Opened { dir }) => self.accept(dir, now),
                QuicEvent::Stream(StreamEvent::Readable { id }) => self.readable(id, now),
                QuicEvent::Stream(StreamEvent::Writable { id }) => self.pump(id, now),
                QuicEvent::Stream(StreamEvent::Stopped { id, .. }) => self.stopped(id, now),
                // All of a response acknowledged: the stream is over.
                QuicEvent::Stream(StreamEvent::Finished { id }) => self.finished(id, now),
                QuicEvent::Stream(StreamEvent::Available { .. })
                | QuicEvent::HandshakeDataReady
                | QuicEvent::DatagramReceived
                | QuicEvent::DatagramsUnblocked => {}
            }
        }
    }

    /// Streams the client opened.
    fn accept(&mut self, dir: Dir, now: Instant) {
        while let Some(id) = self.quic.streams().accept(dir) {
            match dir {
                Dir::Uni => {
                    self.uni.insert(id, Uni::Type(Vec::new()));
                }
                Dir::Bi => self.open_request(id, now),
            }
            self.readable(id, now);
        }
    }

    /// A request stream opened: its head is waited for, unless a GOAWAY
    /// already said it would not be served.
    fn open_request(&mut self, id: StreamId, now: Instant) {
        let index = id.index() * 4;
        self.next_request = self.next_request.max(index + 4);
        let cfg = &self.served.cfg;
        let request = Request {
            reader: RequestReader::new(MAX_HEAD_BYTES as u64, pool::take(&SECTIONS)),
            head_by: Some(now + cfg.read_timeout),
            fields: Fields::default(),
            refused: None,
            ended: false,
            length: None,
            waited: false,
            body: Vec::new(),
            script: None,
            phase: Phase::Head,
        };
        self.requests.insert(id, request);
        if self.goaway.is_some_and(|first| index >= first) {
            self.refuse(id, code::REQUEST_REJECTED);
        }
    }

    /// Reads what a stream has; a violation closes the connection or
    /// resets the stream.
    fn readable(&mut self, id: StreamId, now: Instant) {
        let result = match id.dir() {
            Dir::Uni => self.read_uni(id, now),
            Dir::Bi => self.read_request(id, now),
        };
        match result {
            Ok(()) => {}
            Err(Violation::Stream(code)) => self.refuse(id, code),
            Err(violation @ Violation::Connection(_)) => {
                self.close(now, close_code(violation));
            }
        }
    }

    /// Reads a client's unidirectional stream. A GOAWAY on its control
    /// stream: the connection closes once the streams open are done.
    fn read_uni(&mut self, id: StreamId, now: Instant) -> Result<(), Violation> {
        let Some(uni) = self.uni.get_mut(&id) else {
            return Ok(());
        };
        let mut recv = self.quic.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return Ok(());
        };
        let mut result = Ok(());
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    result = feed_uni(uni, &chunk.bytes, &mut self.client_leaving);
                    if result.is_err() {
                        break;
                    }
                }
                // The stream ended: a critical one never may (§6.2.1).
                Ok(None) => {
                    if matches!(uni, Uni::Control(_) | Uni::Encoder(_) | Uni::Decoder(_)) {
                        result = Err(Violation::Connection(code::CLOSED_CRITICAL_STREAM));
                    }
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) => {
                    if matches!(uni, Uni::Control(_) | Uni::Encoder(_) | Uni::Decoder(_)) {
                        result = Err(Violation::Connection(code::CLOSED_CRITICAL_STREAM));
                    }
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        let ignored = matches!(uni, Uni::Ignored);
        if ignored {
            let _ = self
                .quic
                .recv_stream(id)
                .stop(varint(code::STREAM_CREATION_ERROR));
            self.uni.remove(&id);
        }
        result?;
        self.check_uni_kinds()?;
        if self.client_leaving && self.requests.is_empty() && !self.quic.is_closed() {
            self.close(now, code::NO_ERROR);
        }
        Ok(())
    }

    /// One of each critical stream at most (RFC 9114 §6.2.1, RFC 9204
    /// §4.2).
    fn check_uni_kinds(&self) -> Result<(), Violation> {
        let count = |f: fn(&Uni) -> bool| self.uni.values().filter(|u| f(u)).count();
        let twice = count(|u| matches!(u, Uni::Control(_))) > 1
            || count(|u| matches!(u, Uni::Encoder(_))) > 1
            || count(|u| matches!(u, Uni::Decoder(_))) > 1;
        match twice {
            true => Err(Violation::Connection(code::STREAM_CREATION_ERROR)),
            false => Ok(()),
        }
    }

    /// Reads a request stream: its head decided once whole; its body kept
    /// (up to [`CGI_QUEUE`]) while a script may want it, else dropped.
    fn read_request(&mut self, id: StreamId, now: Instant) -> Result<(), Violation> {
        let Some(request) = self.requests.get_mut(&id) else {
            return Ok(());
        };
        let mut recv = self.quic.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return Ok(());
        };
        let (mut head_came, mut reset, mut more) = (false, false, false);
        let mut result = Ok(());
        loop {
            // What is not read stays QUIC's, and holds the client back.
            let room = match request.keeps_body() {
                true => CGI_QUEUE.saturating_sub(request.body.len()),
                false => usize::MAX,
            };
            if room == 0 {
                break;
            }
            match chunks.next(room) {
                Ok(Some(chunk)) => {
                    let before = request.body.len();
                    if let Err(v) = feed_request(request, &chunk.bytes, &mut head_came) {
                        result = Err(v);
                        break;
                    }
                    more |= request.body.len() > before;
                }
                Ok(None) => {
                    request.ended = true;
                    more = true;
                    result = request.reader.end().and(measure_end(request));
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) => {
                    // The client gave up on it: nothing more to do, unless
                    // a response is on its way.
                    reset = matches!(
                        request.phase,
                        Phase::Head | Phase::Early | Phase::Undecided { .. }
                    );
                    if request.script.is_some() {
                        // The script must not take a cut body for whole.
                        reset = true;
                    }
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        result?;
        let script = request.script.is_some();
        let undecided = matches!(request.phase, Phase::Undecided { .. });
        if reset {
            let _ = self
                .quic
                .send_stream(id)
                .reset(varint(code::REQUEST_CANCELLED));
            self.finished(id, now);
        } else if head_came || (more && undecided) {
            self.decide(id, now);
        } else if more && script {
            self.events.push_back(Event::Body(id));
        }
        Ok(())
    }

    /// Decides a request whose head came, and starts its response.
    fn decide(&mut self, id: StreamId, now: Instant) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        request.head_by = None;
        let served = Arc::clone(&self.served);
        let (cfg, origin) = (&served.cfg, &served.origin);
        let parsed = match request.refused {
            Some(e) => Err(e),
            None => super::request(&request.fields),
        };
        let sent = match parsed {
            Ok(mut parsed) => {
                let unannounced = parsed.framing == BodyFraming::None;
                if unannounced && !request.ended && request.body.is_empty() && !request.waited {
                    let by = now + cfg.read_timeout;
                    request.phase = Phase::Undecided { by };
                    return;
                }
                if !request.ended {
                    super::body_follows(&mut parsed);
                }
                let mut length = BodyLength::of(&parsed);
                let measured = length
                    .more(request.body.len())
                    .and_then(|()| match request.ended {
                        true => length.ended(),
                        false => Ok(()),
                    });
                if measured.is_err() {
                    self.refuse(id, code::MESSAGE_ERROR);
                    return;
                }
                request.length = Some(length);
                if !self.confirmed && !super::replay_safe(&parsed) {
                    request.phase = Phase::Early;
                    return;
                }
                let stopping = self.goaway.is_some();
                match pipeline::answer(origin.kind, &served.site, &parsed, stopping) {
                    Answer::Send(response) => {
                        // Nothing reads its body.
                        request.body = Vec::new();
                        pipeline::sent(cfg, origin, Some(&parsed), response)
                    }
                    Answer::Cgi(job) => {
                        if !self.confirmed {
                            request.phase = Phase::Early;
                            return;
                        }
                        request.phase = Phase::Cgi;
                        request.script = Some(Box::default());
                        self.events.push_back(Event::Cgi { stream: id, job });
                        return;
                    }
                }
            }
            Err(e) => pipeline::sent(cfg, origin, None, respond::refuse(e)),
        };
        self.respond(id, sent, now);
        // What more of its body came is dropped as it comes.
        self.readable(id, now);
    }

    /// Starts `sent` on stream `id`: its HEADERS frame, then its body.
    fn respond(&mut self, id: StreamId, mut sent: Sent, now: Instant) {
        let cfg = &self.served.cfg;
        let hsts = pipeline::hsts(cfg, self.served.origin.kind);
        let Some(extra) = ResponseFields::new(&sent.response.head, hsts, None) else {
            // A status HTTP/3 cannot carry (a script's).
            self.refuse(id, code::INTERNAL_ERROR);
            return;
        };
        let section = &mut self.section;
        section.clear();
        Encoder::start(section);
        for (name, value) in extra.fields(&sent.response.head) {
            Encoder::field(section, name, value);
        }
        let header = frames::FrameHeader::new(frames::frame::HEADERS, section.len() as u64);
        let mut staged = pool::take(&STAGED);
        staged.extend_from_slice(header.bytes());
        staged.extend_from_slice(section);
        let body = std::mem::take(&mut sent.response.body);
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        // A script's output comes as it writes it: no rate, only the
        // timeout without progress.
        let rate = if request.script.is_some() {
            0
        } else {
            cfg.min_rate
        };
        let no_body = sent.response.head.framing == crate::http::head::Framing::Empty;
        let out = Outgoing {
            sent,
            staged,
            at: 0,
            staged_body: 0,
            staged_script: 0,
            body,
            next: 0,
            offset: 0,
            no_body,
            pace: Pace::new(now, cfg.send_timeout, rate),
        };
        let mut out = Box::new(out);
        if request.script.is_none() {
            // The first block rides with the head. A file that fails is
            // met again by `pump`, which cuts the response.
            let _ = stage(&mut out, None);
        }
        request.phase = Phase::Sending(out);
        self.pump(id, now);
    }

    /// Writes what stream `id` has staged, and stages more, until QUIC
    /// takes no more, a script's output is awaited, or the response is all
    /// written (then the stream is finished).
    fn pump(&mut self, id: StreamId, now: Instant) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        let Phase::Sending(out) = &mut request.phase else {
            return;
        };
        let mut send = self.quic.send_stream(id);
        let end = loop {
            if out.at < out.staged.len() {
                match send.write(&out.staged[out.at..]) {
                    Ok(n) => {
                        out.at += n;
                        out.pace.progress(now, n as u64);
                    }
                    Err(WriteError::Blocked) => break None,
                    Err(_) => break Some(Staged::Cut),
                }
                if out.at < out.staged.len() {
                    // Taken in part: the next write says Blocked, which is
                    // what has QUIC tell when the stream is writable again.
                    continue;
                }
                out.sent.written += out.staged_body;
                out.staged_body = 0;
                if out.staged_script > 0 {
                    let bytes = std::mem::take(&mut out.staged_script);
                    self.events.push_back(Event::Sent { stream: id, bytes });
                }
            }
            match stage(out, request.script.as_deref_mut()) {
                Ok(Staged::More) => {}
                Ok(Staged::Waiting) => {
                    // Output dropped (a response without a body) is
                    // credited at once.
                    if out.staged_script > 0 {
                        let bytes = std::mem::take(&mut out.staged_script);
                        self.events.push_back(Event::Sent { stream: id, bytes });
                    }
                    break None;
                }
                Ok(end) => break Some(end),
                // The file shrank or failed: the client must not take a
                // cut body for whole.
                Err(_) => break Some(Staged::Cut),
            }
        };
        match end {
            None => {}
            Some(Staged::Whole) => {
                let _ = send.finish();
                let by = now + self.served.cfg.send_timeout;
                request.phase = Phase::Flushing { by };
                if !request.ended && request.script.is_none() {
                    // A body nothing reads: the client may stop sending it
                    // (RFC 9114 §4.1.1).
                    let _ = self.quic.recv_stream(id).stop(varint(code::NO_ERROR));
                }
            }
            Some(_) => {
                let _ = send.reset(varint(code::INTERNAL_ERROR));
                self.finished(id, now);
            }
        }
    }

    /// The client stopped our side of stream `id` (STOP_SENDING): its
    /// response is abandoned.
    fn stopped(&mut self, id: StreamId, now: Instant) {
        if self.requests.contains_key(&id) {
            let _ = self
                .quic
                .send_stream(id)
                .reset(varint(code::REQUEST_CANCELLED));
            self.finished(id, now);
        }
    }

    /// Resets and stops stream `id` with `code`: it is over.
    fn refuse(&mut self, id: StreamId, code: u64) {
        let _ = self.quic.send_stream(id).reset(varint(code));
        let _ = self.quic.recv_stream(id).stop(varint(code));
        self.forget(id);
    }

    /// Takes stream `id` out; its script, if any, is told.
    fn forget(&mut self, id: StreamId) -> bool {
        let Some(request) = self.requests.remove(&id) else {
            return false;
        };
        if request.script.is_some() || matches!(request.phase, Phase::Cgi) {
            self.events.push_back(Event::Gone(id));
        }
        true
    }

    /// Every stream is over (the connection closed).
    fn forget_all(&mut self) {
        let ids: Vec<StreamId> = self.requests.keys().copied().collect();
        for id in ids {
            self.forget(id);
        }
    }

    /// Request stream `id` is done with (its log line, if any, goes now).
    fn finished(&mut self, id: StreamId, now: Instant) {
        if !self.forget(id) {
            return;
        }
        if self.requests.is_empty() {
            self.idle_since = now;
            if self.stop_by.is_some() || self.client_leaving {
                // Everything it was asked for is the client's: done.
                self.close(now, code::NO_ERROR);
            }
        }
    }
}

/// Feeds a unidirectional stream's bytes to what reads its kind.
fn feed_uni(uni: &mut Uni, bytes: &[u8], leaving: &mut bool) -> Result<(), Violation> {
    if let Uni::Type(held) = uni {
        held.extend_from_slice(bytes);
        let Some((ty, n)) = frames::varint(held) else {
            return Ok(());
        };
        let rest = held.split_off(n);
        *uni = match ty {
            frames::stream::CONTROL => Uni::Control(ControlReader::default()),
            frames::stream::QPACK_ENCODER => Uni::Encoder(EncoderStream::default()),
            frames::stream::QPACK_DECODER => Uni::Decoder(DecoderStream::default()),
            // A client may not push (§6.2.2).
            frames::stream::PUSH => return Err(Violation::Connection(code::STREAM_CREATION_ERROR)),
            _ => Uni::Ignored,
        };
        return feed_uni(uni, &rest, leaving);
    }
    let qpack = |e: qpack::Error| Violation::Connection(e.code());
    match uni {
        // The client's GOAWAY: it is closing down (RFC 9114 §5.2). Its
        // settings ask nothing of staticd's small response heads.
        Uni::Control(reader) => reader.read(bytes, |said| {
            *leaving |= matches!(said, frames::Control::Goaway(_));
        }),
        Uni::Encoder(reader) => reader.read(bytes).map_err(qpack),
        Uni::Decoder(reader) => reader.read(bytes).map_err(qpack),
        Uni::Ignored | Uni::Type(_) => Ok(()),
    }
}

/// Feeds a request stream's bytes to its reader: the head decoded into
/// its fields once whole (`head_came`); body bytes dropped.
fn feed_request(
    request: &mut Request,
    piece: &[u8],
    head_came: &mut bool,
) -> Result<(), Violation> {
    let mut at = 0;
    loop {
        let (next, event) = request.reader.read(piece, at)?;
        at = next;
        match event {
            None => return Ok(()),
            Some(Read::Headers) => {
                decode_head(request)?;
                *head_came = true;
            }
            Some(Read::Data(range)) => {
                if let Some(length) = &mut request.length {
                    let malformed = Violation::Stream(code::MESSAGE_ERROR);
                    length.more(range.len()).map_err(|_| malformed)?;
                }
                if request.keeps_body() {
                    request.body.extend_from_slice(&piece[range]);
                }
            }
            // Trailers.
            Some(Read::Trailers) => {}
        }
    }
}

/// The stream ended: a body shorter than its Content-Length is malformed.
fn measure_end(request: &Request) -> Result<(), Violation> {
    match &request.length {
        Some(length) => length
            .ended()
            .map_err(|_| Violation::Stream(code::MESSAGE_ERROR)),
        None => Ok(()),
    }
}

/// Decodes a whole head into the request's fields. A malformed field
/// leaves the fields for `request` to refuse (400), as over HTTP/2; a
/// section QPACK cannot read closes the connection.
fn decode_head(request: &mut Request) -> Result<(), Violation> {
    let fields = &mut request.fields;
    let decoded = qpack::decode(request.reader.section(), |name: &[u8], value: &[u8]| {
        super::push_field(fields, name, value)
    });
    match decoded {
        Ok(()) => Ok(()),
        Err(qpack::Stop::Qpack(e)) => Err(Violation::Connection(e.code())),
        // A malformed request: its stream is reset (RFC 9114 §4.1.2).
        Err(qpack::Stop::Field(ParseError::Malformed)) => {
            Err(Violation::Stream(code::MESSAGE_ERROR))
        }
        // Too large: answered 431 as over HTTP/1.1 and HTTP/2.
        Err(qpack::Stop::Field(e)) => {
            request.refused.get_or_insert(e);
            Ok(())
        }
    }
}

/// What `stage` left in `staged`.
enum Staged {
    /// A DATA frame to write.
    More,
    /// Nothing yet: a script's output is awaited.
    Waiting,
    /// The body is all written.
    Whole,
    /// The body was cut (a script's): the stream must be reset.
    Cut,
}

/// Stages the next DATA frame of `out`'s body: its chunks, then a
/// script's output as it comes.
fn stage(out: &mut Outgoing, script: Option<&mut Script>) -> std::io::Result<Staged> {
    loop {
        let Some(chunk) = out.body.get(out.next) else {
            let Some(script) = script else {
                return Ok(Staged::Whole);
            };
            return Ok(stage_script(out, script));
        };
        let left = chunk.size() - out.offset;
        if left == 0 {
            out.next += 1;
            out.offset = 0;
            continue;
        }
        let want = left.min(BLOCK as u64) as usize;
        let prefix = make_room(&mut out.staged, &mut out.at, want);
        let room = &mut out.staged[prefix + HEADER_ROOM..];
        let n = match chunk {
            Chunk::File { file, offset, .. } => {
                match read_block(file, *offset + out.offset, room) {
                    Ok(n) => n,
                    Err(e) => {
                        // What was staged before stays as it was.
                        out.staged.truncate(prefix);
                        return Err(e);
                    }
                }
            }
            _ => {
                let bytes = chunk.memory().unwrap_or_default();
                let from = out.offset as usize;
                room.copy_from_slice(&bytes[from..from + want]);
                want
            }
        };
        out.offset += n as u64;
        frame_staged(out, prefix, n);
        return Ok(Staged::More);
    }
}

/// Stages a script's next output as a DATA frame.
fn stage_script(out: &mut Outgoing, script: &mut Script) -> Staged {
    while let Some(bytes) = script.output.pop_front() {
        if out.no_body || bytes.is_empty() {
            // Nothing goes out: its credit comes back at once.
            out.staged_script += bytes.len();
            continue;
        }
        let prefix = make_room(&mut out.staged, &mut out.at, bytes.len());
        out.staged[prefix + HEADER_ROOM..].copy_from_slice(&bytes);
        frame_staged(out, prefix, bytes.len());
        out.staged_script += bytes.len();
        return Staged::More;
    }
    match script.end {
        Some(true) => Staged::Whole,
        Some(false) => Staged::Cut,
        None => Staged::Waiting,
    }
}

/// Makes room for a DATA frame of `n` bytes after what is staged and not
/// yet written (a response's HEADERS frame, so that it goes out with its
/// first DATA frame in one write); the length of that.
fn make_room(staged: &mut Vec<u8>, at: &mut usize, n: usize) -> usize {
    staged.drain(..*at);
    *at = 0;
    let prefix = staged.len();
    staged.resize(prefix + HEADER_ROOM + n, 0);
    prefix
}

/// Puts a DATA frame header before the `n` body bytes staged after
/// `prefix` bytes and [`HEADER_ROOM`], and moves those bytes up to it.
fn frame_staged(out: &mut Outgoing, prefix: usize, n: usize) {
    out.staged.truncate(prefix + HEADER_ROOM + n);
    let header = frames::FrameHeader::new(frames::frame::DATA, n as u64);
    let h = header.bytes();
    let start = prefix + HEADER_ROOM - h.len();
    out.staged[start..prefix + HEADER_ROOM].copy_from_slice(h);
    out.staged.copy_within(..prefix, start - prefix);
    out.at = start - prefix;
    out.staged_body = n as u64;
}

/// Reads a block of a file; a file that ends early fails the body.
fn read_block(file: &Arc<File>, at: u64, into: &mut [u8]) -> std::io::Result<usize> {
    let n = file.read_at(into, at)?;
    match n {
        0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests;
