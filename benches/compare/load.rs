//! The load clients: wrk (the matrix) and ab (the classic method), run as
//! child processes and read back from their printed summaries.

use std::io::{self, Read};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    KeepAlive,
    Close,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::KeepAlive => "keep-alive",
            Mode::Close => "close",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tool {
    Wrk,
    Ab,
    /// The harness's own TLS client, which resumes sessions (resume.rs).
    #[serde(rename = "tls-resume")]
    Resume,
}

/// What one load run reported.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    pub requests: u64,
    pub seconds: f64,
    pub requests_per_second: f64,
    /// Bytes received per second, partial responses included.
    pub bytes_per_second: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// wrk's "Socket errors": connect, read, write, timeout.
    pub socket_errors: SocketErrors,
    /// Responses with a status other than 2xx or 3xx.
    pub non_2xx: u64,
    /// ab's "Failed requests" (connect, receive, length or exception failures).
    pub failed: u64,
    /// The resuming client: handshakes the server made in full although
    /// the client offered a session.
    pub not_resumed: u64,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct SocketErrors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
}

impl Outcome {
    pub fn error_count(&self) -> u64 {
        let e = self.socket_errors;
        e.connect + e.read + e.write + e.timeout + self.non_2xx + self.failed + self.not_resumed
    }

    /// One line naming every kind of error seen, for the table's notes.
    pub fn describe_errors(&self) -> String {
        let e = self.socket_errors;
        let mut parts = Vec::new();
        for (name, n) in [
            ("connect", e.connect),
            ("read", e.read),
            ("write", e.write),
            ("timeout", e.timeout),
            ("non-2xx/3xx", self.non_2xx),
            ("failed", self.failed),
            ("not resumed", self.not_resumed),
        ] {
            if n > 0 {
                parts.push(format!("{name} {n}"));
            }
        }
        parts.join(", ")
    }
}

/// A load run to do.
pub struct Run<'a> {
    pub url: &'a str,
    pub connections: u32,
    pub mode: Mode,
    pub duration: Duration,
    /// wrk threads (ab has one).
    pub threads: u32,
}

/// Kills a load client that is still running when its run is abandoned.
struct ClientGuard(Child);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `cmd`, lets it run for `duration`, then interrupts it with SIGINT
/// (both clients stop and print their summary for the time actually run;
/// their own duration flags count only whole seconds) and returns its output.
fn run_for(mut cmd: Command, duration: Duration, limit: Duration) -> io::Result<String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::reaper::die_with_parent(&mut cmd);
    let mut guard = ClientGuard(cmd.spawn()?);
    let mut stdout = guard.0.stdout.take().expect("piped stdout");
    let mut stderr = guard.0.stderr.take().expect("piped stderr");
    let reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let mut interrupted = false;
    loop {
        if guard.0.try_wait()?.is_some() {
            break;
        }
        let elapsed = start.elapsed();
        if !interrupted && elapsed >= duration {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(guard.0.id() as libc::pid_t, libc::SIGINT) };
            interrupted = true;
        }
        if elapsed >= limit {
            let _ = guard.0.kill();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "load client did not stop",
            ));
        }
        let left = duration.saturating_sub(elapsed);
        thread::sleep(left.clamp(Duration::from_millis(1), Duration::from_millis(5)));
    }
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if out.trim().is_empty() {
        return Err(io::Error::other(format!(
            "no output; stderr: {}",
            err.trim()
        )));
    }
    Ok(out + &err)
}

/// Whole seconds to give a client as its own limit: past our SIGINT.
fn backstop_secs(d: Duration) -> u64 {
    d.as_secs() + 2
}

/// Load for `run.duration` whose results nobody reads: wrk is killed at
/// the end rather than asked for a summary.
pub fn warm_up(run: &Run) -> Result<(), String> {
    let mut cmd = wrk_command(run);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    crate::reaper::die_with_parent(&mut cmd);
    let mut guard = ClientGuard(cmd.spawn().map_err(|e| format!("wrk: {e}"))?);
    thread::sleep(run.duration);
    match guard.0.try_wait() {
        Ok(Some(status)) => Err(format!("wrk ended early ({status})")),
        _ => Ok(()),
    }
}

pub fn wrk(run: &Run) -> Result<Outcome, String> {
    let cmd = wrk_command(run);
    let limit = run.duration + Duration::from_secs(15);
    let out = run_for(cmd, run.duration, limit).map_err(|e| format!("wrk: {e}"))?;
    parse_wrk(&out).ok_or_else(|| format!("wrk: unreadable output:\n{out}"))
}

fn wrk_command(run: &Run) -> Command {
    let mut cmd = Command::new("wrk");
    let threads = run.threads.clamp(1, run.connections);
    cmd.arg("-t")
        .arg(threads.to_string())
        .arg("-c")
        .arg(run.connections.to_string())
        .arg("-d")
        .arg(format!("{}s", backstop_secs(run.duration)))
        .arg("--timeout")
        .arg("10s")
        .arg("--latency");
    if run.mode == Mode::Close {
        cmd.arg("-H").arg("Connection: close");
    }
    cmd.arg(run.url);
    cmd
}

