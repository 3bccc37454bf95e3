//! The `--metrics` listener: its own thread and address, never a public
//! port's. It answers `GET /metrics` (and HEAD) with the exposition page,
//! anything else with 404 (or 405 for another method on /metrics), one
//! request per connection. Requests are read by the same parser as the
//! public ports' (fuzzed there), bounded in size, time and concurrency,
//! and answered through the same head encoder (Date, Server, framing).

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::exposition::{self, Process};
use crate::http::head::Head;
use crate::http::limits::MAX_HEAD_BYTES;
use crate::http::parse::{self, Method, Parsed};
use crate::http::response::{self, Http1};
use crate::http::status::Status;

/// How long a scraper may take to send its request and take the answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are closed at once. A scraper opens one.
const MAX_OPEN: usize = 8;

/// A bound metrics listener, not yet serving.
pub struct Endpoint {
    listener: std::net::TcpListener,
    started: SystemTime,
}

impl Endpoint {
    /// Binds `addr` (while still privileged, like the public ports). The
    /// process's start time is taken now, at start-up.
    /// `reuse_port`: as for the public ports, the port may be shared with
    /// the process being replaced (`--reuse-port`); otherwise it must be
    /// free.
    pub fn bind(addr: SocketAddr, reuse_port: bool) -> io::Result<Endpoint> {
        if addr.port() != 0 && !reuse_port {
            crate::sys::check_port_free(addr)?;
        }
        Ok(Endpoint {
            listener: crate::sys::listener(addr, true)?,
            started: SystemTime::now(),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves scrapes on a thread of its own until the process exits.
    pub fn start(self, max_connections: usize) -> io::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let process = Process {
            started: self.started,
            max_connections,
        };
        let listener = self.listener;
        crate::sys::spawn_helper("staticd-metrics", move || {
            let process = Rc::new(process);
            runtime.block_on(async move {
                let local = tokio::task::LocalSet::new();
                local.run_until(serve(listener, process)).await;
            })
        })?;
        Ok(())
    }
}

async fn serve(listener: std::net::TcpListener, process: Rc<Process>) {
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    let open = Rc::new(Cell::new(0usize));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, most likely: the public ports are busy.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if open.get() >= MAX_OPEN {
            continue;
        }
        open.set(open.get() + 1);
        let (open, process) = (Rc::clone(&open), Rc::clone(&process));
        tokio::task::spawn_local(async move {
            let _ = tokio::time::timeout(TIMEOUT, answer(stream, &process)).await;
            open.set(open.get() - 1);
        });
    }
}

/// Reads one request and answers it; the connection then closes.
async fn answer(mut stream: TcpStream, process: &Process) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let response = loop {
        if stream.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
        match parse::parse(&buf) {
            Parsed::Complete { request, .. } => {
                let path = request.target.split('?').next().unwrap_or("");
                break decide(path, &request.method, process);
            }
            Parsed::Error(_) => break page(Status::BadRequest, &[], "bad request\n", true),
            Parsed::Incomplete if buf.len() > MAX_HEAD_BYTES => {
                break page(Status::HeaderFieldsTooLarge, &[], "too large\n", true)
            }
            Parsed::Incomplete => {}
        }
    };
    stream.write_all(&response).await?;
    stream.shutdown().await
}

/// The answer to a request for `path`, as bytes.
fn decide(path: &str, method: &Method, process: &Process) -> Vec<u8> {
    let body_wanted = match (path, method) {
        ("/metrics", Method::Get) => true,
        ("/metrics", Method::Head) => false,
        ("/metrics", _) => {
            let allow = [("Allow", "GET, HEAD")];
            return page(Status::MethodNotAllowed, &allow, "use GET\n", true);
        }
        (_, Method::Head) => return page(Status::NotFound, &[], "not found\n", false),
        _ => return page(Status::NotFound, &[], "not found: try /metrics\n", true),
    };
    let text = exposition::render(&super::counters::totals(), process);
    let fields = [
        ("Content-Type", exposition::CONTENT_TYPE),
        ("Cache-Control", "no-store"),
    ];
    whole(Status::Ok, &fields, &text, body_wanted)
}

/// A whole small plain-text response; `body_wanted` false for HEAD.
fn page(status: Status, fields: &[(&str, &str)], body: &str, body_wanted: bool) -> Vec<u8> {
    let mut all = vec![("Content-Type", "text/plain; charset=utf-8")];
    all.extend_from_slice(fields);
    whole(status, &all, body, body_wanted)
}

/// The response as HTTP/1.1 bytes, the last on its connection.
fn whole(status: Status, fields: &[(&str, &str)], body: &str, body_wanted: bool) -> Vec<u8> {
    let mut head = Head::new(status);
    for (name, value) in fields {
        head.header(name, value);
    }
    head.length(body.len() as u64);
    let conn = Http1 {
        minor_version: 1,
        close: true,
        hsts: None,
        alt_svc: None,
    };
    let mut out = Vec::with_capacity(256 + body.len());
    response::encode(&head, &conn, &mut out);
    if body_wanted {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process() -> Process {
        Process {
            started: SystemTime::UNIX_EPOCH,
            max_connections: 1,
        }
    }

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn only_metrics_is_served() {
        let ok = text(decide("/metrics", &Method::Get, &process()));
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\nDate: "), "{ok}");
        assert!(ok.contains("\r\nServer: staticd\r\n") && ok.contains("\r\nConnection: close\r\n"));
        assert!(ok.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
        assert!(ok.contains("\n# TYPE staticd_requests_total counter\n"));
        let head = text(decide("/metrics", &Method::Head, &process()));
        assert!(head.ends_with("\r\n\r\n"));
        let length = |t: &str| {
            t.lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map(str::to_string)
        };
        assert!(length(&head).is_some());
        for path in ["/", "/metrics/", "/index.html", "/Metrics"] {
            let r = text(decide(path, &Method::Get, &process()));
            assert!(r.starts_with("HTTP/1.1 404 "), "{path}: {r}");
        }
        let post = text(decide(
            "/metrics",
            &Method::Other("POST".into()),
            &process(),
        ));
        assert!(post.starts_with("HTTP/1.1 405 ") && post.contains("\r\nAllow: GET, HEAD\r\n"));
    }
}
