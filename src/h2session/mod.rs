//! One HTTP/2 connection as a state machine: the client's bytes in
//! (`receive`), a turn's frames out (`produce`, into a [`Plan`]), timers
//! (`deadline`, `tick`), and no I/O. nghttp2 does the framing, HPACK, flow
//! control and the protocol's checks ([`crate::nghttp2`]); each stream's
//! request is decided by the same [`pipeline::answer`] an HTTP/1.1 request
//! is, and its response goes through [`pipeline::sent`] (metrics, the log
//! line) and is encoded from the structured head ([`http::fields`](crate::http::fields)).
//!
//! A CGI script's stream is the driver's to run ([`Event::Cgi`]): it
//! feeds the exchange's steps back in (`cgi_head`, `cgi_data`, `cgi_end`, `cgi_whole`) and takes
//! the request body (`take_body`, `consumed`).

mod plan;
#[cfg(test)]
mod tests;
mod watch;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use plan::Written;
pub use plan::{Plan, TURN_BYTES};

use crate::complaint::Complaint;
use crate::http::fields::{self, Fields, ResponseFields};
use crate::http::limits::MAX_HEAD_BYTES;
use crate::http::parse::{BodyFraming, HttpVersion};
use crate::http::response::Chunk;
use crate::nghttp2::{self, code, Body, Flow, Frame, Session};
use crate::pace::Pace;
use crate::pipeline::{self, Sent};
use crate::respond::{self, Answer};

/// What the client sends first (the fuzz checks open connections with it).
pub use crate::http::H2_PREFACE as PREFACE;

/// Streams reset after we accepted them, by the client or by us (for the
/// client's error: a WINDOW_UPDATE that overflows, a malformed request, a
/// header bomb), that a connection may accumulate beyond the ones it let
/// finish before it is told to calm down: Rapid Reset (CVE-2023-44487) and
/// MadeYouReset (CVE-2025-8671) cost us work per stream opened.
const RESET_ALLOWANCE: usize = 200;

/// Decoded bytes of one header block (each field's name and value and 32,
/// as RFC 7541 §4.1 counts a table entry) past which it is no longer
/// decoded: its stream is reset at once (ENHANCE_YOUR_CALM). Up to it, a
/// head over the 16 KiB limit is answered 431 once it ends, as over
/// HTTP/1.1. What lies beyond is an HPACK bomb: a few bytes on the wire for
/// each reference to a large table entry, each costing nghttp2 a check of
/// the whole value.
const BOMB_BYTES: usize = 4 * MAX_HEAD_BYTES;

/// Header blocks over [`BOMB_BYTES`] a connection may send before it
/// gets GOAWAY(ENHANCE_YOUR_CALM): the first only costs its stream.
const BOMBS_FORGIVEN: usize = 1;

/// How long a connection that sent its last GOAWAY (idle, stalled, told to
/// calm down) may take to get it out before the socket just closes.
const LAST_WORDS: Duration = Duration::from_secs(1);

pub use crate::exchange::CGI_QUEUE;

/// What every stream of one connection is served with.
pub use crate::pipeline::Served;

/// What the driver has to act on: a script's stream.
pub type Event = crate::exchange::StreamEvent<i32>;

pub struct Connection {
    engine: Session<Streams>,
    watch: watch::Watch,
    /// A connection error was found by [`watch`]: no more bytes are read.
    refused: bool,
}

impl Connection {
    pub fn new(served: Arc<Served>, now: Instant) -> Connection {
        let settings = served.cfg.http2.unwrap_or_default();
        let limits = nghttp2::Limits {
            max_streams: settings.max_streams,
            // Room for a client that opens streams faster than they
            // close, refused one by one, before nghttp2 ends the
            // connection.
            hard_streams: settings
                .max_streams
                .saturating_mul(2)
                .max(settings.max_streams.saturating_add(100)),
            max_header_list: MAX_HEAD_BYTES as u32,
            // nghttp2's own Rapid Reset bound, kept above ours (which
            // counts resets against finished streams, not time).
            reset_burst: 1000,
            reset_rate: 33,
        };
        let streams = Streams {
            max_streams: settings.max_streams as usize,
            served,
            map: StreamMap::default(),
            ready: Vec::new(),
            events: VecDeque::new(),
            plan: Plan::default(),
            written: Written::default(),
            now,
            stopping: false,
            decided_up_to: 0,
            last_end: now,
            finished: 0,
            resets: 0,
            bombs: 0,
            closing: None,
        };
        Connection {
            engine: Session::new(streams, limits),
            watch: watch::Watch::default(),
            refused: false,
        }
    }

