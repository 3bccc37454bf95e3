//! The command line: usage errors that keep clap's help, invalid values, and where
//! standalone mode listens: host names and Unix-domain sockets (`--bind unix:PATH`).

#[macro_use]
mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use common::*;
use rustix::process::Signal;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root
}

// What a running server does is checked in every cell of the protocol matrix; usage
// errors and start-up failures (no server to talk to) once.
matrix!([h1, tls, h2c, h2_tls, h3, uring] standalone: host_name_binds_every_address_it_resolves_to);
// An address named twice is about TCP listeners; Unix sockets carry no QUIC: no h3 cell.
matrix!([h1, tls, h2c, h2_tls, uring] standalone:
    an_address_named_twice_is_bound_once,
    unix_socket_serves_beside_tcp_and_goes_at_exit,
    unix_mode_sets_the_socket_permissions,
    stale_socket_file_is_replaced,
    cgi_over_a_unix_socket_sees_the_loopback_address,
    unix_socket_is_bound_before_giving_up_root,
    environment_variables_set_flags,
    a_flag_beats_its_variable,
);

// --- usage errors ------------------------------------------------------------------------

#[test]
fn invalid_value_lists_the_valid_ones() {
    let outcome = run_to_exit(&["--log-format", "xml"]);
    assert_usage_error(
        &outcome,
        &[
            "'xml'",
            "--log-format",
            "common, combined, fnord, json, off",
        ],
    );
}

#[test]
fn misspelt_flag_gets_a_did_you_mean() {
    let outcome = run_to_exit(&["--rot", "www"]);
    assert_usage_error(
        &outcome,
        &["'--rot'", "a similar argument exists: '--root'"],
    );
}

#[test]
fn bare_directory_gets_a_root_hint() {
    let outcome = run_to_exit(&["www"]);
    assert_usage_error(&outcome, &["'www'", "use '--root www'"]);
}

#[test]
fn invalid_values_are_usage_errors() {
    let cases: &[&[&str]] = &[
        &["--index", ""],
        &["--index", "a.html,"],
        &["--index", "../secret.html"],
        &["--index", ".."],
        &["--unix-mode", "8"],
        &["--unix-mode", "1777"],
        &["--unix-mode", "u+rw"],
        &["--bind", "127.0.0.1:8080"],
        &["--bind", "8080"],
        &["--bind", "unix:"],
        &["--bind", ""],
        &["--user", ""],
        &["--root", ""],
        &["--threads", "0"],
        &["--port", "65536"],
    ];
    for args in cases {
        let outcome = run_to_exit(args);
        assert_usage_error(&outcome, &[args[0]]);
    }
}

#[test]
fn empty_index_is_a_usage_error() {
    let outcome = run_to_exit(&["--index", ""]);
    assert_usage_error(&outcome, &["--index", "plain file name"]);
}

// --- help and environment variables ------------------------------------------------------

#[test]
fn help_groups_the_flags_and_ends_with_examples() {
    let outcome = run_to_exit(&["--help"]);
    assert!(outcome.status.success(), "{outcome:?}");
    let help = &outcome.stdout;
    let mut headings = vec!["Serving:", "Limits:", "Logging:", "Production:"];
    if cfg!(feature = "tls") {
        headings.push("HTTPS:");
    }
    if cfg!(feature = "http2") {
        headings.push("HTTP/2 and HTTP/3:");
    }
    for needle in headings.iter().chain(&[
        "-r, --root <DIR>",
        "-p, --port <N>",
        "-b, --bind <ADDR>",
        "[env: STATICD_ROOT=]",
        "[env: STATICD_LISTING=]",
        "[env: STATICD_HEALTH_PATH=]",
        "Examples:",
    ]) {
        assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
    }
    // Every flag but help and version names its variable (flags are indented 2 or 6
    // columns, their text 10).
    let flags = help
        .lines()
        .filter(|l| l.starts_with("  -") || l.starts_with("      --"))
        .count()
        - 2;
    let envs = help.matches("[env: STATICD_").count();
    assert_eq!(flags, envs, "{help}");
}

/// STATICD_LISTING=1 turns listings on as --listing does; 0 (or empty) leaves them off.
fn environment_variables_set_flags(v: Variant) {
    let root = site();
    root.dir("d");
    for (value, listed) in [
        ("1", true),
        ("true", true),
        ("On", true),
        ("0", false),
        ("", false),
    ] {
        let server = Server::builder(v, root.path())
            .env("STATICD_LISTING", value)
            .env("STATICD_INDEX", "a.txt")
            .start();
        assert_eq!(
            server.get("/d/").status == 200,
            listed,
            "STATICD_LISTING={value:?}"
        );
        assert_eq!(server.get("/").body, b"alpha\n", "STATICD_INDEX");
    }
}

