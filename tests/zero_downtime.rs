//! Zero-downtime restart: under wrk's load, a new staticd started with --reuse-port on
//! the address the old one serves takes new connections, SIGTERM lets the old one finish
//! what it has and exit, and wrk sees no failed request.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use common::*;
use rustix::process::Signal;

/// How long wrk runs; the hand-over happens in its middle.
const LOAD: Duration = Duration::from_secs(6);

/// A standalone staticd on 127.0.0.1:`port`, logging to `log`, once it listens.
fn start(root: &Path, port: u16, log: &Path, extra: &[&str]) -> (ChildGuard, Lines) {
    let mut cmd = Command::new(staticd_bin());
    cmd.arg("--root")
        .arg(root)
        .args([
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--threads",
            "2",
        ])
        .arg("--log-file")
        .arg(log)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = ChildGuard::new(cmd.spawn().expect("spawn staticd"));
    let stderr = Lines::default();
    stderr.drain(child.take_stderr().unwrap());
    stderr.wait_line(|l| l.starts_with("staticd: listening on 127.0.0.1:"));
    (child, stderr)
}

fn log_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .count()
}

/// What wrk printed about failures: its `Socket errors` and `Non-2xx or 3xx` lines,
/// which it prints only when there were some.
fn wrk_failures(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.contains("Socket errors") || l.contains("Non-2xx"))
        .collect()
}

fn wrk_requests(stdout: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk's output:\n{stdout}"))
}

/// The hand-over under `wrk ARGS` load; returns wrk's output and each process's count
/// of logged responses.
fn hand_over(wrk: PathBuf, wrk_args: &'static [&'static str]) -> (String, usize, usize) {
    let root = Docroot::new();
    root.file("a.txt", "x".repeat(1024));
    let logs = Docroot::new();
    let (old_log, new_log) = (logs.join("old.log"), logs.join("new.log"));
    let port = free_port();
    let (mut old, _old_stderr) = start(root.path(), port, &old_log, &[]);
    let url = format!("http://127.0.0.1:{port}/a.txt");
    let load = thread::spawn(move || {
        let mut cmd = Command::new(wrk);
        cmd.args(wrk_args)
            .arg(format!("-d{}s", LOAD.as_secs()))
            .arg(url);
        run_bounded(&mut cmd, b"", LOAD + Duration::from_secs(20))
    });
    thread::sleep(LOAD / 4);
    let (mut new, _new_stderr) = start(root.path(), port, &new_log, &["--reuse-port"]);
    thread::sleep(LOAD / 4);
    old.signal(Signal::TERM);
    let status = old
        .wait_timeout(Duration::from_secs(15))
        .expect("the old staticd still runs 15 s after SIGTERM");
    assert_eq!(status.code(), Some(0), "old staticd: {}", describe(status));
    let served_by_old = log_lines(&old_log);
    let run = load.join().unwrap();
    run.assert_success("wrk");
    new.signal(Signal::TERM);
    let status = new.wait_timeout(IO_TIMEOUT).expect("the new staticd exits");
    assert_eq!(status.code(), Some(0), "new staticd: {}", describe(status));
    (run.stdout, served_by_old, log_lines(&new_log))
}

fn assert_lossless(stdout: &str, old: usize, new: usize) {
    let failures = wrk_failures(stdout);
    assert!(
        failures.is_empty(),
        "failed requests: {failures:?}\n{stdout}"
    );
    let requests = wrk_requests(stdout);
    eprintln!("wrk: {requests} requests; logged by the old process {old}, the new {new}");
    assert!(old > 0 && new > 0, "served: old {old}, new {new}\n{stdout}");
    // Every request wrk counts was answered by one of the two (a response in flight when
    // wrk stopped is logged but not counted).
    assert!(
        (old + new) as u64 >= requests,
        "wrk counted {requests} requests, the logs {old} + {new}\n{stdout}"
    );
}

/// Keep-alive load, as browsers and proxies make: the old process closes each connection
/// only after answering a request on it, with `Connection: close`, and wrk reconnects to
/// the new one.
#[test]
fn hand_over_under_keep_alive_load_fails_no_request() {
    let Some(wrk) = tool("wrk", "wrk") else {
        return;
    };
    let (stdout, old, new) = hand_over(wrk, &["-t2", "-c32"]);
    assert_lossless(&stdout, old, new);
}
