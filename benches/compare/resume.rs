//! The resumed-handshake cells. wrk never resumes a TLS session, so its
//! `Connection: close` cells make a full handshake per request; this client
//! resumes. Each of `connections` threads, until the time is up: connects,
//! makes a TLS handshake offering a ticket the server gave on an earlier
//! connection, sends one `GET` with `Connection: close`, reads the whole
//! response and on to the server's close (taking in any tickets sent after
//! the response), sends close_notify and closes. A handshake the server did not
//! resume (`handshake_kind()` is not `Resumed`) still counts as a request,
//! and as a `not resumed` error of the cell.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rustls::{ClientConfig, HandshakeKind};

use crate::idle::one_request;
use crate::load::Outcome;
use crate::tls;

/// What one thread saw.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<f64>,
    connect: u64,
    read: u64,
    timeout: u64,
    bad: u64,
    not_resumed: u64,
}

/// Runs for `duration` with `connections` threads; `config` (with its
/// ticket store) carries over from a warm-up run.
pub fn run(
    url: &str,
    connections: u32,
    duration: Duration,
    config: &Arc<ClientConfig>,
) -> Result<Outcome, String> {
    let (addr, _, path) = crate::fetch::https_parts(url)?;
    let start = Instant::now();
    let deadline = start + duration;
    let workers: Vec<_> = (0..connections.max(1))
        .map(|_| {
            let config = config.clone();
            let path = path.to_string();
            thread::spawn(move || worker(addr, &path, &config, deadline))
        })
        .collect();
    let mut all = Tally::default();
    for w in workers {
        let t = w
            .join()
            .map_err(|_| "a client thread panicked".to_string())?;
        all.latencies_us.extend(t.latencies_us);
        all.connect += t.connect;
        all.read += t.read;
        all.timeout += t.timeout;
        all.bad += t.bad;
        all.not_resumed += t.not_resumed;
    }
    let seconds = start.elapsed().as_secs_f64();
    let mut o = Outcome {
        requests: all.latencies_us.len() as u64,
        seconds,
        ..Outcome::default()
    };
    o.requests_per_second = o.requests as f64 / seconds;
    all.latencies_us.sort_unstable_by(f64::total_cmp);
    let pick = |q: f64| {
        let n = all.latencies_us.len();
        (n > 0).then(|| all.latencies_us[((n as f64 * q) as usize).min(n - 1)])
    };
    o.p50_us = pick(0.50);
    o.p99_us = pick(0.99);
    o.socket_errors.connect = all.connect;
    o.socket_errors.read = all.read;
    o.socket_errors.timeout = all.timeout;
    o.failed = all.bad;
    o.not_resumed = all.not_resumed;
    Ok(o)
}

fn worker(addr: SocketAddr, path: &str, config: &Arc<ClientConfig>, deadline: Instant) -> Tally {
    let mut t = Tally::default();
    let timeout = Duration::from_secs(10);
    while Instant::now() < deadline && !crate::stop::stopping() {
        let began = Instant::now();
        let mut stream = match tls::connect(&addr, config, timeout) {
            Ok(s) => s,
            Err(_) => {
                t.connect += 1;
                // A server that refuses connections must not turn this
                // thread into a busy loop.
                thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        let resumed = stream.conn.handshake_kind() == Some(HandshakeKind::Resumed);
        // Read on to the server's close: some servers send their session
        // tickets after the response, and a client that stopped at the
        // response's end would run out of tickets.
        let exchange = one_request(&mut stream, path, true)
            .and_then(|()| tls::read_to_close(&mut stream, &mut Vec::new()));
        match exchange {
            Ok(()) => {
                t.latencies_us.push(began.elapsed().as_secs_f64() * 1e6);
                if !resumed {
                    t.not_resumed += 1;
                }
            }
            Err(e) => match e.kind() {
                std::io::ErrorKind::InvalidData => t.bad += 1,
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => t.timeout += 1,
                _ => t.read += 1,
            },
        }
        tls::close(&mut stream);
    }
    t
}
