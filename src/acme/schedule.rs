//! When to renew and when to try again: arithmetic only, so it is tested
//! without a CA or a clock.

use std::time::{Duration, SystemTime};

/// The longest wait between attempts after failures: a CA that refuses for
/// days is still asked daily.
pub const MAX_BACKOFF: Duration = Duration::from_secs(24 * 60 * 60);

/// Renewal without renewal information from the CA: at two thirds of the
/// lifetime (30 days before expiry for Let's Encrypt's 90-day
/// certificates, as certbot and Caddy do).
pub fn renewal_due(not_before: SystemTime, not_after: SystemTime) -> SystemTime {
    let lifetime = not_after
        .duration_since(not_before)
        .unwrap_or(Duration::ZERO);
    not_before + lifetime * 2 / 3
}

/// A point in the CA's suggested renewal window (RFC 9773 4.2), `fraction`
/// (0 to 1, random) of the way through, so that a fleet spreads out.
pub fn in_window(start: SystemTime, end: SystemTime, fraction: f64) -> SystemTime {
    let span = end.duration_since(start).unwrap_or(Duration::ZERO);
    start + span.mul_f64(fraction.clamp(0.0, 1.0))
}

/// The wait before attempt `failures + 1` after `failures` failed ones:
/// `base`, doubled after each further failure, at most a day, then spread
/// by +-20% (`jitter` is random in 0..1) so that processes and machines
/// that failed together do not retry together.
pub fn retry_delay(base: Duration, failures: u32, jitter: f64) -> Duration {
    let doublings = failures.saturating_sub(1).min(32);
    let delay = base
        .checked_mul(1 << doublings.min(31))
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF);
    delay.mul_f64(0.8 + 0.4 * jitter.clamp(0.0, 1.0))
}

/// A random number in 0..1 for the jitter and the window.
pub fn random_fraction() -> f64 {
    let mut bytes = [0u8; 8];
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn renews_at_two_thirds_of_the_lifetime() {
        let start = SystemTime::UNIX_EPOCH + DAY * 1000;
        assert_eq!(renewal_due(start, start + DAY * 90), start + DAY * 60);
        assert_eq!(
            renewal_due(start, start + Duration::from_secs(30)),
            start + Duration::from_secs(20)
        );
        // A certificate that ends before it starts is due at once.
        assert_eq!(renewal_due(start + DAY, start), start + DAY);
    }

    #[test]
    fn backoff_doubles_up_to_a_day_with_bounded_jitter() {
        let base = Duration::from_secs(60);
        let middle = |failures| retry_delay(base, failures, 0.5);
        assert_eq!(middle(1), base);
        assert_eq!(middle(2), base * 2);
        assert_eq!(middle(3), base * 4);
        assert_eq!(middle(20), MAX_BACKOFF);
        assert_eq!(middle(u32::MAX), MAX_BACKOFF);
        assert_eq!(retry_delay(base, 1, 0.0), Duration::from_secs(48));
        assert_eq!(retry_delay(base, 1, 1.0), Duration::from_secs(72));
    }

    #[test]
    fn window_points_stay_in_the_window() {
        let start = SystemTime::UNIX_EPOCH + DAY;
        let end = start + DAY;
        assert_eq!(in_window(start, end, 0.0), start);
        assert_eq!(in_window(start, end, 0.5), start + DAY / 2);
        assert_eq!(in_window(start, end, 7.0), end);
        assert_eq!(in_window(end, start, 0.5), end);
        for _ in 0..100 {
            let f = random_fraction();
            assert!((0.0..1.0).contains(&f));
        }
    }
}
