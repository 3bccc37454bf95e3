//! Child processes: stderr collection, kill-on-drop guards, runs that must exit.

use super::*;

/// Lines written to stderr by one or more child processes, collected by drain threads so
/// that no child ever blocks on a full pipe.
#[derive(Clone, Default)]
pub struct Lines {
    inner: Arc<(Mutex<Vec<String>>, Condvar)>,
}

impl Lines {
    pub fn drain(&self, stream: impl Read + Send + 'static) -> JoinHandle<()> {
        let lines = self.clone();
        thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf);
                        lines.push(line.trim_end_matches(['\n', '\r']).to_string());
                    }
                }
            }
        })
    }

    pub fn push(&self, line: String) {
        let (lock, cond) = &*self.inner;
        lock.lock().unwrap().push(line);
        cond.notify_all();
    }

    pub fn snapshot(&self) -> Vec<String> {
        self.inner.0.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the collected lines; returns the lines then, or `None`
    /// after `timeout`.
    pub fn wait_for(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&[String]) -> bool,
    ) -> Option<Vec<String>> {
        let deadline = Instant::now() + timeout;
        let (lock, cond) = &*self.inner;
        let mut lines = lock.lock().unwrap();
        loop {
            if done(&lines) {
                return Some(lines.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            lines = cond.wait_timeout(lines, deadline - now).unwrap().0;
        }
    }

    /// Waits for the first line satisfying `pred`.
    pub fn wait_line(&self, pred: impl Fn(&str) -> bool) -> String {
        let found = self.wait_for(IO_TIMEOUT, |lines| lines.iter().any(|l| pred(l)));
        match found {
            Some(lines) => lines.into_iter().find(|l| pred(l)).unwrap(),
            None => panic!(
                "no matching stderr line within {IO_TIMEOUT:?}; stderr so far: {:#?}",
                self.snapshot()
            ),
        }
    }
}

/// A child process that is killed and reaped when dropped.
/// Spawns `cmd` with stdin and stdout on /dev/null and its stderr collected line by line:
/// the child (killed on drop) and those lines.
pub fn spawn_with_stderr(cmd: &mut Command) -> (ChildGuard, Lines) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let program = cmd.get_program().to_string_lossy().into_owned();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    let mut child = ChildGuard::new(child);
    let stderr = Lines::default();
    stderr.drain(child.take_stderr().unwrap());
    (child, stderr)
}

pub struct ChildGuard {
    child: Child,
    status: Option<ExitStatus>,
}

impl ChildGuard {
    pub fn new(child: Child) -> ChildGuard {
        ChildGuard {
            child,
            status: None,
        }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
    }

    pub fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)
            .expect("send signal");
    }

    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("try_wait");
        }
        self.status
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_status() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// CPU time (user + system) consumed so far, from /proc/PID/stat.
    pub fn cpu_time(&self) -> Duration {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.id())).expect("read stat");
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // USER_HZ is 100 on every Linux architecture the tests run on.
        Duration::from_millis(ticks * 10)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Describes how an exit status came about, for assertion messages.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("{status:?}"),
    }
}

/// What a `staticd` run that was expected to exit by itself left behind.
#[derive(Debug)]
pub struct Outcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: Vec<String>,
}

/// Runs `staticd ARGS` to completion (bounded by [`IO_TIMEOUT`]).
pub fn run_to_exit<S: AsRef<OsStr>>(args: &[S]) -> Outcome {
    run_to_exit_with(args, &[], false)
}

/// [`run_to_exit`] with these environment variables, and as nobody (uid
/// 65534) when `unprivileged` and the tests run as root.
pub fn run_to_exit_with<S: AsRef<OsStr>>(
    args: &[S],
    envs: &[(&str, &str)],
    unprivileged: bool,
) -> Outcome {
    let mut cmd = Command::new(staticd_bin());
    without_staticd_env(&mut cmd);
    cmd.envs(envs.iter().copied());
    if unprivileged && rustix::process::geteuid().is_root() {
        cmd.uid(65534).gid(65534);
    }
    wait_for_exit(cmd, args)
}

