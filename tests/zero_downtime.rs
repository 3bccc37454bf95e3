//! Zero-downtime restart: under wrk's load, a new staticd started with --reuse-port on
//! the address the old one serves takes new connections, SIGTERM lets the old one finish
//! what it has and exit, and wrk sees no failed request.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::h2frames::{kind, H2Conn, Next};
use common::*;
use rustix::process::Signal;

/// How long wrk runs; the hand-over happens in its middle.
const LOAD: Duration = Duration::from_secs(6);

/// One test of this file at a time: each hands over under load (wrk's, or listings
/// that keep both cores busy), and another's load beside it would make a lost request
/// the machine's fault, not the server's.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

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
        .args(extra);
    let (child, stderr) = spawn_with_stderr(&mut cmd);
    stderr.wait_line(|l| l.starts_with("staticd: listening on 127.0.0.1:"));
    (child, stderr)
}

fn log_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .count()
}

/// The hand-over under `wrk ARGS` load; returns wrk's output and each process's count
/// of logged responses.
fn hand_over(wrk: PathBuf, wrk_args: &'static [&'static str]) -> (String, usize, usize) {
    let _serial = serial();
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

/// New connections all the time (wrk with `Connection: close`, as many small clients
/// make): connections the kernel queued on the old process's listeners would be reset
/// when it closes them, unless net.ipv4.tcp_migrate_req=1 has the kernel move them to
/// the new process's listener (Linux 5.14). The test sets it in a network namespace of
/// its own (root only), so the machine's setting is left alone.
#[test]
fn hand_over_under_new_connections_fails_no_request_with_tcp_migrate_req() {
    let Some(wrk) = tool("wrk", "wrk") else {
        return;
    };
    // A thread of its own: the namespace is the thread's, and its children's.
    let outcome = thread::spawn(move || -> Result<_, String> {
        private_network_migrating_requests()?;
        Ok(hand_over(wrk, &["-t2", "-c32", "-H", "Connection: close"]))
    })
    .join()
    .unwrap();
    match outcome {
        Ok((stdout, old, new)) => assert_lossless(&stdout, old, new),
        Err(why) => skip(&why),
    }
}

/// Moves this thread into a new network namespace with its loopback up and
/// net.ipv4.tcp_migrate_req set.
fn private_network_migrating_requests() -> Result<(), String> {
    // SAFETY: unshare(2) changes only this thread's namespaces; the ioctls get a
    // zeroed ifreq naming `lo`, which the kernel reads and fills in.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNET) != 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("cannot make a network namespace (needs root): {e}"));
        }
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut req: libc::ifreq = std::mem::zeroed();
        for (to, from) in req.ifr_name.iter_mut().zip(b"lo") {
            *to = *from as libc::c_char;
        }
        assert_eq!(
            libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req),
            0,
            "SIOCGIFFLAGS lo"
        );
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        assert_eq!(
            libc::ioctl(fd, libc::SIOCSIFFLAGS, &req),
            0,
            "SIOCSIFFLAGS lo"
        );
        libc::close(fd);
    }
    std::fs::write("/proc/sys/net/ipv4/tcp_migrate_req", "1")
        .map_err(|e| format!("cannot set net.ipv4.tcp_migrate_req (Linux 5.14 or later): {e}"))
}

/// The systemd form: a .socket unit holds the listening socket and passes it to each
/// staticd it starts, so `systemctl restart` (stop, then start) refuses nothing even
/// with new connections all the time: while no staticd runs they wait in the socket's
/// queue. Here the test holds the socket and passes it as systemd does (LISTEN_FDS).
#[test]
fn restart_on_a_passed_socket_fails_no_request() {
    let Some(wrk) = tool("wrk", "wrk") else {
        return;
    };
    let _serial = serial();
    let root = Docroot::new();
    root.file("a.txt", "x".repeat(1024));
    let logs = Docroot::new();
    let (old_log, new_log) = (logs.join("old.log"), logs.join("new.log"));
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/a.txt", socket.local_addr().unwrap());
    let mut old = start_activated(root.path(), &socket, &old_log);
    let load = thread::spawn(move || {
        let mut cmd = Command::new(wrk);
        cmd.args(["-t2", "-c32", "-H", "Connection: close"])
            .arg(format!("-d{}s", LOAD.as_secs()))
            .arg(url);
        run_bounded(&mut cmd, b"", LOAD + Duration::from_secs(20))
    });
    thread::sleep(LOAD / 3);
    old.signal(Signal::TERM);
    let status = old
        .wait_timeout(Duration::from_secs(15))
        .expect("the old staticd still runs 15 s after SIGTERM");
    assert_eq!(status.code(), Some(0), "old staticd: {}", describe(status));
    let mut new = start_activated(root.path(), &socket, &new_log);
    let run = load.join().unwrap();
    run.assert_success("wrk");
    new.signal(Signal::TERM);
    new.wait_timeout(IO_TIMEOUT).expect("the new staticd exits");
    assert_lossless(&run.stdout, log_lines(&old_log), log_lines(&new_log));
}

