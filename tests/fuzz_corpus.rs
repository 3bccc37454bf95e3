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
