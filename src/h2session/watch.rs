//! The checks of RFC 9113 that nghttp2 leaves out, made on the client's
//! bytes before nghttp2 reads them: the connection preface (nghttp2 fails
//! a bad one without a GOAWAY), PRIORITY frames (nghttp2 1.68 drops them
//! unread, RFC 7540 priorities being deprecated), and frames on streams
//! the client has closed or skipped (nghttp2 ignores those, as it keeps no
//! record of closed streams). Each is a connection error: GOAWAY with the
//! code, then the connection ends. It also holds back each WINDOW_UPDATE
//! on a stream until it is whole, so that one overflowing the stream's
//! window resets the stream, as §6.9.1 says, where nghttp2 would end the
//! connection.
//!
//! A frame the server may legitimately receive after it reset a stream
//! (RFC 9113 §5.4.2: frames in flight) is never one of these: only the
//! client's own END_STREAM or RST_STREAM closes a stream here.

use super::PREFACE;
use crate::nghttp2::code;

/// Frame types (RFC 9113 §6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const WINDOW_UPDATE: u8 = 0x8;
const END_STREAM: u8 = 0x1;
const STREAM_CLOSED: u32 = 0x5;

/// Streams remembered below the highest the client opened.
const REMEMBERED: u32 = 1024;

/// WINDOW_UPDATE frames a client may send beyond the ones the data it
/// received calls for (it gives back windows as it takes DATA): a flood of
/// them costs the server a hundred times more per byte than a download,
/// and nghttp2 does not count them among its glitches.
const UPDATES_FREE: u32 = 1000;
/// WINDOW_UPDATE frames each DATA frame sent earns (one for its stream, one
/// for the connection), and the most credit held.
const UPDATES_PER_DATA: u32 = 2;
const UPDATES_HELD: u32 = 10_000;

#[derive(Debug)]
pub struct Watch {
    /// Bytes of the preface still to check.
    preface: usize,
    /// A frame header (and a stream WINDOW_UPDATE's payload) being read,
    /// held back from nghttp2 until it is whole, and how much is in.
    header: [u8; 13],
    have: usize,
    /// How many bytes `header` must hold: 9, or 13 for a WINDOW_UPDATE on
    /// a stream.
    want: usize,
    /// Payload bytes of the current frame still to pass.
    left: usize,
    /// The current frame is a PRIORITY frame: its payload is kept.
    priority: Option<Priority>,
    /// Found after bytes that go to nghttp2 first.
    error: Option<u32>,
    /// WINDOW_UPDATE frames the client may still send (see
    /// [`UPDATES_FREE`]).
    updates: u32,
    /// The highest stream the client opened.
    highest: u32,
    /// For the [`REMEMBERED`] odd stream ids up to `highest`:
    /// opened, and closed by the client. A ring: stream s is bit
    /// `slot(s)`, so a new stream clears the slots it passes instead of
    /// shifting every bit.
    opened: Bitmap,
    closed: Bitmap,
}

#[derive(Debug, Clone, Copy)]
struct Priority {
    stream: u32,
    payload: [u8; 5],
    have: usize,
}

type Bitmap = [u64; (REMEMBERED / 64) as usize];

impl Default for Watch {
    fn default() -> Watch {
        Watch {
            preface: 0,
            header: [0; 13],
            have: 0,
            want: 9,
            left: 0,
            priority: None,
            error: None,
            updates: UPDATES_FREE,
            highest: 0,
            opened: [0; (REMEMBERED / 64) as usize],
            closed: [0; (REMEMBERED / 64) as usize],
        }
    }
}

/// What to do with the next of the client's bytes (see
/// [`Watch::next`](crate::h2session::watch::Watch::next)).
#[derive(Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// These go to nghttp2.
    Feed(&'a [u8]),
    /// A frame header the watch held back goes to nghttp2.
    Header([u8; 9]),
    /// A WINDOW_UPDATE for `stream`: nghttp2 ends the connection for one
    /// that overflows the stream's window, where RFC 9113 §6.9.1 resets
    /// the stream; the caller checks, then feeds `frame` or resets.
    WindowUpdate {
        frame: [u8; 13],
        stream: i32,
        increment: u32,
    },
    /// Nothing yet (part of a frame header is held).
    Held,
    /// A connection error: GOAWAY with `code`, and read no more.
    Error(u32),
}

