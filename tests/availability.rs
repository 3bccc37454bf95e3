//! One client cannot starve the others (issue 16): while one address
//! (127.0.0.2, a bound source address) attacks — slowloris, slow bodies,
//! slow reads, a connection flood, slowhttptest — a second address
//! (127.0.0.1) keeps fetching a small file, and gets every answer, with a
//! 99th percentile latency under 100 ms. The bounds that make it so: the
//! head deadline (`--read-timeout`), the minimum rates (`--min-rate`), the
//! per-address connection bound (`--max-connections-per-ip`, with
//! `--per-ip-loopback` since the attacker is a loopback address, or the
//! super-server's in inetd mode), and overload that sheds idle keep-alive
//! connections first (`--max-connections`).
//!
//! Each test prints its figures (the good client's latencies, how long the
//! attacker lasted) as `availability: ...` lines straight to stderr, so a
//! plain `cargo test --test availability` shows them. The tests of this file
//! run one at a time: a latency figure means something only while no other
//! attack runs beside it.

#[macro_use]
mod common;

use std::fs;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::*;

/// The attacker's address.
const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// The good client's address.
const GOOD: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
/// What issue 16 asks of the good client's 99th percentile latency.
const P99_BOUND: Duration = Duration::from_millis(100);
/// The good client's pause between requests.
const PACE: Duration = Duration::from_millis(20);
/// Requests the good client sends on one connection before it opens the next.
const PER_CONNECTION: usize = 4;
/// The good client runs at least this long, however short the attack: long
/// enough for about 200 requests, so that its 99th percentile is not
/// simply its slowest request.
const GOOD_CLIENT_RUNS: Duration = Duration::from_secs(4);
/// Answers the good client has after an attack ended, before its figures
/// are taken: about half a second's worth at [`PACE`].
const AFTER_THE_ATTACK: usize = 20;
/// The large file slow readers ask for (sparse: its size is what matters).
const BIG: u64 = 64 << 20;

/// The tests of this file, one at a time (see the module comment).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    fs::File::create(root.join("big.bin"))
        .unwrap()
        .set_len(BIG)
        .unwrap();
    root
}

/// Inetd mode runs a process per connection: a smaller attack there makes
/// the same point without starting hundreds of processes on a small machine.
fn per_mode(v: Variant, standalone: usize, inetd: usize) -> usize {
    match v.mode {
        Mode::Standalone => standalone,
        Mode::Inetd => inetd,
    }
}

fn test_name() -> String {
    thread::current().name().unwrap_or("a test").to_string()
}

/// One line on the process's stderr, past the test harness's capture (which
/// shows what `eprintln!` prints only for failing tests): figures are for
/// every run.
fn report(what: &str) {
    let line = format!("availability: {}: {what}\n", test_name());
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

// --- the good client ----------------------------------------------------------------------

/// What the good client saw.
#[derive(Default)]
struct Samples {
    latencies: Vec<Duration>,
    errors: Vec<String>,
    /// The most a [`PACE`] sleep overran: how starved of CPU the machine
    /// running the tests was (a figure to read a bad latency by).
    oversleep: Duration,
}

/// The good client's figures.
struct Figures {
    count: usize,
    errors: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
    oversleep: Duration,
}

impl Figures {
    fn of(samples: &Samples) -> Figures {
        let mut sorted = samples.latencies.clone();
        sorted.sort();
        let at = |q: f64| {
            let rank = ((sorted.len() as f64 * q).ceil() as usize).max(1);
            sorted.get(rank - 1).copied().unwrap_or_default()
        };
        Figures {
            count: sorted.len(),
            errors: samples.errors.len(),
            p50: at(0.50),
            p99: at(0.99),
            max: sorted.last().copied().unwrap_or_default(),
            oversleep: samples.oversleep,
        }
    }
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} requests, {} errors, p50 {}, p99 {}, max {} (the test's own \
             sleeps overran by up to {})",
            self.count,
            self.errors,
            ms(self.p50),
            ms(self.p99),
            ms(self.max),
            ms(self.oversleep)
        )
    }
}

/// Runs `attack` (a server under attack with the good client beside it, every other
/// check made; None: skipped) until the good client's 99th percentile is under
/// [`P99_BOUND`], at most three times. Other test binaries share a CI machine's two
/// cores, so one try's slowest requests can be theirs; a server that lets an attack slow
/// its clients misses every try.
fn with_p99_under_bound(mut attack: impl FnMut() -> Option<Figures>) {
    for attempt in 1..=3 {
        let Some(figures) = attack() else { return };
        if figures.p99 < P99_BOUND {
            return;
        }
        let missed = format!(
            "the good client's p99 is {} (over {}): {figures}",
            ms(figures.p99),
            ms(P99_BOUND)
        );
        assert!(attempt < 3, "{missed}, in each of 3 tries");
        report(&format!("try {attempt}: {missed}; trying again"));
    }
}

/// A client at 127.0.0.1 that fetches `/a.txt` every [`PACE`], opening a
/// new connection every [`PER_CONNECTION`] requests, and records each
/// request's latency (with the connect, for the first on a connection) and
/// every error (a failed connect, a closed connection, a wrong answer).
struct GoodClient {
    stop: Arc<AtomicBool>,
    /// How many answers it has had so far.
    answered: Arc<AtomicUsize>,
    started: Instant,
    thread: Option<JoinHandle<Samples>>,
}

impl GoodClient {
    fn start(connector: Connector) -> GoodClient {
        // One fetch first, not counted: in inetd mode the first process
        // start reads the binary from disk, which is no attack's doing.
        let warm_up = connector
            .connect_from(GOOD)
            .roundtrip(request("GET", "/a.txt", &[]));
        assert_eq!(warm_up.status, 200, "{warm_up:#?}");
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let thread = {
            let stop = stop.clone();
            let answered = answered.clone();
            thread::spawn(move || {
                let mut samples = Samples::default();
                let mut conn: Option<Conn> = None;
                let mut on_conn = 0;
                while !stop.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    // The harness's reads panic on a closed connection or a
                    // timeout: here that is an error to count, not the end.
                    let result = panic::catch_unwind(AssertUnwindSafe(|| {
                        if conn.is_none() || on_conn == PER_CONNECTION {
                            conn = Some(connector.connect_from(GOOD));
                            on_conn = 0;
                        }
                        on_conn += 1;
                        let conn = conn.as_mut().unwrap();
                        conn.roundtrip(request("GET", "/a.txt", &[]))
                    }));
                    let took = started.elapsed();
                    match result {
                        Ok(resp) if resp.status == 200 && resp.body == b"alpha\n" => {
                            samples.latencies.push(took);
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(resp) => {
                            samples.errors.push(format!(
                                "{} {:?} after {}",
                                resp.status,
                                resp.body_str(),
                                ms(took)
                            ));
                            conn = None;
                        }
                        Err(panic) => {
                            let why = panic
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default();
                            samples.errors.push(format!("{why} after {}", ms(took)));
                            conn = None;
                        }
                    }
                    let slept = Instant::now();
                    thread::sleep(PACE);
                    let over = slept.elapsed().saturating_sub(PACE);
                    samples.oversleep = samples.oversleep.max(over);
                }
                samples
            })
        };
        GoodClient {
            stop,
            answered,
            started: Instant::now(),
            thread: Some(thread),
        }
    }

