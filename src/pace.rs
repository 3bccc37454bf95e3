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
//! What counts as a response's progress is what the client *took*: bytes
//! the peer acknowledged (`delivered`, from TCP_INFO), not bytes the kernel
//! accepted into the socket's send buffer, which on its own would let a
//! reader of 100 B/s look like one of kilobytes per second for as long as
//! the buffer grows. The transports read the acknowledged count only when a
//! response has to wait (once, to set where it starts) and when its
//! deadline comes (to see whether it moved): a response the socket takes at
//! once costs nothing. Where there are no acknowledgements to read (a pipe),
//! bytes written count (`progress`).
//!
//! Pure: the transports feed it the bytes and the time, and wait until
//! `deadline`.

use std::time::{Duration, Instant};

/// `Pace::acked` before the first reading.
const UNREAD: u64 = u64::MAX;

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
    /// The peer's acknowledged count when `delivered` last read it;
    /// [`UNREAD`] before (not an Option: a Pace is in every connection's
    /// state, kept small).
    acked: u64,
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
            acked: UNREAD,
        }
    }

    /// The peer has acknowledged `total` bytes of the connection so far
    /// (a count that includes earlier responses, and only grows). The first
    /// reading sets where this transfer's count starts; each later one is
    /// progress by the difference. Returns whether the transfer may go on
    /// at `now` (its deadline is still ahead).
    pub fn delivered(&mut self, now: Instant, total: u64) -> bool {
        let before = std::mem::replace(&mut self.acked, total);
        if before != UNREAD {
            self.progress(now, total.saturating_sub(before));
        }
        self.deadline > now
    }

    /// When a transport should next read the acknowledged count, at `now`:
    /// while counting them, four times a window (the first of `deadline`
    /// less 3/4, 1/2, 1/4 of a window, or the deadline, that is after
    /// `now`), so that bytes are credited within a quarter window of when
    /// they were taken, and a client silent for a window is noticed within
    /// a quarter window of it; otherwise at the deadline.
    pub fn check_at(&self, now: Instant) -> Instant {
        if self.counting_acks() {
            let quarter = self.window / 4;
            for k in (1..=3).rev() {
                if let Some(at) = self.deadline.checked_sub(quarter * k) {
                    if at > now {
                        return at;
                    }
                }
            }
        }
        self.deadline
    }

    /// Whether the acknowledged count has been read once (see `delivered`).
    pub fn counting_acks(&self) -> bool {
        self.acked != UNREAD
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
    fn acknowledged_bytes_count_from_the_first_reading() {
        // 1 MB acknowledged by earlier responses: not this one's progress.
        let t = Instant::now();
        let mut p = Pace::new(t, 10 * SEC, 500);
        assert!(!p.counting_acks());
        assert!(p.delivered(t, 1 << 20));
        assert!(p.counting_acks());
        assert_eq!(p.deadline(), t + 10 * SEC);
        // 1,000 bytes acknowledged since: 2 s of credit at 500 B/s.
        assert!(p.delivered(t + 10 * SEC, (1 << 20) + 1000));
        assert_eq!(p.deadline(), t + 12 * SEC);
    }

    #[test]
    fn a_reader_of_100_bytes_a_second_is_dropped_soon_after_one_window() {
        // The transport reads the count at each `check_at`: a reader taking
        // 100 B/s against 500 B/s buys a fifth of each wait, so it is done
        // about 1.25 windows in.
        let t = Instant::now();
        let mut p = Pace::new(t, 10 * SEC, 500);
        p.delivered(t, 0);
        let mut now = t;
        let mut acked = 0u64;
        let mut checks = 0;
        while p.deadline() > now {
            let next = p.check_at(now);
            assert!(next > now && next <= p.deadline());
            acked += (100.0 * (next - now).as_secs_f64()) as u64;
            now = next;
            p.delivered(now, acked);
            checks += 1;
        }
        assert!(now < t + Duration::from_millis(12_600), "{:?}", now - t);
        assert!(checks <= 32, "{checks} readings");
        assert!(p.too_slow());
    }

    #[test]
    fn a_burst_then_silence_ends_a_quarter_window_after_the_timeout_at_most() {
        // 64 KB taken at once (a receive buffer filling), then nothing: the
        // reading a quarter window in credits it then, not at the deadline.
        let t = Instant::now();
        let mut p = Pace::new(t, 2 * SEC, 500);
        p.delivered(t, 0);
        assert_eq!(p.check_at(t), t + Duration::from_millis(500));
        assert!(p.delivered(t + Duration::from_millis(500), 64 << 10));
        assert_eq!(p.deadline(), t + Duration::from_millis(2500));
        let mut now = t + Duration::from_millis(500);
        while p.delivered(now, 64 << 10) {
            now = p.check_at(now);
        }
        assert_eq!(now, t + Duration::from_millis(2500));
    }

    #[test]
    fn without_acknowledgements_the_check_is_the_deadline() {
        let t = Instant::now();
        let p = Pace::new(t, 8 * SEC, 500);
        assert_eq!(p.check_at(t), t + 8 * SEC);
    }

    #[test]
    fn nothing_acknowledged_for_a_window_ends_it() {
        let t = Instant::now();
        let mut p = Pace::new(t, 10 * SEC, 0);
        p.delivered(t + SEC, 5000);
        assert!(!p.delivered(t + 10 * SEC, 5000));
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
