//! Behind a proxy: `--proxy-protocol` (a PROXY v1 or v2 header opens every connection,
//! before TLS) and `--trusted-proxy` (Forwarded / X-Forwarded-For from trusted peers
//! only). The client they name is what the access log and CGI's REMOTE_ADDR and
//! REMOTE_PORT say; a connection without a valid header is closed; nobody else can
//! choose the address logged. Most tests run in both modes; their clients speak TLS
//! in the TLS cells (the header still goes first, in cleartext).

#[macro_use]
mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::*;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    let env = root.file(
        "env.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nexec /usr/bin/env\n",
    );
    fs::set_permissions(&env, fs::Permissions::from_mode(0o755)).unwrap();
    root
}

fn proxied(v: Variant, root: &Docroot, args: &[&str]) -> Server {
    Server::builder(v, root.path())
        .log_format("common")
        .arg("--proxy-protocol")
        .args(args)
        .start()
}

/// A version 1 header from `source` to 127.0.0.1:80 (or ::1 for an IPv6 source).
fn v1(source: SocketAddr) -> Vec<u8> {
    let (family, dest) = match source {
        SocketAddr::V4(_) => ("TCP4", "127.0.0.1"),
        SocketAddr::V6(_) => ("TCP6", "::1"),
    };
    format!(
        "PROXY {family} {} {dest} {} 80\r\n",
        source.ip(),
        source.port()
    )
    .into_bytes()
}

const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// A version 2 PROXY header from `source` to the matching loopback address, port 443,
/// with one TLV (a NOOP) after the addresses.
fn v2(source: SocketAddr) -> Vec<u8> {
    let mut block = Vec::new();
    let family = match source.ip() {
        IpAddr::V4(ip) => {
            block.extend_from_slice(&ip.octets());
            block.extend_from_slice(&[127, 0, 0, 1]);
            0x11
        }
        IpAddr::V6(ip) => {
            block.extend_from_slice(&ip.octets());
            block.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
            0x21
        }
    };
    block.extend_from_slice(&source.port().to_be_bytes());
    block.extend_from_slice(&443u16.to_be_bytes());
    block.extend_from_slice(&[0x04, 0x00, 0x02, 0xaa, 0xbb]);
    v2_with(0x21, family, &block)
}

/// Version 2's LOCAL command, as HAProxy's health checks send it.
fn v2_local() -> Vec<u8> {
    v2_with(0x20, 0x00, &[])
}

fn v2_with(version_command: u8, family: u8, block: &[u8]) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.push(version_command);
    h.push(family);
    h.extend_from_slice(&(block.len() as u16).to_be_bytes());
    h.extend_from_slice(block);
    h
}

/// A connection that sent `header` first and then speaks the server's protocol (TLS
/// when the server does: the header precedes the handshake).
fn connect_with(server: &Server, header: &[u8]) -> Conn {
    let connector = server.connector();
    let mut tcp = connector.tcp();
    tcp.write_all(header).expect("send the PROXY header");
    Conn::from_stream(connector.wrap(tcp))
}

/// The client named by the access-log line of the request whose target holds `marker`.
fn logged_client(server: &Server, marker: &str) -> String {
    let line = server
        .stderr()
        .wait_line(|l| !l.starts_with("staticd: ") && l.contains(marker));
    line.split(' ').next().unwrap_or_default().to_string()
}

fn get(target: &str, extra: &[&str]) -> String {
    request("GET", target, extra)
}

// --- the PROXY header ----------------------------------------------------------------

fn v1_header_names_the_client(v: Variant) {
    let root = site();
    let server = proxied(v, &root, &[]);
    let mut conn = connect_with(&server, &v1("203.0.113.7:40001".parse().unwrap()));
    // Two requests on the connection: the header counts for both.
    for marker in ["v1-first", "v1-second"] {
        let resp = conn.roundtrip(get(&format!("/a.txt?{marker}"), &[]));
        assert_eq!(resp.status, 200, "{resp:#?}");
        assert_eq!(resp.body_str(), "alpha\n");
        assert_eq!(logged_client(&server, marker), "203.0.113.7");
    }
    let mut conn = connect_with(&server, &v1("[2001:db8::17]:40002".parse().unwrap()));
    assert_eq!(conn.roundtrip(get("/a.txt?v1-six", &[])).status, 200);
    assert_eq!(logged_client(&server, "v1-six"), "2001:db8::17");
}

