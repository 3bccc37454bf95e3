//! The bound on what h3 buffers of a client's stream. h3 holds every frame but DATA until it is
//! whole, whatever its declared length (a HEADERS frame of 2^40 bytes was read and kept as it came:
//! 32 MiB on one connection took the RSS from 37 to 73 MB).
//! [`Filter`] reads the frame headers (type and length, RFC 9114
//! §7.1) of the bytes quinn hands up, before h3 sees them, and so:
//!
//! - a HEADERS frame longer than the `SETTINGS_MAX_FIELD_SECTION_SIZE`
//!   staticd advertises fails its stream with H3_EXCESSIVE_LOAD (§10.5: the
//!   client ignored the limit it was told; nothing of it is kept);
//! - any other frame h3 would buffer (SETTINGS, GOAWAY, MAX_PUSH_ID, CANCEL_PUSH, PUSH_PROMISE,
//!   HTTP/2's reserved types) longer than
//!   [`OTHER_FRAME_MAX`] is H3_EXCESSIVE_LOAD for the
//!   connection (quic-go allows 8 KiB of SETTINGS likewise); a shorter one reaches h3, which then
//!   says what is wrong with it;
//! - a frame of a type RFC 9114 does not define (reserved, GREASE,
//!   extensions staticd does not speak) is dropped as it passes, never
//!   buffered, as §7.2.8 says to ignore it;
//! - a field section whose Required Insert Count is not 0 is
//!   QPACK_DECOMPRESSION_FAILED for the connection: staticd's dynamic
//!   table has capacity 0 (RFC 9204 §4.5.1.1), and h3 ignored the count.
//!
//! DATA passes as it comes (h3 hands it on unbuffered). No I/O here: the
//! stream types in `quic` feed it.

use bytes::{Buf, Bytes};

use super::code;
use crate::h3session::frames::{frame_header, varint};

/// The longest frame other than HEADERS and DATA that is passed to h3
/// (which holds it whole): SETTINGS is a few varint pairs, GOAWAY and the
/// push frames one varint.
pub const OTHER_FRAME_MAX: u64 = 8 << 10;

/// What a client did that the stream or the connection ends for: the
/// HTTP/3 or QPACK error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The request stream is reset and stopped with this code.
    Stream(u64),
    /// The connection is closed with this code.
    Connection(u64),
}

/// Which stream a filter reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A request stream: frames from the first byte.
    Request,
    /// A unidirectional stream: its type, then frames if it is the control
    /// stream, else bytes h3 reads as they are (QPACK's streams) or not at
    /// all (unknown types, which it stops).
    Unidirectional,
}

/// HTTP/3's frame types that h3 decodes (RFC 9114 §7.2, §11.2.1, HTTP/2's
/// reserved ones included: h3 refuses them, once whole).
mod frame {
    pub const DATA: u64 = 0x0;
    pub const HEADERS: u64 = 0x1;
    pub const KNOWN: [u64; 11] = [0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8, 0x9, 0xd];
}

/// The control stream's type (RFC 9114 §6.2.1).
const CONTROL_STREAM: u64 = 0x0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// A unidirectional stream's type, not yet whole.
    StreamType,
    /// A frame's type and length, not yet whole.
    Header,
    /// This many bytes of a frame's payload to pass to h3; `prefix`: the
    /// first is a field section's Required Insert Count.
    Pass { left: u64, prefix: bool },
    /// This many bytes of an unknown frame's payload to drop.
    Skip(u64),
    /// Everything passes (a unidirectional stream other than control).
    Raw,
}

/// One stream's frame reader (see the module's comment).
pub struct Filter {
    state: State,
    /// A frame header (or stream type) split between chunks: its start.
    held: [u8; 16],
    held_len: usize,
    /// The advertised SETTINGS_MAX_FIELD_SECTION_SIZE.
    field_section_max: u64,
}

impl Filter {
    pub fn new(kind: Kind, field_section_max: u64) -> Filter {
        Filter {
            state: match kind {
                Kind::Request => State::Header,
                Kind::Unidirectional => State::StreamType,
            },
            held: [0; 16],
            held_len: 0,
            field_section_max,
        }
    }

    /// Whether the stream ended where a frame may end (not inside one). A
    /// unidirectional stream may end before its type (RFC 9114 §6.2).
    pub fn at_boundary(&self) -> bool {
        match self.state {
            State::Header => self.held_len == 0,
            State::StreamType | State::Raw => true,
            State::Pass { .. } | State::Skip(_) => false,
        }
    }

