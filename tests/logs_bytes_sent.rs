//! The access log's size is the body bytes actually sent (nginx's `$body_bytes_sent`,
//! Apache's `%b`): a download cut short logs what went out, not the file's size; ranges,
//! HEAD, 304, errors, pipelined answers and CGI responses log their own bodies; and a
//! response cut off by SIGTERM is logged before the process exits. Lines are in fnord's
//! format (`IP STATUS SIZE HOST USER_AGENT REFERER PATH`) unless a test says otherwise.

#[macro_use]
mod common;

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::*;
use rustix::process::Signal;

/// Large enough that no socket buffers hold all of it.
const BIG: u64 = 128 << 20;
/// Body bytes the client reads before it gives up on the big file.
const READ_BEFORE_LEAVING: u64 = 1 << 20;
/// The standalone stop waits up to its 10 s grace for a response in flight.
const STOP_WAIT: Duration = Duration::from_secs(30);

const SMALL: &str = "0123456789abcdefghijklmnopqrstuvwxyz\n";

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("small.txt", SMALL);
    // Sparse: cheap to make, and sent like any other file.
    File::create(root.join("big.bin"))
        .and_then(|f| f.set_len(BIG))
        .expect("create big.bin");
    script(&root, "chunked.cgi", CHUNKED_SCRIPT);
    let endless = format!(
        "printf 'Content-Type: application/octet-stream\\n\\n'\nexec head -c {ENDLESS} /dev/zero\n"
    );
    script(&root, "endless.cgi", &endless);
    root
}

/// Writes an executable `/bin/sh` script.
fn script(root: &Docroot, rel: &str, body: &str) {
    let path = root.file(rel, format!("#!/bin/sh\n{body}"));
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// No Content-Length: an HTTP/1.1 client gets it chunked.
const CHUNKED_SCRIPT: &str =
    "printf 'Content-Type: text/plain\\n\\n'\necho first line\necho second line\n";
const CHUNKED_BODY: &str = "first line\nsecond line\n";

/// What endless.cgi writes: more than any client here reads.
const ENDLESS: u64 = 1 << 30;

fn server(v: Variant, root: &Docroot, format: &str) -> Server {
    Server::builder(v, root.path())
        .log_format(format)
        .arg("--cgi")
        .start()
}

/// Every access-log line (fnord's) for `path` so far.
fn lines_for(server: &Server, path: &str) -> Vec<String> {
    server
        .stderr()
        .snapshot()
        .into_iter()
        .filter(|l| !l.starts_with("staticd: ") && l.rsplit(' ').next() == Some(path))
        .collect()
}

/// Waits (up to `timeout`) for the access-log line of `path`; returns its status and size.
fn logged_within(server: &Server, path: &str, timeout: Duration) -> (u16, u64) {
    let found = server.stderr().wait_for(timeout, |lines| {
        lines
            .iter()
            .any(|l| !l.starts_with("staticd: ") && l.rsplit(' ').next() == Some(path))
    });
    assert!(
        found.is_some(),
        "no access-log line for {path} within {timeout:?}; stderr: {:#?}",
        server.stderr().snapshot()
    );
    let line = lines_for(server, path).remove(0);
    let fields: Vec<&str> = line.split(' ').collect();
    let parse = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .unwrap_or_else(|| panic!("field {i} of {line:?}"))
    };
    (parse(1) as u16, parse(2))
}

fn logged(server: &Server, path: &str) -> (u16, u64) {
    logged_within(server, path, IO_TIMEOUT)
}

/// Asserts that `path` was logged once only, however its response ended.
fn assert_logged_once(server: &Server, path: &str) {
    let lines = lines_for(server, path);
    assert_eq!(lines.len(), 1, "{lines:#?}");
}

/// Starts a download of `path` and reads the head and a little of the body; returns the
/// connection, still open, and the body bytes received.
fn start_download(server: &Server, path: &str) -> (Conn, u64) {
    let mut conn = server.connect();
    conn.send(request("GET", path, &["Connection: close"]));
    let head = conn.read_head();
    assert_eq!(head.status, 200, "{head:#?}");
    let received = conn.skip_up_to(READ_BEFORE_LEAVING);
    assert_eq!(received, READ_BEFORE_LEAVING);
    (conn, received)
}

/// The figure for a response cut short: some of it, never all, and at least what the
/// client received.
fn assert_partial(size: u64, received: u64, whole: u64) {
    assert!(
        size >= received && size < whole,
        "logged {size} bytes; the client received {received} of {whole}"
    );
}

