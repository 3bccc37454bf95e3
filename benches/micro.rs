//! `cargo bench --bench micro`: what one request for a small, already
//! cached file costs staticd without any I/O: parse the head, resolve the
//! path, decide the response. The comparison with other servers is
//! `cargo bench --bench compare` (see benches/README.md).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use staticd::config::Features;
use staticd::http::parse::{self, Parsed};
use staticd::http::response::{encode, Http1};
use staticd::respond::{self, Answer};
use staticd::site::Site;

/// What a browser-like client sends, give or take a few headers.
const REQUEST: &[u8] = b"GET /small.txt HTTP/1.1\r\nHost: localhost\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64) micro-bench\r\n\
Accept: text/html,application/xhtml+xml,*/*;q=0.8\r\n\
Accept-Encoding: gzip, deflate, br\r\nConnection: keep-alive\r\n\r\n";

/// Parse, resolve, respond and encode the head as HTTP/1.1; returns the
/// head's length and status.
fn answer(site: &Site, raw: &[u8]) -> (usize, u16) {
    let Parsed::Complete { request, .. } = parse::parse(raw) else {
        panic!("the benchmark request does not parse");
    };
    match respond::respond(site, &request, false) {
        Answer::Send(response) => {
            let conn = Http1 {
                minor_version: response.minor_version,
                close: response.close,
                hsts: None,
                alt_svc: None,
            };
            let mut wire = Vec::with_capacity(512);
            encode(&response.head, &conn, &mut wire);
            (wire.len(), response.code())
        }
        Answer::Cgi(_) => panic!("the benchmark file is not a script"),
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join("small.txt"), vec![b'a'; 1000]).expect("write small.txt");
    let site = Site::open(dir.path(), &["index.html"], Features::default()).expect("open the site");
    // The first answer fills the open-file cache; every later one hits it.
    assert_eq!(answer(&site, REQUEST).1, 200, "small.txt must be served");

    c.bench_function("parse", |b| {
        b.iter(|| matches!(parse::parse(black_box(REQUEST)), Parsed::Complete { .. }))
    });
    c.bench_function("parse+resolve+respond, cached 1 KB file", |b| {
        b.iter(|| answer(&site, black_box(REQUEST)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
