//! A log output that blocks holds nothing up (standalone mode): log lines
//! go through a bounded queue to a writer thread of their own. While the
//! queue has room, requests are answered with the output stuck; once it is
//! full, workers wait (no line is dropped); a stop still ends the process
//! within its shutdown grace, counting the lines never written in a last
//! line, written only if the output takes it. And with an output that is
//! read, every line arrives, whole, in one piece.

#[macro_use]
mod common;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::process::{ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::*;
use rustix::process::Signal;

/// The shutdown grace the blocked-output tests give (`--shutdown-grace`).
const GRACE: Duration = Duration::from_secs(1);
/// How much longer than the grace a stop may take (listeners closing,
/// the last call of idle connections, the runtimes' end).
const STOP_SLACK: Duration = Duration::from_secs(4);
/// The query that makes each access line long: the pipe (64 KiB) fills
/// after about a hundred lines.
const QUERY_LEN: usize = 600;
/// Lines the queue (1 MiB) holds on top of a full pipe, at least: these
/// requests must all be answered with the output stuck.
const ANSWERED_WHILE_STUCK: u64 = 1200;
/// What the queue and the writer's batch hold at most (1 MiB each), with
/// the pipe and slack: the server must stop answering before this many
/// bytes of lines, or lines were dropped.
const MOST_HELD: u64 = 3 << 20;
/// Concurrent clients of the load.
const CLIENTS: usize = 4;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root
}

matrix!([h1, uring] standalone:
    a_stderr_nobody_reads_blocks_neither_serving_nor_stopping,
    a_stuck_log_file_is_counted_in_a_last_line_on_stderr,
    with_stderr_read_no_line_is_lost_or_cut,
    with_a_log_file_no_line_is_lost_or_cut_and_all_are_written_by_the_stop,
);

/// `staticd` standalone on 127.0.0.1 with the common access log, a 1 s
/// grace, and `extra` flags; its stderr is `stderr`. On the cell's transport
/// (`--io-uring` in the `uring` cell); the wire and HTTP version are the
/// test's own (cleartext HTTP/1.1).
fn command(v: Variant, root: &Docroot, extra: &[&str], stderr: Stdio) -> Command {
    let mut cmd = Command::new(staticd_bin());
    cmd.arg("--root")
        .arg(root.path())
        .args(["--port", "0", "--bind", "127.0.0.1", "--threads", "2"])
        .args(["--log-format", "common", "--shutdown-grace", "1"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    if v.is_io_uring() {
        cmd.arg("--io-uring");
    }
    cmd
}

/// The address in a `staticd: listening on ADDR` line, if it is one.
fn listening(line: &str) -> Option<SocketAddr> {
    line.trim_end()
        .strip_prefix("staticd: listening on ")
        .map(|a| a.parse().expect("an address in the listening line"))
}

/// Starts staticd with stderr a pipe that the test reads only up to the
/// listening line, then leaves full: the reader is kept open, unread.
fn start_with_stuck_stderr(
    v: Variant,
    root: &Docroot,
) -> (ChildGuard, BufReader<ChildStderr>, SocketAddr) {
    let mut child = ChildGuard::new(
        command(v, root, &[], Stdio::piped())
            .spawn()
            .expect("spawn staticd"),
    );
    let mut stderr = BufReader::new(child.take_stderr().unwrap());
    // A thread reads the start-up lines, so that a server that never says
    // it listens fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = thread::spawn(move || {
        let mut line = String::new();
        loop {
            line.clear();
            if stderr.read_line(&mut line).unwrap_or(0) == 0 {
                panic!("staticd's stderr ended before a listening line");
            }
            if let Some(addr) = listening(&line) {
                tx.send(addr).unwrap();
                return stderr;
            }
        }
    });
    let addr = rx.recv_timeout(IO_TIMEOUT).expect("a listening line");
    (child, reader.join().unwrap(), addr)
}

/// Bytes waiting in a pipe (FIONREAD).
fn unread(pipe: &impl AsFd) -> u64 {
    rustix::io::ioctl_fionread(pipe).expect("FIONREAD")
}

/// GET `path` on `stream` and read the whole response. False when the
/// connection ended instead (as at a stop).
fn get(stream: &mut BufReader<TcpStream>, path: &str) -> bool {
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    if stream.get_mut().write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut length = None;
    let mut line = String::new();
    loop {
        line.clear();
        match stream.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => {
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse::<usize>().ok();
                }
            }
        }
    }
    let mut body = vec![0; length.expect("a Content-Length")];
    stream.read_exact(&mut body).is_ok()
}

fn connect(addr: SocketAddr, read_timeout: Duration) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(read_timeout)).unwrap();
    BufReader::new(stream)
}

/// The path each load request asks for: a long query makes a long line.
fn long_path(client: usize, i: u64) -> String {
    format!("/a.txt?c={client}&i={i}&q={}", "q".repeat(QUERY_LEN))
}