/// staticd serving `socket` as a service manager passes it: descriptor 3, with
/// LISTEN_PID and LISTEN_FDS (set by a shell that then execs staticd, keeping its pid).
fn start_activated(root: &Path, socket: &std::net::TcpListener, log: &Path) -> ChildGuard {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let fd = socket.as_raw_fd();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("export LISTEN_PID=$$ LISTEN_FDS=1; exec \"$0\" \"$@\"")
        .arg(staticd_bin())
        .arg("--root")
        .arg(root)
        .args(["--threads", "2", "--log-file"])
        .arg(log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: dup2 and fcntl are async-signal-safe; the descriptor stays open in the
    // parent for as long as the child is made.
    unsafe {
        cmd.pre_exec(move || {
            let passed = match fd {
                3 => libc::fcntl(3, libc::F_SETFD, 0),
                _ => libc::dup2(fd, 3),
            };
            match passed {
                -1 => Err(std::io::Error::last_os_error()),
                _ => Ok(()),
            }
        });
    }
    let mut child = ChildGuard::new(cmd.spawn().expect("spawn staticd"));
    let stderr = Lines::default();
    stderr.drain(child.take_stderr().unwrap());
    stderr.wait_line(|l| l.starts_with("staticd: listening on 127.0.0.1:") && l.contains("fd 3"));
    child
}

matrix!([h1, uring] standalone: told_of_the_stop_only_once_its_listeners_closed);

/// A rolling restart (`--reuse-port`, a second process, SIGTERM to the first): the old
/// process's connections hear of the stop (an HTTP/2 GOAWAY, `Connection: close`) only
/// once all its listeners are closed. A client that reconnects then reaches the new
/// process, never a listener of the old one about to close (which would reset it). To
/// make the order visible, the old process's workers are kept busy with listings of a
/// directory of 5,000 files (made for HEAD too): a worker in the middle of one closes
/// its listeners late, and the other worker's clients must wait for it.
fn told_of_the_stop_only_once_its_listeners_closed(v: Variant) {
    let _serial = serial();
    let root = Docroot::new();
    let many = root.dir("many");
    for i in 0..5_000 {
        std::fs::File::create(many.join(i.to_string())).unwrap();
    }
    let port = free_port();
    let start = || {
        Server::builder(v, root.path())
            .port(port)
            .args(["--reuse-port", "--threads", "2", "--listing"])
            // No connection of the test ends for being quiet.
            .args(["--read-timeout", "60", "--keepalive-timeout", "60"])
            .start()
    };
    let mut old = start();
    let (addr, pid) = (old.addr(), old.process().id());
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let busy: Vec<_> = (0..4)
        .map(|_| {
            let conn = std::net::TcpStream::connect(addr).unwrap();
            let answered = Arc::clone(&answered);
            thread::spawn(move || list_until_told(conn, &answered, || listeners_of(pid, addr)))
        })
        .collect();
    let warm = eventually(IO_TIMEOUT, || {
        (answered.load(std::sync::atomic::Ordering::Acquire) >= 8).then_some(())
    });
    assert!(warm.is_some(), "the listings were not answered");
    let h2: Vec<_> = (0..8)
        .map(|_| {
            let (mut conn, _) = H2Conn::handshake(addr, &[]);
            thread::spawn(move || loop {
                match conn.next(Instant::now() + STOP_WITHIN) {
                    Next::Frame(f) if f.is(kind::GOAWAY) => return listeners_of(pid, addr),
                    Next::Frame(_) => {}
                    other => panic!("no GOAWAY from the old process: {other:?}"),
                }
            })
        })
        .collect();
    let _new = start();
    old.process().signal(Signal::TERM);
    for (i, conn) in h2.into_iter().enumerate() {
        let open = conn.join().unwrap();
        assert_eq!(open, 0, "HTTP/2 connection {i} had its GOAWAY while the old process still had {open} listeners open");
    }
    for (i, conn) in busy.into_iter().enumerate() {
        let open = conn.join().unwrap();
        assert_eq!(open, 0, "connection {i} had `Connection: close` while the old process still had {open} listeners open");
    }
    let status = old
        .process()
        .wait_timeout(IO_TIMEOUT)
        .expect("the old staticd exits");
    assert_eq!(status.code(), Some(0), "old staticd: {}", describe(status));
}

/// How long the old process may take to tell its connections of the stop (it waits for
/// its workers to finish the listings they are making) and to exit, on a loaded machine.
const STOP_WITHIN: Duration = Duration::from_secs(60);

/// Asks for the listing with HEAD on `conn` again and again, counting the answers in
/// `answered`, until the server tells the connection of the stop: `Connection: close`,
/// or a close between requests (the io_uring transport closes idle connections at
/// once). Returns what `listeners` says then.
fn list_until_told(
    mut conn: std::net::TcpStream,
    answered: &std::sync::atomic::AtomicUsize,
    listeners: impl Fn() -> usize,
) -> usize {
    use std::io::{ErrorKind, Read, Write};
    conn.set_read_timeout(Some(STOP_WITHIN)).unwrap();
    let mut head = Vec::new();
    loop {
        let asked = conn.write_all(request("HEAD", "/many/", &[]).as_bytes());
        head.clear();
        let mut byte = [0; 1];
        while asked.is_ok() && !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    panic!("no answer from the old process within {STOP_WITHIN:?}")
                }
                Ok(_) | Err(_) => break,
            }
        }
        if !head.ends_with(b"\r\n\r\n") {
            // Closed: told, as by `Connection: close`.
            return listeners();
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200 "), "{head}");
        answered.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        if head.contains("\r\nconnection: close\r\n") {
            return listeners();
        }
    }
}
