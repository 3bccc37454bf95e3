//! Unix times as UTC calendar fields, for the text staticd writes itself
//! (access-log timestamps, listing dates). HTTP dates come from httpdate.

use std::time::{SystemTime, UNIX_EPOCH};

/// A time as UTC calendar fields. Times before 1970 count as 1970-01-01.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utc {
    pub year: u64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
    pub hour: u64,
    pub minute: u64,
    pub second: u64,
}

impl Utc {
    pub fn of(t: SystemTime) -> Utc {
        let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let (year, month, day) = civil_from_days(secs / 86_400);
        let in_day = secs % 86_400;
        Utc {
            year,
            month,
            day,
            hour: in_day / 3600,
            minute: in_day / 60 % 60,
            second: in_day % 60,
        }
    }
}

/// Days since 1970-01-01 -> (year, month, day) in the Gregorian calendar:
/// Howard Hinnant's `civil_from_days`, restricted to days after the epoch.
fn civil_from_days(days: u64) -> (u64, u32, u32) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1));
    }

    #[test]
    fn fields() {
        let t = UNIX_EPOCH + Duration::from_secs(971_186_136);
        let u = Utc::of(t);
        assert_eq!((u.year, u.month, u.day), (2000, 10, 10));
        assert_eq!((u.hour, u.minute, u.second), (13, 55, 36));
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(Utc::of(before), Utc::of(UNIX_EPOCH));
    }
}
