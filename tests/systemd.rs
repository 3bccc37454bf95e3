//! systemd: socket activation (sd_listen_fds(3)) under `systemd-socket-activate`, the
//! tool from Debian's systemd package that passes sockets exactly as a `.socket` unit
//! does; and readiness notification (sd_notify(3)) to a datagram socket the test binds,
//! by path and in the abstract namespace.

mod common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use rustix::process::Signal;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root
}

/// `systemd-socket-activate` listening on `listen` (its -l arguments, `PORT` and
/// `PORT2` standing for free ports) with `extra` options, to exec `staticd ARGS` at the
/// first connection. Returns the process (staticd once exec'd: the same pid), its
/// stderr and the two ports.
fn activate(
    tool: &Path,
    listen: &[&str],
    extra: &[&str],
    staticd_args: &[&str],
) -> (ChildGuard, Lines, [u16; 2]) {
    let mut failures = Vec::new();
    for _ in 0..3 {
        let ports = [free_port(), free_port()];
        let mut cmd = Command::new(tool);
        for l in listen {
            let l = l.replace("PORT2", &ports[1].to_string());
            cmd.arg("-l").arg(l.replace("PORT", &ports[0].to_string()));
        }
        cmd.args(extra).arg(staticd_bin()).args(staticd_args);
        let (mut child, stderr) = spawn_with_stderr(&mut cmd);
        let ready = stderr.wait_for(IO_TIMEOUT, |lines| {
            lines
                .iter()
                .filter(|l| l.starts_with("Listening on "))
                .count()
                == listen.len()
        });
        if ready.is_some() {
            return (child, stderr, ports);
        }
        let _ = child.wait_timeout(Duration::from_millis(200));
        failures.push(stderr.snapshot());
    }
    panic!("systemd-socket-activate did not listen: {failures:#?}");
}