/// The figure for endless.cgi cut short. What the client received includes the chunked
/// framing, a few bytes per chunk of thousands, which the figure leaves out.
fn assert_relayed_partially(size: u64, received: u64) {
    let framing = received / 1000;
    assert!(
        size + framing >= received && size < ENDLESS,
        "logged {size} bytes; the client received {received} (with chunked framing)"
    );
}

fn download_cut_short_by_the_client_logs_the_bytes_sent(v: Variant) {
    let root = site();
    let server = server(v, &root, "fnord");
    let (conn, received) = start_download(&server, "/big.bin");
    drop(conn);
    let (status, size) = logged(&server, "/big.bin");
    assert_eq!(status, 200);
    assert_partial(size, received, BIG);
    assert_logged_once(&server, "/big.bin");
}

fn whole_responses_log_their_body(v: Variant) {
    let root = site();
    let server = server(v, &root, "fnord");
    let resp = server
        .connect()
        .roundtrip(request("GET", "/small.txt", &[]));
    assert_eq!(resp.body, SMALL.as_bytes());
    assert_eq!(logged(&server, "/small.txt"), (200, SMALL.len() as u64));

    let mut conn = server.connect();
    conn.send(request("GET", "/big.bin", &["Connection: close"]));
    let (received, _) = conn.count_to_end();
    assert!(received > BIG, "head and body arrive");
    assert_eq!(logged(&server, "/big.bin"), (200, BIG));
}

fn ranges_log_the_body_sent(v: Variant) {
    let root = site();
    let server = server(v, &root, "fnord");
    let resp =
        server
            .connect()
            .roundtrip(request("GET", "/small.txt?one", &["Range: bytes=10-19"]));
    assert_eq!(resp.status, 206);
    assert_eq!(logged(&server, "/small.txt?one"), (206, 10));

    // multipart/byteranges: the part heads and boundaries are body too, as in nginx.
    let resp = server.connect().roundtrip(request(
        "GET",
        "/small.txt?two",
        &["Range: bytes=0-1,20-29"],
    ));
    assert_eq!(resp.status, 206);
    assert!(resp.body.len() > 12, "{resp:#?}");
    assert_eq!(
        logged(&server, "/small.txt?two"),
        (206, resp.body.len() as u64)
    );

    let resp = server
        .connect()
        .roundtrip(request("GET", "/big.bin?tail", &["Range: bytes=-1000"]));
    assert_eq!(resp.body.len(), 1000);
    assert_eq!(logged(&server, "/big.bin?tail"), (206, 1000));
}

fn head_and_not_modified_log_no_body(v: Variant) {
    let root = site();
    let server = server(v, &root, "fnord");
    let resp = server.connect().roundtrip(request("HEAD", "/big.bin", &[]));
    assert_eq!(resp.content_length(), Some(BIG));
    assert_eq!(logged(&server, "/big.bin"), (200, 0));

    let etag = server
        .connect()
        .roundtrip(request("HEAD", "/small.txt", &[]))
        .header("etag")
        .expect("an ETag")
        .to_string();
    let resp = server.connect().roundtrip(request(
        "GET",
        "/small.txt?again",
        &[&format!("If-None-Match: {etag}")],
    ));
    assert_eq!(resp.status, 304);
    assert_eq!(logged(&server, "/small.txt?again"), (304, 0));
}

fn the_common_format_writes_no_body_as_a_dash(v: Variant) {
    let root = site();
    let server = server(v, &root, "common");
    server
        .connect()
        .roundtrip(request("HEAD", "/small.txt", &[]));
    server
        .connect()
        .roundtrip(request("GET", "/small.txt", &[]));
    let done = server.stderr().wait_for(IO_TIMEOUT, |lines| {
        lines.iter().filter(|l| l.contains("/small.txt")).count() == 2
    });
    let lines = done.expect("two access-log lines");
    let head = "\"HEAD /small.txt HTTP/1.1\" 200 -";
    let get = format!("\"GET /small.txt HTTP/1.1\" 200 {}", SMALL.len());
    assert!(lines.iter().any(|l| l.ends_with(head)), "{lines:#?}");
    assert!(lines.iter().any(|l| l.ends_with(&get)), "{lines:#?}");
}

