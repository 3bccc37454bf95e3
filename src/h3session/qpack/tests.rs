use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

type Lines = Vec<(String, String)>;

fn decoded(section: &[u8]) -> Result<Lines, Stop<()>> {
    let mut lines = Vec::new();
    decode(section, |n: &[u8], v: &[u8]| {
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        lines.push((text(n), text(v)));
        Ok::<(), ()>(())
    })?;
    Ok(lines)
}

fn lines(pairs: &[(&str, &str)]) -> Lines {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn rfc9204_b1_a_literal_with_a_static_name_reference() {
    // RFC 9204 Appendix B.1, stream 4's HEADERS payload.
    let section = hex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
    assert_eq!(decoded(&section), Ok(lines(&[(":path", "/index.html")])));
}

#[test]
fn rfc9204_b2_dynamic_references_fail_the_section() {
    // Appendix B.2: a section whose Required Insert Count is 2, then one
    // with count 0 but a post-base index, and one with a dynamic index.
    let failed = Err(Stop::Qpack(Error::Section));
    assert_eq!(decoded(&hex("0381 10 11")), failed);
    assert_eq!(decoded(&hex("0000 10")), failed);
    assert_eq!(decoded(&hex("0000 80")), failed);
    assert_eq!(decoded(&hex("0000 40 00")), failed);
    assert_eq!(Error::Section.code(), 0x200);
}

#[test]
fn rfc9204_b2_an_encoder_stream_that_inserts_is_an_error() {
    // Appendix B.2's encoder stream: Set Dynamic Table Capacity 220, then
    // insertions.
    let mut stream = EncoderStream::default();
    assert_eq!(stream.read(&hex("3fbd01")), Err(Error::EncoderStream));
    let mut stream = EncoderStream::default();
    let insert = hex("c00f 7777 772e 6578 616d 706c 652e 636f 6d");
    assert_eq!(stream.read(&insert), Err(Error::EncoderStream));
    assert_eq!(Error::EncoderStream.code(), 0x201);
}

#[test]
fn an_encoder_stream_may_set_capacity_zero_in_pieces() {
    let mut stream = EncoderStream::default();
    assert_eq!(stream.read(&[0x20, 0x20]), Ok(()));
    // 0x3f alone is the start of a larger capacity: not yet an error.
    assert_eq!(stream.read(&[0x3f]), Ok(()));
    assert_eq!(stream.read(&[0x00]), Err(Error::EncoderStream));
}

#[test]
fn a_decoder_stream_may_cancel_streams_but_not_acknowledge() {
    let mut stream = DecoderStream::default();
    // Stream Cancellation of stream 4, and of stream 100 in two pieces.
    assert_eq!(stream.read(&[0x44, 0x7f]), Ok(()));
    assert_eq!(stream.read(&[0x25]), Ok(()));
    // Section Acknowledgment (Appendix B.2's 0x84) and Insert Count
    // Increment (0x01) refer to dynamic state staticd never made.
    assert_eq!(stream.read(&[0x84]), Err(Error::DecoderStream));
    let mut stream = DecoderStream::default();
    assert_eq!(stream.read(&[0x01]), Err(Error::DecoderStream));
    assert_eq!(Error::DecoderStream.code(), 0x202);
}

#[test]
fn a_decoder_stream_of_endless_continuation_bytes_is_an_error() {
    let mut stream = DecoderStream::default();
    let mut verdict = Ok(());
    for _ in 0..16 {
        verdict = verdict.and(stream.read(&[0x7f, 0xff]));
    }
    assert_eq!(verdict, Err(Error::DecoderStream));
}

#[test]
fn rfc7541_c1_prefixed_integers() {
    // RFC 7541 C.1: 10 and 1337 in a 5-bit prefix, 42 from a byte boundary.
    assert_eq!(integer(&[0x0a], 5), Some((10, 1)));
    assert_eq!(integer(&hex("1f9a0a"), 5), Some((1337, 3)));
    assert_eq!(integer(&[0x2a], 8), Some((42, 1)));
    for (value, bits) in [
        (10, 5),
        (1337, 5),
        (42, 8),
        (0, 6),
        (62, 6),
        (63, 6),
        (1 << 20, 4),
    ] {
        let mut out = Vec::new();
        put_integer(&mut out, bits, 0, value);
        assert_eq!(
            integer(&out, bits),
            Some((value as u64, out.len())),
            "{value}"
        );
    }
    assert_eq!(hex("1f9a0a"), {
        let mut out = Vec::new();
        put_integer(&mut out, 5, 0, 1337);
        out
    });
    // Cut short, or past the bound.
    assert_eq!(integer(&hex("1f9a"), 5), None);
    assert_eq!(integer(&hex("1fffffffffff7f"), 5), None);
}

#[test]
fn rfc7541_c4_huffman_coded_values_and_names() {
    // RFC 7541 C.4.1's "www.example.com", as :authority by static name.
    let section = hex("0000 508c f1e3 c2e5 f23a 6ba0 ab90 f4ff");
    assert_eq!(
        decoded(&section),
        Ok(lines(&[(":authority", "www.example.com")]))
    );
    // C.4.3's custom-key: custom-value, both coded, as a literal name
    // (0 0 1 N=0 H=1 len 7+1).
    let section = hex("0000 2f01 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
    assert_eq!(
        decoded(&section),
        Ok(lines(&[("custom-key", "custom-value")]))
    );
    // Padding that is not a prefix of EOS, and a truncated literal.
    assert!(decoded(&hex("0000 5081 00")).is_err());
    assert!(decoded(&hex("0000 508c f1e3")).is_err());
}

#[test]
fn a_refused_field_stops_the_section_with_the_callers_reason() {
    let section = hex("0000 d1 d7");
    let mut seen = 0;
    let result = decode(&section, |_, _| {
        seen += 1;
        Err("no")
    });
    assert_eq!(result, Err(Stop::Field("no")));
    assert_eq!(seen, 1);
}

#[test]
fn a_response_encodes_with_the_static_table_and_decodes_back() {
    let fields = [
        (":status", "200"),
        ("content-type", "text/html; charset=utf-8"),
        ("content-length", "1234"),
        ("accept-ranges", "bytes"),
        ("server", "staticd"),
        ("x-release", "b"),
        ("date", "Sat, 05 Dec 2026 12:00:00 GMT"),
    ];
    let mut out = Vec::new();
    Encoder::start(&mut out);
    Encoder::status(&mut out, 200);
    for (n, v) in &fields[1..] {
        Encoder::field(&mut out, n.as_bytes(), v.as_bytes());
    }
    // :status 200 is index 25, the HTML type 52, content-length by name (4).
    assert_eq!(&out[..5], &[0, 0, 0xc0 | 25, 0xc0 | 52, 0x50 | 4]);
    assert_eq!(decoded(&out), Ok(lines(&fields)));
}

#[test]
fn statuses_outside_the_table_and_long_literals_round_trip() {
    let long = "v".repeat(300);
    let mut out = Vec::new();
    Encoder::start(&mut out);
    Encoder::status(&mut out, 416);
    Encoder::status(&mut out, 206);
    Encoder::field(&mut out, b"a-rather-long-field-name", long.as_bytes());
    let want = [
        (":status", "416"),
        (":status", "206"),
        ("a-rather-long-field-name", &long[..]),
    ];
    assert_eq!(decoded(&out), Ok(lines(&want)));
}

#[test]
fn every_static_entry_decodes_by_index() {
    for (index, (name, value)) in STATIC_TABLE.iter().enumerate() {
        let mut section = vec![0, 0];
        put_integer(&mut section, 6, 0xc0, index);
        let mut got = Vec::new();
        decode(&section, |n, v| {
            got.push((n.to_vec(), v.to_vec()));
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(got, vec![(name.to_vec(), value.to_vec())]);
    }
    let mut section = vec![0, 0];
    put_integer(&mut section, 6, 0xc0, STATIC_TABLE.len());
    assert_eq!(decoded(&section), Err(Stop::Qpack(Error::Section)));
}
