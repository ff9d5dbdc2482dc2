//! The payload archive's calendar, in pure Rust: which day partitions of
//! `webhook_dedup.archive` maintenance creates and drops, what they are
//! called, and how long a source's archived deliveries are kept.
//!
//! The archive is partitioned by day of arrival, UTC
//! (`archive_YYYYMMDD`, `[day 00:00, next day 00:00)`). A pass makes sure
//! today's partition and the next [`AHEAD_DAYS`] exist (so an insert never
//! lands in the default partition while the worker runs), and drops a
//! partition whole once its last possible row is older than the longest
//! payload retention of the sources that keep payloads: dropping a table is
//! one catalog change however many rows it holds, where deleting them row
//! by row writes each and leaves them for vacuum (the guides' advice for
//! bulky append-only history; pg_partman's `retention`). Sources whose own
//! payload retention is shorter have their rows deleted in paced batches
//! (the extension's `src/maintenance/archive.rs`). Times are PostgreSQL timestamps:
//! microseconds since 2000-01-01 UTC.

use crate::calendar::{civil_from_days, DAY_US, PG_EPOCH_UNIX_S};

/// Days after today whose partitions exist ahead of time: the worker may
/// stop for this long before a delivery lands in the default partition.
pub const AHEAD_DAYS: i64 = 3;

/// The prefix of every day partition's name.
const PREFIX: &str = "archive_";

/// The day (days since 2000-01-01 UTC) that contains `t`.
pub fn day_of(t: i64) -> i64 {
    t.div_euclid(DAY_US)
}

/// The first microsecond of `day`.
pub fn day_start(day: i64) -> i64 {
    day.saturating_mul(DAY_US)
}

/// The partition of `day`: `archive_YYYYMMDD`.
pub fn partition_name(day: i64) -> String {
    let (y, m, d) = civil_from_days(day + PG_EPOCH_UNIX_S / 86_400);
    format!("{PREFIX}{y:04}{m:02}{d:02}")
}

