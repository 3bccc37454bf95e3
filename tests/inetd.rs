//! Inetd mode only: plain pipes, process lifetime, and the access log with the client
//! address taken from the superserver's environment.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};

use common::*;

// The super-server cases in every cell of the protocol matrix they hold in; the pipe
// cases (no socket, so cleartext HTTP/1.x) once.
matrix!([h1, tls] inetd:
    process_exits_zero_when_the_client_closes,
    process_exits_zero_after_connection_close,
    common_log_uses_tcpremoteip,
    combined_log_adds_referer_and_user_agent,
    fnord_log_has_its_own_shape,
    log_uses_tcpremoteaddr_of_busybox_tcpsvd,
    log_uses_remote_host_of_stunnel,
    tcpremoteip_takes_precedence_over_tcpremoteaddr,
    log_falls_back_to_the_socket_peer_address,
);

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root.file("b.txt", "bravo bravo\n");
    root
}

/// What `staticd --inetd` did with `input` on a stdin pipe.
struct PipeRun {
    status: std::process::ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<String>,
}

/// `printf INPUT | staticd --inetd --root ROOT ARGS`, bounded in time.
fn run_on_pipes(root: &Docroot, args: &[&str], input: &str) -> PipeRun {
    let mut cmd = Command::new(staticd_bin());
    cmd.arg("--inetd")
        .arg("--root")
        .arg(root.path())
        .args(args)
        .env_remove("TCPREMOTEIP")
        .env_remove("TCPREMOTEADDR")
        .env_remove("REMOTE_HOST")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn staticd --inetd");
    let mut stdin = child.stdin.take().unwrap();
    let stdout_pipe = child.stdout.take().unwrap();
    let stderr_pipe = child.stderr.take().unwrap();
    let mut child = ChildGuard::new(child);
    let stdout = std::thread::spawn(move || {
        let mut pipe = stdout_pipe;
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    });
    let stderr = Lines::default();
    let stderr_drain = stderr.drain(stderr_pipe);
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let status = child
        .wait_timeout(IO_TIMEOUT)
        .expect("staticd --inetd did not exit after stdin reached EOF");
    stderr_drain.join().unwrap();
    PipeRun {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.snapshot(),
    }
}

#[test]
fn pipes_serve_an_http_1_0_request_and_exit_zero() {
    let root = site();
    let run = run_on_pipes(&root, &[], "GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!(run.status.code(), Some(0), "{}", describe(run.status));
    let resp = &parse_responses(&run.stdout, &["GET"])[0];
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"alpha\n");
}

#[test]
fn pipes_serve_pipelined_keep_alive_requests_until_eof() {
    let root = site();
    let input = request("GET", "/a.txt", &[])
        + &request("HEAD", "/b.txt", &[])
        + &request("GET", "/b.txt", &[]);
    let run = run_on_pipes(&root, &[], &input);
    assert_eq!(run.status.code(), Some(0), "{}", describe(run.status));
    let resps = parse_responses(&run.stdout, &["GET", "HEAD", "GET"]);
    assert_eq!(resps[0].body, b"alpha\n");
    assert_eq!(resps[1].content_length(), Some(12));
    assert_eq!(resps[2].body, b"bravo bravo\n");
}

#[test]
fn pipes_log_a_dash_for_an_unknown_client() {
    let root = site();
    let run = run_on_pipes(
        &root,
        &["--log-format", "common"],
        "GET /a.txt HTTP/1.0\r\n\r\n",
    );
    assert_eq!(run.status.code(), Some(0));
    assert_eq!(run.stderr.len(), 1, "{:?}", run.stderr);
    let (ip, rest) = split_common(&run.stderr[0]);
    assert_eq!(ip, "-");
    assert_eq!(rest, "\"GET /a.txt HTTP/1.0\" 200 6");
}

fn process_exits_zero_when_the_client_closes(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    drop(conn);
    let statuses = server.wait_inetd_exits(1);
    assert_eq!(statuses[0].code(), Some(0), "{}", describe(statuses[0]));
}

fn process_exits_zero_after_connection_close(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip(request("GET", "/a.txt", &["Connection: close"]));
    assert_eq!(resp.status, 200);
    conn.assert_closed();
    let statuses = server.wait_inetd_exits(1);
    assert_eq!(statuses[0].code(), Some(0), "{}", describe(statuses[0]));
}

fn one_logged_request(builder: Builder, extra_headers: &[&str]) -> String {
    let server = builder.start();
    let mut conn = server.connect();
    let resp = conn.roundtrip(request("GET", "/a.txt", extra_headers));
    assert_eq!(resp.status, 200);
    server.stderr().wait_line(|l| l.contains("/a.txt"))
}