fn errors_and_pipelined_answers_log_their_own_bodies(v: Variant) {
    let root = site();
    let server = server(v, &root, "fnord");
    let mut conn = server.connect();
    // Answered in one write: each line still gets its own figure.
    let mut batch = request("GET", "/small.txt?p1", &[]);
    batch.push_str(&request("GET", "/missing?p2", &[]));
    batch.push_str(&request("HEAD", "/small.txt?p3", &[]));
    batch.push_str(&request("GET", "/small.txt?p4", &["Range: bytes=0-4"]));
    conn.send(batch);
    let first = conn.read_response();
    let missing = conn.read_response();
    conn.read_response_to("HEAD");
    let range = conn.read_response();
    assert_eq!(
        (first.status, missing.status, range.status),
        (200, 404, 206)
    );
    assert_eq!(logged(&server, "/small.txt?p1"), (200, SMALL.len() as u64));
    assert_eq!(
        logged(&server, "/missing?p2"),
        (404, missing.body.len() as u64)
    );
    assert_eq!(logged(&server, "/small.txt?p3"), (200, 0));
    assert_eq!(logged(&server, "/small.txt?p4"), (206, 5));
}

fn cgi_logs_the_script_body_without_chunk_framing(v: Variant) {
    let root = site();
    let server = server(v, &root, "fnord");
    let resp = server
        .connect()
        .roundtrip(request("GET", "/chunked.cgi", &[]));
    assert_eq!(resp.header("transfer-encoding"), Some("chunked"));
    assert_eq!(resp.body, CHUNKED_BODY.as_bytes());
    assert_eq!(
        logged(&server, "/chunked.cgi"),
        (200, CHUNKED_BODY.len() as u64)
    );
}

fn cgi_cut_short_by_the_client_logs_the_bytes_relayed(v: Variant) {
    let root = site();
    let server = server(v, &root, "fnord");
    let (conn, received) = start_download(&server, "/endless.cgi");
    drop(conn);
    let (status, size) = logged(&server, "/endless.cgi");
    assert_eq!(status, 200);
    assert_relayed_partially(size, received);
    assert_logged_once(&server, "/endless.cgi");
}

/// SIGTERM while a client is slow to take a download: standalone mode lets it run for the
/// grace period, inetd mode ends it at once; either way the line comes, with what was sent.
fn sigterm_during_a_download_logs_the_bytes_sent(v: Variant) {
    let root = site();
    let mut server = server(v, &root, "fnord");
    let (_conn, received) = start_download(&server, "/big.bin");
    let status = match v.mode {
        Mode::Standalone => {
            server.process().signal(Signal::TERM);
            server.process().wait_timeout(STOP_WAIT)
        }
        Mode::Inetd => {
            server.signal_inetd(Signal::TERM);
            server.wait_inetd_exits(1).first().copied()
        }
    }
    .expect("staticd still running after SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", describe(status));
    // The process is gone: its line must be there already.
    let (code, size) = logged_within(&server, "/big.bin", Duration::from_secs(2));
    assert_eq!(code, 200);
    assert_partial(size, received, BIG);
    assert_logged_once(&server, "/big.bin");
}

/// Inetd mode only: standalone mode's stop lets a script run out its time.
fn sigterm_during_a_cgi_response_in_inetd_mode_logs_the_bytes_relayed(v: Variant) {
    let root = site();
    let server = server(v, &root, "fnord");
    let (_conn, received) = start_download(&server, "/endless.cgi");
    server.signal_inetd(Signal::TERM);
    let status = server.wait_inetd_exits(1)[0];
    assert_eq!(status.code(), Some(0), "{}", describe(status));
    let (code, size) = logged_within(&server, "/endless.cgi", Duration::from_secs(2));
    assert_eq!(code, 200);
    assert_relayed_partially(size, received);
    assert_logged_once(&server, "/endless.cgi");
}

matrix!([h1, tls, uring] both_modes:
    download_cut_short_by_the_client_logs_the_bytes_sent,
    whole_responses_log_their_body,
    ranges_log_the_body_sent,
    head_and_not_modified_log_no_body,
    the_common_format_writes_no_body_as_a_dash,
    errors_and_pipelined_answers_log_their_own_bodies,
    cgi_logs_the_script_body_without_chunk_framing,
    cgi_cut_short_by_the_client_logs_the_bytes_relayed,
    sigterm_during_a_download_logs_the_bytes_sent,
);

matrix!([h1, tls, uring] inetd: sigterm_during_a_cgi_response_in_inetd_mode_logs_the_bytes_relayed);