/// The day of a partition called `name`, if it is one of the day
/// partitions this module names (`archive_default` and anything else: None).
pub fn partition_day(name: &str) -> Option<i64> {
    let digits = name.strip_prefix(PREFIX)?;
    if digits.len() != 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (y, m, d): (i64, u32, u32) = (digits[..4].parse().ok()?, digits[4..6].parse().ok()?, digits[6..].parse().ok()?);
    let day = days_from_civil(y, m, d)? - PG_EPOCH_UNIX_S / 86_400;
    (partition_name(day) == name).then_some(day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`, the inverse of [`civil_from_days`]); None for a
/// month or day out of range.
fn days_from_civil(y: i64, m: u32, d: u32) -> Option<i64> {
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// How long a source's archived deliveries are kept, in microseconds: its
/// `payload_retention`, never longer than the key's own retention (a key's
/// payload outliving the key would be an event nobody can answer for);
/// the key's retention when the source sets none.
pub fn payload_retention_us(payload_retention_us: Option<i64>, key_retention_us: i64) -> i64 {
    payload_retention_us.map_or(key_retention_us, |p| p.min(key_retention_us))
}

/// What one pass does to the partitions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Days whose partition to create, oldest first: today and the next
    /// [`AHEAD_DAYS`], and each day that has rows in the default partition
    /// and is not past retention, when missing.
    pub create: Vec<i64>,
    /// Days whose partition to drop, oldest first: every row they can hold
    /// arrived before `now - longest`.
    pub drop: Vec<i64>,
    /// Rows of the default partition that arrived before this time are past
    /// every retention: deleted rather than moved.
    pub default_cutoff: i64,
}

/// The plan at `now` for the day partitions that `exist`, the days that
/// have rows in the default partition (`in_default`), and the longest
/// payload retention of the sources that keep payloads (`longest_us`; 0
/// when none does: every partition before today's goes).
pub fn plan(now: i64, exist: &[i64], in_default: &[i64], longest_us: i64) -> Plan {
    let cutoff = now.saturating_sub(longest_us.max(0));
    // a day is past retention when its end is at or before the cutoff
    let past = |day: i64| day_start(day.saturating_add(1)) <= cutoff;
    let today = day_of(now);
    let mut create: Vec<i64> = (today..=today + AHEAD_DAYS)
        .chain(in_default.iter().copied().filter(|&d| !past(d)))
        .filter(|d| !exist.contains(d))
        .collect();
    create.sort_unstable();
    create.dedup();
    let mut drop: Vec<i64> = exist.iter().copied().filter(|&d| past(d)).collect();
    drop.sort_unstable();
    drop.dedup();
    Plan { create, drop, default_cutoff: cutoff }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_utc_dates() {
        assert_eq!(partition_name(0), "archive_20000101");
        assert_eq!(partition_name(-1), "archive_19991231");
        assert_eq!(partition_name(59), "archive_20000229");
        assert_eq!(partition_day("archive_20000229"), Some(59));
        assert_eq!(partition_day("archive_default"), None);
        assert_eq!(partition_day("archive_20000230"), None, "no 30 February");
        assert_eq!(partition_day("archive_2000010"), None);
        assert_eq!(partition_day("archive_2000+101"), None);
    }

    #[test]
    fn payload_retention_is_cut_to_the_keys() {
        assert_eq!(payload_retention_us(None, 10), 10);
        assert_eq!(payload_retention_us(Some(3), 10), 3);
        assert_eq!(payload_retention_us(Some(30), 10), 10);
    }

    #[test]
    fn a_pass_creates_ahead_and_drops_whole_days_past_the_longest_retention() {
        let now = day_start(100) + 3_600 * 1_000_000; // 01:00 on day 100
        let week = 7 * DAY_US;
        let exist: Vec<i64> = (90..=101).collect();
        let p = plan(now, &exist, &[], week);
        assert_eq!(p.create, vec![102, 103]);
        // day 92 ends at day_start(93) = now - 7 days - 1 hour: gone; day 93
        // ends after the cutoff: it may still hold a row 7 days old
        assert_eq!(p.drop, vec![90, 91, 92]);
        assert_eq!(p.default_cutoff, now - week);
    }

    #[test]
    fn rows_that_arrived_with_no_partition_get_their_day_unless_past_retention() {
        let now = day_start(100);
        let p = plan(now, &[100, 101, 102, 103], &[95, 99], 2 * DAY_US);
        assert_eq!(p.create, vec![99]);
        assert!(p.drop.is_empty());
    }

    #[test]
    fn without_a_source_keeping_payloads_only_today_and_ahead_stay() {
        let now = day_start(100) + 1;
        let p = plan(now, &[98, 99, 100], &[], 0);
        assert_eq!(p.drop, vec![98, 99]);
        assert_eq!(p.create, vec![101, 102, 103]);
    }

    proptest! {
        #[test]
        fn names_round_trip(day in -400_000i64..400_000) {
            prop_assert_eq!(partition_day(&partition_name(day)), Some(day));
        }

        /// Nothing a source may still read is dropped, today's partition
        /// always exists after the plan, and nothing is both made and dropped.
        #[test]
        fn plans_keep_what_retention_keeps(
            now in 0i64..(1_000 * DAY_US),
            exist in proptest::collection::vec(0i64..1_010, 0..40),
            in_default in proptest::collection::vec(0i64..1_010, 0..10),
            longest in 0i64..(400 * DAY_US),
        ) {
            let p = plan(now, &exist, &in_default, longest);
            for d in &p.drop {
                prop_assert!(day_start(d + 1) <= now - longest);
                prop_assert!(!p.create.contains(d));
            }
            let today = day_of(now);
            prop_assert!(exist.contains(&today) || p.create.contains(&today));
            prop_assert!(!p.drop.contains(&today));
        }
    }
}
