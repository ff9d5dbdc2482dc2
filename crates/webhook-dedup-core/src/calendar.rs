//! Calendar arithmetic on PostgreSQL timestamps, in pure Rust: the epoch,
//! aligning to buckets (the metrics' hours and minutes) and unambiguous UTC
//! literals (in log and error messages).
//!
//! Times are PostgreSQL `timestamptz` values: microseconds since
//! 2000-01-01 00:00:00 UTC (the PostgreSQL epoch).

/// Microseconds in one day.
pub const DAY_US: i64 = 86_400 * 1_000_000;

/// Seconds between 1970-01-01 and 2000-01-01 (both UTC).
pub const PG_EPOCH_UNIX_S: i64 = 946_684_800;

/// The start of the aligned interval (a multiple of `interval` counted from
/// the PostgreSQL epoch) containing `t`.
pub fn align_down(t: i64, interval: i64) -> i64 {
    assert!(interval > 0, "interval must be positive");
    t.div_euclid(interval) * interval
}

/// A PostgreSQL timestamp as an unambiguous UTC literal,
/// `YYYY-MM-DD HH:MM:SS+00` (whole seconds).
pub fn utc_literal(us: i64) -> String {
    let secs = us.div_euclid(1_000_000) + PG_EPOCH_UNIX_S;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}+00", s / 3_600, (s % 3_600) / 60, s % 60)
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
/// Howard Hinnant's `civil_from_days`, <https://howardhinnant.github.io/date_algorithms.html>.
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_down_floors_negative_times() {
        assert_eq!(align_down(-1, DAY_US), -DAY_US);
        assert_eq!(align_down(DAY_US, DAY_US), DAY_US);
        assert_eq!(align_down(DAY_US + 1, DAY_US), DAY_US);
    }

    #[test]
    fn utc_literals() {
        assert_eq!(utc_literal(0), "2000-01-01 00:00:00+00");
        assert_eq!(utc_literal(DAY_US + 3_723_000_000), "2000-01-02 01:02:03+00");
        assert_eq!(utc_literal(-1_000_000), "1999-12-31 23:59:59+00");
        // a leap day, and 2026-11-30 05:13:55 UTC
        assert_eq!(utc_literal((1_709_164_800 - PG_EPOCH_UNIX_S) * 1_000_000), "2024-02-29 00:00:00+00");
        assert_eq!(utc_literal((1_796_015_635 - PG_EPOCH_UNIX_S) * 1_000_000), "2026-11-30 05:13:55+00");
    }
}
