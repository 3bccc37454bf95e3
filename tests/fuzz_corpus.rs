//! Replays the committed fuzz corpus (fuzz/corpus/<target>/) through the
//! same invariant checks the cargo-fuzz targets run, so that `cargo test`
//! exercises them on stable, without nightly or cargo-fuzz installed.

#[path = "../fuzz/src/checks.rs"]
mod checks;

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `check` on every input of the target's corpus, naming the input
/// that breaks an invariant.
fn replay(target: &str, check: fn(&[u8])) {
    let files = corpus(target);
    assert!(
        files.len() >= 5,
        "fuzz/corpus/{target} holds only {} inputs",
        files.len()
    );
    for file in files {
        let data = fs::read(&file).unwrap();
        if let Err(cause) = panic::catch_unwind(AssertUnwindSafe(|| check(&data))) {
            eprintln!("invariant broken by {}", file.display());
            panic::resume_unwind(cause);
        }
    }
}

#[test]
fn parse_request_corpus() {
    replay("parse_request", checks::parse_request);
}

#[test]
fn range_corpus() {
    replay("range", checks::range);
}

#[test]
fn path_corpus() {
    replay("path", checks::path);
}

#[test]
fn vhost_corpus() {
    replay("vhost", checks::vhost);
}

#[test]
fn negotiate_corpus() {
    replay("negotiate", checks::negotiate);
}

#[test]
fn cgi_header_corpus() {
    replay("cgi_header", checks::cgi_header);
}

#[test]
fn headers_file_corpus() {
    replay("headers_file", checks::headers_file);
}

#[test]
fn redirects_file_corpus() {
    replay("redirects_file", checks::redirects_file);
}

/// Every fuzz target has a corpus directory and every corpus directory a
/// target, so a new target cannot go without its replay.
#[test]
fn every_target_has_a_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let names = |dir: &str, strip: &str| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .map(|n| n.trim_end_matches(strip).to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("fuzz_targets", ".rs"), names("corpus", ""));
}

#[cfg(feature = "tls")]
#[test]
fn tls_session_corpus() {
    replay("tls_session", checks::tls_session);
}

#[cfg(feature = "http2")]
#[test]
fn h2_connection_corpus() {
    replay("h2_connection", checks::h2_connection);
}

#[cfg(feature = "http3")]
#[test]
fn h3_reader_corpus() {
    replay("h3_reader", checks::h3_reader);
}

#[cfg(feature = "http3")]
#[test]
fn qpack_corpus() {
    replay("qpack", checks::qpack);
}

#[cfg(feature = "http3")]
#[test]
fn h3_connection_corpus() {
    replay("h3_connection", checks::h3_connection);
}

/// The h3_connection seeds are what [`h3_seeds`] writes, so that each is
/// reproducible and readable as the actions it is. To write them again
/// after changing one: `STATICD_WRITE_SEEDS=1 cargo test --test
/// fuzz_corpus h3_connection_seeds`.
#[cfg(feature = "http3")]
#[test]
fn h3_connection_seeds_are_generated() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/h3_connection");
    let write = std::env::var_os("STATICD_WRITE_SEEDS").is_some();
    for (name, script) in h3_seeds() {
        let path = dir.join(name);
        if write {
            fs::create_dir_all(&dir).unwrap();
            fs::write(&path, &script.0).unwrap();
        }
        let committed = fs::read(&path).unwrap_or_default();
        assert!(
            committed == script.0,
            "{} differs from its generator",
            path.display()
        );
    }
}