    /// The next bytes of `input` for h3, taken from its front; None once
    /// `input` is used up (dropped or held) with nothing to pass.
    pub fn next(&mut self, input: &mut Bytes) -> Result<Option<Bytes>, Violation> {
        while !input.is_empty() {
            match self.state {
                State::Raw => return Ok(Some(std::mem::take(input))),
                State::Pass { left, prefix } => {
                    if prefix && input[0] != 0 {
                        // A Required Insert Count other than 0.
                        let failed = code::QPACK_DECOMPRESSION_FAILED;
                        return Err(Violation::Connection(failed));
                    }
                    let n = left.min(input.len() as u64);
                    self.state = self.after_payload(left - n);
                    return Ok(Some(input.split_to(n as usize)));
                }
                State::Skip(left) => {
                    let n = left.min(input.len() as u64);
                    input.advance(n as usize);
                    self.state = self.after_payload(left - n);
                }
                State::Header | State::StreamType => {
                    if let Some(passed) = self.header(input)? {
                        return Ok(Some(passed));
                    }
                }
            }
        }
        Ok(None)
    }

    fn after_payload(&self, left: u64) -> State {
        match self.state {
            State::Pass { .. } if left > 0 => State::Pass {
                left,
                prefix: false,
            },
            State::Skip(_) if left > 0 => State::Skip(left),
            _ => State::Header,
        }
    }

    /// Reads a frame header (or stream type) from `input`: what of it
    /// passes to h3, if anything yet.
    fn header(&mut self, input: &mut Bytes) -> Result<Option<Bytes>, Violation> {
        let parse = |bytes: &[u8], state| match state {
            State::StreamType => varint(bytes).map(|(ty, n)| (ty, 0, n)),
            _ => frame_header(bytes),
        };
        if self.held_len == 0 {
            // The usual case: the whole header in this chunk, passed (if
            // it is) with the payload that follows, without a copy.
            if let Some((ty, len, n)) = parse(input, self.state) {
                let pass = self.decide(ty, len)?;
                if !pass {
                    input.advance(n);
                    return Ok(None);
                }
                let mut take = n;
                if let State::Pass { left, prefix } = self.state {
                    let rest = &input[n..];
                    if prefix && rest.first().is_some_and(|&b| b != 0) {
                        return Err(Violation::Connection(code::QPACK_DECOMPRESSION_FAILED));
                    }
                    let more = left.min(rest.len() as u64);
                    if more > 0 {
                        take += more as usize;
                        self.state = self.after_payload(left - more);
                    }
                }
                let out = input.split_to(take);
                return Ok(Some(out));
            }
        }
        // Split between chunks: held until whole (16 bytes at most).
        let add = (self.held.len() - self.held_len).min(input.len());
        self.held[self.held_len..self.held_len + add].copy_from_slice(&input[..add]);
        let have = self.held_len + add;
        let Some((ty, len, n)) = parse(&self.held[..have], self.state) else {
            self.held_len = have;
            input.advance(add);
            return Ok(None);
        };
        input.advance(n - self.held_len);
        self.held_len = 0;
        let pass = self.decide(ty, len)?;
        Ok(pass.then(|| Bytes::copy_from_slice(&self.held[..n])))
    }

    /// What comes after a header of type `ty` and payload length `len`:
    /// true if the header passes to h3. Sets the next state.
    fn decide(&mut self, ty: u64, len: u64) -> Result<bool, Violation> {
        if self.state == State::StreamType {
            self.state = if ty == CONTROL_STREAM {
                State::Header
            } else {
                State::Raw
            };
            return Ok(true);
        }
        if !frame::KNOWN.contains(&ty) {
            self.state = self.after_skip(len);
            return Ok(false);
        }
        let max = match ty {
            frame::DATA => u64::MAX,
            frame::HEADERS => self.field_section_max,
            _ => OTHER_FRAME_MAX,
        };
        if len > max {
            // A field section is its request's; any other frame long enough
            // to be refused is the connection's (the control stream's, or
            // one that is an error wherever it is).
            return Err(if ty == frame::HEADERS {
                Violation::Stream(code::EXCESSIVE_LOAD)
            } else {
                Violation::Connection(code::EXCESSIVE_LOAD)
            });
        }
        self.state = if len == 0 {
            State::Header
        } else {
            State::Pass {
                left: len,
                prefix: ty == frame::HEADERS,
            }
        };
        Ok(true)
    }

