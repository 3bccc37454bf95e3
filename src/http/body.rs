//! Discarding request bodies, so the next request on the connection parses.
//!
//! staticd never uses a request body (CGI is a later step), but it must still
//! find where the body ends. This is a byte-at-a-time-free state machine: feed
//! it whatever has arrived, it says how much it consumed.

use super::limits::MAX_CHUNK_LINE;
use super::parse::BodyFraming;

#[derive(Debug, PartialEq, Eq)]
pub enum Skip {
    /// The body is over; `consumed` bytes of the input belonged to it.
    Done { consumed: usize },
    /// All input consumed; more is needed.
    NeedMore,
    /// The chunked framing is broken: the connection must close.
    Invalid,
}

#[derive(Debug)]
pub struct BodySkipper {
    state: State,
}

#[derive(Debug)]
enum State {
    Fixed {
        remaining: u64,
    },
    /// Reading a chunk-size line; `seen` bytes of it so far, `size` parsed hex.
    SizeLine {
        seen: usize,
        size: u64,
        digits: usize,
        in_ext: bool,
    },
    /// A chunk-size line ended with CR: LF must follow.
    SizeLineCr {
        size: u64,
    },
    ChunkData {
        remaining: u64,
    },
    /// After chunk data: expecting CRLF (`seen_cr` once the CR arrived).
    ChunkEnd {
        seen_cr: bool,
    },
    /// In the trailer section; `line_len` bytes into the current line.
    Trailer {
        line_len: usize,
    },
    Done,
}

/// Whether the part of a chunked body that has already arrived breaks its
/// framing. Checked before the request is answered, as nginx does when it
/// discards a body: the client then gets 400 rather than an answer and a cut
/// connection. Bytes that arrive later are checked by the skipper as before.
/// Other framings cannot break, so this costs them nothing.
pub fn chunked_prefix_is_invalid(framing: BodyFraming, arrived: &[u8]) -> bool {
    if framing != BodyFraming::Chunked {
        return false;
    }
    BodySkipper::new(framing).is_some_and(|mut skipper| skipper.feed(arrived) == Skip::Invalid)
}

impl BodySkipper {
    pub fn new(framing: BodyFraming) -> Option<BodySkipper> {
        let state = match framing {
            BodyFraming::None => return None,
            BodyFraming::Length(n) => State::Fixed { remaining: n },
            BodyFraming::Chunked => State::SizeLine {
                seen: 0,
                size: 0,
                digits: 0,
                in_ext: false,
            },
        };
        Some(BodySkipper { state })
    }