fn v2_header_names_the_client(v: Variant) {
    let root = site();
    let server = proxied(v, &root, &[]);
    for (source, marker, expected) in [
        ("198.51.100.9:5555", "v2-four", "198.51.100.9"),
        ("[2001:db8:cafe::1]:5556", "v2-six", "2001:db8:cafe::1"),
        // An IPv4 client seen on an IPv6 socket is logged as IPv4.
        ("[::ffff:198.51.100.10]:5557", "v2-mapped", "198.51.100.10"),
    ] {
        let mut conn = connect_with(&server, &v2(source.parse().unwrap()));
        let resp = conn.roundtrip(get(&format!("/a.txt?{marker}"), &["Connection: close"]));
        assert_eq!(resp.status, 200, "{resp:#?}");
        assert_eq!(logged_client(&server, marker), expected);
    }
}

/// The header and the request in one segment: the bytes after the header are the
/// request's.
fn header_and_request_in_one_write(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .log_format("common")
        .plain()
        .arg("--proxy-protocol")
        .start();
    for (header, marker) in [
        (v1("192.0.2.44:1234".parse().unwrap()), "one-write-v1"),
        (v2("192.0.2.44:1234".parse().unwrap()), "one-write-v2"),
    ] {
        let mut bytes = header;
        bytes
            .extend_from_slice(get(&format!("/a.txt?{marker}"), &["Connection: close"]).as_bytes());
        let mut conn = Conn::new(TcpStream::connect(server.addr()).unwrap());
        conn.send(&bytes);
        let resp = conn.read_response();
        assert_eq!(resp.status, 200, "{resp:#?}");
        assert_eq!(logged_client(&server, marker), "192.0.2.44");
    }
}

/// Health checks: v2 LOCAL (and v1 UNKNOWN) say the proxy speaks for itself, and the
/// connection's own peer is logged.
fn local_keeps_the_peer(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .log_format("common")
        .arg("--proxy-protocol")
        .env("TCPREMOTEIP", "192.0.2.250")
        .start();
    let peer = match v.mode {
        Mode::Standalone => "127.0.0.1",
        Mode::Inetd => "192.0.2.250",
    };
    for (header, marker) in [
        (v2_local(), "local-v2"),
        (b"PROXY UNKNOWN\r\n".to_vec(), "unknown-v1"),
    ] {
        let mut conn = connect_with(&server, &header);
        let resp = conn.roundtrip(get(&format!("/a.txt?{marker}"), &["Connection: close"]));
        assert_eq!(resp.status, 200, "{resp:#?}");
        assert_eq!(logged_client(&server, marker), peer);
    }
}

/// Reads what the server sends on `tcp` until it closes (a reset counts as closed);
/// panics if it stays open past `limit`.
fn bytes_until_closed(tcp: &mut TcpStream, limit: Duration) -> Vec<u8> {
    tcp.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            // A signal to the test process (a child's exit) is no answer: read on.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("the connection stayed open ({e})"),
        }
    }
}

