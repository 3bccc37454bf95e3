//! Log lines about a bound a client ran into (`--max-connections-per-ip`,
//! `--min-rate`, `--max-connections`), at most one per address and kind a
//! minute: a client that runs into a bound thousands of times must not
//! flood the log, nor make it the bottleneck.

use std::collections::HashMap;
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
}

/// How often one address may be named for one kind of complaint.
const EVERY: Duration = Duration::from_secs(60);
/// Most (address, kind) pairs remembered; beyond it the old are forgotten.
const REMEMBERED: usize = 4096;

type Recent = HashMap<(Box<str>, Complaint), Instant>;

static RECENT: Mutex<Option<Recent>> = Mutex::new(None);

/// Logs `what` about `client` unless it was logged within the last minute.
pub fn complain(client: &str, what: Complaint) {
    if should_log(client, what, Instant::now()) {
        log::diagnostic(&line(client, what));
    }
}

fn should_log(client: &str, what: Complaint, now: Instant) -> bool {
    let mut recent = RECENT.lock().unwrap_or_else(|p| p.into_inner());
    let recent = recent.get_or_insert_with(HashMap::new);
    let key = (Box::<str>::from(client), what);
    if let Some(last) = recent.get(&key) {
        if now.duration_since(*last) < EVERY {
            return false;
        }
    }
    if recent.len() >= REMEMBERED {
        recent.retain(|_, last| now.duration_since(*last) < EVERY);
        if recent.len() >= REMEMBERED {
            recent.clear();
        }
    }
    recent.insert(key, now);
    true
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_per_address_and_kind_a_minute() {
        let t = Instant::now();
        let slow = Complaint::SlowBody { rate: 500 };
        assert!(should_log("192.0.2.77", slow, t));
        assert!(!should_log("192.0.2.77", slow, t + Duration::from_secs(59)));
        let other = Complaint::SlowResponse { rate: 500 };
        assert!(should_log("192.0.2.77", other, t));
        assert!(should_log("192.0.2.78", slow, t));
        assert!(should_log("192.0.2.77", slow, t + Duration::from_secs(61)));
    }

    #[test]
    fn memory_stays_bounded() {
        let t = Instant::now();
        for i in 0..3 * REMEMBERED {
            should_log(
                &format!("198.51.100.{i}"),
                Complaint::SlowBody { rate: 1 },
                t,
            );
        }
        let recent = RECENT.lock().unwrap();
        assert!(recent.as_ref().unwrap().len() <= REMEMBERED);
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