    pub fn feed(&mut self, input: &[u8]) -> Skip {
        let mut i = 0;
        while i < input.len() {
            match &mut self.state {
                State::Fixed { remaining } => {
                    let take = (*remaining).min((input.len() - i) as u64);
                    *remaining -= take;
                    i += take as usize;
                    if *remaining == 0 {
                        self.state = State::Done;
                    }
                }
                State::SizeLine {
                    seen,
                    size,
                    digits,
                    in_ext,
                } => {
                    let b = input[i];
                    i += 1;
                    *seen += 1;
                    if *seen > MAX_CHUNK_LINE {
                        return Skip::Invalid;
                    }
                    match b {
                        b'\n' => {
                            if *digits == 0 {
                                return Skip::Invalid;
                            }
                            self.state = if *size == 0 {
                                State::Trailer { line_len: 0 }
                            } else {
                                State::ChunkData { remaining: *size }
                            };
                        }
                        // A CR ends the line: only LF may follow it.
                        b'\r' if *digits > 0 => self.state = State::SizeLineCr { size: *size },
                        b'\r' => return Skip::Invalid,
                        _ if *in_ext => {}
                        b';' | b' ' | b'\t' => *in_ext = true,
                        _ => {
                            let d = match (b as char).to_digit(16) {
                                Some(d) => d as u64,
                                None => return Skip::Invalid,
                            };
                            *digits += 1;
                            if *digits > 15 {
                                return Skip::Invalid;
                            }
                            *size = *size * 16 + d;
                        }
                    }
                }
                State::SizeLineCr { size } => {
                    let b = input[i];
                    i += 1;
                    if b != b'\n' {
                        return Skip::Invalid;
                    }
                    self.state = if *size == 0 {
                        State::Trailer { line_len: 0 }
                    } else {
                        State::ChunkData { remaining: *size }
                    };
                }
                State::ChunkData { remaining } => {
                    let take = (*remaining).min((input.len() - i) as u64);
                    *remaining -= take;
                    i += take as usize;
                    if *remaining == 0 {
                        self.state = State::ChunkEnd { seen_cr: false };
                    }
                }
                State::ChunkEnd { seen_cr } => {
                    let b = input[i];
                    i += 1;
                    match (b, *seen_cr) {
                        (b'\r', false) => *seen_cr = true,
                        (b'\n', _) => {
                            self.state = State::SizeLine {
                                seen: 0,
                                size: 0,
                                digits: 0,
                                in_ext: false,
                            }
                        }
                        _ => return Skip::Invalid,
                    }
                }
                State::Trailer { line_len } => {
                    let b = input[i];
                    i += 1;
                    match b {
                        b'\n' if *line_len == 0 => self.state = State::Done,
                        b'\n' => *line_len = 0,
                        b'\r' if *line_len == 0 => {}
                        _ => {
                            *line_len += 1;
                            if *line_len > MAX_CHUNK_LINE {
                                return Skip::Invalid;
                            }
                        }
                    }
                }
                State::Done => break,
            }
            if matches!(self.state, State::Done) {
                return Skip::Done { consumed: i };
            }
        }
        match self.state {
            State::Done => Skip::Done { consumed: i },
            _ => Skip::NeedMore,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip_all(framing: BodyFraming, input: &[u8]) -> Skip {
        BodySkipper::new(framing).unwrap().feed(input)
    }

    #[test]
    fn fixed_length() {
        assert_eq!(
            skip_all(BodyFraming::Length(3), b"abcGET"),
            Skip::Done { consumed: 3 }
        );
        let mut s = BodySkipper::new(BodyFraming::Length(5)).unwrap();
        assert_eq!(s.feed(b"ab"), Skip::NeedMore);
        assert_eq!(s.feed(b"cdeX"), Skip::Done { consumed: 3 });
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let body = b"4;name=v\r\nWiki\r\n5\r\npedia\r\n0\r\nX-T: 1\r\n\r\nGET";
        assert_eq!(
            skip_all(BodyFraming::Chunked, body),
            Skip::Done {
                consumed: body.len() - 3
            }
        );
    }

    #[test]
    fn chunked_byte_by_byte() {
        let body = b"3\r\nabc\r\n0\r\n\r\n";
        let mut s = BodySkipper::new(BodyFraming::Chunked).unwrap();
        for (i, b) in body.iter().enumerate() {
            let r = s.feed(std::slice::from_ref(b));
            if i + 1 == body.len() {
                assert_eq!(r, Skip::Done { consumed: 1 });
            } else {
                assert_eq!(r, Skip::NeedMore);
            }
        }
    }

    #[test]
    fn chunked_garbage_is_invalid() {
        assert_eq!(skip_all(BodyFraming::Chunked, b"zz\r\n"), Skip::Invalid);
        assert_eq!(skip_all(BodyFraming::Chunked, b"\r\n"), Skip::Invalid);
        assert_eq!(skip_all(BodyFraming::Chunked, b"1\r0\r\n"), Skip::Invalid);
        assert_eq!(
            skip_all(BodyFraming::Chunked, b"1\r\nab\r\n"),
            Skip::Invalid
        );
        assert_eq!(
            skip_all(BodyFraming::Chunked, b"ffffffffffffffffff\r\n"),
            Skip::Invalid
        );
    }

    #[test]
    fn arrived_prefix_is_judged_without_waiting_for_the_rest() {
        let invalid = |arrived: &[u8]| chunked_prefix_is_invalid(BodyFraming::Chunked, arrived);
        assert!(invalid(b"zz\r\n"));
        assert!(invalid(b"3\r\nabcX"));
        assert!(invalid(b"ffffffffffffffff\r\n"));
        // Valid so far, or whole and followed by the next request: not invalid.
        assert!(!invalid(b""));
        assert!(!invalid(b"5\r\nhel"));
        assert!(!invalid(b"0\r\n\r\nzz\r\n\r\n"));
        // Only chunked framing is looked at.
        assert!(!chunked_prefix_is_invalid(
            BodyFraming::Length(2),
            b"zz\r\n"
        ));
        assert!(!chunked_prefix_is_invalid(BodyFraming::None, b"zz\r\n"));
    }

    #[test]
    fn no_body() {
        assert!(BodySkipper::new(BodyFraming::None).is_none());
    }
}