    /// Waits (up to [`IO_TIMEOUT`]) until the client has had `n` more
    /// answers: a little more of it after an attack ended, counted in
    /// answers, not in time (on a loaded machine a pause may hold few).
    fn wait_answers(&self, n: usize) {
        let from = self.answered.load(Ordering::SeqCst);
        let more = || self.answered.load(Ordering::SeqCst) - from;
        let got = eventually(IO_TIMEOUT, || (more() >= n).then_some(()));
        assert!(
            got.is_some(),
            "the good client had {} answers, not {n}, in {IO_TIMEOUT:?} after the attack",
            more()
        );
    }

    /// Stops the client, reports its figures, and asserts that it got every
    /// answer (its 99th percentile is `with_p99_under_bound`'s to check).
    fn finish(mut self) -> Figures {
        thread::sleep(GOOD_CLIENT_RUNS.saturating_sub(self.started.elapsed()));
        self.stop.store(true, Ordering::SeqCst);
        let samples = self
            .thread
            .take()
            .unwrap()
            .join()
            .expect("the good client's thread");
        let figures = Figures::of(&samples);
        report(&format!("good client at 127.0.0.1: {figures}"));
        assert!(
            samples.errors.is_empty(),
            "the good client at 127.0.0.1 got errors ({figures}): {:#?}",
            samples.errors
        );
        assert!(
            figures.count >= 100,
            "the good client got only {} answers ({figures})",
            figures.count
        );
        figures
    }
}

