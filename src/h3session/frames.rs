//! HTTP/3's frames (RFC 9114 §7) as the client sends them, read without
//! I/O: [`RequestReader`] for a request stream, [`ControlReader`] for the
//! client's control stream, and the writing of staticd's own frame
//! headers, SETTINGS and GOAWAY. Frames of types RFC 9114 does not define
//! (reserved, GREASE, extensions staticd does not speak) are skipped as
//! they come, never held (§7.2.8, §9). A frame is held only when it must
//! be whole to be read, and only within a bound: a HEADERS frame within
//! the `SETTINGS_MAX_FIELD_SECTION_SIZE` staticd advertises, a control
//! frame within [`CONTROL_FRAME_MAX`]. DATA is handed on as it comes.
//!
//! The readers take the stream's bytes as the transport has them and say
//! what each piece was ([`Event`]), as positions in the piece, so the
//! caller needs no copy of a body.

use std::ops::Range;

/// HTTP/3's error codes (RFC 9114 §8.1).
pub mod code {
    pub const NO_ERROR: u64 = 0x100;
    pub const GENERAL_PROTOCOL_ERROR: u64 = 0x101;
    pub const INTERNAL_ERROR: u64 = 0x102;
    pub const STREAM_CREATION_ERROR: u64 = 0x103;
    pub const CLOSED_CRITICAL_STREAM: u64 = 0x104;
    pub const FRAME_UNEXPECTED: u64 = 0x105;
    pub const FRAME_ERROR: u64 = 0x106;
    pub const EXCESSIVE_LOAD: u64 = 0x107;
    pub const ID_ERROR: u64 = 0x108;
    pub const SETTINGS_ERROR: u64 = 0x109;
    pub const MISSING_SETTINGS: u64 = 0x10a;
    pub const REQUEST_REJECTED: u64 = 0x10b;
    pub const REQUEST_CANCELLED: u64 = 0x10c;
    pub const REQUEST_INCOMPLETE: u64 = 0x10d;
    pub const MESSAGE_ERROR: u64 = 0x10e;
}

/// Frame types (RFC 9114 §7.2; §11.2.1 for HTTP/2's, reserved in HTTP/3).
pub mod frame {
    pub const DATA: u64 = 0x0;
    pub const HEADERS: u64 = 0x1;
    pub const CANCEL_PUSH: u64 = 0x3;
    pub const SETTINGS: u64 = 0x4;
    pub const PUSH_PROMISE: u64 = 0x5;
    pub const GOAWAY: u64 = 0x7;
    pub const MAX_PUSH_ID: u64 = 0xd;
    /// HTTP/2's PRIORITY, PING, WINDOW_UPDATE and CONTINUATION: an error
    /// wherever they come (§7.2.8).
    pub const HTTP2_ONLY: [u64; 4] = [0x2, 0x6, 0x8, 0x9];
}

/// Settings identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5).
pub mod setting {
    pub const QPACK_MAX_TABLE_CAPACITY: u64 = 0x1;
    pub const MAX_FIELD_SECTION_SIZE: u64 = 0x6;
    pub const QPACK_BLOCKED_STREAMS: u64 = 0x7;
    /// HTTP/2's settings with no HTTP/3 meaning: an error (§7.2.4.1).
    pub const HTTP2_ONLY: [u64; 4] = [0x2, 0x3, 0x4, 0x5];
}

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
pub mod stream {
    pub const CONTROL: u64 = 0x0;
    pub const PUSH: u64 = 0x1;
    pub const QPACK_ENCODER: u64 = 0x2;
    pub const QPACK_DECODER: u64 = 0x3;
}

/// The longest control-stream frame held to be read whole: SETTINGS is a
/// few pairs of varints, GOAWAY and the push frames one varint. quic-go
/// allows 8 KiB of SETTINGS likewise.
pub const CONTROL_FRAME_MAX: u64 = 8 << 10;

/// What ends the stream or the connection: an HTTP/3 error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The request stream is reset and stopped with this code.
    Stream(u64),
    /// The connection is closed with this code.
    Connection(u64),
}

