//! HAProxy (Debian's `haproxy`) in front of two staticd instances, as a load balancer
//! runs a fleet: `send-proxy-v2` to `--proxy-protocol` listeners, HTTP health checks
//! (`option httpchk`), round robin. The test's client connects from 127.0.0.2, HAProxy
//! from 127.0.0.1, so the access logs show which of them they name. HAProxy's
//! configuration is written to a temporary directory; every process is killed on drop.

#[macro_use]
mod common;

use std::fs;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// Where the test's client connects from: not HAProxy's 127.0.0.1.
const CLIENT: &str = "127.0.0.2";

/// One staticd of the fleet: its root says which one answered.
fn instance(name: &str) -> (Docroot, Server) {
    let root = Docroot::new();
    root.file("who.txt", name);
    root.file("health.txt", "ok\n");
    let server = Server::builder(Mode::Standalone, root.path())
        .plain()
        .log_format("common")
        .arg("--proxy-protocol")
        .start();
    (root, server)
}

/// The configuration docs/production.md shows (HAProxy), with the test's ports and paths.
fn config(frontend: u16, servers: &[SocketAddr], stats: &std::path::Path, check: &str) -> String {
    let mut cfg = format!(
        "global
    stats socket {stats} mode 600 level admin
    maxconn 256

defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
    # A connection refused by an instance that is going away is retried on another.
    retries 3
    option redispatch
    retry-on conn-failure empty-response

frontend web
    bind 127.0.0.1:{frontend}
    default_backend staticd

backend staticd
    balance roundrobin
    option httpchk
    http-check send meth GET uri {check} ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
    default-server send-proxy-v2 check inter 200ms fall 1 rise 1
",
        stats = stats.display(),
    );
    for (i, addr) in servers.iter().enumerate() {
        cfg.push_str(&format!("    server s{} {addr}\n", i + 1));
    }
    cfg
}

struct Haproxy {
    addr: SocketAddr,
    stats: PathBuf,
    _dir: tempfile::TempDir,
    _child: ChildGuard,
    stderr: Lines,
}

impl Haproxy {
    fn start(haproxy: &std::path::Path, servers: &[SocketAddr]) -> Haproxy {
        Haproxy::checking(haproxy, servers, "/health.txt")
    }

    /// [`Haproxy::start`], its health checks asking for `check`.
    fn checking(haproxy: &std::path::Path, servers: &[SocketAddr], check: &str) -> Haproxy {
        let dir = tempfile::tempdir().unwrap();
        let stats = dir.path().join("admin.sock");
        let port = free_port();
        let file = dir.path().join("haproxy.cfg");
        fs::write(&file, config(port, servers, &stats, check)).unwrap();
        let check = run_bounded(
            Command::new(haproxy).arg("-c").arg("-f").arg(&file),
            b"",
            IO_TIMEOUT,
        );
        check.assert_success("haproxy -c");
        let mut child = ChildGuard::new(
            Command::new(haproxy)
                .arg("-db")
                .arg("-f")
                .arg(&file)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start haproxy"),
        );
        let stderr = Lines::default();
        stderr.drain(child.take_stderr().unwrap());
        let proxy = Haproxy {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            stats,
            _dir: dir,
            _child: child,
            stderr,
        };
        let names: Vec<String> = (1..=servers.len()).map(|i| format!("s{i}")).collect();
        // Up, and by a health check that passed (they start up unchecked).
        for name in &names {
            proxy.wait_stat(name, "check_status", "L7OK");
            proxy.wait_stat(name, "status", "UP");
        }
        proxy
    }

    /// Each server's `field` (`status`: `UP`, `DOWN`...) from the stats socket's
    /// `show stat`.
    fn stat(&self, field: &str) -> io::Result<Vec<(String, String)>> {
        let mut socket = UnixStream::connect(&self.stats)?;
        socket.set_read_timeout(Some(IO_TIMEOUT))?;
        socket.write_all(b"show stat\n")?;
        let mut csv = String::new();
        socket.read_to_string(&mut csv)?;
        let mut lines = csv.lines();
        let header: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let column = |name: &str| header.iter().position(|h| *h == name);
        let (Some(sv), Some(status)) = (column("svname"), column(field)) else {
            return Err(io::Error::other(format!("unexpected stats: {csv}")));
        };
        Ok(lines
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f.len() > status)
            .map(|f| (f[sv].to_string(), f[status].to_string()))
            .collect())
    }

    /// Waits (bounded) until `server`'s `field` is `value`.
    fn wait_stat(&self, server: &str, field: &str, value: &str) {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            let now = self.stat(field).unwrap_or_default();
            if now.iter().any(|(s, v)| s == server && v == value) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{server}'s {field} not {value} within {IO_TIMEOUT:?}: {now:?}; haproxy: {:#?}",
                self.stderr.snapshot()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One request through HAProxy from [`CLIENT`] on a new connection: the status and body.
fn fetch(addr: SocketAddr) -> io::Result<(u16, String)> {
    use rustix::net::{AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None)?;
    let source: IpAddr = CLIENT.parse().unwrap();
    rustix::net::bind(&fd, &SocketAddr::new(source, 0))?;
    rustix::net::connect(&fd, &addr)?;
    let mut tcp = TcpStream::from(fd);
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    tcp.write_all(b"GET /who.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut bytes = Vec::new();
    tcp.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("no response: {text:?}")))?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, body.to_string()))
}