/// Without a valid header there is no answer at all: a client that reaches the port
/// directly gets nothing, not even an error page.
fn no_or_bad_header_is_closed(v: Variant) {
    let root = site();
    let server = proxied(v, &root, &[]);
    let mut v2_bad_command = v2("192.0.2.1:1".parse().unwrap());
    v2_bad_command[12] = 0x22;
    let mut v2_oversized = V2_SIGNATURE.to_vec();
    v2_oversized.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
    v2_oversized.extend_from_slice(&[0; 64]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a plain request", get("/a.txt", &[]).into_bytes()),
        (
            "a TLS ClientHello",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
        ),
        (
            "v1 with a bad address",
            b"PROXY TCP4 192.0.2.999 127.0.0.1 1 2\r\nGET /".to_vec(),
        ),
        (
            "v1 without CR",
            b"PROXY TCP4 192.0.2.9 127.0.0.1 1 2\nGET /".to_vec(),
        ),
        (
            "v1 longer than 107 bytes",
            [b"PROXY UNKNOWN ".as_slice(), &[b'x'; 200]].concat(),
        ),
        ("v2 with command 2", v2_bad_command),
        ("v2 longer than its bound", v2_oversized),
    ];
    for (what, bytes) in cases {
        let mut tcp = TcpStream::connect(server.addr()).unwrap();
        let _ = tcp.write_all(&bytes);
        let got = bytes_until_closed(&mut tcp, IO_TIMEOUT);
        assert!(
            got.is_empty(),
            "{what}: answered {:?}",
            String::from_utf8_lossy(&got)
        );
    }
    // Nothing was logged as a request, and the server still serves.
    let mut conn = connect_with(&server, &v1("192.0.2.5:9".parse().unwrap()));
    assert_eq!(conn.roundtrip(get("/a.txt?after-garbage", &[])).status, 200);
    assert_eq!(logged_client(&server, "after-garbage"), "192.0.2.5");
    let requests = server
        .stderr()
        .snapshot()
        .iter()
        .filter(|l| !l.starts_with("staticd: "))
        .count();
    assert_eq!(requests, 1, "{:#?}", server.stderr().snapshot());
}

/// The header must come within --read-timeout: a proxy (or anyone) that connects and
/// stalls mid-header is dropped, as a client stalling mid-request is.
fn header_deadline_is_the_read_timeout(v: Variant) {
    let root = site();
    let server = proxied(v, &root, &["--read-timeout", "1"]);
    for partial in [&b""[..], b"PROXY TCP4 192.0", &V2_SIGNATURE[..7]] {
        let mut tcp = TcpStream::connect(server.addr()).unwrap();
        tcp.write_all(partial).unwrap();
        let start = Instant::now();
        let got = bytes_until_closed(&mut tcp, Duration::from_secs(6));
        assert!(got.is_empty());
        assert!(
            start.elapsed() >= Duration::from_millis(700),
            "closed after {:?}, before the read timeout",
            start.elapsed()
        );
    }
}

fn cgi_sees_the_header_client(v: Variant) {
    let root = site();
    let server = proxied(v, &root, &["--cgi"]);
    let mut conn = connect_with(&server, &v2("203.0.113.99:41234".parse().unwrap()));
    let resp = conn.roundtrip(get("/env.cgi", &["Connection: close"]));
    assert_eq!(resp.status, 200, "{resp:#?}");
    let env = resp.body_str();
    assert!(
        env.lines().any(|l| l == "REMOTE_ADDR=203.0.113.99"),
        "{env}"
    );
    assert!(env.lines().any(|l| l == "REMOTE_PORT=41234"), "{env}");
}

// No h3 cell: a PROXY header precedes a TCP connection's bytes; QUIC over UDP has none,
// and its client is the datagrams' source.
matrix!([h1, tls, h2c, h2_tls] both_modes:
    v1_header_names_the_client,
    v2_header_names_the_client,
    header_and_request_in_one_write,
    local_keeps_the_peer,
    no_or_bad_header_is_closed,
    header_deadline_is_the_read_timeout,
    cgi_sees_the_header_client,
);

#[cfg(feature = "tls")]
mod tls {
    use super::*;

    /// HAProxy's `send-proxy-v2` in front of staticd's HTTPS in TCP mode: the header, then
    /// the TLS handshake. Also with the client speaking HTTP/2 (ALPN h2) after it.
    fn header_before_tls(v: Variant) {
        let root = site();
        let server = Server::builder(v, root.path())
            .log_format("common")
            .tls_files(&Pki::shared().localhost().1)
            .arg("--proxy-protocol")
            .start();
        assert!(server.is_tls());
        let mut conn = connect_with(&server, &v2("203.0.113.80:443".parse().unwrap()));
        assert_eq!(conn.roundtrip(get("/a.txt?over-tls", &[])).status, 200);
        assert!(conn.tls().is_some());
        assert_eq!(logged_client(&server, "over-tls"), "203.0.113.80");

        if !cfg!(feature = "http2") {
            return;
        }
        let connector = server.connector();
        let mut tcp = connector.tcp();
        tcp.write_all(&v1("203.0.113.81:443".parse().unwrap()))
            .unwrap();
        let mut h2 = Client::connect_proto(tcp, connector.tls.as_ref(), Proto::Http2);
        let resp = h2.get("/a.txt?over-h2");
        assert_eq!(resp.status, 200);
        assert!(resp.is_h2());
        assert_eq!(logged_client(&server, "over-h2"), "203.0.113.81");
    }