pub fn ab(run: &Run) -> Result<Outcome, String> {
    let mut cmd = Command::new("ab");
    // -t first: it sets -n to 50000, which the -n after it raises again.
    cmd.arg("-q")
        .arg("-r")
        .arg("-s")
        .arg("10")
        .arg("-t")
        .arg(backstop_secs(run.duration).to_string())
        .arg("-n")
        .arg("100000000")
        .arg("-c")
        .arg(run.connections.to_string());
    if run.mode == Mode::KeepAlive {
        cmd.arg("-k");
    }
    cmd.arg(run.url);
    let limit = run.duration + Duration::from_secs(15);
    let out = run_for(cmd, run.duration, limit).map_err(|e| format!("ab: {e}"))?;
    parse_ab(&out).ok_or_else(|| format!("ab: unreadable output:\n{out}"))
}

/// "123.45us", "1.20ms", "2.00s", "1.00m" -> microseconds.
fn wrk_time_us(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic())?;
    let n: f64 = t[..split].parse().ok()?;
    let scale = match &t[split..] {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(n * scale)
}

/// "812.34KB", "1.23GB" (1024-based) -> bytes.
fn wrk_bytes(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic())?;
    let n: f64 = t[..split].parse().ok()?;
    let scale = match &t[split..] {
        "B" => 1.0,
        "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        "TB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(n * scale)
}

/// "2.00s", "1.50m" -> seconds.
fn wrk_duration_s(text: &str) -> Option<f64> {
    wrk_time_us(text).map(|us| us / 1e6)
}

fn parse_wrk(out: &str) -> Option<Outcome> {
    let mut o = Outcome::default();
    let mut rps = None;
    for line in out.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("50%") {
            o.p50_us = wrk_time_us(rest);
        } else if let Some(rest) = line.strip_prefix("99%") {
            o.p99_us = wrk_time_us(rest);
        } else if let Some(rest) = line.strip_prefix("Requests/sec:") {
            rps = rest.trim().parse::<f64>().ok();
        } else if let Some(rest) = line.strip_prefix("Transfer/sec:") {
            o.bytes_per_second = wrk_bytes(rest);
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 12, write 0, timeout 3"
            for part in rest.split(',') {
                let mut words = part.split_whitespace();
                let (Some(name), Some(n)) = (words.next(), words.next()) else {
                    continue;
                };
                let n = n.parse().unwrap_or(0);
                match name {
                    "connect" => o.socket_errors.connect = n,
                    "read" => o.socket_errors.read = n,
                    "write" => o.socket_errors.write = n,
                    "timeout" => o.socket_errors.timeout = n,
                    _ => {}
                }
            }
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            o.non_2xx = rest.trim().parse().unwrap_or(0);
        } else if line.contains(" requests in ") {
            // "123456 requests in 2.00s, 1.23GB read"
            let mut words = line.split_whitespace();
            o.requests = words.next()?.parse().ok()?;
            let secs = words.nth(2)?.trim_end_matches(',');
            o.seconds = wrk_duration_s(secs)?;
        }
    }
    o.requests_per_second = rps?;
    Some(o)
}

fn parse_ab(out: &str) -> Option<Outcome> {
    let mut o = Outcome::default();
    let mut rps = None;
    let mut in_percentiles = false;
    for line in out.lines().map(str::trim) {
        let value = |prefix: &str| {
            line.strip_prefix(prefix)
                .map(|r| r.split_whitespace().next().unwrap_or(""))
        };
        if let Some(v) = value("Complete requests:") {
            o.requests = v.parse().ok()?;
        } else if let Some(v) = value("Failed requests:") {
            o.failed = v.parse().unwrap_or(0);
        } else if let Some(v) = value("Non-2xx responses:") {
            o.non_2xx = v.parse().unwrap_or(0);
        } else if let Some(v) = value("Time taken for tests:") {
            o.seconds = v.parse().ok()?;
        } else if let Some(v) = value("Transfer rate:") {
            o.bytes_per_second = v.parse::<f64>().ok().map(|kb| kb * 1024.0);
        } else if let Some(v) = value("Requests per second:") {
            rps = v.parse::<f64>().ok();
        } else if line.starts_with("Percentage of the requests served") {
            in_percentiles = true;
        } else if in_percentiles {
            // "  50%      1" (milliseconds)
            let mut words = line.split_whitespace();
            let (Some(p), Some(ms)) = (words.next(), words.next()) else {
                continue;
            };
            let us = ms.parse::<f64>().ok().map(|ms| ms * 1e3);
            match p {
                "50%" => o.p50_us = us,
                "99%" => o.p99_us = us,
                _ => {}
            }
        }
    }
    o.requests_per_second = rps?;
    Some(o)
}

/// Whether `tool` can be run at all.
pub fn available(tool: &str) -> bool {
    Command::new(tool)
        .arg(if tool == "ab" { "-V" } else { "--version" })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}