/// Access-log lines (not `staticd:` diagnostics) for `path`.
fn log_lines(lines: &[String], path: &str) -> Vec<String> {
    let request = format!("\"GET {path} ");
    lines
        .iter()
        .filter(|l| !l.starts_with("staticd: ") && l.contains(&request))
        .cloned()
        .collect()
}

#[test]
fn round_robin_and_the_real_client_in_each_log() {
    let Some(haproxy) = tool("haproxy", "haproxy") else {
        return;
    };
    let (_r1, s1) = instance("one");
    let (_r2, s2) = instance("two");
    let proxy = Haproxy::start(&haproxy, &[s1.addr(), s2.addr()]);
    let answers: Vec<String> = (0..10)
        .map(|_| {
            let (status, body) = fetch(proxy.addr).expect("a request through haproxy");
            assert_eq!(status, 200);
            body
        })
        .collect();
    // Round robin: every answer comes from the other instance than the one before.
    for pair in answers.windows(2) {
        assert_ne!(pair[0], pair[1], "{answers:?}");
    }
    for server in [&s1, &s2] {
        let stderr = server.stderr();
        stderr.wait_for(IO_TIMEOUT, |l| log_lines(l, "/who.txt").len() >= 5);
        let lines = log_lines(&stderr.snapshot(), "/who.txt");
        assert_eq!(lines.len(), 5, "{lines:#?}");
        // The client the PROXY header named, never HAProxy's own address.
        for line in &lines {
            assert!(line.starts_with(&format!("{CLIENT} - - [")), "{line}");
        }
        // The health checks are HAProxy's own (PROXY v2 LOCAL): its address stays.
        let checks = log_lines(&stderr.snapshot(), "/health.txt");
        assert!(!checks.is_empty(), "{:#?}", stderr.snapshot());
        for line in &checks {
            assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
        }
    }
}

/// What one request through HAProxy got, and when.
type Outcome = (Instant, Result<(u16, String), String>);

/// Two clients fetching through HAProxy in a loop until `finish`; every outcome kept.
struct Load {
    stop: Arc<AtomicBool>,
    outcomes: Arc<Mutex<Vec<Outcome>>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Load {
    fn start(addr: SocketAddr) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let outcomes: Arc<Mutex<Vec<Outcome>>> = Arc::default();
        let threads = (0..2)
            .map(|_| {
                let (stop, outcomes) = (stop.clone(), outcomes.clone());
                thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let result = fetch(addr).map_err(|e| e.to_string());
                        outcomes.lock().unwrap().push((Instant::now(), result));
                    }
                })
            })
            .collect();
        Load {
            stop,
            outcomes,
            threads,
        }
    }

    fn count(&self) -> usize {
        self.outcomes.lock().unwrap().len()
    }

    /// Waits (bounded) until there are `n` outcomes.
    fn wait_for(&self, n: usize) {
        let deadline = Instant::now() + IO_TIMEOUT;
        while self.count() < n && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the clients: every outcome, in order.
    fn finish(self) -> Vec<Outcome> {
        self.stop.store(true, Ordering::SeqCst);
        for thread in self.threads {
            thread.join().unwrap();
        }
        std::mem::take(&mut *self.outcomes.lock().unwrap())
    }
}