/// The command line wins over the environment, for values and for on/off flags.
fn a_flag_beats_its_variable(v: Variant) {
    let root = site();
    root.file("b.txt", "beta\n");
    root.dir("d");
    let server = Server::builder(v, root.path())
        .env("STATICD_INDEX", "a.txt")
        .env("STATICD_LISTING", "0")
        .env("STATICD_PORT", "1")
        .args(["--index", "b.txt", "--listing"])
        .start();
    assert_eq!(server.get("/").body, b"beta\n");
    assert_eq!(server.get("/d/").status, 200);
}

#[test]
fn a_bad_variable_is_a_usage_error_naming_its_flag() {
    let outcome = run_to_exit_with(&["--port", "0"], &[("STATICD_LISTING", "maybe")], false);
    assert_usage_error(&outcome, &["'maybe'", "--listing", "1/0, true/false"]);
    let outcome = run_to_exit_with(&["--bind", "127.0.0.1"], &[("STATICD_PORT", "http")], false);
    assert_usage_error(&outcome, &["'http'", "--port"]);
}

// --- start-up errors that say what to do ---------------------------------------------------

#[cfg(feature = "tls")]
#[test]
fn a_missing_certificate_names_its_flag() {
    let outcome = run_to_exit(&[
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--tls-cert",
        "/nope/cert.pem",
        "--tls-key",
        "/nope/key.pem",
    ]);
    assert_startup_failure(
        &outcome,
        1,
        &["--tls-cert /nope/cert.pem: No such file or directory"],
    );
}

/// As a user without the privilege, port 80 fails with the three ways to allow it.
#[test]
fn a_low_port_without_privilege_says_how_to_allow_it() {
    let unprivileged_start = fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(1024);
    let is_root = rustix::process::geteuid().is_root();
    if unprivileged_start <= 80 || (!is_root && has_net_bind_service()) {
        return skip("any user may bind port 80 on this machine");
    }
    let root = site();
    let args = [
        "--root".as_ref(),
        root.path().as_os_str(),
        "--port".as_ref(),
        "80".as_ref(),
        "--bind".as_ref(),
        "127.0.0.1".as_ref(),
    ];
    let outcome = run_to_exit_with(&args, &[], true);
    assert_startup_failure(
        &outcome,
        1,
        &[
            "127.0.0.1:80",
            "Permission denied",
            "--user",
            "setcap cap_net_bind_service",
            "socket activation",
        ],
    );
}

/// Whether this process may bind low ports without being root (a capability).
fn has_net_bind_service() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("CapEff:"))?.to_string();
            u64::from_str_radix(line.split_whitespace().nth(1)?, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << 10) != 0)
}

/// A root that can be listed but not entered (0644) is refused at start, as an
/// unreadable one is, instead of a 403 for every file. (Root may enter any
/// directory: as root, the server runs as nobody.)
#[test]
fn a_root_that_cannot_be_entered_is_refused() {
    let root = site();
    let locked = root.dir("locked");
    fs::write(locked.join("x.txt"), "x").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o644)).unwrap();
    let args = [
        "--root".as_ref(),
        locked.as_os_str(),
        "--port".as_ref(),
        "0".as_ref(),
        "--bind".as_ref(),
        "127.0.0.1".as_ref(),
    ];
    let outcome = run_to_exit_with(&args, &[], true);
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    assert_startup_failure(&outcome, 1, &[locked.to_str().unwrap(), "not entered"]);
}

// --- host names --------------------------------------------------------------------------

/// The addresses `localhost` resolves to here that the machine can bind (::1 only where
/// IPv6 is up), each once.
fn localhost_addresses() -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = Vec::new();
    for addr in ("localhost", 0)
        .to_socket_addrs()
        .expect("resolve localhost")
    {
        if !ips.contains(&addr.ip()) && TcpListener::bind(addr).is_ok() {
            ips.push(addr.ip());
        }
    }
    ips
}

