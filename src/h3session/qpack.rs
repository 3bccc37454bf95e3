//! QPACK (RFC 9204) as staticd speaks it: the static table and literals,
//! never the dynamic table. staticd advertises
//! `SETTINGS_QPACK_MAX_TABLE_CAPACITY` 0 and `SETTINGS_QPACK_BLOCKED_STREAMS`
//! 0, which RFC 9204 §3.2.3 allows: a client may then never refer to a
//! dynamic entry, and a field section that does is
//! QPACK_DECOMPRESSION_FAILED for the connection (§2.2.3). Nor does staticd
//! insert entries for its responses, so its encoder stream carries nothing
//! and the client's decoder stream has nothing to acknowledge.
//!
//! This is the one part of HTTP/3 hand-written here (no maintained sans-IO
//! QPACK crate builds with Rust and a C compiler alone). Huffman decoding
//! comes from Cloudflare's `octets`, as in quiche. Responses are encoded
//! without Huffman: a static server's fields are short, and raw literals
//! cost nothing to write.
//!
//! No I/O here: [`decode`] reads one whole field section (a HEADERS
//! frame's payload), [`Encoder`] writes one, [`EncoderStream`] and
//! [`DecoderStream`] check what the client's two QPACK streams carry.

/// QPACK's error codes (RFC 9204 §6), which close the connection.
pub mod code {
    pub const DECOMPRESSION_FAILED: u64 = 0x200;
    pub const ENCODER_STREAM_ERROR: u64 = 0x201;
    pub const DECODER_STREAM_ERROR: u64 = 0x202;
}

/// RFC 9204 Appendix A: the static table, in index order.
pub const STATIC_TABLE: [(&[u8], &[u8]); 99] = [
    (b":authority", b""),
    (b":path", b"/"),
    (b"age", b"0"),
    (b"content-disposition", b""),
    (b"content-length", b"0"),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"referer", b""),
    (b"set-cookie", b""),
    (b":method", b"CONNECT"),
    (b":method", b"DELETE"),
    (b":method", b"GET"),
    (b":method", b"HEAD"),
    (b":method", b"OPTIONS"),
    (b":method", b"POST"),
    (b":method", b"PUT"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"103"),
    (b":status", b"200"),
    (b":status", b"304"),
    (b":status", b"404"),
    (b":status", b"503"),
    (b"accept", b"*/*"),
    (b"accept", b"application/dns-message"),
    (b"accept-encoding", b"gzip, deflate, br"),
    (b"accept-ranges", b"bytes"),
    (b"access-control-allow-headers", b"cache-control"),
    (b"access-control-allow-headers", b"content-type"),
    (b"access-control-allow-origin", b"*"),
    (b"cache-control", b"max-age=0"),
    (b"cache-control", b"max-age=2592000"),
    (b"cache-control", b"max-age=604800"),
    (b"cache-control", b"no-cache"),
    (b"cache-control", b"no-store"),
    (b"cache-control", b"public, max-age=31536000"),
    (b"content-encoding", b"br"),
    (b"content-encoding", b"gzip"),
    (b"content-type", b"application/dns-message"),
    (b"content-type", b"application/javascript"),
    (b"content-type", b"application/json"),
    (b"content-type", b"application/x-www-form-urlencoded"),
    (b"content-type", b"image/gif"),
    (b"content-type", b"image/jpeg"),
    (b"content-type", b"image/png"),
    (b"content-type", b"text/css"),
    (b"content-type", b"text/html; charset=utf-8"),
    (b"content-type", b"text/plain"),
    (b"content-type", b"text/plain;charset=utf-8"),
    (b"range", b"bytes=0-"),
    (b"strict-transport-security", b"max-age=31536000"),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains",
    ),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains; preload",
    ),
    (b"vary", b"accept-encoding"),
    (b"vary", b"origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-xss-protection", b"1; mode=block"),
    (b":status", b"100"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"302"),
    (b":status", b"400"),
    (b":status", b"403"),
    (b":status", b"421"),
    (b":status", b"425"),
    (b":status", b"500"),
    (b"accept-language", b""),
    (b"access-control-allow-credentials", b"FALSE"),
    (b"access-control-allow-credentials", b"TRUE"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-allow-methods", b"get"),
    (b"access-control-allow-methods", b"get, post, options"),
    (b"access-control-allow-methods", b"options"),
    (b"access-control-expose-headers", b"content-length"),
    (b"access-control-request-headers", b"content-type"),
    (b"access-control-request-method", b"get"),
    (b"access-control-request-method", b"post"),
    (b"alt-svc", b"clear"),
    (b"authorization", b""),
    (
        b"content-security-policy",
        b"script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    (b"early-data", b"1"),
    (b"expect-ct", b""),
    (b"forwarded", b""),
    (b"if-range", b""),
    (b"origin", b""),
    (b"purpose", b"prefetch"),
    (b"server", b""),
    (b"timing-allow-origin", b"*"),
    (b"upgrade-insecure-requests", b"1"),
    (b"user-agent", b""),
    (b"x-forwarded-for", b""),
    (b"x-frame-options", b"deny"),
    (b"x-frame-options", b"sameorigin"),
];

/// A field section or instruction QPACK cannot read, or one that needs
/// the dynamic table staticd does not keep: the connection closes with
/// [`Error::code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A field section: QPACK_DECOMPRESSION_FAILED.
    Section,
    /// The client's encoder stream: QPACK_ENCODER_STREAM_ERROR.
    EncoderStream,
    /// The client's decoder stream: QPACK_DECODER_STREAM_ERROR.
    DecoderStream,
}