impl Drop for GoodClient {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

// --- reading what came back ---------------------------------------------------------------

/// How a connection stands after a request (or nothing) was sent on it.
#[derive(Debug)]
enum Outcome {
    /// A response head (and its body) arrived.
    Answered(Response),
    /// The server closed; these bytes came first (none for a plain close).
    Closed(Vec<u8>),
    /// Still open, nothing (complete) received.
    Pending,
}

/// Waits up to `limit` for an answer or a close, without blocking past it.
fn outcome_within(conn: &mut Conn, limit: Duration) -> Outcome {
    let deadline = Instant::now() + limit;
    loop {
        let closed = conn.poll_closed();
        if find(conn.buffered(), b"\r\n\r\n").is_some() {
            return Outcome::Answered(conn.read_response());
        }
        if closed {
            return Outcome::Closed(conn.take_buffered());
        }
        if Instant::now() >= deadline {
            return Outcome::Pending;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// A refusal at accept time for a client whose request was readable: 503,
/// `Retry-After`, `Connection: close`, then the close.
fn assert_refused_with_503(resp: &Response, conn: &mut Conn) {
    assert_eq!(resp.status, 503, "{resp:#?}");
    assert!(
        resp.header("retry-after").is_some(),
        "503 without Retry-After: {resp:#?}"
    );
    assert!(
        resp.has_token("connection", "close"),
        "503 without Connection: close: {resp:#?}"
    );
    conn.assert_closed();
}

/// Waits (bounded) until `count` stderr lines contain `needle`; returns how
/// many there are then.
fn wait_lines(server_stderr: &Lines, needle: &str, count: usize, limit: Duration) -> usize {
    let matching = |lines: &[String]| lines.iter().filter(|l| l.contains(needle)).count();
    server_stderr.wait_for(limit, |lines| matching(lines) >= count);
    matching(&server_stderr.snapshot())
}

/// Standalone: the log line for a bound that triggered appears exactly once
/// (once per address per minute). Inetd: each process has its own minute,
/// so at least once.
fn assert_logged_once(v: Variant, server_stderr: &Lines, line: &str) {
    let found = wait_lines(server_stderr, line, 1, IO_TIMEOUT);
    // A second line, were there one, would come at once: every event that
    // could log one has happened by now (the server logs a complaint as
    // the bound triggers, src/complaint.rs), so this pause only gives such
    // a line time through the pipe. It stays a pause because no event
    // proves a line will not come; it can only miss a second line, never
    // fail a server that logs one.
    thread::sleep(Duration::from_millis(200));
    let found = found.max(
        server_stderr
            .snapshot()
            .iter()
            .filter(|l| l.contains(line))
            .count(),
    );
    match v.mode {
        Mode::Standalone => assert_eq!(
            found,
            1,
            "want exactly one {line:?} line; stderr: {:#?}",
            server_stderr.snapshot()
        ),
        Mode::Inetd => assert!(
            found >= 1,
            "no {line:?} line; stderr: {:#?}",
            server_stderr.snapshot()
        ),
    }
}

// --- 1, 2: slowloris ----------------------------------------------------------------------

/// The head every slowloris connection trickles, a byte at a time.
const TRICKLE: &[u8] =
    b"GET /a.txt HTTP/1.1\r\nHost: test\r\nX-Slow: abcdefghijklmnopqrstuvwxyz0123456789\r\n";

/// Slowloris from 127.0.0.2 (100 connections; 20 processes in inetd mode),
/// each sending a head byte every second, with `--read-timeout 2`: every one
/// is dropped once its head has taken 2 s (however steadily it trickles),
/// and the good client at 127.0.0.1 is served throughout.
fn slowloris_from_one_address(v: Variant) {
    with_p99_under_bound(|| slowloris_from_one_address_try(v));
}

fn slowloris_from_one_address_try(v: Variant) -> Option<Figures> {
    let _serial = serial();
    let root = site();
    let server = Server::builder(v, root.path())
        .args(["--read-timeout", "2"])
        .start();
    let good = GoodClient::start(server.connector());
    let n = per_mode(v, 100, 20);
    // Opened at 100 a second, as slowhttptest's `-r 100` does: the point is
    // connections held, not a burst of them (the flood tests are that).
    let mut conns: Vec<Conn> = (0..n)
        .map(|_| {
            let mut conn = server.connect_from(ATTACKER);
            conn.handshake().expect("TLS handshake");
            thread::sleep(Duration::from_millis(10));
            conn
        })
        .collect();
    let started = Instant::now();
    let mut dropped: Vec<Option<Duration>> = vec![None; n];
    let mut next_byte = started;
    let mut sent = 0;
    while dropped.iter().any(Option::is_none) && started.elapsed() < Duration::from_secs(12) {
        if Instant::now() >= next_byte {
            let byte = TRICKLE[sent % TRICKLE.len()];
            for (conn, gone) in conns.iter_mut().zip(&mut dropped) {
                if gone.is_none() && conn.try_send([byte]).is_err() {
                    *gone = Some(started.elapsed());
                }
            }
            sent += 1;
            next_byte += Duration::from_secs(1);
        }
        for (conn, gone) in conns.iter_mut().zip(&mut dropped) {
            if gone.is_none() && conn.poll_closed() {
                *gone = Some(started.elapsed());
            }
        }
        thread::sleep(Duration::from_millis(50));
    }
    // A little more of the good client after the attack ended.
    good.wait_answers(AFTER_THE_ATTACK);
    let figures = good.finish();
    let times: Vec<Duration> = dropped.iter().flatten().copied().collect();
    let (first, last) = (times.iter().min(), times.iter().max());
    report(&format!(
        "slowloris: {n} connections from 127.0.0.2, {} dropped, first after {}, last after {}",
        times.len(),
        first.map_or("-".into(), |d| secs(*d)),
        last.map_or("-".into(), |d| secs(*d)),
    ));
    assert_eq!(
        times.len(),
        n,
        "{} of {n} slowloris connections still open after 12 s ({figures})",
        n - times.len()
    );
    // Dropped after the 2 s head deadline (no byte ever came later than 1 s
    // after the last), not before, and not much after.
    let (first, last) = (*first.unwrap(), *last.unwrap());
    assert!(
        first >= Duration::from_millis(1500),
        "dropped after {first:?}"
    );
    assert!(last < Duration::from_secs(6), "dropped after {last:?}");
    for conn in &mut conns {
        let got = conn.take_buffered();
        assert!(
            got.is_empty() || got.starts_with(b"HTTP/1.1 408 "),
            "{:?}",
            String::from_utf8_lossy(&got)
        );
    }
    Some(figures)
}

// --- 3: slow bodies -----------------------------------------------------------------------

/// Slow bodies from 127.0.0.2 (20 connections; 5 in inetd mode): POSTs
/// announcing a 1 MB body that comes at 50 B/s, ten bytes every 200 ms —
/// far more often than `--read-timeout 2`, so a timeout between reads never
/// fires. With `--min-rate 500` each connection is dropped once its body's
/// credit runs out (about 2.2 s in: 2 s plus 2 ms per byte received), and
/// the good client is served throughout.
fn slow_body_from_one_address(v: Variant) {
    with_p99_under_bound(|| slow_body_from_one_address_try(v));
}

fn slow_body_from_one_address_try(v: Variant) -> Option<Figures> {
    let _serial = serial();
    let root = site();
    let server = Server::builder(v, root.path())
        .args(["--read-timeout", "2", "--min-rate", "500"])
        .start();
    let good = GoodClient::start(server.connector());
    let n = per_mode(v, 20, 5);
    let head = request("POST", "/a.txt", &["Content-Length: 1000000"]);
    let mut conns = Vec::new();
    for _ in 0..n {
        let mut conn = server.connect_from(ATTACKER);
        conn.send(&head);
        // Answered at once (405: nothing here takes a body); the body is
        // read and discarded after.
        let resp = conn.read_response();
        assert_eq!(resp.status, 405, "{resp:#?}");
        conns.push((conn, Instant::now(), None::<Duration>));
    }
    let started = Instant::now();
    while conns.iter().any(|(_, _, gone)| gone.is_none())
        && started.elapsed() < Duration::from_secs(12)
    {
        for (conn, body_start, gone) in &mut conns {
            if gone.is_none() && (conn.try_send(b"xxxxxxxxxx").is_err() || conn.poll_closed()) {
                *gone = Some(body_start.elapsed());
            }
        }
        thread::sleep(Duration::from_millis(200));
    }
    good.wait_answers(AFTER_THE_ATTACK);
    let figures = good.finish();
    let times: Vec<Duration> = conns.iter().filter_map(|(_, _, gone)| *gone).collect();
    report(&format!(
        "slow body (50 B/s, --min-rate 500, --read-timeout 2): {n} connections from 127.0.0.2, \
         {} dropped, first after {}, last after {}",
        times.len(),
        times.iter().min().map_or("-".into(), |d| secs(*d)),
        times.iter().max().map_or("-".into(), |d| secs(*d)),
    ));
    assert_eq!(
        times.len(),
        n,
        "{} of {n} slow-body connections still open after 12 s ({figures})",
        n - times.len()
    );
    let last = *times.iter().max().unwrap();
    assert!(last < Duration::from_secs(8), "dropped after {last:?}");
    assert_logged_once(
        v,
        server.stderr(),
        "staticd: 127.0.0.2: request body slower than --min-rate (500 B/s): connection closed",
    );
    Some(figures)
}

// --- 4: slow reads ------------------------------------------------------------------------

/// What a slow reader did: its rate before the server gave up, and all it
/// received.
struct SlowRead {
    rate: f64,
    total: u64,
}

/// A TCP connection from 127.0.0.2 that keeps what the server may have in
/// flight small: a 4 KiB receive buffer, and a 536-byte MSS, which keeps the
/// kernel from growing the server's send buffer to megabytes (as it does
/// for loopback's 64 KiB segments). Then a reader taking 50 KB/s lets the
/// server's writes progress about every second, not every dozen seconds.
fn slow_reader_tcp(dest: SocketAddr) -> TcpStream {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).expect("socket");
    sockopt::set_socket_recv_buffer_size(&fd, 4096).expect("SO_RCVBUF");
    let mss: libc::c_int = 536;
    // SAFETY: `fd` is an open socket; the option value is a c_int that lives
    // across the call, and its size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mss as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "TCP_MAXSEG: {}", io::Error::last_os_error());
    rustix::net::bind(&fd, &SocketAddr::new(ATTACKER, 0)).expect("bind 127.0.0.2");
    rustix::net::connect(&fd, &dest).expect("connect");
    TcpStream::from(fd)
}

/// Slow readers from 127.0.0.2 (5; 3 in inetd mode) each fetch a 64 MB file
/// and take what has arrived, at most 5,000 bytes, every 100 ms: under
/// 50 KB/s, yet the server's writes progress several times a second, well
/// inside `--send-timeout 3`, so a timeout on progress alone never fires
/// (the code before `--min-rate` served them for as long as they read). With
/// `--min-rate 200000` (raised for the test: the point is a reader below the
/// rate, whatever the rate) each is dropped once its credit runs out, and
/// the good client is served throughout. (One read per turn matters: a
/// reader that reads until it has its 5,000 bytes opens its window so often
/// that the kernel grows the server's congestion window and send buffer to
/// megabytes, and then the writes progress too seldom for the old timeout.)
fn slow_read_from_one_address(v: Variant) {
    with_p99_under_bound(|| slow_read_from_one_address_try(v));
}

fn slow_read_from_one_address_try(v: Variant) -> Option<Figures> {
    let _serial = serial();
    let root = site();
    let server = Server::builder(v, root.path())
        .args(["--send-timeout", "3", "--min-rate", "200000"])
        .log_format("common")
        .start();
    let good = GoodClient::start(server.connector());
    let n = per_mode(v, 5, 3);
    let fast = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let readers: Vec<JoinHandle<SlowRead>> = (0..n)
        .map(|_| {
            let connector = server.connector();
            let fast = fast.clone();
            thread::spawn(move || {
                let tcp = slow_reader_tcp(connector.addr);
                let mut conn = Conn::from_stream(connector.wrap(tcp));
                conn.send(request("GET", "/big.bin", &[]));
                let head = conn.read_head();
                assert_eq!(head.status, 200);
                assert_eq!(head.content_length(), Some(BIG));
                let reading = Instant::now();
                let mut slowly = 0;
                while slowly < BIG && !fast.load(Ordering::SeqCst) {
                    let k = conn.read_once(5000.min(BIG - slowly) as usize) as u64;
                    if k == 0 {
                        break;
                    }
                    slowly += k;
                    thread::sleep(Duration::from_millis(100));
                }
                let rate = slowly as f64 / reading.elapsed().as_secs_f64();
                // What the server queued before it gave up arrives, then the
                // end: short of the whole file.
                let total = slowly + conn.skip_up_to(BIG - slowly);
                SlowRead { rate, total }
            })
        })
        .collect();
    // Each dropped response is logged (common format) when it ends.
    let logged = wait_lines(
        server.stderr(),
        "\"GET /big.bin HTTP/1.1\" 200",
        n,
        Duration::from_secs(15),
    );
    let took = started.elapsed();
    fast.store(true, Ordering::SeqCst);
    let reads: Vec<SlowRead> = readers
        .into_iter()
        .map(|r| r.join().expect("a slow reader failed"))
        .collect();
    let figures = good.finish();
    let fastest = reads.iter().map(|r| r.rate).fold(0.0, f64::max);
    report(&format!(
        "slow read (--min-rate 200000, --send-timeout 3): {n} readers at 127.0.0.2 taking at \
         most {fastest:.0} B/s, {logged} dropped, the last within {}",
        secs(took),
    ));
    assert_eq!(
        logged, n,
        "only {logged} of {n} slow readers were dropped within 15 s ({figures})"
    );
    for read in &reads {
        assert!(read.total < BIG, "a slow reader got the whole file");
        assert!(
            read.rate < 100_000.0,
            "a reader was not slow: {} B/s",
            read.rate
        );
    }
    assert!(took < Duration::from_secs(12), "dropped after {took:?}");
    assert_logged_once(
        v,
        server.stderr(),
        "staticd: 127.0.0.2: response taken slower than --min-rate (200000 B/s): connection closed",
    );
    Some(figures)
}

matrix!([h1, uring] both_modes:
    slowloris_from_one_address,
    slow_body_from_one_address,
    slow_read_from_one_address,
);

// --- 5: connection floods -----------------------------------------------------------------

/// How a flood's connections fared.
#[derive(Debug, Default)]
struct Flood {
    /// Open and held by the server: answered (keep-alive) or waiting for
    /// their request.
    held: usize,
    /// Refused with a 503 (checked: Retry-After, Connection: close).
    refused_503: usize,
    /// Closed with nothing sent.
    closed: usize,
}

/// Opens `n` connections from 127.0.0.2 as fast as it can, every other one
/// sending a request at once, and sorts out what became of them once the
/// server has taken them all. `bound`: how many one address may hold (the
/// server's or the super-server's bound), which says when that is: every
/// request answered or refused, and no more than `bound` still open (a
/// server past its bound closes a silent connection once it accepts it; a
/// server that holds more is found out after [`IO_TIMEOUT`], by the
/// caller's count). Returns the connections too: the attacker keeps
/// holding what it got.
fn flood(addr: SocketAddr, n: usize, bound: usize) -> (Flood, Vec<Conn>) {
    let connector = Connector::new(addr, None);
    let mut conns: Vec<(bool, Conn)> = (0..n)
        .map(|i| {
            let mut conn = connector.connect_from(ATTACKER);
            let asks = i % 2 == 0;
            if asks {
                conn.send_lossy(request("GET", "/a.txt", &[]));
            }
            (asks, conn)
        })
        .collect();
    let mut result = Flood::default();
    for (_, conn) in conns.iter_mut().filter(|(asks, _)| *asks) {
        match outcome_within(conn, IO_TIMEOUT) {
            Outcome::Answered(resp) if resp.status == 200 => {
                assert_eq!(resp.body, b"alpha\n");
                result.held += 1;
            }
            Outcome::Answered(resp) => {
                assert_refused_with_503(&resp, conn);
                result.refused_503 += 1;
            }
            Outcome::Closed(got) => {
                assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
                result.closed += 1;
            }
            Outcome::Pending => panic!("a request of the flood was neither answered nor refused"),
        }
    }
    let mut silent: Vec<&mut Conn> = conns
        .iter_mut()
        .filter(|(asks, _)| !*asks)
        .map(|(_, conn)| conn)
        .collect();
    let held = result.held;
    eventually(IO_TIMEOUT, || {
        let open = silent
            .iter_mut()
            .map(|c| c.poll_closed())
            .filter(|&closed| !closed);
        let open = open.count();
        (held + open <= bound).then_some(())
    });
    for conn in silent {
        match outcome_within(conn, Duration::ZERO) {
            Outcome::Closed(got) => {
                assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
                result.closed += 1;
            }
            Outcome::Pending => result.held += 1,
            Outcome::Answered(resp) => panic!("a silent connection was answered: {resp:#?}"),
        }
    }
    (result, conns.into_iter().map(|(_, conn)| conn).collect())
}

/// How long the attacker holds its flood's connections while the good
/// client goes on.
const FLOOD_HELD: Duration = Duration::from_secs(2);

/// Standalone, default flags but `--per-ip-loopback` (the tests' attacker
/// is a loopback address, which the bound leaves out by default): 1,000
/// connections from 127.0.0.2 opened as fast as possible, half sending a request at once. The first 256 are
/// served (or wait for their request); every one beyond gets a 503 with
/// Retry-After (its request was readable) or a plain close; the bound is
/// logged once; and the good client at 127.0.0.1 is served throughout.
fn connection_flood_from_one_address_standalone(v: Variant) {
    with_p99_under_bound(|| connection_flood_from_one_address_standalone_try(v));
}

fn connection_flood_from_one_address_standalone_try(v: Variant) -> Option<Figures> {
    let _serial = serial();
    raise_nofile(4096);
    let root = site();
    // 127.0.0.2 is loopback, which the bound leaves out unless asked.
    let server = Server::builder(v, root.path())
        .plain()
        .arg("--per-ip-loopback")
        .start();
    let good = GoodClient::start(server.connector());
    let started = Instant::now();
    let (flood, held) = flood(server.addr(), 1000, 256);
    let took = started.elapsed();
    thread::sleep(FLOOD_HELD);
    let figures = good.finish();
    drop(held);
    report(&format!(
        "flood: 1000 connections from 127.0.0.2 (opened and sorted in {}): {flood:?}",
        secs(took)
    ));
    assert_eq!(flood.held, 256, "{flood:?} ({figures})");
    assert_eq!(flood.refused_503 + flood.closed, 744, "{flood:?}");
    assert!(flood.refused_503 > 0, "no refusal was a 503: {flood:?}");
    assert_logged_once(
        v,
        server.stderr(),
        "staticd: 127.0.0.2: over --max-connections-per-ip (256): connections refused",
    );
    Some(figures)
}

/// Inetd mode: the bound is the super-server's. Under busybox `tcpsvd -c 300
/// -C 20`, 200 connections from 127.0.0.2: 20 are served (or wait for their
/// request), the rest are closed at once, and the good client at 127.0.0.1
/// is served throughout. `-b 1024`: with tcpsvd's default listen backlog
/// (20) the burst overflows the queue, and a SYN dropped there — the good
/// client's too — is sent again only a second later.
#[test]
fn connection_flood_from_one_address_inetd_under_tcpsvd() {
    with_p99_under_bound(connection_flood_from_one_address_inetd_under_tcpsvd_try);
}

fn connection_flood_from_one_address_inetd_under_tcpsvd_try() -> Option<Figures> {
    let _serial = serial();
    let busybox = busybox_with_tcpsvd()?;
    let root = site();
    let staticd_args = vec![
        "--inetd".to_string(),
        "--root".to_string(),
        root.path().display().to_string(),
    ];
    let (_tcpsvd, _stderr, addr) = start_superserver(
        &busybox,
        &["tcpsvd", "-c", "300", "-C", "20", "-b", "1024"],
        &staticd_args,
    );
    let good = GoodClient::start(Connector::new(addr, None));
    let started = Instant::now();
    let (flood, held) = flood(addr, 200, 20);
    let took = started.elapsed();
    thread::sleep(FLOOD_HELD);
    let figures = good.finish();
    drop(held);
    report(&format!(
        "flood under tcpsvd -c 300 -C 20: 200 connections from 127.0.0.2 (opened and sorted \
         in {}): {flood:?}",
        secs(took)
    ));
    assert_eq!(flood.held, 20, "{flood:?} ({figures})");
    assert_eq!(flood.closed, 180, "{flood:?}");
    Some(figures)
}

matrix!([h1, uring] standalone: connection_flood_from_one_address_standalone);

// --- 6: the per-address bound, exactly ----------------------------------------------------

/// `--max-connections-per-ip 5`: five idle connections from 127.0.0.2 stay
/// open; a sixth whose request is readable gets a 503 with Retry-After, a
/// sixth that sends nothing is closed; 127.0.0.1 is still served; once one
/// of the five closes, 127.0.0.2 is served again.
fn per_address_bound_is_exact(v: Variant) {
    let _serial = serial();
    let root = site();
    let server = Server::builder(v, root.path())
        .plain()
        .args(["--max-connections-per-ip", "5", "--per-ip-loopback"])
        .start();
    let mut five: Vec<Conn> = (0..5).map(|_| server.connect_from(ATTACKER)).collect();
    // Accepted, so counted: the sixth below comes after them.
    wait_accepted(server.addr());
    for conn in &mut five {
        assert!(!conn.poll_closed(), "one of the first five was closed");
    }

    // A sixth that asks at once. Its request is readable when the server
    // accepts it, unless the server is quicker than the client's write:
    // then a plain close is right too. One of a few tries gets the 503.
    let mut answered_503 = false;
    for _ in 0..5 {
        let mut sixth = server.connect_from(ATTACKER);
        sixth.send_lossy(request("GET", "/a.txt", &[]));
        match outcome_within(&mut sixth, IO_TIMEOUT) {
            Outcome::Answered(resp) => {
                assert_refused_with_503(&resp, &mut sixth);
                answered_503 = true;
                break;
            }
            Outcome::Closed(got) => assert!(got.is_empty(), "{got:?}"),
            Outcome::Pending => panic!("a sixth connection was neither answered nor closed"),
        }
    }
    assert!(
        answered_503,
        "no sixth connection with a readable request got a 503"
    );

    // A sixth that sends nothing: closed, nothing said.
    let mut silent = server.connect_from(ATTACKER);
    match outcome_within(&mut silent, Duration::from_secs(2)) {
        Outcome::Closed(got) => assert!(got.is_empty(), "{got:?}"),
        other => panic!("a silent sixth connection: {other:?}"),
    }

    // Another address is not affected.
    let resp = server
        .connect_from(GOOD)
        .roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.status, 200);
    for conn in &mut five {
        assert!(!conn.poll_closed(), "one of the first five was closed");
    }

    // One of the five goes: a place for 127.0.0.2 again (once the server
    // has seen the close).
    drop(five.pop());
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let mut conn = server.connect_from(ATTACKER);
        conn.send_lossy(request("GET", "/a.txt", &[]));
        match outcome_within(&mut conn, IO_TIMEOUT) {
            Outcome::Answered(resp) if resp.status == 200 => break,
            other => assert!(
                Instant::now() < deadline,
                "127.0.0.2 not served 3 s after one of its five closed: {other:?}"
            ),
        }
        thread::sleep(Duration::from_millis(50));
    }
    assert_logged_once(
        v,
        server.stderr(),
        "staticd: 127.0.0.2: over --max-connections-per-ip (5): connections refused",
    );
}

/// `--max-connections-per-ip 0` turns the bound off: 300 idle connections
/// from 127.0.0.2 (more than the default 256) stay open, and a 301st is
/// served.
fn per_address_bound_zero_is_off(v: Variant) {
    let _serial = serial();
    raise_nofile(4096);
    let root = site();
    let server = Server::builder(v, root.path())
        .plain()
        .args(["--max-connections-per-ip", "0", "--per-ip-loopback"])
        .start();
    let mut idle: Vec<Conn> = (0..300).map(|_| server.connect_from(ATTACKER)).collect();
    // All accepted: a bound left on would have closed the 257th at accept.
    wait_accepted(server.addr());
    let resp = server
        .connect_from(ATTACKER)
        .roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.status, 200);
    let closed = idle
        .iter_mut()
        .map(|c| c.poll_closed())
        .filter(|&closed| closed)
        .count();
    assert_eq!(closed, 0, "{closed} of 300 idle connections were closed");
    assert!(
        !server
            .stderr()
            .snapshot()
            .iter()
            .any(|l| l.contains("--max-connections-per-ip")),
        "{:#?}",
        server.stderr().snapshot()
    );
}