#[test]
fn stopping_an_instance_fails_no_request_once_marked_down() {
    let Some(haproxy) = tool("haproxy", "haproxy") else {
        return;
    };
    let (_r1, s1) = instance("one");
    let (_r2, mut s2) = instance("two");
    let proxy = Haproxy::start(&haproxy, &[s1.addr(), s2.addr()]);

    let load = Load::start(proxy.addr);
    load.wait_for(50);
    // SIGTERM: staticd lets the responses in flight finish, and exits.
    s2.process().signal(rustix::process::Signal::TERM);
    proxy.wait_stat("s2", "status", "DOWN");
    let down = Instant::now();
    load.wait_for(load.count() + 200);
    let outcomes = load.finish();
    assert!(
        s2.process().wait_timeout(IO_TIMEOUT).is_some(),
        "s2 did not exit"
    );

    let failed: Vec<&Outcome> = outcomes
        .iter()
        .filter(|(_, r)| !matches!(r, Ok((200, _))))
        .collect();
    let after: Vec<&Outcome> = outcomes.iter().filter(|(t, _)| *t > down).collect();
    assert!(
        after.len() >= 100,
        "only {} requests after s2 was down",
        after.len()
    );
    assert!(
        failed.iter().all(|(t, _)| *t <= down),
        "failed once s2 was down: {failed:#?}"
    );
    // Not even the requests in the moment s2 went away failed: HAProxy sent the refused
    // ones to s1 (`option redispatch`).
    assert!(
        failed.is_empty(),
        "{} of {} failed: {failed:#?}",
        failed.len(),
        outcomes.len()
    );
    for (_, result) in &after {
        assert!(
            matches!(result, Ok((200, body)) if body == "one"),
            "{result:?}"
        );
    }
    // Both served before the stop.
    let bodies: Vec<&str> = outcomes
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().map(|(_, b)| b.as_str()))
        .collect();
    assert!(bodies.contains(&"two") && bodies.contains(&"one"));
}

/// One instance of a fleet on a fixed port with `--health-path` and `--reuse-port`, as a
/// rolling restart runs it: a new process on the same address, then SIGTERM to the old.
fn restartable(root: &Docroot, port: u16) -> (ChildGuard, Lines) {
    let mut cmd = Command::new(staticd_bin());
    without_staticd_env(&mut cmd);
    cmd.arg("--root").arg(root.path()).args([
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--proxy-protocol",
        "--health-path",
        "/healthz",
        "--reuse-port",
        "--log-format",
        "common",
    ]);
    let (child, stderr) = spawn_with_stderr(&mut cmd);
    stderr.wait_line(|l| l.starts_with("staticd: listening on 127.0.0.1:"));
    (child, stderr)
}

/// A rolling restart behind HAProxy checking `--health-path`: a new s2 starts on the
/// old one's address (--reuse-port), the old one gets SIGTERM (its health path says
/// 503 from then on, its listener closes, its responses in flight finish), and no
/// request through HAProxy fails; the health checks are in no access log.
#[test]
fn a_rolling_restart_checked_by_the_health_path_fails_no_request() {
    let Some(haproxy) = tool("haproxy", "haproxy") else {
        return;
    };
    let s1_root = Docroot::new();
    s1_root.file("who.txt", "one");
    let s1_port = free_port();
    let (_s1, _s1_stderr) = restartable(&s1_root, s1_port);
    let s1 = SocketAddr::from(([127, 0, 0, 1], s1_port));
    let port = free_port();
    let old_root = Docroot::new();
    old_root.file("who.txt", "two");
    let (mut old, old_stderr) = restartable(&old_root, port);
    let s2 = SocketAddr::from(([127, 0, 0, 1], port));
    let proxy = Haproxy::checking(&haproxy, &[s1, s2], "/healthz");

    let load = Load::start(proxy.addr);
    load.wait_for(50);
    let new_root = Docroot::new();
    new_root.file("who.txt", "three");
    let (_new, new_stderr) = restartable(&new_root, port);
    old.signal(rustix::process::Signal::TERM);
    let exited = old
        .wait_timeout(IO_TIMEOUT)
        .expect("the old s2 did not exit");
    assert_eq!(exited.code(), Some(0), "{}", describe(exited));
    let after_exit = load.count();
    let deadline = Instant::now() + IO_TIMEOUT;
    // Until the new process has served some (HAProxy's checks see it up).
    while Instant::now() < deadline {
        let served_new = load.outcomes.lock().unwrap()[after_exit..]
            .iter()
            .filter(|(_, r)| matches!(r, Ok((200, b)) if b == "three"))
            .count();
        if served_new >= 20 {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let outcomes = load.finish();
    let failed: Vec<_> = outcomes
        .iter()
        .filter(|(_, r)| !matches!(r, Ok((200, _))))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed: {failed:#?}",
        failed.len(),
        outcomes.len()
    );
    let bodies: Vec<&str> = outcomes
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().map(|(_, b)| b.as_str()))
        .collect();
    for who in ["one", "two", "three"] {
        assert!(bodies.contains(&who), "no answer from {who}");
    }
    // HAProxy checked /healthz all along; not one check is in a log.
    for lines in [old_stderr.snapshot(), new_stderr.snapshot()] {
        assert!(log_lines(&lines, "/healthz").is_empty(), "{lines:#?}");
    }
}