/// The varint at the start of `bytes` (RFC 9000 §16) and its length; None
/// if it is not whole.
pub fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let len = 1 << (bytes.first()? >> 6);
    let bytes = bytes.get(..len)?;
    let mut value = u64::from(bytes[0] & 0x3f);
    for &b in &bytes[1..] {
        value = (value << 8) | u64::from(b);
    }
    Some((value, len))
}

/// The longest varint: 8 bytes.
pub const VARINT_MAX_LEN: usize = 8;

/// Writes `value` (below 2^62) as the shortest varint into `out`; the
/// bytes written.
pub fn put_varint(out: &mut [u8], value: u64) -> usize {
    let (len, tag) = match value {
        0..=0x3f => (1, 0x00),
        0x40..=0x3fff => (2, 0x40),
        0x4000..=0x3fff_ffff => (4, 0x80),
        _ => (8, 0xc0),
    };
    let bytes = value.to_be_bytes();
    out[..len].copy_from_slice(&bytes[8 - len..]);
    out[0] |= tag;
    len
}

/// A frame's header (type and payload length), written out.
pub struct FrameHeader {
    bytes: [u8; 2 * VARINT_MAX_LEN],
    len: usize,
}

impl FrameHeader {
    pub fn new(ty: u64, payload: u64) -> FrameHeader {
        let mut bytes = [0; 2 * VARINT_MAX_LEN];
        let a = put_varint(&mut bytes, ty);
        let b = put_varint(&mut bytes[a..], payload);
        FrameHeader { bytes, len: a + b }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The start of staticd's control stream: its type, then SETTINGS with a
/// QPACK dynamic table of capacity 0 and no blocked streams (both the
/// default, so sent only as RFC 9204 allows: not at all) and the largest
/// field section staticd reads.
pub fn control_stream_preface(max_field_section: u64) -> Vec<u8> {
    let mut payload = [0u8; 2 * VARINT_MAX_LEN];
    let a = put_varint(&mut payload, setting::MAX_FIELD_SECTION_SIZE);
    let b = put_varint(&mut payload[a..], max_field_section);
    let payload = &payload[..a + b];
    let mut out = vec![stream::CONTROL as u8];
    out.extend_from_slice(FrameHeader::new(frame::SETTINGS, payload.len() as u64).bytes());
    out.extend_from_slice(payload);
    out
}

/// A GOAWAY frame naming the first request stream that will not be
/// served (RFC 9114 §5.2).
pub fn goaway(stream_id: u64) -> Vec<u8> {
    let mut id = [0u8; VARINT_MAX_LEN];
    let n = put_varint(&mut id, stream_id);
    let mut out = FrameHeader::new(frame::GOAWAY, n as u64).bytes().to_vec();
    out.extend_from_slice(&id[..n]);
    out
}

/// What a piece of a stream held, in order. Ranges are positions in the
/// piece passed to `read`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A whole field section (HEADERS payload): read it with `section()`.
    Headers,
    /// Trailers (a HEADERS frame after DATA): read it with `section()`.
    Trailers,
    /// Part of a DATA frame's payload.
    Data(Range<usize>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// A frame's type and length, not yet whole.
    Header,
    /// This many bytes of a HEADERS payload still to gather.
    Section(u64),
    /// This many bytes of DATA payload still to hand on.
    Data(u64),
    /// This many bytes of an ignored frame's payload still to skip.
    Skip(u64),
}

impl State {
    /// How many of `available` bytes belong to the payload being read
    /// (none at a frame header).
    fn payload_part(self, available: usize) -> usize {
        match self {
            State::Section(left) | State::Data(left) | State::Skip(left) => {
                left.min(available as u64) as usize
            }
            State::Header => 0,
        }
    }

    /// This state once `n` more bytes of its payload passed: the next
    /// frame's header once the payload is all read.
    fn after(self, n: usize) -> State {
        let n = n as u64;
        match self {
            State::Section(left) if left > n => State::Section(left - n),
            State::Data(left) if left > n => State::Data(left - n),
            State::Skip(left) if left > n => State::Skip(left - n),
            _ => State::Header,
        }
    }
}

/// Where a request stream is in RFC 9114 §4.1's order: HEADERS, then
/// DATA, then perhaps trailers; nothing after them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Message {
    Start,
    Body,
    Trailed,
}

/// Reads a request stream's frames (see the module's comment).
pub struct RequestReader {
    state: State,
    message: Message,
    header: Header,
    /// The field section being gathered, then whole.
    section: Vec<u8>,
    section_max: u64,
}

impl RequestReader {
    /// A reader that refuses field sections longer than `section_max`
    /// (the advertised SETTINGS_MAX_FIELD_SECTION_SIZE). `section` is
    /// where field sections are gathered: a pooled buffer, cleared.
    pub fn new(section_max: u64, section: Vec<u8>) -> RequestReader {
        RequestReader {
            state: State::Header,
            message: Message::Start,
            header: Header::default(),
            section,
            section_max,
        }
    }