impl Error {
    pub fn code(self) -> u64 {
        match self {
            Error::Section => code::DECOMPRESSION_FAILED,
            Error::EncoderStream => code::ENCODER_STREAM_ERROR,
            Error::DecoderStream => code::DECODER_STREAM_ERROR,
        }
    }
}

/// Why [`decode`] stopped: QPACK could not read the section, or the
/// caller refused a field (a malformed request, say).
#[derive(Debug, PartialEq, Eq)]
pub enum Stop<E> {
    Qpack(Error),
    Field(E),
}

/// The largest integer accepted (RFC 9204 §4.1.1 leaves the bound to the
/// implementation): a length or an index past it cannot be in a section
/// bounded by SETTINGS_MAX_FIELD_SECTION_SIZE anyway, and it keeps the
/// sums below from overflowing.
const INTEGER_MAX: u64 = 1 << 32;

/// Reads a prefixed integer (RFC 7541 §5.1, as RFC 9204 §4.1.1 uses it)
/// whose first byte's low `bits` hold its start: the value and the bytes
/// it took. None if `bytes` ends first or the value is past INTEGER_MAX.
fn integer(bytes: &[u8], bits: u8) -> Option<(u64, usize)> {
    let mask = ((1u16 << bits) - 1) as u8;
    let first = bytes.first()? & mask;
    if first < mask {
        return Some((u64::from(first), 1));
    }
    let mut value = u64::from(mask);
    for (i, &b) in bytes.iter().enumerate().skip(1) {
        let shift = 7 * (i as u32 - 1);
        value += u64::from(b & 0x7f) << shift;
        if value > INTEGER_MAX {
            return None;
        }
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Writes a prefixed integer: `flags` in the first byte's high bits, the
/// value from its low `bits`.
fn put_integer(out: &mut Vec<u8>, bits: u8, flags: u8, value: usize) {
    let mask = (1usize << bits) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// A string literal (RFC 9204 §4.1.2) at the start of `bytes`, whose
/// first byte holds the Huffman flag at bit `bits` and the length in the
/// `bits` below it: the string as it was sent, whether it is
/// Huffman-coded, and the bytes it took.
fn literal(bytes: &[u8], bits: u8) -> Result<(&[u8], bool, usize), Error> {
    let huffman = bytes.first().ok_or(Error::Section)? & (1 << bits) != 0;
    let (len, n) = integer(bytes, bits).ok_or(Error::Section)?;
    let end = n + len as usize;
    let text = bytes.get(n..end).ok_or(Error::Section)?;
    Ok((text, huffman, end))
}

/// A string as sent, Huffman-decoded if it was coded.
enum Text<'a> {
    Raw(&'a [u8]),
    Decoded(Vec<u8>),
}

impl Text<'_> {
    fn of(text: &[u8], huffman: bool) -> Result<Text<'_>, Error> {
        if !huffman {
            return Ok(Text::Raw(text));
        }
        // Every symbol takes 5 bits at least: at most 8/5 of the coded length.
        let most = text.len() * 8 / 5 + 1;
        let mut coded = octets::Octets::with_slice(text);
        let decoded = coded.get_huffman_decoded_with_max_length(most);
        decoded.map(Text::Decoded).map_err(|_| Error::Section)
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Text::Raw(b) => b,
            Text::Decoded(v) => v,
        }
    }
}