matrix!([h1, uring] standalone:
    per_address_bound_is_exact,
    per_address_bound_zero_is_off,
);

// --- 7: overload sheds the idle first -----------------------------------------------------

/// `--max-connections 20`, all twenty held by keep-alive connections that
/// got their answer and sit idle (parked): a new client is answered within
/// a second, because the oldest idle connection is closed to make room —
/// that one, and no other. The bound is logged once. (One thread, so that
/// "oldest" is one lot's order.)
fn overload_sheds_the_oldest_idle_connection(v: Variant) {
    let _serial = serial();
    let root = site();
    let mut server = Server::builder(v, root.path())
        .plain()
        .args(["--max-connections", "20", "--threads", "1"])
        .start();
    let mut idle = Vec::new();
    for _ in 0..20 {
        let mut conn = server.connect_from(ATTACKER);
        let resp = conn.roundtrip(request("GET", "/a.txt", &[]));
        assert_eq!(resp.status, 200);
        idle.push(conn);
        thread::sleep(Duration::from_millis(20));
    }
    // All twenty idle: parked, where the run parks them.
    wait_idle(&mut server, 20);
    let started = Instant::now();
    let mut newcomer = server.connect_from(GOOD);
    newcomer.send(request("GET", "/a.txt", &[]));
    let outcome = outcome_within(&mut newcomer, Duration::from_secs(3));
    let waited = started.elapsed();
    report(&format!(
        "shed idle: 20 idle keep-alive connections at --max-connections 20; a new client \
         answered after {}",
        ms(waited)
    ));
    match outcome {
        Outcome::Answered(resp) => assert_eq!(resp.status, 200, "{resp:#?}"),
        other => panic!("the new client, after {waited:?}: {other:?}"),
    }
    assert!(waited < Duration::from_secs(1), "answered after {waited:?}");
    assert!(
        idle[0].wait_closed(Instant::now() + Duration::from_secs(1)),
        "the oldest idle connection is still open"
    );
    let closed: Vec<usize> = (1..20).filter(|&i| idle[i].poll_closed()).collect();
    assert!(
        closed.is_empty(),
        "younger idle connections closed too: {closed:?}"
    );
    assert_logged_once(
        v,
        server.stderr(),
        "staticd: --max-connections (20) reached: closing idle keep-alive connections",
    );
}