fn common_log_uses_tcpremoteip(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .log_format("common")
        .env("TCPREMOTEIP", "192.0.2.7")
        .env("TCPREMOTEPORT", "4711")
        .start();
    let mut conn = server.connect();
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    assert_error(&conn.roundtrip(request("GET", "/missing", &[])), 404);
    let lines = server
        .stderr()
        .wait_for(IO_TIMEOUT, |l| l.len() >= 2)
        .unwrap_or_else(|| panic!("two log lines expected: {:?}", server.stderr().snapshot()));
    let (ip, rest) = split_common(&lines[0]);
    assert_eq!(ip, "192.0.2.7");
    assert_eq!(rest, "\"GET /a.txt HTTP/1.1\" 200 6");
    let (ip, rest) = split_common(&lines[1]);
    assert_eq!(ip, "192.0.2.7");
    assert_eq!(rest, "\"GET /missing HTTP/1.1\" 404 14");
}

fn combined_log_adds_referer_and_user_agent(v: Variant) {
    let root = site();
    let builder = Server::builder(v, root.path())
        .log_format("combined")
        .env("TCPREMOTEIP", "192.0.2.7");
    let line = one_logged_request(
        builder.clone(),
        &[
            "Referer: http://ref.example/page",
            "User-Agent: agent/1.0 (test)",
        ],
    );
    let (ip, rest) = split_common(&line);
    assert_eq!(ip, "192.0.2.7");
    assert_eq!(
        rest,
        "\"GET /a.txt HTTP/1.1\" 200 6 \"http://ref.example/page\" \"agent/1.0 (test)\""
    );
    let line = one_logged_request(builder, &[]);
    assert!(
        line.ends_with("\"GET /a.txt HTTP/1.1\" 200 6 \"-\" \"-\""),
        "{line}"
    );
}

fn fnord_log_has_its_own_shape(v: Variant) {
    let root = site();
    let builder = Server::builder(v, root.path())
        .log_format("fnord")
        .env("TCPREMOTEIP", "192.0.2.7");
    let server = builder.start();
    let mut conn = server.connect();
    let resp = conn.roundtrip(
        "GET /a.txt HTTP/1.1\r\nHost: example.com\r\nUser-Agent: test agent/1.0\r\n\r\n",
    );
    assert_eq!(resp.status, 200);
    let resp = conn.roundtrip(
        "GET /b.txt HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\nReferer: http://r.example/\r\n\r\n",
    );
    assert_eq!(resp.status, 200);
    let lines = server
        .stderr()
        .wait_for(IO_TIMEOUT, |l| l.len() >= 2)
        .unwrap_or_else(|| panic!("two log lines expected: {:?}", server.stderr().snapshot()));
    assert_eq!(
        lines[0],
        "192.0.2.7 200 6 example.com test_agent/1.0 none /a.txt"
    );
    assert_eq!(
        lines[1],
        "192.0.2.7 200 12 example.com x http://r.example/ /b.txt"
    );
}

fn log_uses_tcpremoteaddr_of_busybox_tcpsvd(v: Variant) {
    let root = site();
    let builder = Server::builder(v, root.path())
        .log_format("common")
        .env("TCPREMOTEADDR", "192.0.2.9:4444");
    let line = one_logged_request(builder, &[]);
    assert_eq!(split_common(&line).0, "192.0.2.9");
}

fn log_uses_remote_host_of_stunnel(v: Variant) {
    let root = site();
    let builder = Server::builder(v, root.path())
        .log_format("common")
        .env("REMOTE_HOST", "192.0.2.10")
        .env("REMOTE_PORT", "5555");
    let line = one_logged_request(builder, &[]);
    assert_eq!(split_common(&line).0, "192.0.2.10");
}

fn tcpremoteip_takes_precedence_over_tcpremoteaddr(v: Variant) {
    let root = site();
    let builder = Server::builder(v, root.path())
        .log_format("common")
        .env("TCPREMOTEIP", "192.0.2.7")
        .env("TCPREMOTEADDR", "192.0.2.9:4444");
    let line = one_logged_request(builder, &[]);
    assert_eq!(split_common(&line).0, "192.0.2.7");
}

fn log_falls_back_to_the_socket_peer_address(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path()).log_format("common").start();
    let mut conn = server.connect_from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    let line = server.stderr().wait_line(|l| l.contains("/a.txt"));
    assert_eq!(split_common(&line).0, "127.0.0.2");
}
