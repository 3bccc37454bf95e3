use super::*;

const MAX: u64 = 16384;

fn frame(ty: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = FrameHeader::new(ty, payload.len() as u64).bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

/// What a request stream fed in pieces of `size` held: its sections (head
/// and trailers, marked) and its body, or the first violation.
#[derive(Debug, PartialEq, Eq)]
struct Read {
    sections: Vec<(bool, Vec<u8>)>,
    body: Vec<u8>,
}

fn read(input: &[u8], size: usize) -> Result<Read, Violation> {
    let mut reader = RequestReader::new(MAX, Vec::new());
    let mut got = Read {
        sections: Vec::new(),
        body: Vec::new(),
    };
    for piece in input.chunks(size) {
        let mut at = 0;
        loop {
            let (next, event) = reader.read(piece, at)?;
            at = next;
            match event {
                Some(Event::Headers) => got.sections.push((false, reader.section().to_vec())),
                Some(Event::Trailers) => got.sections.push((true, reader.section().to_vec())),
                Some(Event::Data(range)) => got.body.extend_from_slice(&piece[range]),
                None => break,
            }
        }
        assert_eq!(at, piece.len());
    }
    reader.end()?;
    Ok(got)
}

#[test]
fn rfc9000_a1_varints() {
    let cases: [(&[u8], u64); 5] = [
        (
            &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
            151_288_809_941_952_652,
        ),
        (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
        (&[0x7b, 0xbd], 15_293),
        (&[0x25], 37),
        (&[0x40, 0x25], 37),
    ];
    for (bytes, value) in cases {
        assert_eq!(varint(bytes), Some((value, bytes.len())));
        assert_eq!(varint(&bytes[..bytes.len() - 1]), None);
    }
    for value in [
        0,
        63,
        64,
        16383,
        16384,
        (1 << 30) - 1,
        1 << 30,
        (1 << 62) - 1,
    ] {
        let mut out = [0; VARINT_MAX_LEN];
        let n = put_varint(&mut out, value);
        assert_eq!(varint(&out[..n]), Some((value, n)), "{value}");
    }
}

#[test]
fn a_request_reads_the_same_whatever_the_pieces() {
    let head = frame(frame::HEADERS, b"\0\0\xd1");
    let reserved = frame(0x21, b"ignored");
    let grease = frame(0x1f * 7 + 0x21, &[7; 300]);
    let data = frame(frame::DATA, b"hello, ");
    let more = frame(frame::DATA, &[b'x'; 200]);
    let empty = frame(frame::DATA, b"");
    let trailers = frame(frame::HEADERS, b"\0\0\x5f\x1d\x01x");
    let input = [
        &head[..],
        &reserved,
        &data,
        &grease,
        &empty,
        &more,
        &trailers,
    ]
    .concat();
    let want = Read {
        sections: vec![
            (false, b"\0\0\xd1".to_vec()),
            (true, b"\0\0\x5f\x1d\x01x".to_vec()),
        ],
        body: [&b"hello, "[..], &[b'x'; 200]].concat(),
    };
    for size in 1..=input.len() {
        assert_eq!(
            read(&input, size),
            Ok(want.clone_read()),
            "{size}-byte pieces"
        );
    }
}

impl Read {
    fn clone_read(&self) -> Read {
        Read {
            sections: self.sections.clone(),
            body: self.body.clone(),
        }
    }
}

#[test]
fn frames_out_of_order_or_out_of_place_close_the_connection() {
    let unexpected = Err(Violation::Connection(code::FRAME_UNEXPECTED));
    let head = frame(frame::HEADERS, b"\0\0\xd1");
    // DATA before the head.
    assert_eq!(read(&frame(frame::DATA, b"x"), 1), unexpected);
    // Control frames, a push promise, and HTTP/2's frame types.
    for ty in [
        frame::SETTINGS,
        frame::GOAWAY,
        frame::MAX_PUSH_ID,
        frame::CANCEL_PUSH,
        frame::PUSH_PROMISE,
        0x2,
        0x6,
        0x8,
        0x9,
    ] {
        let input = [&head[..], &frame(ty, b"\0")].concat();
        assert_eq!(read(&input, 3), unexpected, "type {ty:#x}");
    }
    // Anything but unknown frames after trailers.
    let input = [&head[..], &head, &head].concat();
    assert_eq!(read(&input, 5), unexpected);
    let input = [&head[..], &head, &frame(frame::DATA, b"x")].concat();
    assert_eq!(read(&input, 5), unexpected);
}

#[test]
fn a_field_section_past_the_limit_fails_its_stream_at_its_header() {
    // Declared 2^40 bytes (an 8-byte varint): refused before any payload.
    let input = [0x01, 0xc0, 0, 0, 0x01, 0, 0, 0, 0];
    assert_eq!(
        read(&input, 1),
        Err(Violation::Stream(code::EXCESSIVE_LOAD))
    );
    let at_limit = frame(frame::HEADERS, &vec![0; MAX as usize]);
    let read_at_limit = read(&at_limit, 1000).unwrap();
    assert_eq!(read_at_limit.sections[0].1.len(), MAX as usize);
    let over = frame(frame::HEADERS, &vec![0; MAX as usize + 1]);
    assert_eq!(
        read(&over[..5], 5),
        Err(Violation::Stream(code::EXCESSIVE_LOAD))
    );
}

#[test]
fn a_stream_that_ends_early_is_an_error_of_its_kind() {
    let head = frame(frame::HEADERS, b"\0\0\xd1");
    // Before a head: the request is incomplete.
    assert_eq!(
        read(b"", 1),
        Err(Violation::Stream(code::REQUEST_INCOMPLETE))
    );
    // Inside a frame, or inside a frame header: a frame error.
    let frame_error = Err(Violation::Connection(code::FRAME_ERROR));
    assert_eq!(read(&head[..head.len() - 1], 1), frame_error);
    let cut = [&head[..], &[0x00, 0x05, b'a']].concat();
    assert_eq!(read(&cut, 2), frame_error);
    let split_header = [&head[..], &[0x40]].concat();
    assert_eq!(read(&split_header, 1), frame_error);
    // After a whole frame: fine.
    assert!(read(&head, 2).is_ok());
}

/// What the control stream said, fed in pieces of `size`.
fn control(input: &[u8], size: usize) -> Result<Vec<Control>, Violation> {
    let mut reader = ControlReader::default();
    let mut said = Vec::new();
    for piece in input.chunks(size) {
        reader.read(piece, |c| said.push(c))?;
    }
    Ok(said)
}

#[test]
fn staticds_own_preface_reads_back_as_its_settings() {
    let preface = control_stream_preface(MAX);
    assert_eq!(preface, [0x00, 0x04, 0x05, 0x06, 0x80, 0x00, 0x40, 0x00]);
    let settings = Settings {
        max_field_section: Some(MAX),
    };
    for size in 1..preface.len() {
        assert_eq!(
            control(&preface[1..], size),
            Ok(vec![Control::Settings(settings)])
        );
    }
    assert_eq!(goaway(4), [0x07, 0x01, 0x04]);
    assert_eq!(goaway(1 << 20), [0x07, 0x04, 0x80, 0x10, 0x00, 0x00]);
}

#[test]
fn the_control_stream_starts_with_settings_once() {
    let settings = frame(frame::SETTINGS, &[0x06, 0x44, 0x00, 0x21, 0x00]);
    let goaway = frame(frame::GOAWAY, &[0x08]);
    assert_eq!(
        control(&goaway, 1),
        Err(Violation::Connection(code::MISSING_SETTINGS))
    );
    let grease_first = [&frame(0x21, b"")[..], &settings].concat();
    assert_eq!(
        control(&grease_first, 1),
        Err(Violation::Connection(code::MISSING_SETTINGS))
    );
    let twice = [&settings[..], &settings].concat();
    assert_eq!(
        control(&twice, 3),
        Err(Violation::Connection(code::FRAME_UNEXPECTED))
    );
    let both = [&settings[..], &goaway].concat();
    let settings = Settings {
        max_field_section: Some(0x400),
    };
    assert_eq!(
        control(&both, 2),
        Ok(vec![Control::Settings(settings), Control::Goaway(8)])
    );
    for ty in [frame::DATA, frame::HEADERS, frame::PUSH_PROMISE, 0x6] {
        let input = [&frame(frame::SETTINGS, b"")[..], &frame(ty, b"\0")].concat();
        assert_eq!(
            control(&input, 4),
            Err(Violation::Connection(code::FRAME_UNEXPECTED)),
            "{ty:#x}"
        );
    }
}

#[test]
fn settings_refuse_http2_identifiers_repeats_and_pairs_cut_short() {
    let settings_error = Err(Violation::Connection(code::SETTINGS_ERROR));
    for id in [0x2, 0x3, 0x4, 0x5] {
        assert_eq!(
            control(&frame(frame::SETTINGS, &[id, 0]), 1),
            settings_error
        );
    }
    assert_eq!(
        control(&frame(frame::SETTINGS, &[0x06, 1, 0x06, 2]), 1),
        settings_error
    );
    assert_eq!(
        control(&frame(frame::SETTINGS, &[0x21, 1, 0x21, 2]), 1),
        settings_error
    );
    let frame_error = Err(Violation::Connection(code::FRAME_ERROR));
    assert_eq!(control(&frame(frame::SETTINGS, &[0x06]), 1), frame_error);
    // A 64 MiB SETTINGS frame is refused at its header.
    let huge = [0x04, 0x84, 0, 0, 0];
    assert_eq!(
        control(&huge, 2),
        Err(Violation::Connection(code::EXCESSIVE_LOAD))
    );
}

#[test]
fn push_ids_and_goaways_go_one_way() {
    let settings = frame(frame::SETTINGS, b"");
    let id_error = Err(Violation::Connection(code::ID_ERROR));
    let up = [
        &settings[..],
        &frame(frame::GOAWAY, &[4]),
        &frame(frame::GOAWAY, &[8]),
    ]
    .concat();
    assert_eq!(control(&up, 1), id_error);
    let down = [
        &settings[..],
        &frame(frame::GOAWAY, &[8]),
        &frame(frame::GOAWAY, &[4]),
    ]
    .concat();
    assert_eq!(
        control(&down, 1),
        Ok(vec![
            Control::Settings(Settings::default()),
            Control::Goaway(8),
            Control::Goaway(4)
        ])
    );
    let lowered = [
        &settings[..],
        &frame(frame::MAX_PUSH_ID, &[8]),
        &frame(frame::MAX_PUSH_ID, &[4]),
    ]
    .concat();
    assert_eq!(control(&lowered, 1), id_error);
    let cancel = [&settings[..], &frame(frame::CANCEL_PUSH, &[0])].concat();
    assert_eq!(control(&cancel, 1), id_error);
    let trailing = [&settings[..], &frame(frame::GOAWAY, &[4, 0])].concat();
    assert_eq!(
        control(&trailing, 1),
        Err(Violation::Connection(code::FRAME_ERROR))
    );
}

#[test]
fn unknown_control_frames_are_skipped_however_long() {
    // A reserved frame declared as 1 MiB, sent in full: nothing is held.
    let mut input = frame(frame::SETTINGS, b"");
    input.extend_from_slice(FrameHeader::new(0x21, 1 << 20).bytes());
    input.extend(std::iter::repeat_n(0xaa, 1 << 20));
    input.extend_from_slice(&frame(frame::GOAWAY, &[0]));
    let said = control(&input, 4096).unwrap();
    assert_eq!(
        said,
        vec![Control::Settings(Settings::default()), Control::Goaway(0)]
    );
    assert_eq!(
        ControlReader::default().end(),
        Violation::Connection(code::CLOSED_CRITICAL_STREAM)
    );
}