impl Watch {
    /// Looks at `input`, the client's next bytes: returns how many of them
    /// it took and what to do. Call again with the rest until none is left.
    pub fn next<'a>(&mut self, input: &'a [u8]) -> (usize, Step<'a>) {
        if let Some(code) = self.error.take() {
            return (0, Step::Error(code));
        }
        if self.have > 0 {
            return self.held(input);
        }
        let mut at = 0;
        while at < input.len() {
            if self.preface < PREFACE.len() {
                let n = (PREFACE.len() - self.preface).min(input.len() - at);
                if input[at..at + n] != PREFACE[self.preface..self.preface + n] {
                    return self.fail(input, at, code::PROTOCOL_ERROR);
                }
                self.preface += n;
                at += n;
                continue;
            }
            if self.left > 0 {
                let n = self.left.min(input.len() - at);
                self.payload(&input[at..at + n]);
                at += n;
                if let Some(code) = self.error.take() {
                    return self.fail(input, at, code);
                }
                continue;
            }
            if input.len() - at < 9 {
                // A header split between reads: held until whole.
                if at > 0 {
                    return (at, Step::Feed(&input[..at]));
                }
                return self.held(input);
            }
            let h: [u8; 9] = input[at..at + 9].try_into().unwrap_or_default();
            if is_stream_window_update(&h) {
                if at > 0 {
                    return (at, Step::Feed(&input[..at]));
                }
                return self.held(input);
            }
            if let Some(code) = self.header(&h) {
                return self.fail(input, at, code);
            }
            at += 9;
        }
        (at, Step::Feed(&input[..at]))
    }

    /// The server sent `frames` DATA frames: the client may give back their
    /// windows.
    pub fn sent_data(&mut self, frames: usize) {
        let earned = u32::try_from(frames)
            .unwrap_or(u32::MAX)
            .saturating_mul(UPDATES_PER_DATA);
        self.updates = self.updates.saturating_add(earned).min(UPDATES_HELD);
    }

    /// One WINDOW_UPDATE: whether the client still had credit for it.
    fn update(&mut self) -> bool {
        match self.updates.checked_sub(1) {
            Some(left) => {
                self.updates = left;
                true
            }
            None => false,
        }
    }

    /// Whether an error waits to be reported by the next `next`.
    pub fn has_error(&self) -> bool {
        self.error.is_some()
    }

    /// Feeds what came before a connection error, then reports it.
    fn fail<'a>(&mut self, input: &'a [u8], at: usize, code: u32) -> (usize, Step<'a>) {
        if at == 0 {
            return (0, Step::Error(code));
        }
        self.error = Some(code);
        (at, Step::Feed(&input[..at]))
    }

    /// Adds to the held header; acts once it is whole.
    fn held<'a>(&mut self, input: &'a [u8]) -> (usize, Step<'a>) {
        let n = (self.want - self.have).min(input.len());
        self.header[self.have..self.have + n].copy_from_slice(&input[..n]);
        self.have += n;
        if self.have == 9 && self.want == 9 && is_stream_window_update(&self.header) {
            self.want = 13;
            let more = self.held(&input[n..]);
            return (n + more.0, more.1);
        }
        if self.have < self.want {
            return (n, Step::Held);
        }
        let whole = self.have;
        self.have = 0;
        self.want = 9;
        if whole == 13 {
            if !self.update() {
                return (n, Step::Error(code::ENHANCE_YOUR_CALM));
            }
            let frame = self.header;
            let stream = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
            let increment =
                u32::from_be_bytes([frame[9], frame[10], frame[11], frame[12]]) & 0x7fff_ffff;
            return (
                n,
                Step::WindowUpdate {
                    frame,
                    stream: stream as i32,
                    increment,
                },
            );
        }
        let h: [u8; 9] = self.header[..9].try_into().unwrap_or_default();
        match self.header(&h) {
            Some(code) => (n, Step::Error(code)),
            None => (n, Step::Header(h)),
        }
    }

    /// A frame header (not a stream WINDOW_UPDATE's) that goes to nghttp2:
    /// the error it is, if any; else its payload follows.
    fn header(&mut self, h: &[u8; 9]) -> Option<u32> {
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        let error = self.frame(h[3], h[4], stream, len);
        if error.is_none() {
            self.left = len;
            if len == 0 {
                self.payload(&[]);
            }
        }
        error
    }

    /// Payload bytes of the current frame.
    fn payload(&mut self, bytes: &[u8]) {
        if let Some(p) = &mut self.priority {
            let take = bytes.len().min(5 - p.have);
            p.payload[p.have..p.have + take].copy_from_slice(&bytes[..take]);
            p.have += take;
        }
        self.left -= bytes.len();
        if self.left == 0 {
            if let Some(p) = self.priority.take() {
                self.error = priority_error(&p);
            }
        }
    }

    /// A frame's header: the error it is, if any.
    fn frame(&mut self, kind: u8, flags: u8, stream: u32, len: usize) -> Option<u32> {
        match kind {
            WINDOW_UPDATE if !self.update() => Some(code::ENHANCE_YOUR_CALM),
            PRIORITY => {
                if stream == 0 {
                    return Some(code::PROTOCOL_ERROR);
                }
                // A wrong length is nghttp2's to refuse (FRAME_SIZE_ERROR).
                if len == 5 {
                    self.priority = Some(Priority {
                        stream,
                        payload: [0; 5],
                        have: 0,
                    });
                }
                None
            }
            HEADERS | DATA if stream % 2 == 1 => {
                let end = flags & END_STREAM != 0;
                if stream > self.highest {
                    if kind == HEADERS {
                        self.open(stream);
                        if end {
                            self.close(stream);
                        }
                    }
                    // DATA on an idle stream: nghttp2's to refuse.
                    return None;
                }
                match self.state(stream) {
                    Some((true, true)) => Some(STREAM_CLOSED),
                    // Skipped: implicitly closed, and never opened.
                    Some((false, _)) if kind == HEADERS => Some(code::PROTOCOL_ERROR),
                    Some((false, _)) => Some(STREAM_CLOSED),
                    Some((true, false)) => {
                        if end {
                            self.close(stream);
                        }
                        None
                    }
                    None => None,
                }
            }
            RST_STREAM if stream % 2 == 1 && stream <= self.highest => {
                if let Some((true, _)) = self.state(stream) {
                    self.close(stream);
                }
                None
            }
            _ => None,
        }
    }

    /// Opens `stream`, above every stream before it.
    fn open(&mut self, stream: u32) {
        // The ids passed over (never opened) and `stream` itself start
        // clear; an id REMEMBERED below them is forgotten with its slot.
        let passed = (stream - self.highest) / 2;
        if self.highest == 0 || passed >= REMEMBERED {
            self.opened = [0; (REMEMBERED / 64) as usize];
            self.closed = [0; (REMEMBERED / 64) as usize];
        } else {
            let first = slot(self.highest + 2);
            clear_run(&mut self.opened, first, passed);
            clear_run(&mut self.closed, first, passed);
        }
        self.highest = stream;
        set(&mut self.opened, slot(stream));
    }

    /// (opened, closed by the client) of a remembered stream.
    fn state(&self, stream: u32) -> Option<(bool, bool)> {
        if (self.highest - stream) / 2 >= REMEMBERED {
            return None;
        }
        let i = slot(stream);
        Some((get(&self.opened, i), get(&self.closed, i)))
    }

    /// The client closed its side of a remembered stream.
    fn close(&mut self, stream: u32) {
        if (self.highest - stream) / 2 < REMEMBERED {
            set(&mut self.closed, slot(stream));
        }
    }
}

