//! The life of a script's process: the bound on how many run at once,
//! spawning it in a process group of its own, its deadline, killing and
//! reaping it, and forwarding its stderr line by line.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

use super::environment::{environment, CgiParams};

/// Longer stderr lines are forwarded in pieces of this size, so a script
/// that never writes a newline cannot make the server buffer without bound.
const MAX_STDERR_LINE: usize = 4096;

/// Bounds how many scripts run at once. Cloning shares the bound.
#[derive(Clone)]
pub struct Limiter {
    running: Arc<AtomicUsize>,
    max: usize,
}

/// One running script's place under the bound, given back on drop.
pub struct Permit {
    running: Arc<AtomicUsize>,
}

impl Limiter {
    pub fn new(max: usize) -> Limiter {
        Limiter {
            running: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A place for one more script, or None at once when all are taken:
    /// the request is refused (503) rather than queued behind slow scripts.
    #[must_use]
    pub fn try_acquire(&self) -> Option<Permit> {
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()?;
        Some(Permit {
            running: Arc::clone(&self.running),
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running script. Its pipes are taken by the transport; dropping the
/// [`Script`] kills whatever is left of its process group and reaps
/// it.
///
/// The child is reaped only in `Drop`, after the group has been killed. A
/// pid cannot be reused while it is an unreaped zombie or still some live
/// process's group id, so `kill_group` can never hit an unrelated process.
/// Killing the group even after a clean exit is deliberate: whatever a
/// script left running in the background would otherwise outlive the
/// timeout and escape the concurrency bound.
pub struct Script {
    child: Child,
    deadline: Instant,
    /// Held until the process is reaped; None once handed to a reaper thread.
    permit: Option<Permit>,
}

/// Starts a script for one request. `timeout` sets
/// [`Script::deadline`](crate::cgi::process::Script::deadline); the caller enforces it. Fails with
/// NotFound or PermissionDenied from exec, and with InvalidInput if a meta-variable (a decoded
/// PATH_INFO, say) holds a NUL.
pub fn spawn(p: &CgiParams, timeout: Duration, permit: Permit) -> io::Result<Script> {
    // With a new working directory, a relative program path would be
    // ambiguous (std leaves it platform-specific), so make it absolute first.
    let program = std::path::absolute(p.script_path)?;
    let dir = program
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "script has no directory"))?;
    let has_body = p.content_length.is_some_and(|len| len > 0);
    let mut child = Command::new(&program)
        .env_clear()
        .envs(environment(p))
        .current_dir(dir)
        .process_group(0)
        .stdin(if has_body {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let now = Instant::now();
    let deadline = now
        .checked_add(timeout)
        .unwrap_or(now + Duration::from_secs(u64::from(u32::MAX)));
    let stderr = child.stderr.take();
    // From here on, an early return drops the Script, which kills and reaps.
    let script = Script {
        child,
        deadline,
        permit: Some(permit),
    };
    if let Some(stderr) = stderr {
        let name = p.script_name.to_string();
        let forwarding = Forwarding::start();
        crate::sys::spawn_helper("cgi-stderr", move || {
            forward_stderr(&name, stderr, io::stderr());
            drop(forwarding);
        })?;
    }
    Ok(script)
}

/// How many stderr forwarders are still copying, so that a process about to
/// exit (inetd mode) can let them finish instead of losing the last lines.
static FORWARDERS: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// One running stderr forwarder; dropping it says it is done.
struct Forwarding;

impl Forwarding {
    fn start() -> Forwarding {
        *FORWARDERS.0.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Forwarding
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        let mut n = FORWARDERS.0.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        FORWARDERS.1.notify_all();
    }
}

/// Waits (at most `limit`) until every script's stderr has been copied to
/// the server's. Scripts are dead by then, so their pipes reach EOF at once
/// unless a process escaped the group; the limit covers that case.
pub fn finish_stderr(limit: Duration) {
    let (lock, done) = &FORWARDERS;
    let n = lock.lock().unwrap_or_else(|p| p.into_inner());
    let _ = done.wait_timeout_while(n, limit, |n| *n > 0);
}

impl Script {
    /// The script's stdin, when the request has a body. Dropping it is the
    /// script's end of input.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// When the script has run too long: kill it then.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// SIGKILL to the script and everything it started in its group. Its
    /// stdout then reaches EOF once no process holds it any more.
    pub fn kill_group(&self) {
        let pgid = Pid::from_child(&self.child);
        // ESRCH (everything already gone) is the outcome we want anyway.
        let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        self.kill_group();
        // SIGKILL takes effect as soon as the process is scheduled; wait a
        // little for that, with backoff, rather than block a transport.
        let mut pause = Duration::from_micros(50);
        for _ in 0..10 {
            match self.child.try_wait() {
                // ECHILD: nothing left to reap.
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(pause),
            }
            pause *= 2;
        }
        // Still there (stuck in an uninterruptible sleep, say): a thread
        // waits for it, holding the permit so it still counts as running.
        let pid = Pid::from_child(&self.child);
        let permit = self.permit.take();
        let reaper = move || {
            while let Err(rustix::io::Errno::INTR) =
                rustix::process::waitpid(Some(pid), WaitOptions::empty())
            {}
            drop(permit);
        };
        let handed_off = crate::sys::spawn_helper("cgi-reaper", reaper).is_ok();
        if !handed_off {
            // No thread to be had: blocking here beats leaving a zombie.
            let _ = self.child.wait();
        }
    }
}

/// Copies a script's stderr to `to`, one line at a time with the script's
/// name in front, until the last process holding the pipe closes it.
fn forward_stderr(name: &str, from: impl Read, mut to: impl Write) {
    let mut reader = BufReader::new(from);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_STDERR_LINE as u64)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            // The server's stderr failing is no reason to stop draining the
            // pipe: a script blocked on a full stderr would hang.
            Ok(_) => {
                let _ = to.write_all(stderr_line(name, &line).as_bytes());
            }
        }
    }
}

/// `staticd: cgi NAME: TEXT\n`, with control characters escaped so a script
/// cannot forge or garble the server's other log lines.
fn stderr_line(name: &str, raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let mut out = String::with_capacity(raw.len() + name.len() + 16);
    out.push_str("staticd: cgi ");
    push_escaped(&mut out, name);
    out.push_str(": ");
    push_escaped(&mut out, &String::from_utf8_lossy(raw));
    out.push('\n');
    out
}

fn push_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        if c.is_control() && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgi::tests::params;
    use crate::cgi::{is_runnable, tests::complete};
    use std::os::fd::AsFd;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    #[test]
    fn limiter_bounds_running_scripts() {
        let limiter = Limiter::new(2);
        let a = limiter.try_acquire();
        let b = limiter.clone().try_acquire();
        assert!(a.is_some() && b.is_some());
        assert!(limiter.try_acquire().is_none());
        drop(a);
        assert!(limiter.try_acquire().is_some());
        assert!(Limiter::new(0).try_acquire().is_none());
    }

    #[test]
    fn scripts_and_limiters_can_cross_threads() {
        fn shareable<T: Send + Sync>() {}
        fn movable<T: Send>() {}
        shareable::<Limiter>();
        movable::<Permit>();
        movable::<Script>();
    }

    #[test]
    fn stderr_is_forwarded_line_by_line() {
        let mut out = Vec::new();
        let long = "x".repeat(MAX_STDERR_LINE + 10);
        let input = format!("one\r\ntwo\n\x1b[31mred\n{long}\nlast");
        forward_stderr("/t.cgi", input.as_bytes(), &mut out);
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "staticd: cgi /t.cgi: one");
        assert_eq!(lines[1], "staticd: cgi /t.cgi: two");
        assert_eq!(lines[2], "staticd: cgi /t.cgi: \\u{1b}[31mred");
        assert_eq!(
            lines[3].len(),
            "staticd: cgi /t.cgi: ".len() + MAX_STDERR_LINE
        );
        assert_eq!(lines[4], "staticd: cgi /t.cgi: xxxxxxxxxx");
        assert_eq!(lines[5], "staticd: cgi /t.cgi: last");
        assert_eq!(lines.len(), 6);
    }

    // The process tests below run real scripts; every wait is bounded.

    const PATIENCE: Duration = Duration::from_secs(10);

    fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Spawns, retrying on ETXTBSY: another test thread forking while this
    /// one still had the script open for writing holds the file busy until
    /// that child execs.
    fn start(p: &CgiParams, timeout: Duration, limiter: &Limiter) -> Script {
        let mut tries = 0;
        loop {
            let permit = limiter.try_acquire().expect("a free permit");
            match spawn(p, timeout, permit) {
                Ok(script) => return script,
                Err(e)
                    if e.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error())
                        && tries < 50 =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("spawn: {e}"),
            }
        }
    }

