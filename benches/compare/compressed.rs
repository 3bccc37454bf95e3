//! The compression cell: a 100 KB JavaScript file asked for with
//! `Accept-Encoding: gzip, br`, from staticd (compressed once, then served
//! from its cache) and from the peers with their usual on-the-fly
//! compression (nginx `gzip on` and `gzip_static on`, lighttpd mod_deflate
//! with its cache directory, apache2 mod_brotli and mod_deflate, h2o
//! `compress: ON`, Caddy `encode gzip`, static-web-server's default
//! `--compression`). wrk keep-alive at 50 connections; reports requests/s
//! and the bytes on the wire per response.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde::Serialize;

use crate::load::{self, Mode, Run};
use crate::procstat;
use crate::script::{PATH, SIZE};
use crate::servers::{Kind, Server};

/// What the client sends: a browser's choice less zstd, which nginx
/// lacks, so that every server can answer in a coding.
pub const ACCEPT_ENCODING: &str = "gzip, br";
pub const CONNECTIONS: u32 = 50;

/// One server's figures in the cell.
#[derive(Clone, Debug, Serialize)]
pub struct Compressed {
    pub server: String,
    /// Content-Encoding of a probe response, None: sent as it is.
    pub content_encoding: Option<String>,
    /// Its Content-Length.
    pub body_bytes: Option<u64>,
    pub requests_per_second: Option<f64>,
    /// wrk's bytes read per second over its requests per second: head
    /// and body of one response.
    pub bytes_per_response: Option<f64>,
    pub cpu_us_per_request: Option<f64>,
    pub error: Option<String>,
}

/// The servers the cell runs on: every cleartext HTTP/1.1 instance but
/// the ceiling, which serves only the size files.
pub fn runs_on(server: &Server) -> bool {
    !server.proto.tls() && !server.proto.http2() && server.kind != Kind::Ceiling
}

pub fn measure(
    server: &mut Server,
    duration: Duration,
    warmup: Duration,
    threads: u32,
) -> Compressed {
    let mut c = Compressed {
        server: server.name().to_string(),
        content_encoding: None,
        body_bytes: None,
        requests_per_second: None,
        bytes_per_response: None,
        cpu_us_per_request: None,
        error: None,
    };
    match probe(server) {
        Ok((coding, len)) => {
            c.content_encoding = coding;
            c.body_bytes = len;
        }
        Err(e) => {
            c.error = Some(format!("probe: {e}"));
            return c;
        }
    }
    let url = format!("http://{}{PATH}", server.addr());
    let run = |duration| Run {
        url: &url,
        connections: CONNECTIONS,
        mode: Mode::KeepAlive,
        duration,
        threads,
        streams: 1,
    };
    let header = format!("Accept-Encoding: {ACCEPT_ENCODING}");
    if let Err(e) = load::wrk_with_header(&run(warmup), &header) {
        c.error = Some(format!("warm-up: {e}"));
        return c;
    }
    server.settle(Duration::from_secs(2));
    let pid = server.pid();
    let before = procstat::cpu_ticks(pid);
    let result = load::wrk_with_header(&run(duration), &header);
    let cpu_seconds =
        procstat::cpu_ticks(pid).saturating_sub(before) as f64 / procstat::ticks_per_second();
    server.reap_connections();
    match result {
        Ok(o) => {
            c.requests_per_second = Some(o.requests_per_second);
            if o.requests_per_second > 0.0 {
                c.bytes_per_response = o.bytes_per_second.map(|b| b / o.requests_per_second);
            }
            if o.requests > 0 {
                c.cpu_us_per_request = Some(cpu_seconds * 1e6 / o.requests as f64);
            }
            if o.error_count() > 0 {
                c.error = Some(o.describe_errors());
            }
        }
        Err(e) => c.error = Some(e),
    }
    c
}

/// One GET with the cell's Accept-Encoding: the coding and length the
/// server answers with.
fn probe(server: &Server) -> io::Result<(Option<String>, Option<u64>)> {
    let mut s = TcpStream::connect(server.addr())?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: {ACCEPT_ENCODING}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    s.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    if !head.starts_with("HTTP/1.1 200") {
        let status = head.lines().next().unwrap_or("no response");
        return Err(io::Error::other(status.to_string()));
    }
    let field = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let len = field("content-length").and_then(|v| v.parse().ok());
    Ok((field("content-encoding"), len))
}

/// The cell as a table, staticd's rows with their ratio to nginx.
pub fn table(out: &mut String, cells: &[Compressed], seconds: f64) {
    if cells.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n== wrk keep-alive c={CONNECTIONS}, {} KB JavaScript with Accept-Encoding: {ACCEPT_ENCODING}, {seconds:.2} s: compressed on the fly ==",
        SIZE / 1000
    );
    let nginx = cells
        .iter()
        .find(|c| c.server == "nginx")
        .and_then(|c| c.requests_per_second);
    let _ = writeln!(
        out,
        "{:<18} {:>8} {:>10} {:>12} {:>10} {:>12}",
        "server", "coding", "body B", "requests/s", "B/resp", "CPU us/req"
    );
    for c in cells {
        let rps = c.requests_per_second.map_or("failed".to_string(), |r| {
            let ratio = match nginx {
                Some(n) if n > 0.0 && c.server.starts_with("staticd") => format!(" x{:.2}", r / n),
                _ => String::new(),
            };
            format!("{r:.0}{ratio}")
        });
        let _ = writeln!(
            out,
            "{:<18} {:>8} {:>10} {:>12} {:>10} {:>12}{}",
            c.server,
            c.content_encoding.as_deref().unwrap_or("identity"),
            c.body_bytes.map_or("-".into(), |b| b.to_string()),
            rps,
            c.bytes_per_response
                .map_or("-".into(), |b| format!("{b:.0}")),
            c.cpu_us_per_request
                .map_or("-".into(), |u| format!("{u:.1}")),
            c.error
                .as_deref()
                .map_or(String::new(), |e| format!("  ERROR: {e}"))
        );
    }
}
