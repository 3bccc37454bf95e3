//! The load clients: wrk (the matrix), ab (the classic method), h2load
//! (HTTP/2) and oha (HTTP/3's cross-check), run as child processes and
//! read back from their printed summaries (oha's JSON). HTTP/3's load is
//! the harness's own client in h3load.rs, which reports an [`Outcome`]
//! as these are read into.

use std::io::{self, BufRead, BufReader, Read};
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
    /// nghttp2's HTTP/2 load client.
    H2load,
    /// oha built with `--features http3`: one HTTP/3 cell, a cross-check
    /// of h3load's figures (oha spends more CPU per request than the
    /// server, see h3load.rs).
    Oha,
    /// The harness's own HTTP/3 client (h3load.rs): the HTTP/3 cells.
    H3load,
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
    /// h2load, which has no percentiles: mean and standard deviation of
    /// the time per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sd_us: Option<f64>,
    /// h2load: what it negotiated ("TLSv1.3 TLS_AES_256_GCM_SHA384 X25519
    /// 253 bits, h2", or "h2c").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negotiated: Option<String>,
    /// An in-process client (h3load): its own CPU time over the run, user
    /// and system, summed over its threads (a child process's is read
    /// from /proc instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cpu_seconds: Option<f64>,
    /// h3load: what went through its UDP sockets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<Datagrams>,
}

/// The UDP traffic of h3load's sockets over a run, all threads summed:
/// how large the datagrams were and how many each system call carried
/// (recvmmsg with GRO in, sendmsg with GSO out).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Datagrams {
    pub received: u64,
    pub received_bytes: u64,
    /// The largest datagram received (after GRO's split).
    pub largest_received: u64,
    /// recvmmsg(2) calls that returned datagrams.
    pub recv_calls: u64,
    pub sent: u64,
    pub sent_bytes: u64,
    /// sendmsg(2) calls (one GSO batch each).
    pub send_calls: u64,
    /// Sends that found the socket buffer full and waited.
    pub send_blocked: u64,
    /// SO_RCVBUF and SO_SNDBUF as the kernel granted them (getsockopt's
    /// figure: twice what the data may use, the rest its bookkeeping).
    pub rcvbuf: u64,
    pub sndbuf: u64,
}

impl Datagrams {
    pub fn add(&mut self, o: &Datagrams) {
        self.received += o.received;
        self.received_bytes += o.received_bytes;
        self.largest_received = self.largest_received.max(o.largest_received);
        self.recv_calls += o.recv_calls;
        self.sent += o.sent;
        self.sent_bytes += o.sent_bytes;
        self.send_calls += o.send_calls;
        self.send_blocked += o.send_blocked;
        self.rcvbuf = self.rcvbuf.max(o.rcvbuf);
        self.sndbuf = self.sndbuf.max(o.sndbuf);
    }
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
    /// wrk threads (ab has one), h2load threads, h3load threads (each
    /// with its own UDP socket and QUIC endpoint).
    pub threads: u32,
    /// h2load: concurrent streams per connection (-m); oha: -p, which
    /// its HTTP/3 client also honours (streams per QUIC connection);
    /// h3load: requests in flight on each QUIC connection.
    pub streams: u32,
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
fn run_for(cmd: Command, duration: Duration, limit: Duration) -> io::Result<String> {
    let (out, err) = run_client(cmd, Some(duration), limit)?;
    Ok(out + &err)
}

/// Runs a load client with its output piped, interrupted with SIGINT at
/// `interrupt` (None: it stops by itself) and killed past `limit`; its
/// stdout and stderr, or an error if it printed nothing on stdout.
fn run_client(
    mut cmd: Command,
    interrupt: Option<Duration>,
    limit: Duration,
) -> io::Result<(String, String)> {
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
        if !interrupted && interrupt.is_some_and(|at| elapsed >= at) {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(guard.0.id() as libc::pid_t, libc::SIGINT) };
            interrupted = true;
        }
        if elapsed >= limit {
            let _ = guard.0.kill();
            return Err(io::Error::new(io::ErrorKind::TimedOut, "did not stop"));
        }
        // Close to the interrupt (and after it), a finer poll.
        let left = interrupt.map_or(Duration::MAX, |at| at.saturating_sub(elapsed));
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
    Ok((out, err))
}

/// Whole seconds to give a client as its own limit: past our SIGINT.
fn backstop_secs(d: Duration) -> u64 {
    d.as_secs() + 2
}