    matrix!([h1, tls, h2c, h2_tls] both_modes: header_before_tls);
}

/// A proxy on the same host, over a Unix socket, sends the header too.
fn unix_listener_reads_the_header(v: Variant) {
    let root = site();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staticd.sock");
    let bind = format!("unix:{}", path.display());
    let server = Server::builder(v, root.path())
        .log_format("common")
        .plain()
        .bind(&bind)
        .arg("--proxy-protocol")
        .start();
    server
        .stderr()
        .wait_line(|l| l == format!("staticd: listening on {bind}"));
    let mut stream = UnixStream::connect(&path).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
        .write_all(&v2("198.51.100.200:3000".parse().unwrap()))
        .unwrap();
    stream
        .write_all(get("/a.txt?over-unix", &["Connection: close"]).as_bytes())
        .unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    assert_eq!(parse_responses(&bytes, &["GET"])[0].status, 200);
    assert_eq!(logged_client(&server, "over-unix"), "198.51.100.200");
}

matrix!([h1, tls, h2c, h2_tls] standalone: unix_listener_reads_the_header);

// --- trusted proxies -----------------------------------------------------------------

fn trusted_peer_names_the_client(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .log_format("common")
        .args([
            "--trusted-proxy",
            "127.0.0.1",
            "--trusted-proxy",
            "10.0.0.0/8",
            "--cgi",
        ])
        .start();
    let cases: &[(&[&str], &str)] = &[
        // The client wrote its own entry first; our proxy appended what it saw.
        (&["X-Forwarded-For: 6.6.6.6, 203.0.113.9"], "203.0.113.9"),
        // Two trusted hops, on two header lines.
        (
            &[
                "X-Forwarded-For: 6.6.6.6, 198.51.100.3",
                "X-Forwarded-For: 10.1.1.1",
            ],
            "198.51.100.3",
        ),
        // Forwarded wins over X-Forwarded-For.
        (
            &[
                "Forwarded: for=6.6.6.6, for=\"[2001:db8::9]:4711\";proto=https",
                "X-Forwarded-For: 198.51.100.4",
            ],
            "2001:db8::9",
        ),
        // An entry that is no address: the nearest trusted proxy is all that is known.
        (&["X-Forwarded-For: 203.0.113.9, unknown"], "127.0.0.1"),
    ];
    for (i, (headers, expected)) in cases.iter().enumerate() {
        let marker = format!("trusted-{i}");
        let resp = server.exchange(get(&format!("/a.txt?{marker}"), headers));
        assert_eq!(resp.status, 200);
        assert_eq!(logged_client(&server, &marker), *expected, "{headers:?}");
    }
    // CGI: the address, and the port when the header gave one.
    let resp = server.exchange(get("/env.cgi", &["Forwarded: for=\"[2001:db8::9]:4711\""]));
    let env = resp.body_str();
    assert!(env.lines().any(|l| l == "REMOTE_ADDR=2001:db8::9"), "{env}");
    assert!(env.lines().any(|l| l == "REMOTE_PORT=4711"), "{env}");
    let resp = server.exchange(get("/env.cgi", &["X-Forwarded-For: 203.0.113.9"]));
    let env = resp.body_str();
    assert!(env.lines().any(|l| l == "REMOTE_ADDR=203.0.113.9"), "{env}");
    assert!(!env.contains("REMOTE_PORT="), "no port was given: {env}");
}