/// [`run_to_exit`] with RLIMIT_NOFILE lowered to `n`.
pub fn run_to_exit_with_nofile<S: AsRef<OsStr>>(args: &[S], n: u64) -> Outcome {
    let mut cmd = Command::new(staticd_bin());
    without_staticd_env(&mut cmd);
    limit_nofile(&mut cmd, n);
    wait_for_exit(cmd, args)
}

/// Lowers RLIMIT_NOFILE (soft and hard) of what `cmd` starts to `n`.
pub fn limit_nofile(cmd: &mut Command, n: u64) {
    let limit = rustix::process::Rlimit {
        current: Some(n),
        maximum: Some(n),
    };
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
                .map_err(io::Error::from)
        });
    }
}

/// Runs `cmd` with `args` to its exit (bounded by [`IO_TIMEOUT`]).
fn wait_for_exit<S: AsRef<OsStr>>(mut cmd: Command, args: &[S]) -> Outcome {
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = ChildGuard::new(cmd.spawn().expect("spawn staticd"));
    let stdout = Lines::default();
    let stderr = Lines::default();
    let drains = [
        stdout.drain(child.child.stdout.take().unwrap()),
        stderr.drain(child.child.stderr.take().unwrap()),
    ];
    let shown: Vec<&OsStr> = args.iter().map(AsRef::as_ref).collect();
    let status = child
        .wait_timeout(IO_TIMEOUT)
        .unwrap_or_else(|| panic!("staticd {shown:?} did not exit within {IO_TIMEOUT:?}"));
    for drain in drains {
        drain.join().unwrap();
    }
    Outcome {
        status,
        stdout: stdout.snapshot().join("\n"),
        stderr: stderr.snapshot(),
    }
}

/// Leaves out the caller's STATICD_* variables (every flag reads one): a
/// test gets only the settings it names. The tests' own (STATICD_TEST_*)
/// stay.
pub fn without_staticd_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("STATICD_") && !name.starts_with("STATICD_TEST_") {
            cmd.env_remove(&key);
        }
    }
}

/// Asserts the contract's start-up failure: exit `code` and exactly one stderr line,
/// starting `staticd: `, that contains every one of `needles`.
pub fn assert_startup_failure(outcome: &Outcome, code: i32, needles: &[&str]) {
    assert_eq!(
        outcome.status.code(),
        Some(code),
        "expected exit code {code}, got {}; stderr: {:#?}",
        describe(outcome.status),
        outcome.stderr
    );
    let lines: Vec<&String> = outcome.stderr.iter().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected ONE line on stderr, got {:#?}",
        outcome.stderr
    );
    assert!(
        lines[0].starts_with("staticd: "),
        "stderr line must start with `staticd: `: {:?}",
        lines[0]
    );
    for needle in needles {
        assert!(
            lines[0].contains(needle),
            "stderr line {:?} does not mention {needle:?}",
            lines[0]
        );
    }
}

/// Asserts a usage error: exit 2, nothing on stdout, and clap's message on stderr (it
/// may take several lines: valid values, tips) starting `staticd: `, containing every
/// one of `needles`.
pub fn assert_usage_error(outcome: &Outcome, needles: &[&str]) {
    assert_eq!(
        outcome.status.code(),
        Some(2),
        "expected exit code 2, got {}; stderr: {:#?}",
        describe(outcome.status),
        outcome.stderr
    );
    assert_eq!(outcome.stdout, "", "a usage error prints nothing on stdout");
    let first = outcome.stderr.first().map_or("", String::as_str);
    assert!(
        first.starts_with("staticd: ") && !first.starts_with("staticd: error"),
        "stderr must start with `staticd: ` and the message: {:#?}",
        outcome.stderr
    );
    let all = outcome.stderr.join("\n");
    for needle in needles {
        assert!(
            all.contains(needle),
            "stderr does not mention {needle:?}: {:#?}",
            outcome.stderr
        );
    }
}