    /// The buffer field sections are gathered in, for its pool (the
    /// reader is left an empty one, which allocates nothing).
    pub fn take_section(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.section)
    }

    /// The field section of the last [`Event::Headers`] or
    /// [`Event::Trailers`].
    pub fn section(&self) -> &[u8] {
        &self.section
    }

    /// The buffer the sections were gathered in, for the pool.
    pub fn into_buffer(mut self) -> Vec<u8> {
        self.section.clear();
        self.section
    }

    /// Whether the head (the first HEADERS frame) has come.
    pub fn has_head(&self) -> bool {
        self.message != Message::Start
    }

    /// The stream ended (FIN) here: an error if it ended inside a frame
    /// (§7.1: H3_FRAME_ERROR) or before a head (H3_REQUEST_INCOMPLETE,
    /// §4.1.2).
    pub fn end(&self) -> Result<(), Violation> {
        if self.state != State::Header || self.header.partial() {
            return Err(Violation::Connection(code::FRAME_ERROR));
        }
        match self.message {
            Message::Start => Err(Violation::Stream(code::REQUEST_INCOMPLETE)),
            _ => Ok(()),
        }
    }

    /// Reads from `piece` starting at `at`: the position it read to and
    /// what it found there, if anything. Call again from that position
    /// until it returns the piece's end with no event.
    pub fn read(&mut self, piece: &[u8], at: usize) -> Result<(usize, Option<Event>), Violation> {
        let mut at = at;
        while at < piece.len() {
            let rest = &piece[at..];
            match self.state {
                State::Header => {
                    let (took, header) = self.header.take(rest);
                    at += took;
                    if let Some((ty, len)) = header {
                        if let Some(event) = self.begin(ty, len)? {
                            return Ok((at, Some(event)));
                        }
                    }
                }
                State::Section(_) => {
                    let n = self.state.payload_part(rest.len());
                    self.section.extend_from_slice(&rest[..n]);
                    at += n;
                    self.state = self.state.after(n);
                    if self.state == State::Header {
                        return Ok((at, Some(self.section_done())));
                    }
                }
                State::Data(_) => {
                    let n = self.state.payload_part(rest.len());
                    self.state = self.state.after(n);
                    return Ok((at + n, Some(Event::Data(at..at + n))));
                }
                State::Skip(_) => {
                    let n = self.state.payload_part(rest.len());
                    at += n;
                    self.state = self.state.after(n);
                }
            }
        }
        Ok((at, None))
    }

    /// A frame of type `ty` and payload length `len` begins: the state it
    /// leads to, and an event if it is already whole.
    fn begin(&mut self, ty: u64, len: u64) -> Result<Option<Event>, Violation> {
        let unexpected = Violation::Connection(code::FRAME_UNEXPECTED);
        match ty {
            frame::HEADERS => {
                if self.message == Message::Trailed {
                    return Err(unexpected);
                }
                if len > self.section_max {
                    // §10.5: the client ignored the limit it was told;
                    // nothing of the section is kept.
                    return Err(Violation::Stream(code::EXCESSIVE_LOAD));
                }
                self.section.clear();
                if len == 0 {
                    // Not even QPACK's prefix: the decoder refuses it.
                    return Ok(Some(self.section_done()));
                }
                self.state = State::Section(len);
            }
            frame::DATA => {
                if self.message != Message::Body {
                    return Err(unexpected);
                }
                if len > 0 {
                    self.state = State::Data(len);
                }
            }
            frame::CANCEL_PUSH
            | frame::SETTINGS
            | frame::PUSH_PROMISE
            | frame::GOAWAY
            | frame::MAX_PUSH_ID => return Err(unexpected),
            ty if frame::HTTP2_ONLY.contains(&ty) => return Err(unexpected),
            _ => {
                if len > 0 {
                    self.state = State::Skip(len);
                }
            }
        }
        Ok(None)
    }