    /// Reads until EOF, `limit` bytes, or the patience runs out.
    fn read_bounded(out: &mut ChildStdout, limit: usize) -> Vec<u8> {
        let give_up = Instant::now() + PATIENCE;
        let mut got = Vec::new();
        let mut chunk = [0u8; 8192];
        while got.len() < limit {
            let left = give_up.saturating_duration_since(Instant::now());
            assert!(
                crate::sys::wait(out.as_fd(), false, left).unwrap(),
                "script output timed out"
            );
            match out.read(&mut chunk).unwrap() {
                0 => break,
                n => got.extend_from_slice(&chunk[..n]),
            }
        }
        got
    }

    /// A process's state letter from /proc, or None once it is gone, and its parent.
    fn proc_state(pid: u32) -> Option<(char, u32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after_name = &stat[stat.rfind(')')? + 2..];
        let mut fields = after_name.split(' ');
        let state = fields.next()?.chars().next()?;
        let ppid = fields.next()?.parse().ok()?;
        Some((state, ppid))
    }

    fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let give_up = Instant::now() + PATIENCE;
        while !done() {
            assert!(Instant::now() < give_up, "{what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Dead: gone, or a zombie waiting for whoever adopted it.
    fn assert_dies(pid: u32) {
        eventually(&format!("process {pid} still running"), || {
            proc_state(pid).is_none_or(|(state, _)| state == 'Z')
        });
    }

    /// Reaped: no longer a child of this process in any state.
    fn assert_reaped(pid: u32) {
        let me = std::process::id();
        eventually(&format!("process {pid} not reaped"), || {
            proc_state(pid).is_none_or(|(_, ppid)| ppid != me)
        });
    }

    #[test]
    fn script_sees_its_environment_and_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "env.cgi",
            "printf 'Content-Type: text/plain\\r\\n\\r\\n'\nenv\necho \"cwd=$(pwd -P)\"\n",
        );
        let headers = [("X-Test", "yes"), ("Proxy", "http://evil.example")];
        let p = CgiParams {
            script_path: &path,
            path_info: "/x/y",
            query: "q=1",
            ..params(&headers)
        };
        let mut script = start(&p, PATIENCE, &Limiter::new(1));
        assert!(script.take_stdin().is_none());
        let out = read_bounded(&mut script.take_stdout().unwrap(), usize::MAX);
        let (head, start) = complete(&out);
        assert_eq!(head.content_type.as_deref(), Some("text/plain"));
        let body = String::from_utf8_lossy(&out[start..]);
        for line in [
            "GATEWAY_INTERFACE=CGI/1.1",
            "PATH_INFO=/x/y",
            "QUERY_STRING=q=1",
            "HTTP_X_TEST=yes",
            "SCRIPT_NAME=/a.cgi",
            "PATH=/usr/local/bin:/usr/bin:/bin",
        ] {
            assert!(body.lines().any(|l| l == line), "{line} missing:\n{body}");
        }
        let cwd = dir.path().canonicalize().unwrap();
        assert!(
            body.lines().any(|l| l == format!("cwd={}", cwd.display())),
            "{body}"
        );
        for absent in ["HTTP_PROXY=", "HOME=", "CARGO"] {
            assert!(
                !body.lines().any(|l| l.starts_with(absent)),
                "{absent}:\n{body}"
            );
        }
    }