/// With all twenty places held by connections in the middle of a request
/// (half a head each: not idle), nothing is shed: a new client waits in the
/// listen queue until the read timeout (2 s) frees places, as before.
///
/// Every wait is counted from when the first busy connection was opened,
/// not from when the newcomer came: the server starts a connection's read
/// clock at its accept, which is after that, and on a loaded machine opening
/// the twenty can take most of the timeout (a CI run answered the newcomer
/// 0.9 s after it came, yet after the first busy connection's 2 s).
fn overload_with_no_idle_connection_waits(v: Variant) {
    let _serial = serial();
    let root = site();
    let server = Server::builder(v, root.path())
        .plain()
        .args([
            "--max-connections",
            "20",
            "--threads",
            "1",
            "--read-timeout",
            "2",
        ])
        .start();
    let read_timeout = Duration::from_secs(2);
    let first_opened = Instant::now();
    let mut busy: Vec<Conn> = (0..20)
        .map(|_| {
            let mut conn = server.connect_from(ATTACKER);
            conn.send("GET /a.txt HTTP/1.1\r\nHost: te");
            conn
        })
        .collect();
    // Each half head read: the server holds every one as busy, not idle.
    wait_all_read_by_server(&busy);
    let started = Instant::now();
    let mut newcomer = server.connect_from(GOOD);
    newcomer.send(request("GET", "/a.txt", &[]));
    // No place can free before the first busy connection's read timeout.
    let quiet = (first_opened + read_timeout - Duration::from_millis(100))
        .saturating_duration_since(Instant::now());
    match outcome_within(&mut newcomer, quiet) {
        Outcome::Pending => {}
        other => panic!(
            "the new client was not kept waiting: {:?} after the first busy connection: \
             {other:?}",
            first_opened.elapsed()
        ),
    }
    let closed = busy
        .iter_mut()
        .map(|c| c.poll_closed())
        .filter(|&closed| closed)
        .count();
    assert_eq!(closed, 0, "{closed} busy connections were shed");
    match outcome_within(&mut newcomer, Duration::from_secs(8)) {
        Outcome::Answered(resp) => assert_eq!(resp.status, 200),
        other => panic!("the new client, after {:?}: {other:?}", started.elapsed()),
    }
    let since_first = first_opened.elapsed();
    let waited = started.elapsed();
    report(&format!(
        "no idle to shed: 20 half-sent heads at --max-connections 20; a new client answered \
         after {}",
        secs(waited)
    ));
    assert!(
        since_first >= read_timeout,
        "served {since_first:?} after the first busy connection was opened, before its read \
         timeout"
    );
}