    /// Takes the client's bytes and decides every request whose head they
    /// completed. Err: the connection is broken (what nghttp2 had to say
    /// about it is queued for `produce`).
    pub fn receive(&mut self, bytes: &[u8], now: Instant) -> Result<(), nghttp2::Fatal> {
        self.engine.handler().now = now;
        if self.refused {
            return Ok(());
        }
        let result = self.feed(bytes, now);
        let ready = std::mem::take(&mut self.engine.handler().ready);
        for &stream in &ready {
            self.decide(stream);
        }
        let mut ready = ready;
        ready.clear();
        self.engine.handler().ready = ready;
        let h = self.engine.handler();
        if h.resets > RESET_ALLOWANCE && h.resets > 2 * h.finished && h.closing.is_none() {
            h.closing = Some(now + h.served.cfg.shutdown_grace);
            let last = h.decided_up_to;
            self.engine.terminate(last, code::ENHANCE_YOUR_CALM);
        }
        result.map(|_| ())
    }

    /// A client that sent header bombs again: GOAWAY(ENHANCE_YOUR_CALM),
    /// and nothing more of its bytes is read.
    fn calm_bombs(&mut self, now: Instant) -> bool {
        let h = self.engine.handler();
        if h.bombs <= BOMBS_FORGIVEN || h.closing.is_some() {
            return false;
        }
        crate::complaint::complain(&h.served.origin.client, Complaint::HeaderBomb);
        self.refused = true;
        self.last_words(now, code::ENHANCE_YOUR_CALM);
        true
    }

    /// Resets `stream` for the client's error (`code`): the stream is
    /// cancelled, its request never decided if it was not yet.
    fn cancel(&mut self, stream: i32, code: u32) {
        if let Some(s) = self.engine.handler().map.get_mut(&stream) {
            s.cancelled = true;
        }
        self.engine.reset(stream, code);
    }

