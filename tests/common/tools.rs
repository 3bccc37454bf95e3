//! Outside programs some tests drive (curl, tcpserver, busybox tcpsvd,
//! slowhttptest). On a machine without them such a test is skipped, saying
//! so in one line on stderr; `.ci/run` installs them all and sets
//! `STATICD_TEST_REQUIRE_TOOLS=1`, which turns every skip into a failure, so
//! CI proves every test ran.

use std::io::{Read, Write};

use super::describe;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Set (to anything but `0` or empty) by `.ci/run`: a missing tool fails the test.
const REQUIRE_TOOLS: &str = "STATICD_TEST_REQUIRE_TOOLS";

/// `program` on PATH, or None after `skip` (Debian's `package` provides it).
pub fn tool(program: &str, package: &str) -> Option<PathBuf> {
    let found = find_on_path(program);
    if found.is_none() {
        skip(&format!(
            "`{program}` not found on PATH (Debian package {package}); .ci/run installs it"
        ));
    }
    found
}

/// busybox, if it has the tcpsvd applet (Debian builds it without), or None
/// after `skip`.
pub fn busybox_with_tcpsvd() -> Option<PathBuf> {
    let busybox = tool("busybox", "busybox")?;
    let applets = Command::new(&busybox)
        .arg("--list")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    if applets.lines().any(|a| a == "tcpsvd") {
        return Some(busybox);
    }
    skip(&format!(
        "{} has no tcpsvd applet (Debian's busybox is built without it); \
         .ci/run builds one that has it",
        busybox.display()
    ));
    None
}

/// Skips the running test, or fails it when `STATICD_TEST_REQUIRE_TOOLS` is set.
pub fn skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    if tools_required() {
        panic!("{test}: {why} ({REQUIRE_TOOLS} is set, so this test may not be skipped)");
    }
    // Straight to the process's stderr: the test harness captures what
    // `eprintln!` prints and shows it only for failing tests, and a skip
    // must be seen.
    let line = format!("skipped: {test}: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

fn tools_required() -> bool {
    std::env::var_os(REQUIRE_TOOLS).is_some_and(|v| !v.is_empty() && v != "0")
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// What an outside program that ran to completion left behind.
pub struct Run {
    pub status: ExitStatus,
    pub raw_stdout: Vec<u8>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn describe(&self, what: &str) -> String {
        format!(
            "{what} ({}):\n--- stdout ---\n{}\n--- stderr ---\n{}",
            describe(self.status),
            self.stdout,
            self.stderr
        )
    }

    pub fn assert_success(&self, what: &str) {
        assert!(self.status.success(), "{}", self.describe(what));
    }
}

/// Runs `cmd` in its own process group with `input` on stdin (then closed); past `limit`
/// the whole group (testssl.sh starts many openssl processes) is killed and the test fails.
pub fn run_bounded(cmd: &mut Command, input: &[u8], limit: Duration) -> Run {
    let shown = format!("{cmd:?}");
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    let group = rustix::process::Pid::from_child(&child);
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // A program that exits without reading its input must not block this thread.
    let writer = thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let collect = |mut stream: Box<dyn Read + Send>| {
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stream.read_to_end(&mut bytes);
            let _ = sender.send(bytes);
        });
        receiver
    };
    let stdout = collect(Box::new(child.stdout.take().unwrap()));
    let stderr = collect(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let mut overran = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            overran = true;
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            break child.wait().expect("wait");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    // A process the program left behind could keep the pipes open: wait a little only.
    let output = |receiver: mpsc::Receiver<Vec<u8>>| {
        receiver
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{shown}: something it started kept its output open"))
    };
    let raw_stdout = output(stdout);
    let run = Run {
        status,
        stdout: String::from_utf8_lossy(&raw_stdout).into_owned(),
        raw_stdout,
        stderr: String::from_utf8_lossy(&output(stderr)).into_owned(),
    };
    if overran {
        panic!("{}", run.describe(&format!("{shown} ran past {limit:?}")));
    }
    run
}

/// What wrk printed about failures: its `Socket errors` and `Non-2xx or 3xx` lines,
/// which it prints only when there were some.
pub fn wrk_failures(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.contains("Socket errors") || l.contains("Non-2xx"))
        .collect()
}

/// How many requests wrk counted (`N requests in ...`).
pub fn wrk_requests(stdout: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk's output:\n{stdout}"))
}