matrix!([h1, uring] standalone:
    overload_sheds_the_oldest_idle_connection,
    overload_with_no_idle_connection_waits,
);

// --- 8: slowhttptest ----------------------------------------------------------------------

/// Runs slowhttptest (`attack`, for 6 s, probing every 2 s) against a server
/// with default flags while the good client fetches, and asserts that its
/// CSV says "service available" at every sample.
fn slowhttptest_reports_available(v: Variant, name: &str, path: &str, attack: &[&str]) {
    with_p99_under_bound(|| slowhttptest_reports_available_try(v, name, path, attack));
}

fn slowhttptest_reports_available_try(
    v: Variant,
    name: &str,
    path: &str,
    attack: &[&str],
) -> Option<Figures> {
    let _serial = serial();
    let program = tool("slowhttptest", "slowhttptest")?;
    let root = site();
    let server = Server::start(v, &root);
    let out = tempfile::tempdir().unwrap();
    let prefix = out.path().join(name);
    let good = GoodClient::start(server.connector());
    let run = run_bounded(
        Command::new(program)
            .args(attack)
            .args(["-l", "6", "-p", "2", "-g", "-o"])
            .arg(&prefix)
            .args(["-u", &server.url(path)]),
        b"",
        Duration::from_secs(30),
    );
    let figures = good.finish();
    run.assert_success("slowhttptest");
    let csv = prefix.with_extension("csv");
    let samples = service_available(&csv);
    report(&format!(
        "slowhttptest {}: service available at {} of {} samples",
        attack.join(" "),
        samples.iter().filter(|&&a| a).count(),
        samples.len()
    ));
    // Against the slow body attack the run may end within its first second:
    // each POST is answered at once (405), and slowhttptest then closes.
    assert!(!samples.is_empty(), "{}: no samples", csv.display());
    assert!(
        samples.iter().all(|&a| a),
        "slowhttptest found the service unavailable: {samples:?} ({figures}); {}",
        run.describe("slowhttptest")
    );
    Some(figures)
}

