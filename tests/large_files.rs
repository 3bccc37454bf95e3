//! Big bodies: a client that stops reading, a file that shrinks mid-send, a file past
//! 4 GiB. Every test runs in both modes.

#[macro_use]
mod common;

use std::fs;
use std::os::unix::fs::FileExt;
use std::thread;
use std::time::Duration;

use common::*;

const BIG: u64 = 64 << 20;

fn big_site() -> Docroot {
    let root = Docroot::new();
    root.file("small.txt", "small\n");
    write_pattern_file(&root.join("big.bin"), BIG);
    root
}

fn client_that_stops_reading_is_dropped_after_send_timeout(v: Variant) {
    let root = big_site();
    let mut server = Server::builder(v, root.path())
        .args(["--send-timeout", "1"])
        .start();
    let mut conn = server.connect();
    conn.send(request("GET", "/big.bin", &[]));
    // Read nothing until the server has given up on us.
    match v.mode {
        Mode::Inetd => {
            server.wait_inetd_exits(1);
        }
        Mode::Standalone => thread::sleep(Duration::from_secs(4)),
    }
    let head = conn.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(BIG));
    let (received, _) = conn.count_to_end();
    assert!(
        received < BIG,
        "the server sent all {BIG} bytes to a client that did not read for seconds"
    );
    server.assert_survived("/small.txt");
}

fn file_shrinking_while_sent_ends_the_response_early(v: Variant) {
    let root = big_site();
    let mut server = Server::start(v, &root);
    let mut conn = server.connect();
    conn.send(request("GET", "/big.bin", &[]));
    let head = conn.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(BIG));
    fs::File::options()
        .write(true)
        .open(root.join("big.bin"))
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let (body, _) = conn.read_to_end();
    assert!(
        (body.len() as u64) < BIG,
        "got all {BIG} bytes of a file truncated to 1 MiB: padded"
    );
    assert!(
        body == pattern(body.len()),
        "the body does not match the file's content (padding or garbage)"
    );
    server.assert_survived("/small.txt");
}

fn file_over_4_gib_has_exact_length_and_ranges_past_4_gib(v: Variant) {
    const SIZE: u64 = 5 << 30;
    const MARKER_AT: u64 = 4_831_838_208; // 4.5 GiB
    const MARKER: &[u8] = b"past-four-gibibytes";
    let root = Docroot::new();
    let file = fs::File::create(root.join("huge.bin")).unwrap();
    file.set_len(SIZE).unwrap(); // sparse: costs no disk
    file.write_all_at(MARKER, MARKER_AT).unwrap();
    drop(file);
    let server = Server::start(v, &root);

    let head = server.request("HEAD", "/huge.bin", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("5368709120"));

    let last = MARKER_AT + MARKER.len() as u64 - 1;
    let resp = server.request(
        "GET",
        "/huge.bin",
        &[("range", &format!("bytes={MARKER_AT}-{last}"))],
    );
    assert_eq!(resp.status, 206);
    assert_eq!(
        resp.header("content-range"),
        Some(format!("bytes {MARKER_AT}-{last}/{SIZE}").as_str())
    );
    assert_eq!(resp.body, MARKER);

    let tail = server.request("GET", "/huge.bin", &[("range", "bytes=-16")]);
    assert_eq!(tail.status, 206);
    assert_eq!(
        tail.header("content-range"),
        Some(format!("bytes {}-{}/{SIZE}", SIZE - 16, SIZE - 1).as_str())
    );
    assert_eq!(tail.body, [0u8; 16]);
}

// On raw HTTP/1.1 connections over TCP in every cell: no h3 cell (tests/http3.rs has a
// file that shrinks under an HTTP/3 response).
matrix!([h1, tls, h2c, h2_tls, uring] both_modes:
    client_that_stops_reading_is_dropped_after_send_timeout,
    file_shrinking_while_sent_ends_the_response_early,
);
matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    file_over_4_gib_has_exact_length_and_ranges_past_4_gib,
);