/// A static table entry by index: a dynamic reference (`static_ref`
/// false) or an index past the table fails the section.
fn entry(index: u64, static_ref: bool) -> Result<(&'static [u8], &'static [u8]), Error> {
    match static_ref {
        true => STATIC_TABLE
            .get(index as usize)
            .copied()
            .ok_or(Error::Section),
        false => Err(Error::Section),
    }
}

/// Decodes one field section (a HEADERS frame's payload), handing each
/// field line to `field(name, value)` in order. Names are passed as sent:
/// HTTP/3's rules on them (lowercase, pseudo-fields first) are the
/// caller's. A section that refers to the dynamic table, or that is cut
/// short or malformed, is [`Error::Section`].
pub fn decode<E>(
    section: &[u8],
    mut field: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
) -> Result<(), Stop<E>> {
    let fail = Stop::Qpack(Error::Section);
    // The prefix (§4.5.1): Required Insert Count, then the Base's sign and
    // delta. With no dynamic table the count must be 0 (§4.5.1.1), and the
    // Base means nothing.
    let (required_insert_count, n) = integer(section, 8).ok_or(fail)?;
    if required_insert_count != 0 {
        return Err(Stop::Qpack(Error::Section));
    }
    let (_, m) = integer(&section[n..], 7).ok_or(Stop::Qpack(Error::Section))?;
    let mut rest = &section[n + m..];
    while let Some(&first) = rest.first() {
        let took = line(rest, first, &mut field)?;
        rest = &rest[took..];
    }
    Ok(())
}

/// Decodes the field line at the start of `bytes` (whose first byte is
/// `first`), hands it on, and returns the bytes it took.
fn line<E>(
    bytes: &[u8],
    first: u8,
    field: &mut impl FnMut(&[u8], &[u8]) -> Result<(), E>,
) -> Result<usize, Stop<E>> {
    let qpack = Stop::Qpack;
    if first & 0x80 != 0 {
        // Indexed field line (§4.5.2): 1 T index(6).
        let (index, n) = integer(bytes, 6).ok_or(qpack(Error::Section))?;
        let (name, value) = entry(index, first & 0x40 != 0).map_err(qpack)?;
        field(name, value).map_err(Stop::Field)?;
        Ok(n)
    } else if first & 0x40 != 0 {
        // Literal field line with name reference (§4.5.4): 0 1 N T index(4).
        let (index, n) = integer(bytes, 4).ok_or(qpack(Error::Section))?;
        let (name, _) = entry(index, first & 0x10 != 0).map_err(qpack)?;
        let (value, huffman, m) = literal(&bytes[n..], 7).map_err(qpack)?;
        let value = Text::of(value, huffman).map_err(qpack)?;
        field(name, value.bytes()).map_err(Stop::Field)?;
        Ok(n + m)
    } else if first & 0x20 != 0 {
        // Literal field line with literal name (§4.5.6): 0 0 1 N H len(3).
        let (name, name_huffman, n) = literal(bytes, 3).map_err(qpack)?;
        let (value, huffman, m) = literal(&bytes[n..], 7).map_err(qpack)?;
        let name = Text::of(name, name_huffman).map_err(qpack)?;
        let value = Text::of(value, huffman).map_err(qpack)?;
        field(name.bytes(), value.bytes()).map_err(Stop::Field)?;
        Ok(n + m)
    } else {
        // Post-base forms (§4.5.3, §4.5.5) name dynamic entries only.
        Err(qpack(Error::Section))
    }
}

/// How a field is best written with the static table alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Match {
    /// An entry holds the name and the value.
    Whole(usize),
    /// An entry holds the name.
    Name(usize),
    None,
}

/// The static entry for a field (its name in any case): whole if one
/// matches name and value, else the first with its name.
fn find(name: &[u8], value: &[u8]) -> Match {
    let mut best = Match::None;
    for (index, &(n, v)) in STATIC_TABLE.iter().enumerate() {
        if !n.eq_ignore_ascii_case(name) {
            continue;
        }
        if v == value {
            return Match::Whole(index);
        }
        if best == Match::None {
            best = Match::Name(index);
        }
    }
    best
}

/// Writes field sections of staticd's responses: the static table where
/// it holds the field, raw literals for the rest.
pub struct Encoder;

impl Encoder {
    /// Starts a field section in `out`: its prefix, which says it needs no
    /// dynamic entry (Required Insert Count 0, Base 0).
    pub fn start(out: &mut Vec<u8>) {
        out.extend_from_slice(&[0, 0]);
    }