/// Every TCP address the server announced, once `count` are there.
fn announced(server: &Server, count: usize) -> Vec<SocketAddr> {
    let listening = |lines: &[String]| -> Vec<SocketAddr> {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix("staticd: listening on "))
            .filter_map(|a| a.parse().ok())
            .collect()
    };
    let lines = server
        .stderr()
        .wait_for(IO_TIMEOUT, |lines| listening(lines).len() >= count)
        .unwrap_or_else(|| panic!("not {count} listeners: {:#?}", server.stderr().snapshot()));
    listening(&lines)
}

fn get_over_tcp(server: &Server, addr: SocketAddr) -> Response {
    server
        .connector_to(addr)
        .connect()
        .roundtrip(request("GET", "/a.txt", &[]))
}

fn host_name_binds_every_address_it_resolves_to(v: Variant) {
    let expected = localhost_addresses();
    assert!(
        expected.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)),
        "localhost resolves to {expected:?}"
    );
    let root = site();
    let server = Server::builder(v, root.path()).bind("localhost").start();
    let addrs = announced(&server, expected.len());
    let mut ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
    ips.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(ips, want, "{:#?}", server.stderr().snapshot());
    for addr in addrs {
        assert_eq!(get_over_tcp(&server, addr).body, b"alpha\n", "{addr}");
        // And the cell's protocol: HTTP/3 on each address's port over UDP in the h3 cell.
        let mut client = server.connector_to(addr).client();
        assert_eq!(client.get("/a.txt").body, b"alpha\n", "{addr}");
    }
}

fn an_address_named_twice_is_bound_once(v: Variant) {
    let expected = localhost_addresses();
    let root = site();
    // A raw argument: the harness would wait for one announcement per .bind().
    let server = Server::builder(v, root.path())
        .bind("localhost")
        .args(["--bind", "127.0.0.1"])
        .start();
    let addrs = announced(&server, expected.len());
    // Every announcement precedes the first request served.
    assert_eq!(get_over_tcp(&server, addrs[0]).body, b"alpha\n");
    let lines = server.stderr().snapshot();
    let listening: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("staticd: listening on "))
        .collect();
    assert_eq!(listening.len(), expected.len(), "{lines:#?}");
}

// --- Unix-domain sockets -----------------------------------------------------------------

/// A fresh directory for socket files, and the path of one in it.
fn socket_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("staticd.sock");
    (dir, path)
}

fn unix_bind(path: &Path) -> String {
    format!("unix:{}", path.display())
}

/// Cleartext even in a TLS cell: the Unix-socket clients here speak plain HTTP.
fn start_on_unix(v: Variant, root: &Docroot, path: &Path, args: &[&str]) -> Server {
    let server = Server::builder(v, root.path())
        .plain()
        .bind(&unix_bind(path))
        .args(args)
        .start();
    let line = format!("staticd: listening on {}", unix_bind(path));
    server.stderr().wait_line(|l| l == line);
    server
}

/// Sends `requests` on one Unix-socket connection, the last asking to close, and returns
/// the responses.
fn exchange_unix(path: &Path, targets: &[&str]) -> Vec<Response> {
    let mut stream = UnixStream::connect(path).expect("connect to the Unix socket");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    for (i, target) in targets.iter().enumerate() {
        let close: &[&str] = if i + 1 == targets.len() {
            &["Connection: close"]
        } else {
            &[]
        };
        stream
            .write_all(request("GET", target, close).as_bytes())
            .expect("send");
    }
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("read the responses");
    parse_responses(&bytes, &vec!["GET"; targets.len()])
}

fn mode_of(path: &Path) -> u32 {
    let meta = fs::symlink_metadata(path).expect("the socket file");
    assert!(meta.file_type().is_socket(), "{path:?} is no socket");
    meta.permissions().mode() & 0o777
}

fn unix_socket_serves_beside_tcp_and_goes_at_exit(v: Variant) {
    let root = site();
    let (_dir, path) = socket_dir();
    let mut server = Server::builder(v, root.path())
        .plain()
        .bind("127.0.0.1")
        .bind(&unix_bind(&path))
        .log_format("common")
        .start();
    let line = format!("staticd: listening on {}", unix_bind(&path));
    server.stderr().wait_line(|l| l == line);
    assert_eq!(mode_of(&path), 0o666, "the default mode");
    let responses = exchange_unix(&path, &["/a.txt", "/a.txt"]);
    for resp in &responses {
        assert_eq!(resp.status, 200, "{resp:#?}");
        assert_eq!(resp.body, b"alpha\n");
    }
    let logged = server
        .stderr()
        .wait_line(|l| l.contains("\"GET /a.txt HTTP/1.1\""));
    assert!(
        logged.starts_with("unix: - - ["),
        "as nginx logs it: {logged}"
    );
    assert_eq!(server.get("/a.txt").body, b"alpha\n", "TCP as well");

    server.process().signal(Signal::TERM);
    let status = server
        .process()
        .wait_timeout(IO_TIMEOUT)
        .expect("staticd still running after SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", describe(status));
    assert!(
        fs::symlink_metadata(&path).is_err(),
        "the socket file is removed at a clean stop"
    );
}

