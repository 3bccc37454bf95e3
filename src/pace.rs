//! `--min-rate`: how long a client may take over a request body or a
//! response, as a deadline that moves with the bytes that go through.
//!
//! A token bucket counted in time: the client starts with one timeout's
//! worth of credit (`--read-timeout` for a body, `--send-timeout` for a
//! response); every byte adds 1/min-rate s; the credit never exceeds one
//! timeout ahead of now, so a fast start cannot be banked for a slow
//! middle, and a pause longer than the timeout always ends the connection,
//! as it did before there was a rate. Averaged over any stretch longer than
//! the timeout, a client that keeps its connection moved at least min-rate
//! bytes per second. With a rate of 0 the deadline is simply one timeout
//! after the last progress.
//!
//! Pure: the transports feed it the bytes and the time, and wait until
//! `deadline`.

use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub struct Pace {
    deadline: Instant,
    /// The most credit a client holds, and the longest it may be silent.
    window: Duration,
    /// Credit per byte, in nanoseconds; 0: no rate, only the timeout.
    per_byte_ns: u64,
    /// When bytes last went through: a deadline before `last + window`
    /// is the rate's doing, not silence's.
    last: Instant,
}

impl Pace {
    /// A transfer starting `now`, with `window` (the timeout) of credit and
    /// `min_rate` bytes per second (0: none).
    pub fn new(now: Instant, window: Duration, min_rate: u64) -> Pace {
        let per_byte_ns = match min_rate {
            0 => 0,
            rate => (1_000_000_000 / rate).max(1),
        };
        Pace {
            deadline: now + window,
            window,
            per_byte_ns,
            last: now,
        }
    }

    /// `bytes` went through at `now`.
    pub fn progress(&mut self, now: Instant, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.last = now;
        let ceiling = now + self.window;
        if self.per_byte_ns == 0 {
            self.deadline = ceiling;
            return;
        }
        let credit = Duration::from_nanos(bytes.saturating_mul(self.per_byte_ns));
        self.deadline = self
            .deadline
            .checked_add(credit)
            .map_or(ceiling, |d| d.min(ceiling));
    }

    /// When the transfer is given up on, unless more bytes go through.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether a transfer that reached its deadline was too slow (the
    /// rate ended it) rather than silent for a whole window.
    pub fn too_slow(&self) -> bool {
        self.deadline < self.last + self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn without_a_rate_the_deadline_is_a_timeout_after_the_last_progress() {
        let t = Instant::now();
        let mut p = Pace::new(t, 10 * SEC, 0);
        assert_eq!(p.deadline(), t + 10 * SEC);
        p.progress(t + 9 * SEC, 1);
        assert_eq!(p.deadline(), t + 19 * SEC);
        assert!(!p.too_slow());
    }

    #[test]
    fn a_trickle_below_the_rate_runs_out_after_about_one_window() {
        // One byte every 2 s against 500 B/s and a 10 s window: each byte
        // buys 2 ms, so the deadline stays near t + 10 s.
        let t = Instant::now();
        let mut p = Pace::new(t, 10 * SEC, 500);
        let mut now = t;
        while now + 2 * SEC < p.deadline() {
            now += 2 * SEC;
            p.progress(now, 1);
        }
        assert!(p.deadline() < t + 11 * SEC, "{:?}", p.deadline() - t);
        assert!(p.too_slow());
    }

    #[test]
    fn a_client_at_the_rate_never_runs_out() {
        let t = Instant::now();
        let mut p = Pace::new(t, 10 * SEC, 500);
        for s in 1..1000 {
            let now = t + s * SEC;
            assert!(p.deadline() > now);
            p.progress(now, 500);
        }
    }

    #[test]
    fn credit_is_capped_at_one_window_ahead() {
        let t = Instant::now();
        let mut p = Pace::new(t, 10 * SEC, 500);
        // A megabyte at once is 2,000 s of credit at 500 B/s: only 10 s count.
        p.progress(t + SEC, 1 << 20);
        assert_eq!(p.deadline(), t + 11 * SEC);
        assert!(!p.too_slow());
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        let t = Instant::now();
        let mut p = Pace::new(t, 10 * SEC, 1);
        p.progress(t, u64::MAX);
        assert_eq!(p.deadline(), t + 10 * SEC);
    }
}
