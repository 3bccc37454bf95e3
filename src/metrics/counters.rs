//! Per-thread counters, summed when scraped.
//!
//! Every thread that counts something gets its own block of counters the
//! first time it does (one allocation per thread, never per event), and
//! only that thread ever writes to it: an increment is a load and a store
//! to a cache line no other core writes, no lock and no read-modify-write
//! shared between threads. A scrape reads every live thread's block under
//! the registry's lock; a thread that ends adds its counts to the
//! registry's retired totals first, so nothing it counted is lost (tokio's
//! blocking pool, which runs CGI exchanges, starts and ends threads).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::http::parse::{HttpVersion, Method, Request};

/// What is counted, besides requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Response body bytes that went out (add their number).
    BodyBytes,
    /// A connection took one of the --max-connections places.
    ConnectionOpened,
    /// A connection gave its place back.
    ConnectionClosed,
    /// A connection was accepted while every place was taken, and waited.
    ConnectionAtLimit,
    /// A connection was refused: its client was over --max-connections-per-ip.
    ConnectionRefused,
    /// An idle connection was closed to make room at --max-connections.
    ConnectionShed,
    /// A connection was closed: its request body came slower than --min-rate.
    SlowBody,
    /// A connection was closed: its response was taken slower than --min-rate.
    SlowResponse,
    TlsFull,
    TlsResumed,
    TlsFailed,
    CacheHit,
    CacheMiss,
    CgiRun,
    CgiTimeout,
}

const EVENTS: usize = Event::CgiTimeout as usize + 1;

/// The status classes 1xx to 5xx.
pub const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
pub const METHODS: [&str; 4] = ["GET", "HEAD", "POST", "other"];
pub const PROTOCOLS: [&str; 4] = ["http/1.0", "http/1.1", "h2", "h3"];
pub const SCHEMES: [&str; 2] = ["http", "https"];

const REQUEST_CELLS: usize = STATUS_CLASSES.len() * METHODS.len() * PROTOCOLS.len() * SCHEMES.len();
const CELLS: usize = EVENTS + REQUEST_CELLS;

/// Where one request is counted: its status class, method class, protocol
/// and scheme, as indexes into the label lists above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestKind {
    pub status: usize,
    pub method: usize,
    pub protocol: usize,
    pub scheme: usize,
}

impl RequestKind {
    /// A request that got `status`. One whose head did not parse has no
    /// method or version: it counts as method `other` over HTTP/1.1.
    pub fn of(request: Option<&Request>, status: u16, https: bool) -> RequestKind {
        let status = (usize::from(status / 100)).clamp(1, 5) - 1;
        let method = match request.map(|r| &r.method) {
            Some(Method::Get) => 0,
            Some(Method::Head) => 1,
            Some(Method::Other(m)) if m == "POST" => 2,
            _ => 3,
        };
        let protocol = match request {
            Some(r) if r.version == HttpVersion::Http2 => 2,
            Some(r) if r.version == HttpVersion::Http3 => 3,
            Some(r) if r.minor_version == 0 => 0,
            _ => 1,
        };
        RequestKind {
            status,
            method,
            protocol,
            scheme: usize::from(https),
        }
    }

    fn cell(self) -> usize {
        let index = ((self.status * METHODS.len() + self.method) * PROTOCOLS.len() + self.protocol)
            * SCHEMES.len()
            + self.scheme;
        EVENTS + index
    }
}

/// One thread's counters.
struct Counters {
    cells: [AtomicU64; CELLS],
}

impl Counters {
    /// Only the owning thread calls this, so a plain load and store is an
    /// exact increment (readers may see it a moment late, never torn).
    fn add(&self, cell: usize, n: u64) {
        let c = &self.cells[cell];
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
}

/// Counts summed over threads, for a scrape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Totals {
    cells: [u64; CELLS],
}

impl Totals {
    const fn zero() -> Totals {
        Totals { cells: [0; CELLS] }
    }

    fn absorb(&mut self, c: &Counters) {
        for (total, cell) in self.cells.iter_mut().zip(&c.cells) {
            *total = total.wrapping_add(cell.load(Ordering::Relaxed));
        }
    }

    pub fn event(&self, e: Event) -> u64 {
        self.cells[e as usize]
    }

    pub fn requests(&self, kind: RequestKind) -> u64 {
        self.cells[kind.cell()]
    }