/// A client that is not a trusted proxy cannot choose the address logged or given to
/// CGI, however it spells the headers.
fn untrusted_peer_cannot_spoof(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .log_format("common")
        .args(["--trusted-proxy", "127.0.0.1", "--cgi"])
        .start();
    let spoofs: &[&[&str]] = &[
        &["X-Forwarded-For: 6.6.6.6"],
        &["Forwarded: for=6.6.6.6"],
        &[
            "Forwarded: for=\"[2001:db8::66]\"",
            "X-Forwarded-For: 6.6.6.6",
        ],
        &["X-Forwarded-For: 127.0.0.1, 6.6.6.6"],
    ];
    for (i, headers) in spoofs.iter().enumerate() {
        let marker = format!("spoof-{i}");
        let mut conn = server.connect_from("127.0.0.2".parse().unwrap());
        let resp = conn.roundtrip(get(&format!("/a.txt?{marker}"), headers));
        assert_eq!(resp.status, 200);
        assert_eq!(logged_client(&server, &marker), "127.0.0.2", "{headers:?}");
        let mut conn = server.connect_from("127.0.0.2".parse().unwrap());
        let env = conn.roundtrip(get("/env.cgi", headers)).body_str();
        assert!(env.lines().any(|l| l == "REMOTE_ADDR=127.0.0.2"), "{env}");
    }
}

/// PROXY and trusted proxies together: the header's client is the peer whose trust
/// decides, whatever the TCP peer was.
fn header_client_decides_trust(v: Variant) {
    let root = site();
    let server = proxied(v, &root, &["--trusted-proxy", "10.0.0.0/8"]);
    // Through a trusted proxy (10.2.3.4 per the header) the forwarded client counts...
    let mut conn = connect_with(&server, &v1("10.2.3.4:1000".parse().unwrap()));
    let resp = conn.roundtrip(get(
        "/a.txt?via-trusted",
        &["X-Forwarded-For: 198.51.100.4"],
    ));
    assert_eq!(resp.status, 200);
    assert_eq!(logged_client(&server, "via-trusted"), "198.51.100.4");
    // ...from an untrusted client it does not, though the TCP peer (127.0.0.1) is the
    // same.
    let mut conn = connect_with(&server, &v1("203.0.113.7:1000".parse().unwrap()));
    let resp = conn.roundtrip(get(
        "/a.txt?via-untrusted",
        &["X-Forwarded-For: 198.51.100.4"],
    ));
    assert_eq!(resp.status, 200);
    assert_eq!(logged_client(&server, "via-untrusted"), "203.0.113.7");
}

matrix!([h1, tls, h2c, h2_tls] both_modes:
    trusted_peer_names_the_client,
    untrusted_peer_cannot_spoof,
    header_client_decides_trust,
);

/// `--trusted-proxy unix:` trusts the clients of a Unix-socket listener: the
/// name the listeners give them is the one the flag takes.
fn unix_socket_peers_are_trusted_as_unix(v: Variant) {
    let root = site();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staticd.sock");
    let bind = format!("unix:{}", path.display());
    let server = Server::builder(v, root.path())
        .log_format("common")
        .plain()
        .bind(&bind)
        .args(["--trusted-proxy", "unix:"])
        .start();
    server
        .stderr()
        .wait_line(|l| l == format!("staticd: listening on {bind}"));
    let mut stream = UnixStream::connect(&path).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let request = get(
        "/a.txt?forwarded-over-unix",
        &["X-Forwarded-For: 198.51.100.9", "Connection: close"],
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    assert_eq!(parse_responses(&bytes, &["GET"])[0].status, 200);
    assert_eq!(
        logged_client(&server, "forwarded-over-unix"),
        "198.51.100.9"
    );
}

matrix!([h1, tls, h2c, h2_tls] standalone: unix_socket_peers_are_trusted_as_unix);

#[test]
fn bad_trusted_proxy_values_are_usage_errors() {
    for value in [
        "10.0.0.1/8",
        "10.0.0.0/33",
        "example.com",
        "10.0.0.0/08",
        "",
    ] {
        let outcome = run_to_exit(&["--trusted-proxy", value]);
        assert_usage_error(&outcome, &["--trusted-proxy"]);
    }
    let outcome = run_to_exit(&["--trusted-proxy", "10.0.0.1/8"]);
    assert_usage_error(&outcome, &["10.0.0.0/8"]);
}