/// Checks a common-log timestamp such as `[30/Nov/2026:04:48:17 +0000]`.
pub fn assert_log_timestamp(stamp: &str) {
    let bytes = stamp.as_bytes();
    let shape_ok = bytes.len() == 28
        && bytes[0] == b'['
        && bytes[27] == b']'
        && bytes[3] == b'/'
        && bytes[7] == b'/'
        && bytes[12] == b':'
        && bytes[15] == b':'
        && bytes[18] == b':'
        && bytes[21] == b' '
        && (bytes[22] == b'+' || bytes[22] == b'-')
        && [1, 2, 8, 9, 10, 11, 13, 14, 16, 17, 19, 20, 23, 24, 25, 26]
            .iter()
            .all(|&i| bytes[i].is_ascii_digit());
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    assert!(
        shape_ok && months.contains(&&stamp[4..7]),
        "bad log timestamp {stamp:?}, want like [30/Nov/2026:04:48:17 +0000]"
    );
}

/// Splits a common/combined log line `IP - - [STAMP] REST` into the IP and
/// REST, checking the timestamp's shape.
pub fn split_common(line: &str) -> (&str, &str) {
    let (ip, after) = line
        .split_once(" - - ")
        .unwrap_or_else(|| panic!("not a common-log line: {line:?}"));
    assert!(after.len() > 29, "not a common-log line: {line:?}");
    assert_log_timestamp(&after[..28]);
    assert_eq!(&after[28..29], " ", "{line:?}");
    (ip, &after[29..])
}

/// `tcpserver -RHl0 127.0.0.1 PORT staticd ARGS...` on a free port (a few tries, in case
/// another test takes the port meanwhile).
pub fn start_tcpserver(program: &Path, staticd_args: &[String]) -> (ChildGuard, Lines, SocketAddr) {
    start_superserver(program, &["-RHl0"], staticd_args)
}

/// `PROGRAM ARGS... 127.0.0.1 PORT staticd STATICD_ARGS...` (tcpserver, busybox tcpsvd)
/// on a free port, once it listens (a few tries, in case another test takes the port
/// meanwhile).
pub fn start_superserver(
    program: &Path,
    args: &[&str],
    staticd_args: &[String],
) -> (ChildGuard, Lines, SocketAddr) {
    let mut failures = Vec::new();
    for _ in 0..3 {
        match try_start_superserver(program, args, staticd_args) {
            Ok(started) => return started,
            Err(why) => failures.push(why),
        }
    }
    panic!("{} did not start: {failures:#?}", program.display());
}

fn try_start_superserver(
    program: &Path,
    args: &[&str],
    staticd_args: &[String],
) -> Result<(ChildGuard, Lines, SocketAddr), String> {
    let port = free_port();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .args(["127.0.0.1", &port.to_string(), staticd_bin()])
        .args(staticd_args)
        .env_remove("TCPREMOTEIP")
        .env_remove("TCPREMOTEADDR")
        .env_remove("REMOTE_HOST")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut process = ChildGuard::new(cmd.spawn().expect("spawn the superserver"));
    let stderr = Lines::default();
    stderr.drain(process.take_stderr().unwrap());
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + IO_TIMEOUT;
    while TcpStream::connect_timeout(&addr, IO_TIMEOUT).is_err() {
        if let Some(status) = process.try_status() {
            thread::sleep(Duration::from_millis(100));
            return Err(format!(
                "exited ({}): {:?}",
                describe(status),
                stderr.snapshot()
            ));
        }
        if Instant::now() >= deadline {
            return Err(format!("not listening on {addr} within {IO_TIMEOUT:?}"));
        }
        thread::sleep(Duration::from_millis(50));
    }
    Ok((process, stderr, addr))
}

/// Raises this process's soft descriptor limit to `want`, as far as the hard
/// limit allows (the servers and tools it starts inherit it), so that
/// thousands of connections fit at both ends; returns the soft limit now.
pub fn raise_nofile(want: u64) -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft >= want {
        return soft;
    }
    let raised = Rlimit {
        current: Some(want.min(hard)),
        maximum: limit.maximum,
    };
    setrlimit(Resource::Nofile, raised).expect("raise RLIMIT_NOFILE");
    want.min(hard)
}