    /// Connections open now. Each connection's open and close are counted
    /// by the one thread that serves it, so the difference is exact once
    /// a scrape sees both (a close seen before its open reads as 0).
    pub fn connections_open(&self) -> u64 {
        self.event(Event::ConnectionOpened)
            .saturating_sub(self.event(Event::ConnectionClosed))
    }
}

struct Registry {
    live: Vec<Arc<Counters>>,
    /// What threads that ended had counted.
    retired: Totals,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    live: Vec::new(),
    retired: Totals::zero(),
});

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// This thread's counters, registered on first use.
struct Mine(Arc<Counters>);

impl Mine {
    fn register() -> Mine {
        let counters = Arc::new(Counters {
            cells: std::array::from_fn(|_| AtomicU64::new(0)),
        });
        registry().live.push(Arc::clone(&counters));
        Mine(counters)
    }
}

impl Drop for Mine {
    fn drop(&mut self) {
        let mut r = registry();
        r.retired.absorb(&self.0);
        r.live.retain(|c| !Arc::ptr_eq(c, &self.0));
    }
}

thread_local! {
    static MINE: Mine = Mine::register();
}

/// Adds `n` to this thread's count of `cell`. Quietly nothing while the
/// thread is being torn down.
fn add(cell: usize, n: u64) {
    let _ = MINE.try_with(|m| m.0.add(cell, n));
}

/// Counts one `e` (for [`Event::BodyBytes`], see
/// `add_bytes`).
pub fn count(e: Event) {
    add(e as usize, 1);
}

/// Counts `n` response body bytes sent.
pub fn body_bytes(n: u64) {
    if n > 0 {
        add(Event::BodyBytes as usize, n);
    }
}

/// Counts one answered request.
pub fn request(request: Option<&Request>, status: u16, https: bool) {
    add(RequestKind::of(request, status, https).cell(), 1);
}

/// Everything counted so far, by every thread.
pub fn totals() -> Totals {
    let r = registry();
    let mut totals = r.retired.clone();
    for c in &r.live {
        totals.absorb(c);
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::parse::{self, Parsed};

    fn kind(raw: &str, status: u16, https: bool) -> RequestKind {
        let Parsed::Complete { request, .. } = parse::parse(raw.as_bytes()) else {
            panic!("{raw:?} parses");
        };
        RequestKind::of(Some(&request), status, https)
    }

    #[test]
    fn requests_are_classified() {
        let k = kind("GET / HTTP/1.1\r\nHost: a\r\n\r\n", 200, false);
        assert_eq!((k.status, k.method, k.protocol, k.scheme), (1, 0, 1, 0));
        let k = kind("HEAD / HTTP/1.0\r\n\r\n", 304, true);
        assert_eq!((k.status, k.method, k.protocol, k.scheme), (2, 1, 0, 1));
        let k = kind("POST /x HTTP/1.1\r\nHost: a\r\n\r\n", 504, false);
        assert_eq!((k.status, k.method), (4, 2));
        let k = kind("DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n", 405, false);
        assert_eq!((k.status, k.method), (3, 3));
        let k = RequestKind::of(None, 400, false);
        assert_eq!((k.status, k.method, k.protocol), (3, 3, 1));
    }

    #[test]
    fn every_request_kind_has_its_own_cell() {
        let mut seen = std::collections::HashSet::new();
        for status in 0..STATUS_CLASSES.len() {
            for method in 0..METHODS.len() {
                for protocol in 0..PROTOCOLS.len() {
                    for scheme in 0..SCHEMES.len() {
                        let k = RequestKind {
                            status,
                            method,
                            protocol,
                            scheme,
                        };
                        assert!(k.cell() >= EVENTS && k.cell() < CELLS);
                        assert!(seen.insert(k.cell()));
                    }
                }
            }
        }
    }

    #[test]
    fn counts_of_ended_threads_are_kept() {
        let before = totals().event(Event::ConnectionAtLimit);
        std::thread::spawn(|| {
            count(Event::ConnectionAtLimit);
            count(Event::ConnectionAtLimit);
        })
        .join()
        .unwrap();
        count(Event::ConnectionAtLimit);
        // Counted only by the accept loop, which no unit test runs (the
        // CGI exchange's tests count CgiTimeout).
        assert_eq!(totals().event(Event::ConnectionAtLimit) - before, 3);
    }
}