    /// Appends one field line, its name lowercased as HTTP/3 wants (§4.2).
    pub fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        match find(name, value) {
            // 1 T=1 index(6)
            Match::Whole(index) => put_integer(out, 6, 0xc0, index),
            // 0 1 N=0 T=1 index(4), then the value
            Match::Name(index) => {
                put_integer(out, 4, 0x50, index);
                put_integer(out, 7, 0x00, value.len());
                out.extend_from_slice(value);
            }
            // 0 0 1 N=0 H=0 len(3), the name, then the value
            Match::None => {
                put_integer(out, 3, 0x20, name.len());
                out.extend(name.iter().map(u8::to_ascii_lowercase));
                put_integer(out, 7, 0x00, value.len());
                out.extend_from_slice(value);
            }
        }
    }

    /// Appends `:status`.
    pub fn status(out: &mut Vec<u8>, status: u16) {
        let mut digits = [0u8; 3];
        let mut s = status.min(999);
        for d in digits.iter_mut().rev() {
            *d = b'0' + (s % 10) as u8;
            s /= 10;
        }
        Encoder::field(out, b":status", &digits);
    }
}

/// Reads the client's encoder stream (RFC 9204 §4.3), which may only set
/// the dynamic table's capacity to 0: any insertion exceeds the capacity
/// staticd allowed (0), and a capacity above it is an error (§4.3.1).
#[derive(Default)]
pub struct EncoderStream {
    /// An instruction split between reads: its start.
    held: Vec<u8>,
}

/// Reads the client's decoder stream (RFC 9204 §4.4). staticd's sections
/// never need acknowledging, so a Section Acknowledgment or an Insert
/// Count Increment is an error (§4.4.1, §4.4.3); Stream Cancellations may
/// come and mean nothing.
#[derive(Default)]
pub struct DecoderStream {
    held: Vec<u8>,
}

/// Takes the whole instructions of `held` + `bytes`, each checked by
/// `instruction` (which returns the bytes one took, None if it is not
/// whole), keeping a partial one's start. A partial instruction longer
/// than an integer can be is an error.
fn instructions(
    held: &mut Vec<u8>,
    bytes: &[u8],
    error: Error,
    instruction: impl Fn(&[u8]) -> Result<Option<usize>, Error>,
) -> Result<(), Error> {
    held.extend_from_slice(bytes);
    let mut at = 0;
    while at < held.len() {
        match instruction(&held[at..])? {
            Some(took) => at += took,
            None => break,
        }
    }
    held.drain(..at);
    // The longest instruction that may come whole is an integer: 1 + 5
    // bytes up to INTEGER_MAX.
    match held.len() > 8 {
        true => Err(error),
        false => Ok(()),
    }
}

/// A prefixed integer that is whole, too large, or not yet whole.
fn whole_integer(bytes: &[u8], bits: u8, error: Error) -> Result<Option<(u64, usize)>, Error> {
    match integer(bytes, bits) {
        Some(found) => Ok(Some(found)),
        // Cut short, or past INTEGER_MAX: the latter only once the
        // continuation bytes seen already pass it.
        None if bytes[1..].iter().all(|b| b & 0x80 != 0) && bytes.len() < 7 => Ok(None),
        None => Err(error),
    }
}

impl EncoderStream {
    /// The stream's next bytes.
    pub fn read(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let error = Error::EncoderStream;
        instructions(&mut self.held, bytes, error, |b| {
            // Set Dynamic Table Capacity: 0 0 1 capacity(5), and only 0.
            if b[0] & 0xe0 != 0x20 {
                return Err(error);
            }
            match whole_integer(b, 5, error)? {
                Some((0, n)) => Ok(Some(n)),
                Some(_) => Err(error),
                None => Ok(None),
            }
        })
    }
}

impl DecoderStream {
    /// The stream's next bytes.
    pub fn read(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let error = Error::DecoderStream;
        instructions(&mut self.held, bytes, error, |b| {
            // Stream Cancellation: 0 1 stream id(6). The others (Section
            // Acknowledgment 1..., Insert Count Increment 0 0 ...) refer
            // to dynamic state staticd never made.
            if b[0] & 0xc0 != 0x40 {
                return Err(error);
            }
            Ok(whole_integer(b, 6, error)?.map(|(_, n)| n))
        })
    }
}

#[cfg(test)]
mod tests;