/// One request with `Connection: close`; the whole response.
fn fetch(mut stream: impl Read + Write, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

fn tcp(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

fn unix(path: &Path) -> UnixStream {
    let stream = UnixStream::connect(path).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

#[test]
fn activation_serves_every_passed_socket_and_names_it() {
    let Some(tool) = tool("systemd-socket-activate", "systemd") else {
        return;
    };
    let root = site();
    let sock = root.path().join("staticd.sock");
    let root_arg = root.path().to_str().unwrap();
    let listen = ["127.0.0.1:PORT", sock.to_str().unwrap()];
    let args = ["--root", root_arg, "--threads", "2"];
    let (_process, stderr, [port, _]) = activate(&tool, &listen, &["--fdname=web:local"], &args);
    // This first connection is queued on the socket before staticd even runs (the
    // manager starts it on the first connection): the passed socket carries it over.
    let first = fetch(tcp(port), "/a.txt");
    assert!(first.starts_with("HTTP/1.1 200 "), "{first}");
    assert!(first.ends_with("\r\n\r\nalpha\n"), "{first}");
    stderr.wait_line(|l| {
        l == format!("staticd: listening on 127.0.0.1:{port} (socket activation: fd 3 \"web\")")
    });
    stderr.wait_line(|l| {
        l == format!(
            "staticd: listening on unix:{} (socket activation: fd 4 \"local\")",
            sock.display()
        )
    });
    // Both worker threads accept on the one queue of each socket.
    for _ in 0..8 {
        assert!(fetch(tcp(port), "/a.txt").starts_with("HTTP/1.1 200 "));
        assert!(fetch(unix(&sock), "/a.txt").starts_with("HTTP/1.1 200 "));
    }
}

#[test]
fn passed_sockets_win_over_bind_and_port_saying_so() {
    let Some(tool) = tool("systemd-socket-activate", "systemd") else {
        return;
    };
    let root = site();
    let root_arg = root.path().to_str().unwrap();
    let unused = free_port().to_string();
    let by_env = format!("STATICD_PORT={unused}");
    // Given as flags, then as the environment (a unit's Environment=).
    for (extra, args) in [
        (
            vec![],
            vec!["--root", root_arg, "--bind", "127.0.0.1", "--port", &unused],
        ),
        (vec!["-E", by_env.as_str()], vec!["--root", root_arg]),
    ] {
        let (_process, stderr, [port, _]) = activate(&tool, &["127.0.0.1:PORT"], &extra, &args);
        assert!(fetch(tcp(port), "/a.txt").starts_with("HTTP/1.1 200 "));
        // That request's access-log line comes after every `listening on` line
        // (written before staticd accepts): once it is read, so are they. A
        // snapshot taken sooner could miss them.
        let log_line = stderr.wait_line(|l| l.contains("\"GET /a.txt HTTP/1.1\" 200"));
        let lines = stderr.snapshot();
        let announced = &lines[..lines.iter().position(|l| *l == log_line).unwrap()];
        assert!(
            announced.iter().any(|l| l
                == "staticd: socket activation: serving the sockets passed by systemd, \
                    not --bind or --port (or STATICD_BIND, STATICD_PORT)"),
            "{announced:#?}"
        );
        let listening: Vec<&String> = announced
            .iter()
            .filter(|l| l.starts_with("staticd: listening on "))
            .collect();
        assert_eq!(listening.len(), 1, "{listening:?}");
        assert!(
            listening[0].contains(&format!("127.0.0.1:{port} ")),
            "{listening:?}"
        );
        let refused = TcpStream::connect(("127.0.0.1", unused.parse::<u16>().unwrap()));
        assert!(
            refused.is_err(),
            "port {unused} was bound as well ({extra:?})"
        );
    }
}

#[test]
fn cgi_scripts_inherit_neither_the_variables_nor_the_sockets() {
    use std::os::unix::fs::PermissionsExt;
    let Some(tool) = tool("systemd-socket-activate", "systemd") else {
        return;
    };
    let root = site();
    let script = root.file(
        "env.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n/usr/bin/env\nls -l /proc/$$/fd\n",
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let notify = UnixDatagram::bind(root.path().join("notify")).unwrap();
    let notify_path = notify.local_addr().unwrap();
    let notify_var = format!(
        "NOTIFY_SOCKET={}",
        notify_path.as_pathname().unwrap().display()
    );
    let root_arg = root.path().to_str().unwrap();
    let args = ["--root", root_arg, "--cgi"];
    let extra = ["-E", &notify_var];
    let (_process, _stderr, [port, _]) = activate(&tool, &["127.0.0.1:PORT"], &extra, &args);
    let response = fetch(tcp(port), "/env.cgi");
    assert!(response.starts_with("HTTP/1.1 200 "), "{response}");
    assert!(response.contains("GATEWAY_INTERFACE=CGI/1.1"), "{response}");
    for var in [
        "LISTEN_PID",
        "LISTEN_FDS",
        "LISTEN_FDNAMES",
        "NOTIFY_SOCKET",
    ] {
        assert!(!response.contains(var), "the script saw {var}:\n{response}");
    }
    assert!(
        response.contains(" 2 -> "),
        "no descriptor list:\n{response}"
    );
    assert!(
        !response.contains("socket:"),
        "the script holds a socket:\n{response}"
    );
}

#[test]
fn a_passed_socket_that_is_not_a_stream_listener_is_a_start_up_error() {
    let Some(tool) = tool("systemd-socket-activate", "systemd") else {
        return;
    };
    let root = site();
    let root_arg = root.path().to_str().unwrap();
    let args = ["--root", root_arg];
    let (mut process, stderr, [port, _]) =
        activate(&tool, &["127.0.0.1:PORT"], &["--datagram"], &args);
    // A datagram starts the service.
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.send_to(b"x", ("127.0.0.1", port)).unwrap();
    let status = process
        .wait_timeout(IO_TIMEOUT)
        .expect("staticd kept running on a datagram socket");
    assert_eq!(status.code(), Some(1), "{}", describe(status));
    let ours: Vec<String> = stderr
        .wait_for(IO_TIMEOUT, |l| l.iter().any(|l| l.starts_with("staticd")))
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l.starts_with("staticd"))
        .collect();
    assert_eq!(ours.len(), 1, "{ours:#?}");
    assert!(
        ours[0].starts_with("staticd: socket activation: fd 3 (")
            && ours[0].ends_with("not a listening stream socket"),
        "{ours:?}"
    );
}

#[cfg(feature = "tls")]
#[test]
fn a_socket_named_redirect_http_redirects_to_the_https_socket() {
    let Some(tool) = tool("systemd-socket-activate", "systemd") else {
        return;
    };
    let root = site();
    let (_, files) = Pki::shared().localhost();
    let tls: Vec<String> = files
        .args()
        .iter()
        .map(|a| a.to_string_lossy().into())
        .collect();
    let mut args: Vec<&str> = vec!["--root", root.path().to_str().unwrap()];
    args.extend(tls.iter().map(String::as_str));
    let listen = ["127.0.0.1:PORT", "127.0.0.1:PORT2"];
    let names = ["--fdname=https:redirect-http"];
    let (_process, stderr, [port, redirect]) = activate(&tool, &listen, &names, &args);
    let response = fetch(tcp(redirect), "/a.txt?x=1");
    assert!(response.starts_with("HTTP/1.1 308 "), "{response}");
    assert!(
        response.contains(&format!(
            "\r\nLocation: https://localhost:{port}/a.txt?x=1\r\n"
        )),
        "{response}"
    );
    stderr.wait_line(|l| {
        l == format!(
            "staticd: redirecting to https on 127.0.0.1:{redirect} (socket activation: fd 4 \"redirect-http\")"
        )
    });
}

#[cfg(feature = "tls")]
#[test]
fn redirect_http_without_its_socket_is_a_start_up_error() {
    let Some(tool) = tool("systemd-socket-activate", "systemd") else {
        return;
    };
    let root = site();
    let (_, files) = Pki::shared().localhost();
    let tls: Vec<String> = files
        .args()
        .iter()
        .map(|a| a.to_string_lossy().into())
        .collect();
    let mut args: Vec<&str> = vec![
        "--root",
        root.path().to_str().unwrap(),
        "--redirect-http",
        "80",
    ];
    args.extend(tls.iter().map(String::as_str));
    let (mut process, stderr, [port, _]) = activate(&tool, &["127.0.0.1:PORT"], &[], &args);
    let _ = TcpStream::connect(("127.0.0.1", port));
    let status = process
        .wait_timeout(IO_TIMEOUT)
        .expect("staticd kept running");
    assert_eq!(status.code(), Some(1), "{}", describe(status));
    stderr.wait_line(|l| {
        l.starts_with(
            "staticd: --redirect-http: socket activation passed no socket named redirect-http",
        )
    });
}

// ---------------------------------------------------------------------------------------
// sd_notify
// ---------------------------------------------------------------------------------------

/// Where the test listens for notifications.
enum NotifyAt {
    Path(PathBuf),
    Abstract(String),
}

/// The next notification datagram, split into its lines.
fn next_notification(socket: &UnixDatagram) -> Vec<String> {
    let mut buf = [0u8; 4096];
    let n = socket
        .recv(&mut buf)
        .expect("no notification within the timeout");
    let text = String::from_utf8(buf[..n].to_vec()).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    text.lines().map(String::from).collect()
}

fn monotonic_usec() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1000
}

fn notify_sequence(at: NotifyAt) {
    let root = site();
    let (socket, variable) = match at {
        NotifyAt::Path(path) => (
            UnixDatagram::bind(&path).unwrap(),
            path.display().to_string(),
        ),
        NotifyAt::Abstract(name) => {
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
            (UnixDatagram::bind_addr(&addr).unwrap(), format!("@{name}"))
        }
    };
    socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut server = Server::builder(Mode::Standalone, root.path())
        .plain()
        .env("NOTIFY_SOCKET", &variable)
        .start();
    let ready = next_notification(&socket);
    let status = format!("STATUS=listening on {}", server.addr());
    assert_eq!(ready, ["READY=1", status.as_str()]);
    // Ready means serving.
    assert_eq!(server.get("/a.txt").status, 200);

    let before = monotonic_usec();
    server.process().signal(Signal::HUP);
    let reloading = next_notification(&socket);
    assert_eq!(reloading.len(), 2, "{reloading:?}");
    assert_eq!(reloading[0], "RELOADING=1");
    let stamp: u64 = reloading[1]
        .strip_prefix("MONOTONIC_USEC=")
        .unwrap_or_else(|| panic!("{reloading:?}"))
        .parse()
        .unwrap();
    assert!(
        (before..=monotonic_usec()).contains(&stamp),
        "MONOTONIC_USEC {stamp} is not CLOCK_MONOTONIC now"
    );
    assert_eq!(next_notification(&socket), ["READY=1"]);
    assert_eq!(server.get("/a.txt").status, 200);

    server.process().signal(Signal::TERM);
    let stopping = next_notification(&socket);
    assert_eq!(stopping[0], "STOPPING=1", "{stopping:?}");
    assert!(stopping[1].starts_with("STATUS=stopping"), "{stopping:?}");
    let status = server.process().wait_timeout(IO_TIMEOUT).expect("exit");
    assert_eq!(status.code(), Some(0), "{}", describe(status));
    socket.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    assert!(
        socket.recv(&mut buf).is_err(),
        "a notification after STOPPING=1"
    );
}

#[test]
fn notifies_ready_reloading_and_stopping_on_a_socket_file() {
    let dir = Docroot::new();
    notify_sequence(NotifyAt::Path(dir.path().join("notify")));
}

#[test]
fn notifies_on_an_abstract_socket() {
    let name = format!(
        "staticd-test-notify-{}-{:?}",
        std::process::id(),
        Instant::now()
    );
    notify_sequence(NotifyAt::Abstract(name));
}

#[test]
fn a_notify_socket_that_cannot_be_reached_is_a_warning() {
    let root = site();
    let missing = root.path().join("no-such-socket");
    let server = Server::builder(Mode::Standalone, root.path())
        .plain()
        .env("NOTIFY_SOCKET", missing.to_str().unwrap())
        .start();
    assert_eq!(server.get("/a.txt").status, 200);
    let warning = format!(
        "staticd: warning: NOTIFY_SOCKET {}: cannot connect: ",
        missing.display()
    );
    server.stderr().wait_line(|l| l.starts_with(&warning));
}

// ---------------------------------------------------------------------------------------
// examples/systemd
// ---------------------------------------------------------------------------------------

/// Every unit in examples/systemd passes `systemd-analyze verify` without a word: all of
/// them together (a socket needs its service; each unit's name says what it is, so no two
/// collide), copied with ExecStart pointing at the binary under test, since verify checks
/// that the program exists.
#[test]
fn example_units_pass_systemd_analyze_verify() {
    let Some(analyze) = tool("systemd-analyze", "systemd") else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/systemd");
    let copy = Docroot::new();
    let mut names = Vec::new();
    let mut units = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        assert!(
            path.is_file(),
            "{}: examples/systemd is one directory of units",
            path.display()
        );
        let text = std::fs::read_to_string(&path).unwrap();
        if text.contains("ExecStart=") {
            assert!(
                text.contains("ExecStart=/usr/local/bin/staticd "),
                "{}: ExecStart is not /usr/local/bin/staticd",
                path.display()
            );
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        units.push(copy.file(&name, text.replace("/usr/local/bin/staticd", staticd_bin())));
        names.push(name);
    }
    names.sort();
    assert_eq!(
        names,
        [
            "staticd-activated.service",
            "staticd-activated.socket",
            "staticd-inetd.socket",
            "staticd-inetd@.service",
            "staticd.service",
        ],
        "examples/systemd: standalone, socket-activated, and one process per connection"
    );
    units.sort();
    let mut cmd = Command::new(&analyze);
    cmd.args(["verify", "--man=no"]).args(&units);
    let run = run_bounded(&mut cmd, b"", Duration::from_secs(60));
    let what = format!("systemd-analyze verify {}", dir.display());
    run.assert_success(&what);
    assert_eq!(
        (run.stdout.trim(), run.stderr.trim()),
        ("", ""),
        "{}",
        run.describe(&what)
    );
}
