//! Process start to first response byte, inetd mode: staticd is started
//! with a connected socket as stdin and stdout and a request already
//! waiting in it, as tcpserver or inetd start it; the clock runs from just
//! before the spawn to the first response byte the client can read.
//!
//! For scale, the same is timed end to end through tcpserver (connect to
//! first byte: accept, fork, exec, staticd), through the standalone server
//! (connect to first byte, no process started), and for a plain
//! spawn-and-wait of /bin/true (what fork/exec/exit cost on this machine).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Unmeasured runs first: the page cache, the dynamic loader's caches.
const WARM_RUNS: u32 = 10;

/// One row of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Startup {
    /// Short name: inetd-spawn, tcpserver, standalone, true.
    pub name: String,
    /// What was timed, from when to when.
    pub what: String,
    pub runs: u32,
    pub min_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub max_us: Option<f64>,
    pub error: Option<String>,
}

/// A GET of `path` as one connection's only request (`Connection: close`).
pub fn request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
}

/// Waits for the first byte, then reads the rest and checks it is a 200
/// carrying `size` body bytes. Returns when the first byte came.
fn first_byte(client: &mut TcpStream, size: u64) -> io::Result<Instant> {
    client.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = vec![0u8; 64 * 1024];
    let n = client.read(&mut buf)?;
    let at = Instant::now();
    if n == 0 {
        return Err(io::Error::other("closed without a response"));
    }
    let mut all = buf[..n].to_vec();
    client.read_to_end(&mut all)?;
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::other("no response head"))?;
    if !all.starts_with(b"HTTP/1.1 200") || (all.len() - end - 4) as u64 != size {
        return Err(io::Error::other(format!(
            "unexpected response: {:?}, {} body bytes",
            String::from_utf8_lossy(&all[..all.len().min(40)]),
            all.len() - end - 4
        )));
    }
    Ok(at)
}

fn summarize(name: &str, what: &str, times: &[f64], error: Option<String>) -> Startup {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    // Nearest rank.
    let pct = |p: f64| -> Option<f64> {
        let i = ((p * t.len() as f64).ceil() as usize).max(1) - 1;
        t.get(i).copied()
    };
    Startup {
        name: name.into(),
        what: what.into(),
        runs: t.len() as u32,
        min_us: t.first().copied(),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        max_us: t.last().copied(),
        error,
    }
}

/// Runs `once` WARM_RUNS + `runs` times and keeps what the last `runs`
/// returned: the first WARM_RUNS do not count. Stops at the first error,
/// or when the harness is told to stop, and says which.
pub fn repeat_values<T>(
    runs: u32,
    mut once: impl FnMut() -> io::Result<T>,
) -> (Vec<T>, Option<String>) {
    let mut values = Vec::with_capacity(runs as usize);
    for i in 0..WARM_RUNS + runs {
        if crate::stop::stopping() {
            return (values, Some("interrupted".into()));
        }
        match once() {
            Ok(v) if i >= WARM_RUNS => values.push(v),
            Ok(_) => {}
            Err(e) => return (values, Some(e.to_string())),
        }
    }
    (values, None)
}

/// A series of `runs` timed runs (after WARM_RUNS), in microseconds.
fn repeat(
    name: &str,
    what: &str,
    runs: u32,
    once: impl FnMut() -> io::Result<Duration>,
) -> Startup {
    let (durations, error) = repeat_values(runs, once);
    let times: Vec<f64> = durations.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    summarize(name, what, &times, error)
}

/// staticd --inetd on an accepted loopback connection whose request is
/// already written: spawn to first response byte.
pub fn inetd_spawn(staticd: &Path, root: &Path, size: u64, runs: u32) -> Startup {
    let what = "staticd --inetd spawned on an accepted TCP socket (request already in it): spawn to first response byte";
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => return summarize("inetd-spawn", what, &[], Some(e.to_string())),
    };
    let path = crate::docroot::url_path(size);
    repeat("inetd-spawn", what, runs, || {
        let mut client = TcpStream::connect(listener.local_addr()?)?;
        let (accepted, _) = listener.accept()?;
        client.write_all(request(&path).as_bytes())?;
        let stdin: OwnedFd = accepted.into();
        let stdout = stdin.try_clone()?;
        let mut cmd = Command::new(staticd);
        cmd.arg("--inetd")
            .arg("--root")
            .arg(root)
            .args(["--log-format", "off"])
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::null());
        let start = Instant::now();
        let mut child = cmd.spawn()?;
        // The harness's copies of the socket go, so that the client sees
        // the end of the response when staticd closes its side.
        drop(cmd);
        let got = first_byte(&mut client, size);
        let status = child.wait()?;
        let at = got?;
        if !status.success() {
            return Err(io::Error::other(format!("staticd --inetd: {status}")));
        }
        Ok(at - start)
    })
}

/// Connect to first response byte of a fresh connection to `url`.
pub fn connect_first_byte(name: &str, what: &str, url: &str, size: u64, runs: u32) -> Startup {
    let rest = url.trim_start_matches("http://");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let addr: SocketAddr = match authority.parse() {
        Ok(a) => a,
        Err(_) => return summarize(name, what, &[], Some(format!("bad address {authority}"))),
    };
    let req = request(path);
    repeat(name, what, runs, || {
        let start = Instant::now();
        let mut client = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        client.set_nodelay(true)?;
        client.write_all(req.as_bytes())?;
        Ok(first_byte(&mut client, size)? - start)
    })
}

/// Spawn and wait for /bin/true: the fork/exec/exit floor.
pub fn bin_true(runs: u32) -> Startup {
    repeat(
        "true",
        "/bin/true: spawn to exit reaped (the process-start floor)",
        runs,
        || {
            let mut cmd = Command::new("/bin/true");
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let start = Instant::now();
            let status = cmd.spawn()?.wait()?;
            let took = start.elapsed();
            if !status.success() {
                return Err(io::Error::other(format!("/bin/true: {status}")));
            }
            Ok(took)
        },
    )
}