    /// A field section is whole: the head's, or the trailers'.
    fn section_done(&mut self) -> Event {
        match self.message {
            Message::Start => {
                self.message = Message::Body;
                Event::Headers
            }
            _ => {
                self.message = Message::Trailed;
                Event::Trailers
            }
        }
    }
}

/// A frame header's type, length and size; None if it is not whole.
pub fn frame_header(bytes: &[u8]) -> Option<(u64, u64, usize)> {
    let (ty, a) = varint(bytes)?;
    let (len, b) = varint(&bytes[a..])?;
    Some((ty, len, a + b))
}

/// A frame header read from a stream's pieces, joined when a piece ends
/// inside it.
#[derive(Default)]
struct Header {
    held: [u8; 2 * VARINT_MAX_LEN],
    held_len: usize,
}

impl Header {
    /// Takes a frame header from the front of `rest`: the bytes taken and,
    /// once whole, its type and payload length.
    fn take(&mut self, rest: &[u8]) -> (usize, Option<(u64, u64)>) {
        if self.held_len == 0 {
            if let Some((ty, len, n)) = frame_header(rest) {
                return (n, Some((ty, len)));
            }
        }
        let add = (self.held.len() - self.held_len).min(rest.len());
        self.held[self.held_len..self.held_len + add].copy_from_slice(&rest[..add]);
        let have = self.held_len + add;
        match frame_header(&self.held[..have]) {
            Some((ty, len, n)) => {
                let took = n - self.held_len;
                self.held_len = 0;
                (took, Some((ty, len)))
            }
            None => {
                self.held_len = have;
                (add, None)
            }
        }
    }

    /// Whether part of a header is held.
    fn partial(&self) -> bool {
        self.held_len > 0
    }
}

/// The client's settings that matter to staticd.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// The largest field section the client takes (None: unlimited).
    pub max_field_section: Option<u64>,
}

/// What the client's control stream said, as it comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Settings(Settings),
    /// The client will not accept pushes past this ID: staticd pushes
    /// nothing, so only its order matters (§5.2).
    Goaway(u64),
}

/// Reads the client's control stream (after its type byte): SETTINGS
/// first and once, then GOAWAY, MAX_PUSH_ID and CANCEL_PUSH, each held
/// whole within [`CONTROL_FRAME_MAX`]; unknown frames skipped.
pub struct ControlReader {
    state: State,
    header: Header,
    /// The frame being gathered: its type, and its payload so far.
    ty: u64,
    payload: Vec<u8>,
    settings_seen: bool,
    last_goaway: Option<u64>,
    max_push_id: Option<u64>,
}

impl Default for ControlReader {
    fn default() -> ControlReader {
        ControlReader {
            state: State::Header,
            header: Header::default(),
            ty: 0,
            payload: Vec::new(),
            settings_seen: false,
            last_goaway: None,
            max_push_id: None,
        }
    }
}

impl ControlReader {
    /// Reads all of `piece`: what it said, in order, handed to `said`.
    pub fn read(&mut self, piece: &[u8], mut said: impl FnMut(Control)) -> Result<(), Violation> {
        let mut at = 0;
        while at < piece.len() {
            let rest = &piece[at..];
            match self.state {
                State::Header => {
                    let (took, header) = self.header.take(rest);
                    at += took;
                    if let Some((ty, len)) = header {
                        if let Some(control) = self.begin(ty, len)? {
                            said(control);
                        }
                    }
                }
                State::Section(_) => {
                    let n = self.state.payload_part(rest.len());
                    self.payload.extend_from_slice(&rest[..n]);
                    at += n;
                    self.state = self.state.after(n);
                    if self.state == State::Header {
                        if let Some(control) = self.whole()? {
                            said(control);
                        }
                    }
                }
                // Skipped (the control stream never reads DATA).
                State::Skip(_) | State::Data(_) => {
                    let n = self.state.payload_part(rest.len());
                    at += n;
                    self.state = self.state.after(n);
                }
            }
        }
        Ok(())
    }

