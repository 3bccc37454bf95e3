//! HTTP/2 with prior knowledge (h2c) on the standalone event loop, through
//! hyper's HTTP/2 client: the same answers as over HTTP/1.1.
//!
//! A first step of issue 11: these tests are not yet parametrised over
//! HTTP/1.1 and h2, nor run in inetd mode or over TLS (ALPN).

#[macro_use]
mod common;

use common::*;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::time::Duration;

const LARGE: usize = 3 * 1024 * 1024 + 17;

fn site() -> (Docroot, Vec<u8>) {
    let root = Docroot::new();
    root.file("small.txt", "hello, h2\n");
    let large = pattern(LARGE);
    root.file("large.bin", &large);
    (root, large)
}

fn server(root: &Docroot) -> Server {
    Server::builder(Mode::Standalone, root.path())
        .plain()
        .log_format("common")
        .start()
}

/// An h2c connection with prior knowledge, driven on its own runtime.
struct H2 {
    rt: tokio::runtime::Runtime,
    send: http2::SendRequest<Empty<Bytes>>,
    base: String,
}

struct Answer {
    status: u16,
    version: hyper::Version,
    headers: hyper::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl H2 {
    fn connect(server: &Server) -> H2 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let addr = server.addr();
        let send = rt.block_on(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (send, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .expect("h2 handshake");
            tokio::spawn(conn);
            send
        });
        H2 {
            rt,
            send,
            base: format!("http://{addr}"),
        }
    }

    fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
        let send = self.send.clone();
        let req = build(method, &format!("{}{path}", self.base), headers);
        self.rt.block_on(fetch(send, req))
    }

    fn get(&mut self, path: &str) -> Answer {
        self.request("GET", path, &[])
    }
}

fn build(method: &str, uri: &str, headers: &[(&str, &str)]) -> hyper::Request<Empty<Bytes>> {
    let mut b = hyper::Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        b = b.header(*name, *value);
    }
    b.body(Empty::new()).unwrap()
}

async fn fetch(
    mut send: http2::SendRequest<Empty<Bytes>>,
    req: hyper::Request<Empty<Bytes>>,
) -> Answer {
    let exchange = async move {
        send.ready().await.expect("connection ready");
        let resp = send.send_request(req).await.expect("response");
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.expect("body").to_bytes().to_vec();
        Answer {
            status: parts.status.as_u16(),
            version: parts.version,
            headers: parts.headers,
            body,
        }
    };
    tokio::time::timeout(IO_TIMEOUT, exchange)
        .await
        .expect("h2 exchange timed out")
}

#[test]
fn get_small_and_large_files() {
    let (root, large) = site();
    let server = server(&root);
    let mut h2 = H2::connect(&server);
    let small = h2.get("/small.txt");
    assert_eq!(small.status, 200);
    assert_eq!(small.version, hyper::Version::HTTP_2);
    assert_eq!(small.body, b"hello, h2\n");
    assert_eq!(small.header("content-length"), Some("10"));
    assert!(small.headers.get("connection").is_none());
    assert!(small.header("etag").is_some());
    let big = h2.get("/large.bin");
    assert_eq!(big.status, 200);
    assert_eq!(
        big.header("content-length"),
        Some(LARGE.to_string().as_str())
    );
    assert!(big.body == large, "large body differs");
    // The same answer as over HTTP/1.1, field for field but Date.
    let h1 = server.get("/large.bin");
    assert_eq!(h1.header("etag"), big.header("etag"));
    assert_eq!(h1.header("last-modified"), big.header("last-modified"));
    assert_eq!(h1.header("content-type"), big.header("content-type"));
}

#[test]
fn head_has_the_fields_and_no_body() {
    let (root, _) = site();
    let server = server(&root);
    let mut h2 = H2::connect(&server);
    let head = h2.request("HEAD", "/large.bin", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(LARGE.to_string().as_str())
    );
    assert!(head.body.is_empty());
}

#[test]
fn range_is_206_with_content_range() {
    let (root, large) = site();
    let server = server(&root);
    let mut h2 = H2::connect(&server);
    let part = h2.request("GET", "/large.bin", &[("range", "bytes=100-199")]);
    assert_eq!(part.status, 206);
    let expected = format!("bytes 100-199/{LARGE}");
    assert_eq!(part.header("content-range"), Some(expected.as_str()));
    assert_eq!(part.header("content-length"), Some("100"));
    assert!(part.body == large[100..200]);
}

#[test]
fn if_none_match_is_304() {
    let (root, _) = site();
    let server = server(&root);
    let mut h2 = H2::connect(&server);
    let first = h2.get("/small.txt");
    let etag = first.header("etag").expect("etag").to_string();
    let again = h2.request("GET", "/small.txt", &[("if-none-match", &etag)]);
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    assert_eq!(again.header("etag"), Some(etag.as_str()));
}

#[test]
fn missing_file_is_404_with_the_error_page() {
    let (root, _) = site();
    let server = server(&root);
    let mut h2 = H2::connect(&server);
    let missing = h2.get("/nope.txt");
    let h1 = server.get("/nope.txt");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body, h1.body);
    assert_eq!(missing.header("content-type"), h1.header("content-type"));
}

#[test]
fn concurrent_streams_share_one_connection() {
    let (root, large) = site();
    let server = server(&root);
    let h2 = H2::connect(&server);
    let base = h2.base.clone();
    let answers = h2.rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..12 {
            let path = if i % 3 == 0 {
                "/large.bin"
            } else {
                "/small.txt"
            };
            let req = build("GET", &format!("{base}{path}"), &[]);
            let send = h2.send.clone();
            set.spawn(async move { (path, fetch(send, req).await) });
        }
        set.join_all().await
    });
    assert_eq!(answers.len(), 12);
    for (path, a) in answers {
        assert_eq!(a.status, 200, "{path}");
        match path {
            "/large.bin" => assert!(a.body == large),
            _ => assert_eq!(a.body, b"hello, h2\n"),
        }
    }
    let lines = server.stderr().wait_for(IO_TIMEOUT, |lines| {
        lines.iter().filter(|l| l.contains("HTTP/2.0")).count() >= 12
    });
    let lines = lines.expect("one access-log line per stream");
    let large_line = format!("\"GET /large.bin HTTP/2.0\" 200 {LARGE}");
    assert!(lines.iter().any(|l| l.contains(&large_line)), "{lines:#?}");
}

#[test]
fn idle_connection_is_closed_after_the_keepalive_timeout() {
    let (root, _) = site();
    let server = Server::builder(Mode::Standalone, root.path())
        .plain()
        .args(["--keepalive-timeout", "1", "--read-timeout", "30"])
        .start();
    let mut h2 = H2::connect(&server);
    assert_eq!(h2.get("/small.txt").status, 200);
    let send = h2.send.clone();
    let closed = h2.rt.block_on(async move {
        let deadline = tokio::time::Instant::now() + IO_TIMEOUT;
        while !send.is_closed() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        send.is_closed()
    });
    assert!(closed, "the idle h2 connection stayed open");
}

#[test]
fn http1_is_unchanged_on_the_same_port() {
    let (root, _) = site();
    let server = server(&root);
    let mut h2 = H2::connect(&server);
    assert_eq!(h2.get("/small.txt").status, 200);
    let h1 = server.get("/small.txt");
    assert_eq!(h1.status, 200);
    assert_eq!(h1.body, b"hello, h2\n");
}