/// Load for `run.duration` whose results nobody reads: wrk is killed at
/// the end rather than asked for a summary.
pub fn warm_up(run: &Run) -> Result<(), String> {
    let mut cmd = wrk_command(run, "");
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
    wrk_with_header(run, "")
}

/// wrk with one more request header (none if empty).
pub fn wrk_with_header(run: &Run, header: &str) -> Result<Outcome, String> {
    let cmd = wrk_command(run, header);
    let limit = run.duration + Duration::from_secs(15);
    let out = run_for(cmd, run.duration, limit).map_err(|e| format!("wrk: {e}"))?;
    parse_wrk(&out).ok_or_else(|| format!("wrk: unreadable output:\n{out}"))
}

fn wrk_command(run: &Run, header: &str) -> Command {
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
    if !header.is_empty() {
        cmd.arg("-H").arg(header);
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

/// The TLS 1.3 suites h2load offers, in the order wrk's OpenSSL offers
/// them (h2load's own default puts AES-128-GCM first), so that every
/// server settles on what it settles on with wrk in the HTTPS cells.
const H2LOAD_TLS13_CIPHERS: &str =
    "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256";

/// What an h2load run measured, with the server's CPU time over the
/// measured part alone.
pub struct H2Run {
    pub outcome: Outcome,
    /// Server CPU seconds between the first thread's start of the main
    /// duration and the last thread's end of it, and that wall time.
    pub window_cpu_seconds: f64,
    pub window_seconds: f64,
}

/// h2load for `warmup` then `run.duration` (its own timing: -D and
/// --warm-up-time), `run.threads` threads, `run.connections` connections
/// with `run.streams` streams each. The connections are made in the
/// warm-up, so the measured part starts with them all busy. h2load says
/// on stdout when each thread's measured part starts and ends; `cpu` (the
/// server's CPU time in clock ticks) is read at the first start and the
/// last end, so that neither the warm-up nor the requests still in flight
/// when h2load stops are in the server's CPU time.
pub fn h2load(
    run: &Run,
    warmup: Duration,
    ticks_per_second: f64,
    cpu: &dyn Fn() -> u64,
) -> Result<H2Run, String> {
    let threads = run.threads.clamp(1, run.connections);
    let mut cmd = Command::new("h2load");
    cmd.arg("-t")
        .arg(threads.to_string())
        .arg("-c")
        .arg(run.connections.to_string())
        .arg("-m")
        .arg(run.streams.to_string())
        .arg("-D")
        .arg(format!("{}ms", run.duration.as_millis().max(1)))
        .arg("--warm-up-time")
        .arg(format!("{}ms", warmup.as_millis().max(1)))
        .arg(format!("--tls13-ciphers={H2LOAD_TLS13_CIPHERS}"))
        .arg(run.url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::reaper::die_with_parent(&mut cmd);
    let mut guard = ClientGuard(cmd.spawn().map_err(|e| format!("h2load: {e}"))?);
    let stdout = guard.0.stdout.take().expect("piped stdout");
    let mut stderr = guard.0.stderr.take().expect("piped stderr");
    let err_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    // Lines come as h2load prints them (it flushes each); a thread reads
    // them and marks the window, the caller's thread enforces the limit.
    let limit = warmup + run.duration + Duration::from_secs(15);
    let (tx, rx) = std::sync::mpsc::channel::<(String, Instant)>();
    let reader = thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send((line, Instant::now())).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let mut out = String::new();
    let mut first_start: Option<(Instant, u64)> = None;
    let mut last_end: Option<(Instant, u64)> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok((line, at)) => {
                if line.starts_with("Main benchmark duration is started") && first_start.is_none() {
                    first_start = Some((at, cpu()));
                } else if line.starts_with("Main benchmark duration is over") {
                    // Each thread's; the last one's counts.
                    last_end = Some((at, cpu()));
                }
                if !line.starts_with("progress:") {
                    out.push_str(&line);
                    out.push('\n');
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if start.elapsed() > limit {
            let _ = guard.0.kill();
            return Err("h2load: did not stop".into());
        }
    }
    let _ = reader.join();
    let _ = guard.0.wait();
    let err = err_reader.join().unwrap_or_default();
    let outcome = parse_h2load(&out).ok_or_else(|| {
        format!(
            "h2load: unreadable output:\n{}{}",
            out.trim_end(),
            if err.trim().is_empty() {
                String::new()
            } else {
                format!("\nstderr: {}", err.trim())
            }
        )
    })?;
    match outcome.negotiated.as_deref() {
        Some(p) if p.ends_with("h2") || p == "h2c" => {}
        other => {
            return Err(format!(
                "h2load: negotiated {}, not HTTP/2",
                other.unwrap_or("no application protocol")
            ))
        }
    }
    let (Some((t0, c0)), Some((t1, c1))) = (first_start, last_end) else {
        return Err("h2load: no start and end of its measured duration in its output".into());
    };
    Ok(H2Run {
        outcome,
        window_cpu_seconds: c1.saturating_sub(c0) as f64 / ticks_per_second,
        window_seconds: (t1 - t0).as_secs_f64(),
    })
}

/// h2load's summary: "finished in 1.56s, 2200.00 req/s, 2.08GB/s",
/// "requests: N total, N started, N done, N succeeded, N failed, N errored,
/// N timeout", "status codes: ...", "time for request: min max mean sd",
/// and over TLS "TLS Protocol:", "Cipher:", "Server Temp Key:", then
/// "Application protocol:". Failed requests include 4xx/5xx (counted as
/// non-2xx/3xx here) and errored ones (resets, connection errors).
fn parse_h2load(out: &str) -> Option<Outcome> {
    let mut o = Outcome::default();
    let mut rps = None;
    let mut tls: Vec<String> = Vec::new();
    let mut failed = 0;
    let mut protocol = None;
    for line in out.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("finished in ") {
            // "1.56s, 2200.00 req/s, 2.08GB/s"
            let mut parts = rest.split(',').map(str::trim);
            parts.next();
            rps = parts
                .next()
                .and_then(|r| r.strip_suffix(" req/s"))
                .and_then(|r| r.parse::<f64>().ok());
            o.bytes_per_second = parts
                .next()
                .and_then(|b| b.strip_suffix("/s"))
                .and_then(wrk_bytes);
        } else if let Some(rest) = line.strip_prefix("requests:") {
            for part in rest.split(',') {
                let mut words = part.split_whitespace();
                let (Some(n), Some(name)) = (words.next(), words.next()) else {
                    continue;
                };
                let n: u64 = n.parse().ok()?;
                match name {
                    "succeeded" => o.requests = n,
                    "failed" => failed = n,
                    "timeout" => o.socket_errors.timeout = n,
                    _ => {}
                }
            }
        } else if let Some(rest) = line.strip_prefix("status codes:") {
            for part in rest.split(',') {
                let mut words = part.split_whitespace();
                if let (Some(n), Some("4xx" | "5xx")) = (words.next(), words.next()) {
                    o.non_2xx += n.parse::<u64>().unwrap_or(0);
                }
            }
        } else if let Some(rest) = line.strip_prefix("time for request:") {
            let cols: Vec<&str> = rest.split_whitespace().collect();
            o.mean_us = cols.get(2).and_then(|t| wrk_time_us(t));
            o.sd_us = cols.get(3).and_then(|t| wrk_time_us(t));
        } else if let Some(rest) = line
            .strip_prefix("TLS Protocol:")
            .or_else(|| line.strip_prefix("Cipher:"))
            .or_else(|| line.strip_prefix("Server Temp Key:"))
        {
            tls.push(rest.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("Application protocol:") {
            protocol = Some(rest.trim().to_string());
        }
    }
    // Timeouts are errored requests, which are failed ones too.
    o.failed = failed.saturating_sub(o.non_2xx + o.socket_errors.timeout);
    o.seconds = o.requests as f64 / rps.filter(|r| *r > 0.0).unwrap_or(1.0);
    o.requests_per_second = rps?;
    o.negotiated = protocol.map(|p| {
        if tls.is_empty() {
            p
        } else {
            format!("{}, {p}", tls.join(" "))
        }
    });
    Some(o)
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

/// "`tool` is not installed (apt-get install `package`)" when it cannot be run.
pub fn not_installed(tool: &str, package: &str) -> Option<String> {
    (!available(tool)).then(|| format!("{tool} is not installed (apt-get install {package})"))
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

/// Where `cargo install oha --features http3 --root /opt/oha` puts it,
/// looked at after PATH (and the directories `servers::which` knows).
pub const OHA_FALLBACK: &str = "/opt/oha/bin/oha";

/// oha, if installed: on PATH, in ~/.cargo/bin, or at OHA_FALLBACK. Whether
/// it was built with HTTP/3 shows in its first request (oha_probe).
pub fn oha_path() -> Option<std::path::PathBuf> {
    static PATH: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        crate::programs::which("oha").or_else(|| {
            let p = std::path::PathBuf::from(OHA_FALLBACK);
            p.is_file().then_some(p)
        })
    })
    .clone()
}

/// oha's version line ("oha 1.16.0"), for the machine record.
pub fn oha_version() -> Option<String> {
    let out = Command::new(oha_path()?)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    v.lines().next().map(|l| l.trim().to_string())
}

/// oha over HTTP/3: `-c` connections, `-p` streams on each, for `-z`
/// (milliseconds), certificate not verified (`--insecure`: the harness's
/// own certificate), JSON on stdout, no TUI.
fn oha_command(run: &Run, duration: Option<Duration>) -> Result<Command, String> {
    let program = oha_path().ok_or("oha is not installed")?;
    let mut cmd = Command::new(program);
    cmd.args([
        "--no-tui",
        "--output-format",
        "json",
        "--http-version",
        "3",
        "--insecure",
    ]);
    match duration {
        Some(d) => {
            cmd.arg("-c")
                .arg(run.connections.to_string())
                .arg("-p")
                .arg(run.streams.max(1).to_string())
                .arg("-z")
                .arg(format!("{}ms", d.as_millis().max(1)));
        }
        None => {
            cmd.args(["-n", "1", "-c", "1"]);
        }
    }
    cmd.arg(run.url);
    Ok(cmd)
}

/// How long oha may take past `-z`: at the deadline its HTTP/3 client
/// waits for the requests in flight to end (and then counts them as
/// aborted), which at 50 x 10 streams of 1 MB takes seconds.
const OHA_DRAIN_LIMIT: Duration = Duration::from_secs(60);

/// Runs oha to its end (it stops by itself after `-z`), or kills it past
/// `limit`; its stdout, or why not.
fn oha_output(cmd: Command, limit: Duration) -> Result<String, String> {
    let (out, _) = run_client(cmd, None, limit).map_err(|e| format!("oha: {e}"))?;
    Ok(out)
}

/// Load for `run.duration` whose results nobody reads (the warm-up).
pub fn oha_warm_up(run: &Run) -> Result<(), String> {
    let cmd = oha_command(run, Some(run.duration))?;
    oha_output(cmd, run.duration + OHA_DRAIN_LIMIT).map(|_| ())
}

/// The measured oha run.
pub fn oha(run: &Run) -> Result<Outcome, String> {
    let cmd = oha_command(run, Some(run.duration))?;
    let out = oha_output(cmd, run.duration + OHA_DRAIN_LIMIT)?;
    parse_oha(&out).ok_or_else(|| format!("oha: unreadable output:\n{out}"))
}

/// oha's JSON: the responses are `statusCodeDistribution` (any status;
/// other than 2xx/3xx counted as non-2xx/3xx), failed requests are
/// `errorDistribution` but for the requests cut off at the deadline
/// ("aborted due to deadline": in flight when `-z` ran out, as wrk's
/// unfinished requests at SIGINT, which wrk does not count either);
/// requests/s is responses over `summary.total` (the whole run, QUIC
/// handshakes included); p50 and p99 from `latencyPercentiles` (seconds).
fn parse_oha(out: &str) -> Option<Outcome> {
    let v: serde_json::Value = serde_json::from_str(out.trim()).ok()?;
    let seconds = v["summary"]["total"].as_f64()?;
    let mut o = Outcome {
        seconds,
        negotiated: Some("h3".into()),
        ..Outcome::default()
    };
    for (status, n) in v["statusCodeDistribution"].as_object()? {
        let n = n.as_u64().unwrap_or(0);
        o.requests += n;
        if !(status.starts_with('2') || status.starts_with('3')) {
            o.non_2xx += n;
        }
    }
    if let Some(errors) = v["errorDistribution"].as_object() {
        for (what, n) in errors {
            if what != "aborted due to deadline" {
                o.failed += n.as_u64().unwrap_or(0);
            }
        }
    }
    if seconds > 0.0 {
        o.requests_per_second = o.requests as f64 / seconds;
    }
    o.bytes_per_second = v["summary"]["sizePerSec"].as_f64();
    let p = &v["latencyPercentiles"];
    o.p50_us = p["p50"].as_f64().map(|s| s * 1e6);
    o.p99_us = p["p99"].as_f64().map(|s| s * 1e6);
    Some(o)
}