    /// Hands the client's bytes to nghttp2 through the watch (see
    /// [`watch`]): a WINDOW_UPDATE that would overflow a stream's window
    /// resets that stream; a connection error found ends the connection.
    fn feed(&mut self, bytes: &[u8], now: Instant) -> Result<(), nghttp2::Fatal> {
        let mut rest = bytes;
        while !rest.is_empty() || self.watch.has_error() {
            let (n, step) = self.watch.next(rest);
            rest = &rest[n..];
            match step {
                watch::Step::Feed(bytes) => {
                    self.engine.receive(bytes)?;
                    if self.calm_bombs(now) {
                        return Ok(());
                    }
                }
                watch::Step::Header(header) => {
                    self.engine.receive(&header)?;
                }
                watch::Step::Held => {}
                watch::Step::WindowUpdate {
                    frame,
                    stream,
                    increment,
                } => {
                    let window = self.engine.send_window(stream);
                    if window.is_some_and(|w| i64::from(w) + i64::from(increment) > i32::MAX as i64)
                    {
                        self.cancel(stream, code::FLOW_CONTROL_ERROR);
                    } else {
                        self.engine.receive(&frame)?;
                    }
                }
                watch::Step::Error(code) => {
                    self.refused = true;
                    self.last_words(now, code);
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Puts every frame nghttp2 has to send into the plan, up to a turn's
    /// worth; the transport writes it whole before the next turn.
    pub fn produce(&mut self, now: Instant) -> Result<(), nghttp2::Fatal> {
        self.engine.handler().now = now;
        let before = self.engine.handler().plan.data.len();
        let sent = self.engine.send();
        let frames = self.engine.handler().plan.data.len() - before;
        self.watch.sent_data(frames);
        sent
    }

    /// The turn's output (see `produce`); `written()` once written.
    pub fn plan_mut(&mut self) -> &mut Plan {
        &mut self.engine.handler().plan
    }

    /// The turn's plan was written whole: it is cleared for the next turn,
    /// and its DATA payloads are remembered for a while (see `Written`).
    pub fn written(&mut self) {
        let h = self.engine.handler();
        h.written.add(&h.plan);
        h.plan.clear();
    }

    /// The transport failed `written` bytes into the turn's plan, and the
    /// reset it made discarded the last `discarded` of the bytes written so
    /// far (0 if it made none): those body bytes never reached the client,
    /// and the log lines say so.
    pub fn unsent(&mut self, written: u64, discarded: u64) {
        let h = self.engine.handler();
        for (stream, n) in h.written.unsent(&h.plan, written, discarded) {
            if let Some(sent) = h.map.get_mut(&stream).and_then(|s| s.sent.as_mut()) {
                sent.written = sent.written.saturating_sub(n);
            }
        }
    }

    /// Whether the connection is over: nghttp2 wants neither to read nor
    /// to write, and nothing is left to write.
    pub fn is_done(&mut self) -> bool {
        let idle = !self.engine.wants_read() && !self.engine.wants_write();
        idle && self.engine.handler().plan.is_empty()
    }

    /// Whether `produce` has something to give.
    pub fn wants_write(&self) -> bool {
        self.engine.wants_write()
    }

    pub fn next_event(&mut self) -> Option<Event> {
        self.engine.handler().events.pop_front()
    }

    /// When `tick` has something to do: the idle timeout, a stream's send
    /// deadline, a header block's or a request body's read deadline, or the
    /// end of the grace of a closing connection.
    pub fn deadline(&mut self) -> Instant {
        let h = self.engine.handler();
        if let Some(at) = h.closing {
            return at;
        }
        let keepalive = h.served.cfg.keepalive_timeout;
        let waiting = h.map.values().filter_map(Stream::next_deadline).min();
        match waiting {
            Some(at) => at,
            None if h.map.is_empty() => h.idle_until(),
            // Streams wait for their scripts: the exchange has deadlines.
            None => h.now + keepalive,
        }
    }

    /// Acts on the time: a stream whose client took nothing for the send
    /// timeout (or slower than `--min-rate`) ends the connection, as an
    /// HTTP/1.1 one would; so does the keep-alive timeout with no stream
    /// open. Returns true once a closing connection's grace is over: close
    /// the socket.
    pub fn tick(&mut self, now: Instant) -> bool {
        let h = self.engine.handler();
        h.now = now;
        if let Some(at) = h.closing {
            return now >= at;
        }
        let late = h
            .map
            .values()
            .find(|s| s.read_deadline().is_some_and(|d| d <= now));
        if let Some(s) = late {
            // A header block holds the connection whole (nothing else may
            // come until it ends), and a body a stream: either way, the
            // client stopped sending what it started. GOAWAY(NO_ERROR), as
            // for any timeout: no rule was broken, and the stream above
            // the GOAWAY's last id was not processed, so a client that was
            // merely slow may retry it on a new connection.
            let cfg = &h.served.cfg;
            let complaint = match s.head_by {
                Some(_) => Some(Complaint::UnfinishedHead {
                    secs: cfg.read_timeout.as_secs(),
                }),
                None => s
                    .body_pace
                    .is_some_and(|p| p.too_slow())
                    .then_some(Complaint::SlowBody { rate: cfg.min_rate }),
            };
            if let Some(what) = complaint {
                crate::complaint::complain(&h.served.origin.client, what);
            }
            self.last_words(now, code::NO_ERROR);
            return false;
        }
        let stalled = h
            .map
            .iter()
            .find(|(_, s)| s.deadline().is_some_and(|d| d <= now))
            .map(|(&id, s)| (id, s.pace));
        if let Some((id, pace)) = stalled {
            if pace.is_some_and(|p| p.too_slow()) {
                let rate = h.served.cfg.min_rate;
                crate::complaint::complain(
                    &h.served.origin.client,
                    Complaint::SlowResponse { rate },
                );
            }
            self.engine.reset(id, code::CANCEL);
            self.last_words(now, code::NO_ERROR);
            return false;
        }
        if h.map.is_empty() && h.idle_until() <= now {
            // No stream open: nothing to let finish. A stream the client
            // opened meanwhile is above the GOAWAY's last id: unprocessed,
            // safe to retry (RFC 9113 §6.8).
            self.last_words(now, code::NO_ERROR);
        }
        false
    }

    /// Whether the connection owes its client nothing: no request decided
    /// and unanswered (streams whose head is still arriving owe nothing
    /// yet), nothing to send, not closing. Such a connection may be closed
    /// to make room at `--max-connections`, as an idle HTTP/1.1 one is.
    pub fn owes_nothing(&mut self) -> bool {
        if self.engine.wants_write() {
            return false;
        }
        let h = self.engine.handler();
        h.closing.is_none() && h.plan.is_empty() && h.map.values().all(|s| !s.decided)
    }

    /// Closes a connection that owes nothing (see `owes_nothing`) to make
    /// room for another: GOAWAY, then the close. A request whose head was
    /// still arriving is above the GOAWAY's last id, unprocessed: a client
    /// may send it again elsewhere (RFC 9113 §6.8).
    pub fn shed(&mut self, now: Instant) {
        let h = self.engine.handler();
        if h.closing.is_some() {
            return;
        }
        self.last_words(now, code::NO_ERROR);
    }

    /// The connection's last GOAWAY (`code`), with nothing more to let finish: it has
    /// [`LAST_WORDS`] (within the shutdown grace) to get out before
    /// the socket closes.
    fn last_words(&mut self, now: Instant, code: u32) {
        let h = self.engine.handler();
        h.closing = Some(now + h.served.cfg.shutdown_grace.min(LAST_WORDS));
        let last = h.decided_up_to;
        self.engine.terminate(last, code);
    }

    /// A graceful stop: GOAWAY, the streams in flight finish within the
    /// shutdown grace; with none, the connection ends at once.
    pub fn stop(&mut self, now: Instant) {
        let h = self.engine.handler();
        if h.closing.is_some() {
            return;
        }
        h.stopping = true;
        let grace = h.served.cfg.shutdown_grace;
        if h.map.is_empty() {
            self.last_words(now, code::NO_ERROR);
        } else {
            h.closing = Some(now + grace);
            let last = h.decided_up_to;
            self.engine.goaway(last, code::NO_ERROR);
        }
    }

    /// Decides a request whose head is complete, and submits its answer.
    /// The stream stays in the map throughout: it is large, and moving it
    /// out and back costs more than looking it up again.
    fn decide(&mut self, id: i32) {
        let h = self.engine.handler();
        let Some(stream) = h.map.get_mut(&id) else {
            return;
        };
        let (served, now) = (&h.served, h.now);
        let (cfg, origin) = (&served.cfg, &served.origin);
        stream.decided = true;
        h.decided_up_to = h.decided_up_to.max(id);
        stream.head_by = None;
        let head = &stream.fields;
        if stream.cancelled {
            // Reset in the same read that completed its head: no file is
            // opened for it, and its line says it was not answered. It
            // stays in the map until nghttp2 closes it, to be counted.
            if let (Ok(request), None) =
                (fields::request(head, HttpVersion::Http2), &stream.refused)
            {
                pipeline::unanswered(cfg, origin, &request);
            }
            return;
        }
        if !stream.ended {
            // The body must come as HTTP/1.1's does: within --read-timeout,
            // then at --min-rate (a script's stream reads it at the
            // script's pace, under the exchange's deadlines).
            stream.body_pace = Some(Pace::new(now, cfg.read_timeout, cfg.min_rate));
        }
        let sent = match stream
            .refused
            .take()
            .map_or_else(|| fields::request(head, HttpVersion::Http2), Err)
        {
            Ok(mut request) => {
                if !stream.ended && request.framing == BodyFraming::None {
                    // A body of unannounced length: what HTTP/1.1 says
                    // with chunked coding (the CGI exchange reads it so).
                    request.framing = BodyFraming::Chunked;
                }
                match pipeline::answer(origin.kind, &served.site, &request, h.stopping) {
                    Answer::Send(response) => pipeline::sent(cfg, origin, Some(&request), response),
                    Answer::Cgi(job) => {
                        stream.cgi = Some(CgiOut {
                            body: std::mem::take(&mut stream.early),
                            ..CgiOut::default()
                        });
                        stream.body_pace = None;
                        h.events.push_back(Event::Cgi { stream: id, job });
                        return;
                    }
                }
            }
            Err(e) => pipeline::sent(cfg, origin, None, respond::refuse(e)),
        };
        let early = std::mem::take(&mut stream.early).len();
        if early > 0 {
            // Nothing reads it: its window goes back.
            self.engine.consume(id, early);
        }
        self.submit(id, sent);
    }

    /// Submits `sent` on stream `id`: HEADERS now, DATA as nghttp2 asks.
    fn submit(&mut self, id: i32, sent: Sent) {
        let h = self.engine.handler();
        let Some(stream) = h.map.get(&id) else {
            return;
        };
        let open = stream.cgi.is_some();
        let hsts = pipeline::hsts(&h.served.cfg, h.served.origin.kind);
        let alt_svc = pipeline::alt_svc(&h.served.cfg, h.served.origin.kind);
        let Some(extra) = ResponseFields::new(&sent.response.head, hsts, alt_svc) else {
            // A status HTTP/2 cannot carry (a script's).
            h.map.remove(&id);
            self.engine.reset(id, code::INTERNAL_ERROR);
            return;
        };
        let total = Chunk::total(&sent.response.body);
        let body =
            total > 0 || (open && sent.response.head.framing != crate::http::head::Framing::Empty);
        if self
            .engine
            .respond(id, extra.fields(&sent.response.head), body)
            .is_err()
        {
            self.engine.handler().map.remove(&id);
            return;
        }
        let h = self.engine.handler();
        let (now, timeout, rate) = (h.now, h.served.cfg.send_timeout, h.served.cfg.min_rate);
        let Some(stream) = h.map.get_mut(&id) else {
            return;
        };
        stream.left = total;
        if body {
            // A script's output comes as it writes it: no rate, only the
            // timeout without progress.
            stream.pace = Some(Pace::new(now, timeout, if open { 0 } else { rate }));
        }
        if let Some(cgi) = &mut stream.cgi {
            cgi.headed = true;
            cgi.done |= !body;
        }
        stream.sent = Some(sent);
    }

    /// What the connection's streams are served with.
    pub fn served(&mut self) -> Arc<Served> {
        Arc::clone(&self.engine.handler().served)
    }

    /// A CGI stream's response head; its body follows with `cgi_data`.
    pub fn cgi_head(&mut self, id: i32, sent: Sent) {
        self.submit(id, sent);
    }

    /// A whole response of ours for a CGI stream (a failure's, a local
    /// redirect's), sent as any other.
    pub fn cgi_whole(&mut self, id: i32, sent: Sent) {
        let Some(stream) = self.engine.handler().map.get_mut(&id) else {
            return;
        };
        stream.cgi = None;
        self.submit(id, sent);
    }

    /// More of a script's body for the client.
    pub fn cgi_data(&mut self, id: i32, bytes: &[u8]) {
        let h = self.engine.handler();
        let now = h.now;
        let Some(stream) = h.map.get_mut(&id) else {
            return;
        };
        let Some(cgi) = &mut stream.cgi else { return };
        if cgi.done {
            // A head without a body (HEAD, 304): nothing more goes out.
            return;
        }
        if cgi.queued() == 0 {
            // The client is measured from when there is something to take.
            if let Some(pace) = &mut stream.pace {
                *pace = Pace::new(now, h.served.cfg.send_timeout, 0);
            }
        }
        cgi.queue.extend_from_slice(bytes);
        if std::mem::take(&mut stream.deferred) {
            self.engine.resume(id);
        }
    }

    /// The script is done: `complete`, its body ends the stream; else the
    /// stream is reset, so the client cannot take a cut body for whole.
    pub fn cgi_end(&mut self, id: i32, complete: bool) {
        let h = self.engine.handler();
        let Some(stream) = h.map.get_mut(&id) else {
            return;
        };
        if !complete {
            self.engine.reset(id, code::CANCEL);
            return;
        }
        if let Some(cgi) = &mut stream.cgi {
            cgi.done = true;
        }
        if std::mem::take(&mut stream.deferred) {
            self.engine.resume(id);
        }
    }

    /// The request body received for `id`'s script so far, and whether it
    /// is all there; `consumed` gives its window back once the script took
    /// it.
    pub fn take_body(&mut self, id: i32, into: &mut Vec<u8>) -> bool {
        let Some(stream) = self.engine.handler().map.get_mut(&id) else {
            return true;
        };
        let Some(cgi) = &mut stream.cgi else {
            return true;
        };
        into.append(&mut cgi.body);
        stream.ended
    }

    /// The script took `n` bytes of its request body.
    pub fn consumed(&mut self, id: i32, n: usize) {
        self.engine.consume(id, n);
    }
}

/// Streams by id, hashed by a multiply rather than SipHash: ids come from
/// the client, but a connection holds at most `--h2-max-streams` of them,
/// so a crafted collision costs only that connection, and the map is
/// looked up several times per stream (each field, each frame).
type StreamMap = HashMap<i32, Stream, std::hash::BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_i32(&mut self, id: i32) {
        // Client ids are odd: the low bit says nothing.
        let x = (u64::from(id as u32) >> 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 29);
    }
}

/// One stream's state, as long as nghttp2 has it open.
#[derive(Default)]
struct Stream {
    /// The request head while it arrives.
    fields: Fields,
    /// A head over the limits: answered with this error once complete.
    refused: Option<crate::http::parse::ParseError>,
    /// The client's side is closed (the request body, if any, is whole).
    ended: bool,
    /// The request is decided (its answer submitted, or its script started).
    decided: bool,
    /// Request body that came before the request was decided (with its
    /// head, in the same read): the script's, or given back.
    early: Vec<u8>,
    /// The response going out: its body chunks, its log line.
    sent: Option<Sent>,
    /// Where the body's next frame starts: chunk, and bytes into it.
    chunk: usize,
    chunk_done: u64,
    /// Body bytes still to frame (a script's: see [`cgi`](crate::cgi)).
    left: u64,
    /// How long the client may take to take the body (see [`pace`](crate::pace)).
    pace: Option<Pace>,
    /// nghttp2 was told `Body::Later`: resume when there is more.
    deferred: bool,
    /// The client reset the stream.
    reset: bool,
    /// We reset the stream for the client's error: its request is not to
    /// be decided.
    cancelled: bool,
    /// Until the head is complete: when it must be (`--read-timeout` from
    /// its first frame).
    head_by: Option<Instant>,
    /// Bytes of the head decoded so far (see [`BOMB_BYTES`]).
    decoded: usize,
    /// A static answer's request body still coming: how long it may take.
    body_pace: Option<Pace>,
    cgi: Option<CgiOut>,
}

impl Stream {
    /// When the client must have taken more of the body: a static body's
    /// until it is all framed, a script's while output waits for it.
    fn deadline(&self) -> Option<Instant> {
        let pace = self.pace.as_ref()?;
        let waiting = match &self.cgi {
            Some(cgi) => cgi.queued() > 0,
            None => self.left > 0,
        };
        waiting.then(|| pace.deadline())
    }

    /// When the client must have sent more: the rest of its head, or more
    /// of a request body no script reads.
    fn read_deadline(&self) -> Option<Instant> {
        if self.head_by.is_some() {
            return self.head_by;
        }
        match self.ended {
            true => None,
            false => self.body_pace.as_ref().map(Pace::deadline),
        }
    }

    /// The earlier of the two deadlines.
    fn next_deadline(&self) -> Option<Instant> {
        match (self.deadline(), self.read_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A CGI stream's side of the connection.
#[derive(Default)]
struct CgiOut {
    /// The request body, not yet taken by the driver.
    body: Vec<u8>,
    /// Script output not yet framed, from `at` on.
    queue: Vec<u8>,
    at: usize,
    /// The head went out.
    headed: bool,
    /// The script's body is complete.
    done: bool,
}

impl CgiOut {
    fn queued(&self) -> usize {
        self.queue.len() - self.at
    }
}

/// The streams of a connection, as nghttp2 calls back about them.
struct Streams {
    served: Arc<Served>,
    /// --h2-max-streams: more open at once are refused.
    max_streams: usize,
    map: StreamMap,
    /// Streams whose heads completed during this `receive`.
    ready: Vec<i32>,
    events: VecDeque<Event>,
    plan: Plan,
    /// What the turns before this one wrote.
    written: Written,
    now: Instant,
    stopping: bool,
    /// The highest stream whose request was decided: the last a GOAWAY
    /// names processed. A stream whose head was still arriving is above
    /// it, unprocessed, so its client may send it again (RFC 9113 §6.8).
    decided_up_to: i32,
    /// When the last stream ended, or the connection began.
    last_end: Instant,
    finished: usize,
    resets: usize,
    /// Header blocks cut off at [`BOMB_BYTES`].
    bombs: usize,
    /// Set once the connection's last GOAWAY is queued: when to close.
    closing: Option<Instant>,
}

impl Streams {
    /// When a connection with no stream open has been idle too long: the
    /// keep-alive timeout; before its first stream, the read timeout if
    /// shorter, as an HTTP/1.1 connection's first request has.
    fn idle_until(&self) -> Instant {
        let cfg = &self.served.cfg;
        let first = self.finished == 0 && self.resets == 0;
        match first {
            true => self.last_end + cfg.keepalive_timeout.min(cfg.read_timeout),
            false => self.last_end + cfg.keepalive_timeout,
        }
    }
}

impl nghttp2::Handler for Streams {
    fn begin(&mut self, stream: i32) -> Result<(), u32> {
        if self.map.len() >= self.max_streams {
            return Err(code::REFUSED_STREAM);
        }
        let head_by = Some(self.now + self.served.cfg.read_timeout);
        self.map.insert(
            stream,
            Stream {
                head_by,
                ..Stream::default()
            },
        );
        Ok(())
    }

    fn field(&mut self, stream: i32, name: &[u8], value: &[u8]) -> Result<(), u32> {
        let Some(s) = self.map.get_mut(&stream) else {
            return Ok(());
        };
        s.decoded += name.len() + value.len() + 32;
        if s.decoded > BOMB_BYTES {
            // nghttp2 decodes the rest of the block without checking or
            // passing its fields, which costs little.
            self.bombs += 1;
            s.cancelled = true;
            return Err(code::ENHANCE_YOUR_CALM);
        }
        if s.refused.is_none() {
            if let Err(e) = s.fields.push(name, value) {
                // Answered 431 once the head ends, as HTTP/1.1 would;
                // nghttp2 bounds how long that may take (CONTINUATIONs).
                s.refused = Some(e);
                s.fields = Fields::default();
            }
        }
        Ok(())
    }

    fn data(&mut self, stream: i32, bytes: &[u8]) -> usize {
        let Some(s) = self.map.get_mut(&stream) else {
            return bytes.len();
        };
        if let Some(pace) = &mut s.body_pace {
            pace.progress(self.now, bytes.len() as u64);
        }
        match &mut s.cgi {
            Some(cgi) => {
                let was_empty = cgi.body.is_empty();
                cgi.body.extend_from_slice(bytes);
                if was_empty {
                    self.events.push_back(Event::Body(stream));
                }
                // Given back as the script takes it (`consumed`).
                0
            }
            // Until the request is decided, it may be a script's.
            None if !s.decided => {
                s.early.extend_from_slice(bytes);
                0
            }
            // Nothing reads it: its window goes back at once.
            None => bytes.len(),
        }
    }

    fn frame(&mut self, frame: Frame) {
        match frame {
            Frame::Head { stream, end } => {
                if let Some(s) = self.map.get_mut(&stream) {
                    s.ended = end;
                    self.ready.push(stream);
                }
            }
            Frame::Data { stream, end: true } | Frame::Trailers { stream } => {
                if let Some(s) = self.map.get_mut(&stream) {
                    s.ended = true;
                    if s.cgi.is_some() {
                        self.events.push_back(Event::Body(stream));
                    }
                }
            }
            Frame::Reset { stream, .. } => {
                if let Some(s) = self.map.get_mut(&stream) {
                    s.reset = true;
                }
            }
            Frame::Data { .. } | Frame::Other => {}
        }
    }

    fn closed(&mut self, stream: i32, code: u32) {
        let Some(s) = self.map.remove(&stream) else {
            return;
        };
        self.last_end = self.now;
        // Reset by the client, or for its error (by us, or by nghttp2 for
        // a malformed request): either way a stream that cost us work and
        // finished nothing (MadeYouReset). Our own failures (a status HTTP/2
        // cannot carry, a script cut short, a client too slow to read) are
        // not the client's doing.
        let ours = matches!(code, code::INTERNAL_ERROR | code::CANCEL);
        if s.reset || s.cancelled || (code != code::NO_ERROR && !ours) {
            self.resets += 1;
        } else {
            self.finished += 1;
        }
        if s.cgi.is_some() {
            self.events.push_back(Event::Gone(stream));
        }
        // Dropping `s` writes the stream's log line.
    }

    fn body(&mut self, stream: i32, max: usize) -> Body {
        let Some(s) = self.map.get_mut(&stream) else {
            return Body::Fail;
        };
        if let Some(cgi) = &s.cgi {
            let n = cgi.queued().min(max);
            if n == 0 && !cgi.done {
                s.deferred = true;
                return Body::Later;
            }
            return Body::Ready {
                len: n,
                last: cgi.done && n == cgi.queued(),
            };
        }
        let Some(sent) = &s.sent else {
            return Body::Fail;
        };
        let Some(chunk) = sent.response.body.get(s.chunk) else {
            return Body::Ready { len: 0, last: true };
        };
        let n = (chunk.size() - s.chunk_done).min(max as u64).min(s.left);
        Body::Ready {
            len: n as usize,
            last: n == s.left,
        }
    }

    fn send_body(&mut self, stream: i32, header: &[u8], len: usize) -> Flow {
        self.plan.push(header);
        let now = self.now;
        let Some(s) = self.map.get_mut(&stream) else {
            return Flow::More;
        };
        if let Some(pace) = &mut s.pace {
            pace.progress(now, len as u64);
        }
        if let Some(cgi) = &mut s.cgi {
            self.plan.push(&cgi.queue[cgi.at..cgi.at + len]);
            self.plan.data_frame(stream, len as u64);
            cgi.at += len;
            if cgi.at == cgi.queue.len() {
                cgi.queue.clear();
                cgi.at = 0;
            }
            if let Some(sent) = &mut s.sent {
                sent.written += len as u64;
            }
            self.events.push_back(Event::Sent { stream, bytes: len });
        } else if let Some(sent) = &mut s.sent {
            let mut left = len as u64;
            while left > 0 {
                let Some(chunk) = sent.response.body.get(s.chunk) else {
                    break;
                };
                let n = (chunk.size() - s.chunk_done).min(left);
                match chunk {
                    Chunk::File { file, offset, .. } => {
                        self.plan.file(file, offset + s.chunk_done, n);
                    }
                    memory => {
                        let bytes = memory.memory().unwrap_or_default();
                        let at = s.chunk_done as usize;
                        self.plan.push(&bytes[at..at + n as usize]);
                    }
                }
                s.chunk_done += n;
                if s.chunk_done == chunk.size() {
                    s.chunk += 1;
                    s.chunk_done = 0;
                }
                left -= n;
            }
            s.left -= len as u64 - left;
            sent.written += len as u64 - left;
            self.plan.data_frame(stream, len as u64 - left);
        }
        match self.plan.full() {
            true => Flow::Full,
            false => Flow::More,
        }
    }

    fn output(&mut self, bytes: &[u8]) -> Flow {
        self.plan.push(bytes);
        match self.plan.full() {
            true => Flow::Full,
            false => Flow::More,
        }
    }
}
