//! The driver with a client of the test's own (recording what it is told,
//! feeding a body, or never taking what it is sent) and real scripts: what
//! every protocol's client can count on.

use std::future::Future;
use std::time::{Duration, Instant};

use super::{run, Client, Gone};
use crate::exchange::testing::Fixture;
use crate::origin::{Kind, Protocol};
use crate::pipeline::Sent;

/// What the client was told, in order.
#[derive(Debug, PartialEq, Eq)]
enum Told {
    Whole(u16),
    Head(u16, bool),
    Data(Vec<u8>),
    End(bool),
}

/// A client with `body` to send (in these pieces; then its end, unless
/// `silent`), that takes what it is sent unless `stalled`.
struct Recorder {
    body: Vec<Vec<u8>>,
    silent: bool,
    told: Vec<Told>,
    took: usize,
    stalled: bool,
}

impl Recorder {
    fn new(body: &[&str]) -> Recorder {
        Recorder {
            body: body.iter().rev().map(|b| b.as_bytes().to_vec()).collect(),
            silent: false,
            told: Vec::new(),
            took: 0,
            stalled: false,
        }
    }

    /// The body bytes sent, joined.
    fn data(&self) -> Vec<u8> {
        let pieces = self.told.iter().filter_map(|t| match t {
            Told::Data(bytes) => Some(bytes.as_slice()),
            _ => None,
        });
        pieces.flatten().copied().collect()
    }
}

impl Client for Recorder {
    async fn body(&mut self) -> Result<Option<Vec<u8>>, Gone> {
        if self.body.is_empty() && self.silent {
            std::future::pending::<()>().await;
        }
        Ok(self.body.pop())
    }

    fn took(&mut self, n: usize) {
        self.took += n;
    }

    async fn whole(&mut self, sent: Box<Sent>) -> Result<(), Gone> {
        self.told.push(Told::Whole(sent.response.code()));
        Ok(())
    }

    async fn head(&mut self, sent: Box<Sent>, body: bool) -> Result<(), Gone> {
        self.told.push(Told::Head(sent.response.code(), body));
        Ok(())
    }

    async fn data(&mut self, bytes: Vec<u8>) -> Result<(), Gone> {
        if self.stalled {
            std::future::pending::<()>().await;
        }
        self.told.push(Told::Data(bytes));
        Ok(())
    }

    async fn end(&mut self, complete: bool) -> Result<(), Gone> {
        self.told.push(Told::End(complete));
        Ok(())
    }
}

/// The shared site of scripts, its requests as HTTP/2's fields, with
/// scripts given `cgi_timeout`.
fn fixture(cgi_timeout: Duration) -> Fixture {
    let mut f = Fixture::new(Kind::Http, Protocol::Fields);
    f.cfg.cgi_timeout = cgi_timeout;
    f
}

/// Runs `raw`'s script for `client` to its end, on a runtime of its own.
fn drive(f: &Fixture, raw: &str, client: &mut Recorder, stop: impl Future<Output = ()>) -> bool {
    let ctx = f.ctx();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A driver that waits past every bound fails the test, never hangs it.
    let job = f.job(raw);
    let ran = async {
        let bound = Duration::from_secs(30);
        tokio::time::timeout(bound, run(job, &ctx, client, stop)).await
    };
    let (keep_alive, exchange) = runtime.block_on(ran).expect("the exchange ends");
    drop(exchange);
    keep_alive
}

/// No stop comes.
fn no_stop() -> std::future::Pending<()> {
    std::future::pending()
}

#[test]
fn the_body_goes_to_the_script_and_its_output_to_the_client() {
    let f = fixture(Duration::from_secs(10));
    let raw = "POST /cgi-bin/echo.cgi HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n";
    let mut client = Recorder::new(&["hello", " world"]);
    assert!(drive(&f, raw, &mut client, no_stop()), "keep-alive");
    assert_eq!(client.told.first(), Some(&Told::Head(200, true)));
    assert_eq!(client.data(), b"hello world");
    assert_eq!(client.told.last(), Some(&Told::End(true)));
    // Every body byte taken is given back to the client's window.
    assert_eq!(client.took, 11);
}

#[test]
fn a_whole_response_of_ours_ends_the_stream_without_an_end() {
    let f = fixture(Duration::from_secs(10));
    let raw = "GET /cgi-bin/quiet.cgi HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut client = Recorder::new(&[]);
    assert!(!drive(&f, raw, &mut client, no_stop()));
    // No output is a 502, sent whole: nothing else follows it.
    assert_eq!(client.told, [Told::Whole(502)]);
}

#[test]
fn a_client_that_takes_nothing_holds_the_script_only_until_its_deadline() {
    let timeout = Duration::from_millis(500);
    let f = fixture(timeout);
    let raw = "GET /cgi-bin/flood.cgi HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut client = Recorder::new(&[]);
    client.stalled = true;
    let started = Instant::now();
    assert!(
        !drive(&f, raw, &mut client, no_stop()),
        "a cut response ends the connection"
    );
    let took = started.elapsed();
    assert!(took >= timeout, "ended after {took:?}, before the deadline");
    assert!(took < timeout * 10, "ended only after {took:?}");
    assert_eq!(client.told, [Told::Head(200, true), Told::End(false)]);
}

#[test]
fn a_stop_ends_the_exchange_at_once_and_cut() {
    let f = fixture(Duration::from_secs(30));
    // The script waits for a body that never comes.
    let raw = "POST /cgi-bin/echo.cgi HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n";
    let mut client = Recorder::new(&[]);
    client.silent = true;
    let started = Instant::now();
    let stop = async { tokio::time::sleep(Duration::from_millis(200)).await };
    assert!(!drive(&f, raw, &mut client, stop));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200),
        "ended after {took:?}, before the stop"
    );
    assert!(
        took < Duration::from_secs(10),
        "the stop did not end it: {took:?}"
    );
    // The script's head went out before it read: the stop cuts the body.
    assert_eq!(client.told, [Told::Head(200, true), Told::End(false)]);
}