    fn begin(&mut self, ty: u64, len: u64) -> Result<Option<Control>, Violation> {
        let unexpected = Violation::Connection(code::FRAME_UNEXPECTED);
        let known = matches!(
            ty,
            frame::SETTINGS | frame::GOAWAY | frame::MAX_PUSH_ID | frame::CANCEL_PUSH
        );
        if !self.settings_seen && ty != frame::SETTINGS {
            // §6.2.1: SETTINGS first, whatever follows.
            return Err(Violation::Connection(code::MISSING_SETTINGS));
        }
        if ty == frame::SETTINGS && self.settings_seen {
            return Err(unexpected);
        }
        if matches!(ty, frame::DATA | frame::HEADERS | frame::PUSH_PROMISE)
            || frame::HTTP2_ONLY.contains(&ty)
        {
            return Err(unexpected);
        }
        if !known {
            if len > 0 {
                self.state = State::Skip(len);
            }
            return Ok(None);
        }
        if len > CONTROL_FRAME_MAX {
            return Err(Violation::Connection(code::EXCESSIVE_LOAD));
        }
        self.ty = ty;
        self.payload.clear();
        if len > 0 {
            self.state = State::Section(len);
            return Ok(None);
        }
        self.whole()
    }

    /// A control frame is whole in `payload`: what it said, if anything
    /// that matters.
    fn whole(&mut self) -> Result<Option<Control>, Violation> {
        let frame_error = Violation::Connection(code::FRAME_ERROR);
        let id_error = Violation::Connection(code::ID_ERROR);
        if self.ty == frame::SETTINGS {
            self.settings_seen = true;
            return settings(&self.payload).map(|s| Some(Control::Settings(s)));
        }
        // One varint, nothing after it (§7.2.3, §7.2.6, §7.2.7).
        let (value, n) = varint(&self.payload).ok_or(frame_error)?;
        if n != self.payload.len() {
            return Err(frame_error);
        }
        match self.ty {
            frame::GOAWAY => {
                // §5.2: a client's GOAWAY never raises the ID it sent.
                if self.last_goaway.is_some_and(|last| value > last) {
                    return Err(id_error);
                }
                self.last_goaway = Some(value);
                Ok(Some(Control::Goaway(value)))
            }
            frame::MAX_PUSH_ID => {
                // §7.2.7: never lowered. staticd pushes nothing, so this
                // is all it means here.
                if self.max_push_id.is_some_and(|last| value < last) {
                    return Err(id_error);
                }
                self.max_push_id = Some(value);
                Ok(None)
            }
            // CANCEL_PUSH (§7.2.3): of a push never promised, as every
            // push ID is here.
            _ => Err(id_error),
        }
    }

    /// The control stream ended: never allowed (§6.2.1).
    pub fn end(&self) -> Violation {
        Violation::Connection(code::CLOSED_CRITICAL_STREAM)
    }
}

/// A SETTINGS payload's pairs (§7.2.4): HTTP/2's identifiers and repeated
/// ones are H3_SETTINGS_ERROR, a pair cut short H3_FRAME_ERROR.
fn settings(mut payload: &[u8]) -> Result<Settings, Violation> {
    let mut settings = Settings::default();
    // Every identifier, sorted afterwards to find repeats: at most
    // CONTROL_FRAME_MAX / 2 of them, once per connection.
    let mut ids = Vec::new();
    let settings_error = Violation::Connection(code::SETTINGS_ERROR);
    while !payload.is_empty() {
        let frame_error = Violation::Connection(code::FRAME_ERROR);
        let (id, a) = varint(payload).ok_or(frame_error)?;
        let (value, b) = varint(&payload[a..]).ok_or(frame_error)?;
        payload = &payload[a + b..];
        if setting::HTTP2_ONLY.contains(&id) {
            return Err(settings_error);
        }
        ids.push(id);
        if id == setting::MAX_FIELD_SECTION_SIZE {
            settings.max_field_section = Some(value);
        }
    }
    ids.sort_unstable();
    match ids.windows(2).any(|pair| pair[0] == pair[1]) {
        true => Err(settings_error),
        false => Ok(settings),
    }
}

#[cfg(test)]
mod tests;