fn unix_mode_sets_the_socket_permissions(v: Variant) {
    let root = site();
    let (_dir, path) = socket_dir();
    let _server = start_on_unix(v, &root, &path, &["--unix-mode", "600"]);
    assert_eq!(mode_of(&path), 0o600);
    assert_eq!(exchange_unix(&path, &["/a.txt"])[0].body, b"alpha\n");
}

fn stale_socket_file_is_replaced(v: Variant) {
    let root = site();
    let (_dir, path) = socket_dir();
    drop(UnixListener::bind(&path).unwrap());
    assert!(
        fs::symlink_metadata(&path).is_ok(),
        "a closed listener leaves its file"
    );
    let _server = start_on_unix(v, &root, &path, &[]);
    assert_eq!(exchange_unix(&path, &["/a.txt"])[0].body, b"alpha\n");
}

fn run_bound_to(root: &Docroot, path: &Path) -> Outcome {
    let root = root.path().to_str().unwrap();
    run_to_exit(&["--root", root, "--bind", &unix_bind(path)])
}

#[test]
fn live_socket_is_refused_and_left_alone() {
    let root = site();
    let (_dir, path) = socket_dir();
    let other = UnixListener::bind(&path).unwrap();
    let outcome = run_bound_to(&root, &path);
    assert_startup_failure(&outcome, 1, &["in use", path.to_str().unwrap()]);
    let _client = UnixStream::connect(&path).expect("the other server's socket still works");
    other.accept().expect("and it gets the connection");
}

#[test]
fn path_that_is_no_socket_is_refused_and_kept() {
    let root = site();
    let (_dir, path) = socket_dir();
    fs::write(&path, "keep me\n").unwrap();
    let outcome = run_bound_to(&root, &path);
    assert_startup_failure(&outcome, 1, &["not a socket", path.to_str().unwrap()]);
    assert_eq!(fs::read(&path).unwrap(), b"keep me\n");
}

fn cgi_over_a_unix_socket_sees_the_loopback_address(v: Variant) {
    let root = site();
    let script = root.file(
        "env.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n%s %s' \"$REMOTE_ADDR\" \"${REMOTE_PORT-none}\"\n",
    );
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let (_dir, path) = socket_dir();
    let _server = start_on_unix(v, &root, &path, &["--cgi"]);
    // HTTP/1.0: the script's output ends with the connection, unframed.
    let mut stream = UnixStream::connect(&path).expect("connect to the Unix socket");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.write_all(b"GET /env.cgi HTTP/1.0\r\n\r\n").unwrap();
    let mut reply = String::new();
    stream
        .read_to_string(&mut reply)
        .expect("read the response");
    assert!(reply.starts_with("HTTP/1.1 200 "), "{reply}");
    assert!(reply.ends_with("\r\n\r\n127.0.0.1 none"), "{reply}");
}

fn unix_socket_is_bound_before_giving_up_root(v: Variant) {
    let root = site();
    let (dir, path) = socket_dir();
    if !rustix::process::geteuid().is_root() {
        let outcome = run_to_exit(&[
            "--root",
            root.path().to_str().unwrap(),
            "--bind",
            &unix_bind(&path),
            "--user",
            "nobody",
        ]);
        assert_startup_failure(&outcome, 1, &["nobody"]);
        return;
    }
    // Only root can make a file here: nobody could not have bound the socket.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
    let mut server = start_on_unix(v, &root, &path, &["--user", "nobody"]);
    assert_eq!(exchange_unix(&path, &["/a.txt"])[0].body, b"alpha\n");
    server.process().signal(Signal::TERM);
    let status = server
        .process()
        .wait_timeout(IO_TIMEOUT)
        .expect("staticd still running after SIGTERM");
    assert_eq!(
        status.code(),
        Some(0),
        "a socket file nobody may remove is no failure: {}",
        describe(status)
    );
}
