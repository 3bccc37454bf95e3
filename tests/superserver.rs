//! `staticd --inetd` behind real superservers: ucspi-tcp's tcpserver and busybox tcpsvd.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use common::*;

/// A running superserver that starts `staticd --inetd --log-format common` per connection.
struct Superserver {
    addr: SocketAddr,
    stderr: Lines,
    _process: ChildGuard,
    _root: Docroot,
}

impl Superserver {
    /// `PROGRAM ARGS... 127.0.0.1 PORT staticd --inetd --root DIR --log-format common`,
    /// on a free port (the harness's `start_superserver`, which retries on a port taken
    /// meanwhile).
    fn start(program: PathBuf, args: &[&str]) -> Superserver {
        let root = Docroot::new();
        root.file("a.txt", "alpha\n");
        root.file("b.txt", "bravo bravo\n");
        let staticd_args = ["--inetd", "--log-format", "common", "--root"]
            .map(String::from)
            .into_iter()
            .chain([root.path().display().to_string()])
            .collect::<Vec<_>>();
        let (process, stderr, addr) = start_superserver(&program, args, &staticd_args);
        Superserver {
            addr,
            stderr,
            _process: process,
            _root: root,
        }
    }

    fn connect_from(&self, source: [u8; 4]) -> Conn {
        Conn::new(connect_from(IpAddr::V4(Ipv4Addr::from(source)), self.addr))
    }
}

fn tcpserver() -> Option<Superserver> {
    let program = tool("tcpserver", "ucspi-tcp")?;
    Some(Superserver::start(program, &["-RHl0"]))
}

fn busybox_tcpsvd() -> Option<Superserver> {
    let busybox = busybox_with_tcpsvd()?;
    Some(Superserver::start(busybox, &["tcpsvd"]))
}

fn serves_a_get(server: Superserver) {
    let mut conn = server.connect_from([127, 0, 0, 1]);
    let resp = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"alpha\n");
    assert_eq!(resp.header("server"), Some("staticd"));
}

fn serves_a_keep_alive_pair(server: Superserver) {
    let mut conn = server.connect_from([127, 0, 0, 1]);
    let first = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(first.body, b"alpha\n");
    assert!(!first.has_token("connection", "close"));
    let second = conn.roundtrip(request("GET", "/b.txt", &["Connection: close"]));
    assert_eq!(second.body, b"bravo bravo\n");
    conn.assert_closed();
}

fn logs_the_client_ip(server: Superserver) {
    // A source address other than 127.0.0.1 shows the address really is the client's.
    let mut conn = server.connect_from([127, 0, 0, 2]);
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
    let line = server.stderr.wait_line(|l| l.contains("\"GET /a.txt "));
    assert!(line.starts_with("127.0.0.2 - - ["), "{line}");
    assert!(line.ends_with("\"GET /a.txt HTTP/1.1\" 200 6"), "{line}");
}

#[test]
fn tcpserver_serves_a_get() {
    if let Some(server) = tcpserver() {
        serves_a_get(server);
    }
}

#[test]
fn tcpserver_serves_a_keep_alive_pair() {
    if let Some(server) = tcpserver() {
        serves_a_keep_alive_pair(server);
    }
}

#[test]
fn tcpserver_log_names_the_client_ip() {
    if let Some(server) = tcpserver() {
        logs_the_client_ip(server);
    }
}

#[test]
fn busybox_tcpsvd_serves_a_get() {
    if let Some(server) = busybox_tcpsvd() {
        serves_a_get(server);
    }
}

#[test]
fn busybox_tcpsvd_serves_a_keep_alive_pair() {
    if let Some(server) = busybox_tcpsvd() {
        serves_a_keep_alive_pair(server);
    }
}

#[test]
fn busybox_tcpsvd_log_names_the_client_ip() {
    if let Some(server) = busybox_tcpsvd() {
        logs_the_client_ip(server);
    }
}