/// The "Service Available" column of slowhttptest's CSV, as booleans (it
/// writes the connection count when the probe was answered, else 0).
fn service_available(csv: &Path) -> Vec<bool> {
    let text = fs::read_to_string(csv)
        .unwrap_or_else(|e| panic!("slowhttptest wrote no {}: {e}", csv.display()));
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().expect("a CSV header").split(',').collect();
    let column = header
        .iter()
        .position(|h| h.trim().eq_ignore_ascii_case("service available"))
        .unwrap_or_else(|| panic!("no Service Available column in {header:?}"));
    lines
        .map(|line| {
            let value = line.split(',').nth(column).expect("a full CSV row");
            value.trim().parse::<u64>().expect("a number") > 0
        })
        .collect()
}

/// Slow body (R-U-Dead-Yet): POSTs announcing 100,000 bytes, trickled.
fn slowhttptest_slow_body(v: Variant) {
    let c = per_mode(v, 100, 30).to_string();
    let attack = [
        "-B", "-c", &c, "-i", "1", "-r", "100", "-s", "100000", "-x", "10",
    ];
    slowhttptest_reports_available(v, "slow-body", "/a.txt", &attack);
}

/// Slow read: tiny receive windows, 32 bytes read a second, three pipelined
/// requests for the 64 MB file per connection.
fn slowhttptest_slow_read(v: Variant) {
    let c = per_mode(v, 100, 30).to_string();
    let attack = [
        "-X", "-c", &c, "-r", "100", "-w", "512", "-y", "1024", "-n", "1", "-z", "32", "-k", "3",
    ];
    slowhttptest_reports_available(v, "slow-read", "/big.bin", &attack);
}

/// Slowloris, with the CSV check (tests/hostile.rs runs it without).
fn slowhttptest_slowloris(v: Variant) {
    let c = per_mode(v, 100, 30).to_string();
    let attack = ["-H", "-c", &c, "-i", "1", "-r", "100", "-x", "10"];
    slowhttptest_reports_available(v, "slowloris", "/a.txt", &attack);
}

matrix!([h1, uring] both_modes:
    slowhttptest_slow_body,
    slowhttptest_slow_read,
    slowhttptest_slowloris,
);

// --- 7: HTTP/2 header blocks that never end, from many addresses --------------------------

/// The attackers' addresses: 127.0.0.10 to 127.0.0.49.
fn attacker(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + (i % 40) as u8))
}

/// What an h2c attacker sends before it falls silent: the preface, empty
/// SETTINGS, and a HEADERS frame for stream 1 without END_HEADERS (its
/// block, `:method GET` `:scheme http` `:path /`, waits for a CONTINUATION
/// that never comes).
const UNFINISHED_BLOCK: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\
    \x00\x00\x00\x04\x00\x00\x00\x00\x00\
    \x00\x00\x03\x01\x01\x00\x00\x00\x01\x82\x86\x84";

/// How one attacker's connection ended.
#[derive(Default, Debug)]
struct Ended {
    /// Closed by the server (EOF or reset) before the test's limit.
    closed: usize,
    /// Of those, ended in order: a GOAWAY frame, then EOF.
    with_goaway: usize,
    /// Still open at the limit.
    open: usize,
}

/// Whether `bytes` (what the server sent an h2c client) hold a GOAWAY frame.
fn has_goaway(bytes: &[u8]) -> bool {
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let len = usize::from(bytes[at]) << 16
            | usize::from(bytes[at + 1]) << 8
            | usize::from(bytes[at + 2]);
        if bytes[at + 3] == 0x7 {
            return true;
        }
        at += 9 + len;
    }
    false
}