/// Clients that fetch long paths until their connection ends, counting the
/// responses. A response may wait for as long as a stuck log makes it
/// (that is the point); the process's exit ends the wait.
struct Load {
    answered: Arc<AtomicU64>,
    /// Set: each client sends no further request.
    done: Arc<AtomicBool>,
    clients: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(addr: SocketAddr) -> Load {
        let answered = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let clients = (0..CLIENTS)
            .map(|c| {
                let (answered, done) = (Arc::clone(&answered), Arc::clone(&done));
                thread::spawn(move || {
                    let mut stream = connect(addr, Duration::from_secs(60));
                    for i in 0.. {
                        if done.load(Ordering::SeqCst) || !get(&mut stream, &long_path(c, i)) {
                            return;
                        }
                        answered.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        Load {
            answered,
            done,
            clients,
        }
    }

    fn answered(&self) -> u64 {
        self.answered.load(Ordering::SeqCst)
    }

    /// Waits for `n` responses; panics if they do not come in time.
    fn wait_answered(&self, n: u64, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.answered() < n {
            assert!(
                Instant::now() < deadline,
                "{what}: only {} of {n} requests answered",
                self.answered()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until no response has come for a while: the workers wait for
    /// room in the log's queue. Returns how many were answered.
    fn wait_stalled(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = self.answered();
        loop {
            thread::sleep(Duration::from_millis(500));
            let now = self.answered();
            if now == last {
                return now;
            }
            assert!(
                Instant::now() < deadline,
                "the server never stopped answering with its log output stuck: {now} answered"
            );
            last = now;
        }
    }

    /// Tells the clients to send no more requests: each ends once its
    /// request in flight is answered.
    fn finish(&self) {
        self.done.store(true, Ordering::SeqCst);
    }

    fn join(self) -> u64 {
        for c in self.clients {
            c.join().expect("a load client");
        }
        self.answered.load(Ordering::SeqCst)
    }
}

/// The length of one load request's access line, about.
fn line_len() -> u64 {
    (long_path(0, 0).len() + 60) as u64
}

/// Sends SIGTERM and waits for the exit: within the grace and the slack,
/// with status 0. Returns how long it took.
fn stop_within_bound(child: &mut ChildGuard) -> Duration {
    let start = Instant::now();
    child.signal(Signal::TERM);
    let status = child.wait_timeout(GRACE + STOP_SLACK + IO_TIMEOUT);
    let took = start.elapsed();
    let status = status.expect("staticd did not exit after SIGTERM with its log output stuck");
    assert!(
        took <= GRACE + STOP_SLACK,
        "the stop took {took:?}, over the grace ({GRACE:?}) and {STOP_SLACK:?}"
    );
    assert_eq!(status.code(), Some(0), "staticd: {}", describe(status));
    took
}

/// Checks that every line is an access line of the load, whole: a pipe
/// is written whole lines at a time, so even a writer stuck in a write
/// leaves none cut off. Returns how many there are.
fn whole_access_lines(text: &str) -> usize {
    let mut whole = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("staticd: ") {
            continue;
        }
        assert!(
            line.starts_with("127.0.0.1 - - [") && line.ends_with(" HTTP/1.1\" 200 6\n"),
            "not a whole access line: {line:?}"
        );
        assert!(line.contains(&"q".repeat(QUERY_LEN)), "{line:?}");
        whole += 1;
    }
    whole
}

fn a_stderr_nobody_reads_blocks_neither_serving_nor_stopping(v: Variant) {
    let root = site();
    let (mut child, mut stderr, addr) = start_with_stuck_stderr(v, &root);
    let load = Load::start(addr);

    // (1) The pipe fills after a hundred lines or so; the queue takes the
    // next thousand and more, and their requests are answered meanwhile.
    load.wait_answered(ANSWERED_WHILE_STUCK, "with the pipe full and the queue not");
    let in_pipe = unread(stderr.get_ref());
    // (Its 16 pages each take whole lines of a write of 4 KiB at most.)
    assert!(
        in_pipe >= 32 << 10,
        "the pipe is full: {in_pipe} bytes in it"
    );

    // Then the queue is full too: the workers wait for room. That they
    // stop answering at all shows that no line is dropped.
    let answered = load.wait_stalled();
    assert!(
        answered * line_len() < MOST_HELD,
        "{answered} lines answered: more than the queue can hold, so lines were dropped"
    );

    // (2) A stop still ends the process within the grace and a bound,
    // with the pipe still full.
    let took = stop_within_bound(&mut child);
    eprintln!("stopped in {took:?} with {answered} requests answered, stderr stuck");
    load.join();

    // (3) Read now, the pipe holds whole access lines; the count of
    // unwritten lines follows if the pipe took it (it was full, so it did
    // not: the process exited anyway).
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let whole = whole_access_lines(&rest);
    assert!(whole >= 50, "{whole} whole lines in the pipe");
    if let Some(last) = rest.lines().find(|l| l.contains("not written")) {
        assert!(
            last.starts_with("staticd: ") && last.ends_with("(log output blocked)"),
            "{last:?}"
        );
    }
}

/// A FIFO at `path` (mkfifo), opened for reading without waiting for a
/// writer: the reader staticd's `--log-file` open needs, kept unread.
fn fifo(path: &std::path::Path) -> File {
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        path,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .expect("mkfifo");
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .expect("open the FIFO for reading")
}

fn a_stuck_log_file_is_counted_in_a_last_line_on_stderr(v: Variant) {
    let root = site();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.fifo");
    let mut log = fifo(&path);
    let log_file = path.to_str().unwrap();
    let mut cmd = command(v, &root, &["--log-file", log_file], Stdio::piped());
    let (mut child, stderr) = spawn_with_stderr(&mut cmd);
    let addr = listening(&stderr.wait_line(|l| listening(l).is_some())).unwrap();
    let load = Load::start(addr);
    load.wait_answered(ANSWERED_WHILE_STUCK, "with the log file stuck");
    let answered = load.wait_stalled();
    assert!(answered * line_len() < MOST_HELD, "{answered} answered");
    // The requests in flight are the last.
    load.finish();

    stop_within_bound(&mut child);
    let answered = load.join();
    // stderr is read: the last line made it, and its count is exact: every
    // response has its line, in the file or in the count.
    let last = stderr.wait_line(|l| l.contains("not written"));
    let unwritten: u64 = last
        .strip_prefix("staticd: ")
        .and_then(|l| l.strip_suffix(" log lines not written (log output blocked)"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the last line: {last:?}"));
    let mut text = Vec::new();
    let _ = log.read_to_end(&mut text);
    let written = whole_access_lines(&String::from_utf8(text).unwrap()) as u64;
    let logged = written + unwritten;
    assert_eq!(
        logged, answered,
        "{answered} answered; {written} lines written, {unwritten} counted unwritten"
    );
    assert!(unwritten > 0);
    fs::remove_file(&path).unwrap();
}

/// Fetches `per_client` requests on each of `clients` connections.
fn fetch_all(addr: SocketAddr, clients: usize, per_client: u64) {
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            thread::spawn(move || {
                let mut stream = connect(addr, IO_TIMEOUT);
                for i in 0..per_client {
                    assert!(get(&mut stream, &format!("/a.txt?c={c}&i={i}")), "{c}/{i}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client");
    }
}

/// Checks that `lines` are exactly one whole access line per request of
/// `fetch_all`, each client's in order.
fn check_every_line(lines: &[String], clients: usize, per_client: u64) {
    let mut next = vec![0; clients];
    for line in lines {
        let (c, i) = line
            .strip_prefix("127.0.0.1 - - [")
            .and_then(|l| l.split_once("] \"GET /a.txt?c="))
            .and_then(|(_, l)| l.strip_suffix(" HTTP/1.1\" 200 6"))
            .and_then(|l| l.split_once("&i="))
            .unwrap_or_else(|| panic!("not a whole access line: {line:?}"));
        let (c, i): (usize, u64) = (c.parse().unwrap(), i.parse().unwrap());
        assert_eq!(i, next[c], "client {c}'s lines in order");
        next[c] += 1;
    }
    assert!(next.iter().all(|&n| n == per_client), "{next:?}");
}

const CLIENTS_READ: usize = 8;
const PER_CLIENT_READ: u64 = 2500;

fn with_stderr_read_no_line_is_lost_or_cut(v: Variant) {
    let root = site();
    let mut cmd = command(v, &root, &[], Stdio::piped());
    let (mut child, stderr) = spawn_with_stderr(&mut cmd);
    let addr = listening(&stderr.wait_line(|l| listening(l).is_some())).unwrap();
    fetch_all(addr, CLIENTS_READ, PER_CLIENT_READ);
    let total = CLIENTS_READ * PER_CLIENT_READ as usize;
    let access = |lines: &[String]| -> Vec<String> {
        let lines = lines.iter().filter(|l| !l.starts_with("staticd: "));
        lines.cloned().collect()
    };
    let lines = stderr.wait_for(IO_TIMEOUT, |l| access(l).len() >= total);
    let lines =
        lines.unwrap_or_else(|| panic!("{} of {total} lines", access(&stderr.snapshot()).len()));
    check_every_line(&access(&lines), CLIENTS_READ, PER_CLIENT_READ);
    stop_within_bound(&mut child);
    // A stop with nothing unwritten says nothing about it.
    assert!(!stderr.snapshot().iter().any(|l| l.contains("not written")));
}

fn with_a_log_file_no_line_is_lost_or_cut_and_all_are_written_by_the_stop(v: Variant) {
    let root = site();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let mut cmd = command(
        v,
        &root,
        &["--log-file", path.to_str().unwrap()],
        Stdio::piped(),
    );
    let (mut child, stderr) = spawn_with_stderr(&mut cmd);
    let addr = listening(&stderr.wait_line(|l| listening(l).is_some())).unwrap();
    fetch_all(addr, CLIENTS_READ, PER_CLIENT_READ);
    // Stopped at once: the lines still queued are written before the exit.
    stop_within_bound(&mut child);
    let text = fs::read_to_string(&path).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    check_every_line(&lines, CLIENTS_READ, PER_CLIENT_READ);
    assert!(text.ends_with('\n'));
    let _ = io::stderr().flush();
}