    fn after_skip(&self, len: u64) -> State {
        if len == 0 {
            State::Header
        } else {
            State::Skip(len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 16384;

    /// Everything `filter` passes of `input` fed in chunks of `size`.
    fn run(filter: &mut Filter, input: &[u8], size: usize) -> Result<Vec<u8>, Violation> {
        let mut out = Vec::new();
        for chunk in input.chunks(size) {
            let mut chunk = Bytes::copy_from_slice(chunk);
            while let Some(passed) = filter.next(&mut chunk)? {
                out.extend_from_slice(&passed);
            }
            assert!(chunk.is_empty());
        }
        Ok(out)
    }

    fn frame(ty: u8, payload: &[u8]) -> Vec<u8> {
        assert!(payload.len() < 64);
        [&[ty, payload.len() as u8][..], payload].concat()
    }

    #[test]
    fn unknown_frames_are_dropped_and_the_rest_passes_whatever_the_chunks() {
        let headers = frame(0x1, b"\0\0abc");
        let data = frame(0x0, b"body");
        // A reserved type (0x21) and a two-byte type (0x4041) with a
        // two-byte length (0x4005).
        let reserved = frame(0x21, b"ignored");
        let long = [&[0x40, 0x41, 0x40, 0x05][..], b"12345"].concat();
        let input = [&headers[..], &reserved, &long, &data].concat();
        let want = [&headers[..], &data].concat();
        for size in 1..input.len() {
            let mut filter = Filter::new(Kind::Request, MAX);
            assert_eq!(run(&mut filter, &input, size), Ok(want.clone()), "{size}");
            assert!(filter.at_boundary());
        }
    }

    #[test]
    fn a_headers_frame_past_the_limit_fails_its_stream_at_its_header() {
        // Declared 2^40 bytes (an 8-byte varint), no payload needed.
        let input = [0x01, 0xc0, 0, 0, 0x01, 0, 0, 0, 0];
        let mut filter = Filter::new(Kind::Request, MAX);
        let stream = Violation::Stream(code::EXCESSIVE_LOAD);
        assert_eq!(run(&mut filter, &input, 3), Err(stream));
        let at_limit = [0x01, 0x80, 0, 0x40, 0x00, 0];
        let mut filter = Filter::new(Kind::Request, MAX);
        assert_eq!(run(&mut filter, &at_limit, 2), Ok(at_limit.to_vec()));
    }

    #[test]
    fn a_required_insert_count_is_refused_with_a_zero_capacity_table() {
        let input = frame(0x1, b"\x06\0abc");
        for size in [1, 2, 3, input.len()] {
            let mut filter = Filter::new(Kind::Request, MAX);
            let failed = Violation::Connection(code::QPACK_DECOMPRESSION_FAILED);
            assert_eq!(run(&mut filter, &input, size), Err(failed), "{size}");
        }
    }

    #[test]
    fn the_control_stream_is_bounded_and_other_streams_pass_raw() {
        let settings = [&[0x00][..], &frame(0x4, b"\x06\x40\x00")].concat();
        let mut filter = Filter::new(Kind::Unidirectional, MAX);
        assert_eq!(run(&mut filter, &settings, 1), Ok(settings.clone()));
        // A SETTINGS frame of 64 MiB.
        let huge = [0x00, 0x04, 0x84, 0, 0, 0];
        let mut filter = Filter::new(Kind::Unidirectional, MAX);
        let load = Violation::Connection(code::EXCESSIVE_LOAD);
        assert_eq!(run(&mut filter, &huge, 2), Err(load));
        // QPACK's encoder stream: not frames.
        let encoder = [0x02, 0x3f, 0xe1, 0x1f, 0x01, 0xff];
        let mut filter = Filter::new(Kind::Unidirectional, MAX);
        assert_eq!(run(&mut filter, &encoder, 2), Ok(encoder.to_vec()));
    }

    #[test]
    fn a_stream_ending_inside_a_frame_is_not_at_a_boundary() {
        let mut filter = Filter::new(Kind::Request, MAX);
        run(&mut filter, &[0x21, 0x10, 1, 2], 4).unwrap();
        assert!(!filter.at_boundary());
        let mut filter = Filter::new(Kind::Request, MAX);
        run(&mut filter, &[0x40], 1).unwrap();
        assert!(!filter.at_boundary());
        // A unidirectional stream may end before its type is whole.
        let mut filter = Filter::new(Kind::Unidirectional, MAX);
        run(&mut filter, &[0x40], 1).unwrap();
        assert!(filter.at_boundary());
    }
}