/// Where odd stream id `stream` lies in a [`Bitmap`].
fn slot(stream: u32) -> u32 {
    (stream / 2) % REMEMBERED
}

fn get(map: &Bitmap, i: u32) -> bool {
    map[(i / 64) as usize] >> (i % 64) & 1 == 1
}

fn set(map: &mut Bitmap, i: u32) {
    map[(i / 64) as usize] |= 1 << (i % 64);
}

/// Clears `n` slots from `at` on, around the ring, a word at a time: a
/// client that skips many ids costs no more than one that skips none.
fn clear_run(map: &mut Bitmap, mut at: u32, mut n: u32) {
    while n > 0 {
        let bit = at % 64;
        let take = (64 - bit).min(n);
        let ones = if take == 64 { !0 } else { (1u64 << take) - 1 };
        map[(at / 64) as usize] &= !(ones << bit);
        // REMEMBERED is a multiple of 64: a run never wraps inside a word.
        at = (at + take) % REMEMBERED;
        n -= take;
    }
}

/// A PRIORITY frame whose stream depends on itself (RFC 9113 §5.3.1).
fn priority_error(p: &Priority) -> Option<u32> {
    let dependency =
        u32::from_be_bytes([p.payload[0], p.payload[1], p.payload[2], p.payload[3]]) & 0x7fff_ffff;
    (dependency == p.stream).then_some(code::PROTOCOL_ERROR)
}

