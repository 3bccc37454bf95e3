//! `--log-format json`: one JSON object per line in Caddy's layout, whatever bytes a
//! client puts in its path and User-Agent: each line parses, and says back what was sent.

#[macro_use]
mod common;

use common::*;
use serde_json::Value;

both_modes!(hostile_values_stay_inside_their_json_strings);

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