/// The seeds of `h3_connection` (see checks::h3_script for the actions;
/// REQUESTS' indexes: 0 GET /a.txt, 1 GET /big.bin, 2 HEAD /a.txt, 3 GET
/// /missing.txt, 4 a range of big.bin, 5 POST with Content-Length, 6 and 7
/// paths out of the root, 8 GET /, 9 If-None-Match, 10 two ranges, 11
/// OPTIONS *; UNI_TYPES': 0 control, 1 push, 2 QPACK encoder, 3 decoder, 4
/// grease, 5 unknown; a time argument below 200 is 5 ms steps, from 200 on
/// seconds).
#[cfg(feature = "http3")]
fn h3_seeds() -> Vec<(&'static str, checks::h3_script::Script)> {
    use checks::h3_script::Script;
    // The client's control stream: its SETTINGS (empty), as it opens.
    let settings = || Script::default().uni(0, &[0x04, 0x00]);
    // GET /a.txt's HEADERS frame, written raw (not one of REQUESTS).
    let section = staticd::h3session::loopback::section("GET", "/a.txt");
    let header = staticd::h3session::frames::FrameHeader::new(0x01, section.len() as u64);
    let get_a = &[header.bytes(), &section].concat();
    vec![
        ("get", settings().request(0, true).run()),
        (
            "several_streams",
            settings()
                .request(0, true)
                .request(1, true)
                .request(3, true)
                .request(4, true)
                .request(10, true)
                .run()
                .advance(5),
        ),
        ("head", settings().request(2, true).run()),
        (
            "missing_and_outside_the_root",
            settings()
                .request(3, true)
                .request(6, true)
                .request(7, true)
                .request(8, true)
                .request(11, true)
                .run(),
        ),
        (
            "dynamic_table_reference",
            settings()
                .open(&[0x01, 0x03, 0x02, 0x00, 0x80])
                .finish(0)
                .run(),
        ),
        (
            "head_never_ends",
            settings()
                .open(&[0x01, 0x20, 0x00, 0x00])
                .run()
                .advance(200)
                .advance(201)
                .advance(200),
        ),
        (
            "client_goaway",
            settings()
                .request(1, true)
                .deliver()
                .uni_write(0, &[0x07, 0x01, 0x00])
                .run(),
        ),
        (
            // A GET with a body (so answered at once), reset by the client
            // while its response is on its way; another GET stopped
            // (STOP_SENDING) while its response is.
            "reset_mid_response",
            settings()
                .request(1, false)
                .write(0, &[0x00, 0x01, b'x'])
                .deliver()
                .reset(0, 0x0c)
                .request(1, true)
                .deliver()
                .stop_sending(1, 0x0c)
                .run()
                .advance(5),
        ),
        (
            "control_data_frame",
            Script::default()
                .uni(0, &[0x04, 0x00, 0x00, 0x02, 0x61, 0x62])
                .request(0, true)
                .run(),
        ),
        (
            "control_settings_twice",
            settings()
                .request(1, true)
                .deliver()
                .uni_write(0, &[0x04, 0x00])
                .run(),
        ),
        (
            "grease_and_unknown_uni",
            settings()
                .uni(4, b"grease, to be dropped")
                .uni(5, b"nobody's type")
                .uni(2, &[0x20])
                .uni(3, &[0x41])
                .request(0, true)
                .run()
                .uni_end(1, false)
                .run(),
        ),
        (
            "push_stream",
            settings().uni(1, &[0x00]).request(0, true).run(),
        ),
        (
            "stop_mid_response",
            settings()
                .request(1, true)
                .deliver()
                .stop(202)
                .request(0, true)
                .run(),
        ),
        (
            // Idle after a response: open at 4 s, GOAWAY past the 5 s
            // keep-alive timeout, closed a second later, long before a
            // minute passes.
            "long_idle",
            settings()
                .request(0, true)
                .run()
                .advance(10)
                .advance(203)
                .advance(201)
                .advance(255)
                .request(0, true)
                .run(),
        ),
        (
            "post_with_body",
            settings()
                .request(5, false)
                .write(0, &[0x00, 0x05, b'h', b'e', b'l', b'l', b'o'])
                .finish(0)
                .run(),
        ),
        (
            "get_without_fin",
            settings()
                .open(get_a)
                .run()
                .advance(200)
                .advance(200)
                .write(0, &[0x00, 0x01, b'x'])
                .finish(0)
                .run(),
        ),
        (
            "critical_stream_closed",
            settings()
                .uni(2, &[])
                .request(0, true)
                .run()
                .uni_end(1, true)
                .run(),
        ),
        (
            "client_closes",
            settings().request(1, true).deliver().close(0).run(),
        ),
    ]
}

#[cfg(feature = "auth")]
#[test]
fn htpasswd_corpus() {
    replay("htpasswd", checks::htpasswd);
}

#[test]
fn proxy_header_corpus() {
    replay("proxy_header", checks::proxy_header);
}

#[test]
fn forwarded_corpus() {
    replay("forwarded", checks::forwarded);
}
