//! HPACK by hand (RFC 7541), strings never Huffman-coded: for the black-box tests
//! (through `h2frames`) and the unit tests of `h2session`, which include
//! this file by path.

/// An integer with an N-bit prefix (§5.1); `high` holds the bits above the prefix.
pub fn integer(out: &mut Vec<u8>, prefix_bits: u32, high: u8, value: usize) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A string literal (§5.2), not Huffman-coded.
pub fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 7, 0, s.len());
    out.extend_from_slice(s);
}

/// Literal header field without indexing, new name (§6.2.2).
pub fn literal(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(0x00);
    string(out, name.as_bytes());
    string(out, value);
}

/// Literal header field with incremental indexing, new name (§6.2.1): the field
/// becomes dynamic-table entry 62, pushing older ones down.
pub fn literal_indexed(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(0x40);
    string(out, name.as_bytes());
    string(out, value);
}

/// Indexed header field (§6.1): a reference to table entry `index`.
pub fn indexed(out: &mut Vec<u8>, index: usize) {
    integer(out, 7, 0x80, index);
}

/// The first dynamic-table index (§2.3.3).
pub const FIRST_DYNAMIC: usize = 62;

/// A request's pseudo-header fields, all literals without indexing.
pub fn request(method: &str, path: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + path.len());
    literal(&mut out, ":method", method.as_bytes());
    literal(&mut out, ":scheme", b"http");
    literal(&mut out, ":path", path.as_bytes());
    literal(&mut out, ":authority", b"localhost");
    out
}

/// The `:status` of a response header block, when it comes first as an indexed
/// static-table field (§A: 8..=14) or a literal with a plain (not Huffman) value
/// and the name of entry 8..=14; None for anything else (Huffman-coded values).
pub fn status(block: &[u8]) -> Option<u16> {
    const STATIC: [(u8, u16); 7] = [
        (8, 200),
        (9, 204),
        (10, 206),
        (11, 304),
        (12, 400),
        (13, 404),
        (14, 500),
    ];
    let first = *block.first()?;
    if first & 0x80 != 0 {
        let index = first & 0x7f;
        return STATIC.iter().find(|(i, _)| *i == index).map(|(_, s)| *s);
    }
    // Literal with (0x40), without (0x00) or never (0x10) indexing, indexed name.
    let name = if first & 0xc0 == 0x40 {
        first & 0x3f
    } else {
        first & 0x0f
    };
    if !(8..=14).contains(&name) {
        return None;
    }
    let len = *block.get(1)?;
    let value = block.get(2..2 + (len & 0x7f) as usize)?;
    let text = if len & 0x80 != 0 {
        huffman_digits(value)?
    } else {
        String::from_utf8(value.to_vec()).ok()?
    };
    text.parse().ok()
}

/// Decodes a Huffman-coded string of digits (§5.2, Appendix B: '0'..'2' have
/// 5-bit codes 0..2, '3'..'9' 6-bit codes 0x19..0x1f); None for anything else.
fn huffman_digits(bytes: &[u8]) -> Option<String> {
    let mut out = String::new();
    let (mut code, mut len) = (0u32, 0u32);
    for bit in bytes
        .iter()
        .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1))
    {
        code = code << 1 | bit as u32;
        len += 1;
        let digit = match (len, code) {
            (5, 0..=2) => Some(b'0' + code as u8),
            (6, 0x19..=0x1f) => Some(b'3' + (code - 0x19) as u8),
            _ => None,
        };
        if let Some(d) = digit {
            out.push(d as char);
            (code, len) = (0, 0);
        } else if len > 7 {
            return None;
        }
    }
    // What is left must be padding: fewer than 8 bits, all ones (the EOS prefix).
    (len < 8 && code == (1 << len) - 1).then_some(out)
}