/// Waits until the server has ended every connection of `conns`, at most
/// until `limit`, reading what it sends.
fn wait_all_ended(conns: Vec<TcpStream>, limit: Instant) -> Ended {
    let mut left: Vec<(TcpStream, Vec<u8>)> = conns
        .into_iter()
        .map(|c| {
            c.set_nonblocking(true).unwrap();
            (c, Vec::new())
        })
        .collect();
    let mut ended = Ended::default();
    let mut chunk = [0u8; 4096];
    loop {
        left.retain_mut(|(conn, got)| loop {
            match io::Read::read(conn, &mut chunk) {
                Ok(0) => {
                    ended.closed += 1;
                    ended.with_goaway += usize::from(has_goaway(got));
                    return false;
                }
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    ended.closed += 1;
                    return false;
                }
            }
        });
        if left.is_empty() || Instant::now() >= limit {
            ended.open = left.len();
            return ended;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Standalone, `--max-connections 1000 --max-connections-per-ip 50
/// --per-ip-loopback --read-timeout 3`: 2,000 h2c connections from 40
/// addresses (50 each, within the per-address bound), each with a header
/// block that never ends. At the bound the oldest of them make room, as idle
/// connections do (they owe their clients nothing yet); the rest are closed
/// when their block's --read-timeout expires, each with a GOAWAY. The good
/// client at 127.0.0.1 is served throughout.
fn unfinished_h2_header_blocks_from_many_addresses(v: Variant) {
    with_p99_under_bound(|| unfinished_h2_header_blocks_from_many_addresses_try(v));
}

fn unfinished_h2_header_blocks_from_many_addresses_try(v: Variant) -> Option<Figures> {
    const ATTACKS: usize = 2000;
    let _serial = serial();
    raise_nofile(8192);
    let root = site();
    let server = Server::builder(v, root.path())
        .plain()
        .args([
            "--max-connections",
            "1000",
            "--max-connections-per-ip",
            "50",
        ])
        .args(["--per-ip-loopback", "--read-timeout", "3"])
        .start();
    let good = GoodClient::start(server.connector());
    let addr = server.addr();
    let started = Instant::now();
    // 10 connections every 20 ms, 2,000 in about 4 s: the attack is what the
    // connections hold, not how fast they come (a burst of thousands at once
    // is the connection flood of section 5).
    let attack = thread::spawn(move || {
        let mut conns = Vec::with_capacity(ATTACKS);
        for i in 0..ATTACKS {
            if i % 10 == 0 {
                thread::sleep(Duration::from_millis(20));
            }
            let mut conn = connect_from(attacker(i), addr);
            // The server may have shed it already: what matters is what it does.
            let _ = conn.write_all(UNFINISHED_BLOCK);
            conns.push(conn);
        }
        conns
    });
    let conns = attack.join().expect("the attackers' thread");
    let opened = started.elapsed();
    // Each must end by its block's deadline (3 s after it arrived) and the
    // close's grace; the limit leaves room for a loaded machine.
    let ended = wait_all_ended(conns, Instant::now() + Duration::from_secs(30));
    let took = started.elapsed();
    let figures = good.finish();
    report(&format!(
        "{ATTACKS} h2c connections with unfinished header blocks from 40 addresses (opened in \
         {}, all ended after {}): {ended:?}",
        secs(opened),
        secs(took)
    ));
    assert_eq!(ended.open, 0, "connections left open: {ended:?}");
    assert_eq!(ended.closed, ATTACKS, "{ended:?}");
    assert!(
        ended.with_goaway > ATTACKS / 2,
        "most were not told GOAWAY before the close: {ended:?}"
    );
    Some(figures)
}

matrix!([h1, uring] standalone: unfinished_h2_header_blocks_from_many_addresses);

// --- compression on the fly (issue 40) ----------------------------------------------------

mod compression_flood {
    //! A flood of HEAD, Range and abandoned GET requests from 127.0.0.2 for text files
    //! of 2 MB, cycling through 12 variants (4 files in br, zstd and gzip) where
    //! `--compress-cache 1` holds 4 at most, so each request wants one that is not
    //! cached. Staticd compressed each whole on the worker thread that asked (a HEAD and
    //! a range too: 0.45 s for 4 MB of brotli in a release build, many times that in the
    //! debug build the tests run), and every other connection on that thread waited.
    //! Now a HEAD or a range gets the file as it is unless the variant is cached, and a
    //! GET's variant is compressed by the background threads (standalone; inetd mode
    //! sends a file over 1 MiB as it is). The good client at 127.0.0.1 is served
    //! throughout, none of its requests taking a second (they took seconds, standalone),
    //! and no HEAD or range of the flood takes a second either (they took seconds in both
    //! modes: in inetd mode the attacker's processes paid, not the good client's).
    use super::*;

    /// Files, each of [`TEXT`] bytes.
    const FILES: usize = 4;
    const TEXT: usize = 2 << 20;
    /// How long the flood lasts.
    const FLOOD: Duration = Duration::from_secs(6);
    /// A request of the good client slower than this is one the flood held up, whatever
    /// else the machine is doing: before the change they took seconds.
    const SLOW: Duration = Duration::from_secs(1);

    /// Text that compresses to about an eighth: words from a list of 64, chosen at
    /// random, so that each file's variants are some 250 KB and 4 fit the cache.
    fn text(seed: u64) -> Vec<u8> {
        let words: Vec<String> = (0..64)
            .map(|i| format!("w{i:x}{}", "o".repeat(i % 5)))
            .collect();
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut out = Vec::with_capacity(TEXT + 16);
        while out.len() < TEXT {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            out.extend_from_slice(words[(x >> 58) as usize].as_bytes());
            out.push(if x >> 54 & 15 == 0 { b'\n' } else { b' ' });
        }
        out.truncate(TEXT);
        out
    }

    fn site() -> Docroot {
        let root = Docroot::new();
        root.file("a.txt", "alpha\n");
        for i in 0..FILES {
            root.file(&format!("t{i}.txt"), text(i as u64));
        }
        root
    }

    /// The `n`th request of the cycle: a HEAD, a range, or a GET (abandoned once sent),
    /// of the next variant.
    fn nth(n: usize) -> (String, bool) {
        let coding = ["br", "zstd", "gzip"][n % 3];
        let file = format!("/t{}.txt", n / 3 % FILES);
        let ae = format!("Accept-Encoding: {coding}");
        match n % 4 {
            0 => (request("HEAD", &file, &[&ae]), true),
            1 => (request("GET", &file, &[&ae, "Range: bytes=0-10"]), true),
            2 => (
                request("HEAD", &file, &[&ae, "Connection: keep-alive"]),
                true,
            ),
            _ => (request("GET", &file, &[&ae]), false),
        }
    }

    /// One of the attacker's threads: its requests until `stop`, a connection each.
    /// Returns how many it sent and the slowest answer to a HEAD or a range (a GET is
    /// abandoned): what those cost the server is what they cost it to answer.
    fn attacker(
        connector: Connector,
        stop: Arc<AtomicBool>,
        first: usize,
        pause: Duration,
    ) -> (usize, Duration) {
        let (mut n, mut sent, mut slowest) = (first, 0, Duration::ZERO);
        while !stop.load(Ordering::SeqCst) {
            let (req, answered) = nth(n);
            let started = Instant::now();
            let _ = panic::catch_unwind(AssertUnwindSafe(|| {
                let mut conn = connector.connect_from(ATTACKER);
                if answered {
                    conn.roundtrip(req);
                } else {
                    let _ = conn.try_send(req);
                }
            }));
            if answered {
                slowest = slowest.max(started.elapsed());
            }
            n += 7;
            sent += 1;
            thread::sleep(pause);
        }
        (sent, slowest)
    }

    fn flood_of_uncached_variants(v: Variant) {
        with_p99_under_bound(|| flood_of_uncached_variants_try(v));
    }

    fn flood_of_uncached_variants_try(v: Variant) -> Option<Figures> {
        let _serial = serial();
        let root = site();
        let server = Server::builder(v, root.path())
            .plain()
            .args(["--compress-cache", "1"])
            .start();
        let good = GoodClient::start(server.connector());
        let stop = Arc::new(AtomicBool::new(false));
        // In inetd mode each request starts a process: fewer, or the flood would be one
        // of processes, which is not this test's point.
        let pause = Duration::from_millis(per_mode(v, 20, 100) as u64);
        let threads: Vec<JoinHandle<(usize, Duration)>> = (0..per_mode(v, 4, 2))
            .map(|i| {
                let (connector, stop) = (server.connector(), stop.clone());
                thread::spawn(move || attacker(connector, stop, i, pause))
            })
            .collect();
        thread::sleep(FLOOD);
        stop.store(true, Ordering::SeqCst);
        let flood: Vec<(usize, Duration)> =
            threads.into_iter().map(|t| t.join().unwrap()).collect();
        let sent: usize = flood.iter().map(|(n, _)| n).sum();
        let slowest = flood.iter().map(|(_, d)| *d).max().unwrap_or_default();
        let figures = good.finish();
        report(&format!(
            "{sent} HEAD, Range and abandoned GET requests from 127.0.0.2 for {} variants \
             not cached, in {}; the slowest HEAD or range answered in {}",
            FILES * 3,
            secs(FLOOD),
            ms(slowest)
        ));
        // A HEAD or a range costs no compression: in inetd mode, where the good
        // client's processes are not the attacker's, this is where the cost showed.
        assert!(
            slowest < SLOW,
            "a HEAD or a range of the flood took {} ({sent} sent)",
            ms(slowest)
        );
        assert!(sent >= 20, "the flood sent only {sent} requests");
        assert!(
            figures.max < SLOW,
            "a request of the good client took over {} ({figures})",
            secs(SLOW)
        );
        Some(figures)
    }

    matrix!([h1, uring] both_modes: flood_of_uncached_variants);
}