    #[test]
    fn request_body_goes_to_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "echo.cgi",
            "printf 'Content-Type: text/plain\\n\\n'\necho \"$CONTENT_LENGTH\"\ncat\n",
        );
        let p = CgiParams {
            script_path: &path,
            method: "POST",
            content_length: Some(11),
            ..params(&[])
        };
        let mut script = start(&p, PATIENCE, &Limiter::new(1));
        let mut stdin = script.take_stdin().unwrap();
        stdin.write_all(b"hello world").unwrap();
        drop(stdin);
        let out = read_bounded(&mut script.take_stdout().unwrap(), usize::MAX);
        let (_, start) = complete(&out);
        assert_eq!(&out[start..], b"11\nhello world");
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "slow.cgi",
            "sleep 100 &\necho $!\nexec sleep 100\n",
        );
        let p = CgiParams {
            script_path: &path,
            ..params(&[])
        };
        let timeout = Duration::from_millis(200);
        let mut script = start(&p, timeout, &Limiter::new(1));
        let leader = script.child.id();
        let mut stdout = script.take_stdout().unwrap();
        let mut first = Vec::new();
        while !first.ends_with(b"\n") {
            first.extend(read_bounded(&mut stdout, 1));
        }
        let background: u32 = std::str::from_utf8(&first).unwrap().trim().parse().unwrap();
        assert!(script.deadline() <= Instant::now() + timeout);
        std::thread::sleep(script.deadline().saturating_duration_since(Instant::now()));
        assert!(proc_state(background).is_some_and(|(state, _)| state != 'Z'));

        script.kill_group();
        // Every holder of stdout died, so it ends.
        assert_eq!(read_bounded(&mut stdout, usize::MAX), b"");
        drop(script);
        assert_dies(background);
        assert_reaped(leader);
    }

    #[test]
    fn dropping_a_running_script_kills_and_reaps_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "yes.cgi",
            "printf 'Content-Type: text/plain\\n\\n'\nexec yes\n",
        );
        let p = CgiParams {
            script_path: &path,
            ..params(&[])
        };
        let limiter = Limiter::new(1);
        let mut script = start(&p, PATIENCE, &limiter);
        let leader = script.child.id();
        let mut stdout = script.take_stdout().unwrap();
        // The client goes away mid-response: the transport drops everything.
        assert!(read_bounded(&mut stdout, 100_000).len() >= 100_000);
        assert!(
            limiter.try_acquire().is_none(),
            "a running script holds its permit"
        );
        drop(script);
        drop(stdout);
        assert_reaped(leader);
        eventually("permit not released", || limiter.try_acquire().is_some());
    }

    #[test]
    fn a_finished_script_is_reaped_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_script(
            dir.path(),
            "quick.cgi",
            "printf 'Content-Type: text/plain\\n\\nok'\necho 'a line for the server log' >&2\n",
        );
        let p = CgiParams {
            script_path: &path,
            ..params(&[])
        };
        let limiter = Limiter::new(1);
        let mut script = start(&p, PATIENCE, &limiter);
        let leader = script.child.id();
        let out = read_bounded(&mut script.take_stdout().unwrap(), usize::MAX);
        assert!(out.ends_with(b"\n\nok"));
        drop(script);
        assert_reaped(leader);
        eventually("permit not released", || limiter.try_acquire().is_some());
    }

    #[test]
    fn a_script_that_cannot_run_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.cgi");
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(!is_runnable(&meta));
        let p = CgiParams {
            script_path: &path,
            ..params(&[])
        };
        let limiter = Limiter::new(1);
        let permit = limiter.try_acquire().unwrap();
        let err = spawn(&p, PATIENCE, permit).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(limiter.try_acquire().is_some(), "the permit went back");
    }
}
