//! Log lines about a bound a client ran into (`--max-connections-per-ip`,
//! `--min-rate`, `--max-connections`), at most one per address and kind a
//! minute: a client that runs into a bound thousands of times must not
//! flood the log, nor make it the bottleneck.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::log;

/// What happened, with the bound's value for the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Complaint {
    /// Connections from this address were refused at accept time.
    OverPerClient { max: usize },
    /// A request body arrived slower than `--min-rate`.
    SlowBody { rate: u64 },
    /// A response was taken slower than `--min-rate`.
    SlowResponse { rate: u64 },
    /// `--max-connections` was reached: idle keep-alive connections closed.
    AtMaxConnections { max: usize },
    /// An HTTP/2 header block (HEADERS and its CONTINUATIONs) did not end
    /// within `--read-timeout` (in seconds).
    UnfinishedHead { secs: u64 },
    /// HTTP/2 header blocks that decode far beyond the header list limit
    /// (an HPACK bomb), again on one connection.
    HeaderBomb,
}

/// How often one address may be named for one kind of complaint.
const EVERY: Duration = Duration::from_secs(60);
/// Most (address, kind) pairs remembered; beyond it the oldest is forgotten.
const REMEMBERED: usize = 1024;

/// When each (address, kind) pair was last logged, by its fingerprint: a
/// short list searched from end to end is plenty at this size, and costs
/// the minimal build no hash table of its own.
static RECENT: Mutex<Vec<(u64, Instant)>> = Mutex::new(Vec::new());

/// Counts `what` in the metrics, and logs it about `client` unless it was
/// logged within the last minute.
pub fn complain(client: &str, what: Complaint) {
    use crate::metrics::{count, Event};
    match what {
        Complaint::OverPerClient { .. } => count(Event::ConnectionRefused),
        Complaint::SlowBody { .. } => count(Event::SlowBody),
        Complaint::SlowResponse { .. } => count(Event::SlowResponse),
        // Counted per connection closed, where they are (`park`).
        Complaint::AtMaxConnections { .. } => {}
        Complaint::UnfinishedHead { .. } | Complaint::HeaderBomb => {}
    }
    let mut recent = RECENT.lock().unwrap_or_else(|p| p.into_inner());
    if should_log(&mut recent, client, what, Instant::now()) {
        log::diagnostic(&line(client, what));
    }
}

fn should_log(
    recent: &mut Vec<(u64, Instant)>,
    client: &str,
    what: Complaint,
    now: Instant,
) -> bool {
    let key = fingerprint(client, what);
    if let Some((_, last)) = recent.iter_mut().find(|(k, _)| *k == key) {
        if now.duration_since(*last) < EVERY {
            return false;
        }
        *last = now;
        return true;
    }
    if recent.len() >= REMEMBERED {
        let oldest = (0..recent.len()).min_by_key(|&i| recent[i].1).unwrap_or(0);
        recent.swap_remove(oldest);
    }
    recent.push((key, now));
    true
}

/// FNV-1a of the address and the kind: two pairs that collide share one
/// minute, which costs a log line, nothing else.
fn fingerprint(client: &str, what: Complaint) -> u64 {
    let kind = match what {
        Complaint::OverPerClient { .. } => 1,
        Complaint::SlowBody { .. } => 2,
        Complaint::SlowResponse { .. } => 3,
        Complaint::AtMaxConnections { .. } => 4,
        Complaint::UnfinishedHead { .. } => 5,
        Complaint::HeaderBomb => 6,
    };
    client
        .bytes()
        .chain([0, kind])
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
}

fn line(client: &str, what: Complaint) -> String {
    match what {
        Complaint::OverPerClient { max } => {
            format!("staticd: {client}: over --max-connections-per-ip ({max}): connections refused\n")
        }
        Complaint::SlowBody { rate } => format!(
            "staticd: {client}: request body slower than --min-rate ({rate} B/s): connection closed\n"
        ),
        Complaint::SlowResponse { rate } => format!(
            "staticd: {client}: response taken slower than --min-rate ({rate} B/s): connection closed\n"
        ),
        Complaint::AtMaxConnections { max } => format!(
            "staticd: --max-connections ({max}) reached: closing idle keep-alive connections\n"
        ),
        Complaint::UnfinishedHead { secs } => format!(
            "staticd: {client}: HTTP/2 header block not complete within --read-timeout ({secs} s): connection closed\n"
        ),
        Complaint::HeaderBomb => format!(
            "staticd: {client}: HTTP/2 header blocks decoding far beyond the header list limit, again: connection closed\n"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_per_address_and_kind_a_minute() {
        let (r, t) = (&mut Vec::new(), Instant::now());
        let slow = Complaint::SlowBody { rate: 500 };
        assert!(should_log(r, "192.0.2.77", slow, t));
        assert!(!should_log(
            r,
            "192.0.2.77",
            slow,
            t + Duration::from_secs(59)
        ));
        let other = Complaint::SlowResponse { rate: 500 };
        assert!(should_log(r, "192.0.2.77", other, t));
        assert!(should_log(r, "192.0.2.78", slow, t));
        assert!(should_log(
            r,
            "192.0.2.77",
            slow,
            t + Duration::from_secs(61)
        ));
    }

    #[test]
    fn memory_stays_bounded() {
        let (r, t) = (&mut Vec::new(), Instant::now());
        let slow = Complaint::SlowBody { rate: 1 };
        for i in 0..3 * REMEMBERED {
            let now = t + Duration::from_millis(i as u64);
            should_log(r, &format!("198.51.100.{i}"), slow, now);
        }
        assert_eq!(r.len(), REMEMBERED);
        // The newest are the ones kept.
        let newest = format!("198.51.100.{}", 3 * REMEMBERED - 1);
        assert!(!should_log(r, &newest, slow, t));
    }

    #[test]
    fn lines_name_the_bound() {
        let l = line("::1", Complaint::OverPerClient { max: 256 });
        assert_eq!(
            l,
            "staticd: ::1: over --max-connections-per-ip (256): connections refused\n"
        );
    }
}
