//! `--log-format json`: one JSON object per line in Caddy's layout, whatever bytes a
//! client puts in its path and User-Agent: each line parses, and says back what was sent.

#[macro_use]
mod common;

use common::*;
use serde_json::Value;

both_modes!(hostile_values_stay_inside_their_json_strings);
matrix!([tls, h2_tls, h3] both_modes: tls_lines_say_what_the_handshake_agreed);
matrix!([tls] standalone: a_resumed_session_and_tls_1_2_are_told);

fn hostile_values_stay_inside_their_json_strings(mode: Mode) {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    let server = Server::builder(Variant::h1(mode), root.path())
        .log_format("json")
        .start();
    let mut conn = server.connect();
    // Quotes, a backslash, C1 controls (a terminal acts on them) and a line separator:
    // each must come back as data. (A field with a C0 control, DEL or bytes that are not
    // UTF-8 is refused with a 400, logged without the request: the third line.)
    let mut raw = b"GET /a.txt?q=%22x%5C HTTP/1.1\r\nHost: example\r\nUser-Agent: ev\"il\\ \xc2\x9b31m \xc2\x85 \xe2\x80\xa8end\r\nReferer: https://r/\r\n\r\n".to_vec();
    let response = conn.roundtrip(&raw);
    assert_eq!(response.status, 200);
    raw = b"GET /no\"pe\\ HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    assert_eq!(conn.roundtrip(&raw).status, 404);
    raw = b"GET /a.txt HTTP/1.1\r\nHost: x\r\nUser-Agent: \xff\xfe\x1b\r\n\r\n".to_vec();
    conn.send_lossy(&raw);
    let _ = conn.read_response();
    let stderr = server.stderr();
    let is_log = |l: &&String| l.starts_with('{');
    stderr.wait_for(IO_TIMEOUT, |l| l.iter().filter(is_log).count() >= 3);
    let lines: Vec<String> = stderr
        .snapshot()
        .into_iter()
        .filter(|l| l.starts_with('{'))
        .collect();
    assert_eq!(lines.len(), 3, "{:#?}", stderr.snapshot());
    let first: Value =
        serde_json::from_str(&lines[0]).unwrap_or_else(|e| panic!("{e}: {}", lines[0]));
    let request = &first["request"];
    assert_eq!(request["method"], "GET");
    assert_eq!(request["uri"], "/a.txt?q=%22x%5C");
    assert_eq!(request["proto"], "HTTP/1.1");
    assert_eq!(request["host"], "example");
    assert_eq!(request["headers"]["Referer"][0], "https://r/");
    let agent = request["headers"]["User-Agent"][0].as_str().unwrap();
    assert_eq!(agent, "ev\"il\\ \u{9b}31m \u{85} \u{2028}end");
    // Control characters and the line separator are escaped, never raw, in the line.
    assert!(
        lines[0].contains(r"\u009b31m \u0085") && lines[0].contains(r"\u2028end"),
        "{}",
        lines[0]
    );
    assert!(!lines[0].bytes().any(|b| b < 0x20), "{}", lines[0]);
    assert_eq!(first["status"], 200);
    assert_eq!(first["size"], 6);
    if mode == Mode::Standalone {
        assert_eq!(request["remote_ip"], "127.0.0.1");
    }
    assert!(first["duration"]
        .as_f64()
        .is_some_and(|d| (0.0..10.0).contains(&d)));
    assert!(first["ts"].as_f64().is_some_and(|t| t > 1.7e9));
    assert!(request.get("tls").is_none());
    let second: Value =
        serde_json::from_str(&lines[1]).unwrap_or_else(|e| panic!("{e}: {}", lines[1]));
    assert_eq!(second["request"]["uri"], "/no\"pe\\");
    assert_eq!(second["status"], 404);
    let third: Value =
        serde_json::from_str(&lines[2]).unwrap_or_else(|e| panic!("{e}: {}", lines[2]));
    assert_eq!(third["status"], 400);
    assert!(third["request"].get("uri").is_none(), "{}", lines[2]);
}

/// The first `n` JSON lines the server logs, parsed.
#[cfg(feature = "tls")]
fn json_lines(server: &Server, n: usize) -> Vec<Value> {
    let stderr = server.stderr();
    let is_log = |l: &&String| l.starts_with('{');
    stderr.wait_for(IO_TIMEOUT, |l| l.iter().filter(is_log).count() >= n);
    let lines: Vec<String> = stderr
        .snapshot()
        .into_iter()
        .filter(|l| l.starts_with('{'))
        .collect();
    assert!(lines.len() >= n, "{:#?}", stderr.snapshot());
    lines[..n]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Over HTTPS the line's `tls` object holds the version and ALPN protocol, and over TCP
/// the cipher suite and whether the session was resumed (Caddy's names and numbers).
#[cfg(feature = "tls")]
fn tls_lines_say_what_the_handshake_agreed(v: Variant) {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    let server = Server::builder(v, root.path()).log_format("json").start();
    assert_eq!(server.get("/a.txt").status, 200);
    let line = &json_lines(&server, 1)[0];
    let tls = &line["request"]["tls"];
    assert_eq!(line["request"]["proto"], server.log_version(), "{line}");
    // TLS 1.3, which every client here offers first.
    assert_eq!(tls["version"], 772, "{line}");
    let alpn = match (server.is_h3(), server.is_h2()) {
        (true, _) => "h3",
        (_, true) => "h2",
        _ => "http/1.1",
    };
    assert_eq!(tls["proto"], alpn, "{line}");
    if server.is_h3() {
        // quinn does not tell these.
        assert!(tls.get("cipher_suite").is_none() && tls.get("resumed").is_none());
    } else {
        // TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256.
        let suite = tls["cipher_suite"].as_u64();
        assert!(matches!(suite, Some(0x1301..=0x1303)), "{line}");
        assert_eq!(tls["resumed"], false, "{line}");
    }
}

/// A second connection that resumes its session is logged `resumed`; a TLS 1.2
/// client's lines say 771 and a TLS 1.2 suite.
#[cfg(feature = "tls")]
fn a_resumed_session_and_tls_1_2_are_told(v: Variant) {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    let get = b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let pki = Pki::shared();
    for (config, version) in [
        (pki.client_config(), 772),
        (pki.client_config_versions(&[&rustls::version::TLS12]), 771),
    ] {
        let server = Server::builder(v, root.path()).log_format("json").start();
        let connector = Connector {
            tls: Some(TlsClient::new(config, "localhost")),
            ..server.connector()
        };
        for _ in 0..2 {
            // Reading the whole response takes in the tickets sent before it.
            assert_eq!(connector.connect().roundtrip(get).status, 200);
        }
        let lines = json_lines(&server, 2);
        for (line, resumed) in lines.iter().zip([false, true]) {
            let tls = &line["request"]["tls"];
            assert_eq!(tls["version"], version, "{line}");
            assert_eq!(tls["resumed"], resumed, "{line}");
            let suite = tls["cipher_suite"].as_u64().unwrap_or(0);
            // 1.3's suites are 0x1301-0x1305; 1.2's ECDHE suites are 0xc0.. and 0xcc..
            assert_eq!((0x1301..=0x1305).contains(&suite), version == 772, "{line}");
        }
    }
}