fn is_stream_window_update(h: &[u8]) -> bool {
    let len = u32::from_be_bytes([0, h[0], h[1], h[2]]);
    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    h[3] == WINDOW_UPDATE && stream != 0 && len == 4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = len.to_be_bytes()[1..].to_vec();
        f.extend([kind, flags]);
        f.extend(stream.to_be_bytes());
        f.extend(payload);
        f
    }

    /// Runs `input` through the watch: the bytes nghttp2 would get, and
    /// the last step that was not a feed.
    fn run(w: &mut Watch, input: &[u8]) -> (Vec<u8>, Option<String>) {
        let (mut fed, mut last) = (Vec::new(), None);
        let mut rest = input;
        loop {
            let (n, step) = w.next(rest);
            match step {
                Step::Feed(bytes) => fed.extend(bytes),
                Step::Header(h) => fed.extend(h),
                Step::Held => {}
                Step::WindowUpdate {
                    frame,
                    stream,
                    increment,
                } => {
                    fed.extend(frame);
                    last = Some(format!("wu {stream} {increment}"));
                }
                Step::Error(code) => return (fed, Some(format!("error {code}"))),
            }
            rest = &rest[n..];
            if rest.is_empty() && w.error.is_none() {
                return (fed, last);
            }
        }
    }

    fn opened() -> Watch {
        let mut w = Watch::default();
        assert_eq!(run(&mut w, PREFACE).0, PREFACE);
        w
    }

    #[test]
    fn a_bad_preface_is_an_error_at_once() {
        let mut w = Watch::default();
        assert_eq!(run(&mut w, &PREFACE[..10]).1, None);
        assert_eq!(run(&mut w, b"INVALID"), (vec![], Some("error 1".into())));
    }

    #[test]
    fn every_byte_goes_through_in_order_however_split() {
        let mut all = PREFACE.to_vec();
        all.extend(frame(4, 0, 0, &[0, 3, 0, 0, 0, 100]));
        all.extend(frame(HEADERS, 0x4, 1, b"hpack"));
        all.extend(frame(WINDOW_UPDATE, 0, 1, &[0, 0, 1, 0]));
        all.extend(frame(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]));
        all.extend(frame(DATA, 0x1, 1, b"body"));
        for split in 1..all.len() {
            let mut w = Watch::default();
            let (mut fed, a) = run(&mut w, &all[..split]);
            let (more, b) = run(&mut w, &all[split..]);
            fed.extend(more);
            assert_eq!(fed, all, "split at {split}");
            assert!(a.is_none() || b.is_none());
            assert_eq!(a.or(b).as_deref(), Some("wu 1 256"), "split at {split}");
        }
    }

    #[test]
    fn window_updates_beyond_what_data_earned_are_a_flood() {
        let mut w = opened();
        let update = frame(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 1]);
        for _ in 0..UPDATES_FREE {
            assert_eq!(run(&mut w, &update).1, None);
        }
        assert_eq!(run(&mut w, &update).1.as_deref(), Some("error 11"));
        // A client taking DATA gives its windows back as it goes.
        let mut w = opened();
        let stream_update = frame(WINDOW_UPDATE, 0, 1, &[0, 0, 0, 1]);
        for _ in 0..3 * UPDATES_FREE {
            w.sent_data(1);
            assert_eq!(run(&mut w, &update).1, None);
            assert_eq!(run(&mut w, &stream_update).1.as_deref(), Some("wu 1 1"));
        }
    }

    #[test]
    fn priority_on_stream_zero_or_on_itself_is_refused_even_split() {
        let mut w = opened();
        let bad = frame(PRIORITY, 0, 0, &[0, 0, 0, 1, 16]);
        assert_eq!(run(&mut w, &bad), (vec![], Some("error 1".into())));
        let mut w = opened();
        let own = frame(PRIORITY, 0, 3, &[0, 0, 0, 3, 16]);
        assert_eq!(run(&mut w, &own[..11]).1, None);
        assert_eq!(run(&mut w, &own[11..]).1.as_deref(), Some("error 1"));
        let mut w = opened();
        assert_eq!(
            run(&mut w, &frame(PRIORITY, 0, 3, &[0, 0, 0, 1, 16])).1,
            None
        );
    }

    #[test]
    fn frames_on_streams_the_client_closed_or_skipped_are_refused() {
        let mut w = opened();
        let mut bytes = frame(HEADERS, 0x5, 5, b"hpack");
        let first = bytes.clone();
        bytes.extend(frame(HEADERS, 0x5, 3, b"hpack"));
        assert_eq!(run(&mut w, &bytes), (first, Some("error 1".into())));
        let mut w = opened();
        assert_eq!(run(&mut w, &frame(HEADERS, 0x5, 1, b"x")).1, None);
        assert_eq!(
            run(&mut w, &frame(DATA, 0x1, 1, b"late")).1.as_deref(),
            Some("error 5")
        );
        // Reset by the client, then DATA.
        let mut w = opened();
        assert_eq!(run(&mut w, &frame(HEADERS, 0x4, 1, b"x")).1, None);
        assert_eq!(run(&mut w, &frame(RST_STREAM, 0, 1, &[0, 0, 0, 8])).1, None);
        assert!(run(&mut w, &frame(DATA, 0, 1, b"x")).1.is_some());
        // An open stream's body and trailers are fine, and so is a stream
        // long forgotten.
        let mut w = opened();
        assert_eq!(run(&mut w, &frame(HEADERS, 0x4, 1, b"x")).1, None);
        assert_eq!(run(&mut w, &frame(DATA, 0, 1, b"body")).1, None);
        assert_eq!(run(&mut w, &frame(HEADERS, 0x5, 1, b"trailers")).1, None);
        for id in (3..5000).step_by(2) {
            assert_eq!(run(&mut w, &frame(HEADERS, 0x5, id, b"x")).1, None);
        }
        assert_eq!(run(&mut w, &frame(DATA, 0, 1, b"x")).1, None);
        assert!(run(&mut w, &frame(DATA, 0, 4995, b"x")).1.is_some());
    }

    #[test]
    fn the_ring_remembers_what_a_list_of_every_stream_would() {
        // Streams opened with skips small and large (across the ring's
        // end, past all of it) and closed at random, against a plain
        // record of every stream.
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as u32
        };
        let mut w = Watch::default();
        let mut record = std::collections::HashMap::new();
        let mut highest = 0;
        for _ in 0..20_000 {
            let skip = match next(10) {
                0 => next(3 * REMEMBERED),
                1..=3 => next(40),
                _ => 0,
            };
            let id = highest + 2 * skip + if highest == 0 { 1 } else { 2 };
            w.open(id);
            record.insert(id, false);
            highest = id;
            let back = 2 * next(REMEMBERED + 8);
            // As `next` does: only a stream it remembers as opened.
            if let Some(old) = id.checked_sub(back) {
                if back / 2 < REMEMBERED && record.contains_key(&old) {
                    w.close(old);
                    record.insert(old, true);
                }
            }
            for _ in 0..4 {
                let probe = id.saturating_sub(2 * next(REMEMBERED + 8)) | 1;
                let expected = match (id - probe) / 2 < REMEMBERED {
                    true => Some(record.get(&probe).map_or((false, false), |&c| (true, c))),
                    false => None,
                };
                assert_eq!(w.state(probe), expected, "stream {probe}, highest {id}");
            }
        }
    }
}
