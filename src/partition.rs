//! Time-partition arithmetic for `webhook_dedup.keys`: which ranges exist,
//! which to create, and their names. Pure Rust; the SQL that creates them
//! lives in [`crate::api::maintenance`].
//!
//! Times are PostgreSQL `timestamptz` values: microseconds since
//! 2000-01-01 00:00:00 UTC (the PostgreSQL epoch). Partition boundaries are
//! whole multiples of the partition interval counted from that epoch, so a
//! one-day interval gives UTC-midnight boundaries.

/// Microseconds in one day.
pub const DAY_US: i64 = 86_400 * 1_000_000;

/// Seconds between 1970-01-01 and 2000-01-01 (both UTC).
pub const PG_EPOCH_UNIX_S: i64 = 946_684_800;

/// A half-open range `[lo, hi)` of PostgreSQL timestamps (microseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Range {
    pub lo: i64,
    pub hi: i64,
}

/// The start of the aligned interval containing `t`.
pub fn align_down(t: i64, interval: i64) -> i64 {
    assert!(interval > 0, "partition interval must be positive");
    t.div_euclid(interval) * interval
}

/// The ranges to create so that `[align_down(now), +(premake + 1) intervals)`
/// is covered, given the ranges that already exist (in any order, possibly
/// created with another interval). New ranges are aligned to `interval`, never
/// overlap an existing range, and are returned in ascending order.
pub fn ranges_to_create(existing: &[Range], now: i64, interval: i64, premake: i64) -> Vec<Range> {
    let mut existing = existing.to_vec();
    existing.sort();
    let start = align_down(now, interval);
    let end = start.saturating_add(interval.saturating_mul(premake.saturating_add(1)));
    let mut created = Vec::new();
    let mut cursor = start;
    while cursor < end {
        if let Some(covering) = existing.iter().find(|r| r.lo <= cursor && cursor < r.hi) {
            cursor = covering.hi;
            continue;
        }
        let next_aligned = align_down(cursor, interval) + interval;
        let next_existing = existing.iter().map(|r| r.lo).filter(|&lo| lo > cursor).min();
        let hi = next_existing.map_or(next_aligned, |lo| lo.min(next_aligned));
        created.push(Range { lo: cursor, hi });
        cursor = hi;
    }
    created
}

/// The partitions past retention: those whose every row was stored before
/// `now - min_retention_us` (upper bound at or before it), oldest first.
/// `min_retention_us` is the shortest retention of any source (and of
/// `webhook_dedup.retention`): a partition younger than that can hold no
/// key that may go, so it is not even looked at.
pub fn past_retention(existing: &[Range], now: i64, min_retention_us: i64) -> Vec<Range> {
    let cutoff = now.saturating_sub(min_retention_us);
    let mut old: Vec<Range> = existing.iter().copied().filter(|r| r.hi <= cutoff).collect();
    old.sort();
    old
}

/// Whether to drop a partition past retention now, given its `rows` and
/// how many of them are completed keys still within their source's
/// retention (`retained`). Dropping means carrying every key that must live
/// on into the current partition first, one row move each. Keys that are
/// not completed (pending, processing, failed, unknown_outcome,
/// dead_lettered) never expire by themselves, so they are carried whenever
/// the partition goes and do not count here. Retained completed keys do
/// expire: the partition is dropped once at least half of its rows go with
/// it (`retained <= rows / 2`), so carrying never moves more rows than the
/// drop frees; until then it waits for more of them to expire. With one
/// retention for every source nothing is retained but keys touched late (a
/// duplicate delivery long after the first), and every partition goes at
/// its first look.
pub fn worth_dropping(rows: i64, retained: i64) -> bool {
    retained.saturating_mul(2) <= rows
}

/// The table name of the partition starting at `lo`: `keys_pYYYYMMDD_HHMM`
/// (UTC). Names sort in time order, and stay under 63 bytes.
pub fn partition_name(lo: i64) -> String {
    let secs = lo.div_euclid(1_000_000) + PG_EPOCH_UNIX_S;
    let days = secs.div_euclid(86_400);
    let second_of_day = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("keys_p{y:04}{m:02}{d:02}_{:02}{:02}", second_of_day / 3_600, (second_of_day % 3_600) / 60)
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
/// Howard Hinnant's `civil_from_days`, <https://howardhinnant.github.io/date_algorithms.html>.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
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

    const HOUR: i64 = 3_600 * 1_000_000;

    /// 2026-11-30 05:13:55 UTC as a PostgreSQL timestamp.
    fn sample_now() -> i64 {
        (1_796_015_635 - PG_EPOCH_UNIX_S) * 1_000_000
    }

    #[test]
    fn names_are_utc_dates() {
        assert_eq!(partition_name(0), "keys_p20000101_0000");
        assert_eq!(partition_name(align_down(sample_now(), DAY_US)), "keys_p20261130_0000");
        assert_eq!(partition_name(align_down(sample_now(), HOUR)), "keys_p20261130_0500");
        assert_eq!(partition_name(-DAY_US), "keys_p19991231_0000");
        // a leap day
        let feb29 = (1_709_164_800 - PG_EPOCH_UNIX_S) * 1_000_000;
        assert_eq!(partition_name(feb29), "keys_p20240229_0000");
    }

    #[test]
    fn align_down_floors_negative_times() {
        assert_eq!(align_down(-1, DAY_US), -DAY_US);
        assert_eq!(align_down(DAY_US, DAY_US), DAY_US);
        assert_eq!(align_down(DAY_US + 1, DAY_US), DAY_US);
    }

    #[test]
    fn premake_from_nothing_covers_today_and_ahead() {
        let now = sample_now();
        let got = ranges_to_create(&[], now, DAY_US, 2);
        let today = align_down(now, DAY_US);
        assert_eq!(
            got,
            vec![
                Range { lo: today, hi: today + DAY_US },
                Range { lo: today + DAY_US, hi: today + 2 * DAY_US },
                Range { lo: today + 2 * DAY_US, hi: today + 3 * DAY_US },
            ]
        );
    }

    #[test]
    fn premake_is_idempotent() {
        let now = sample_now();
        let first = ranges_to_create(&[], now, DAY_US, 3);
        assert!(ranges_to_create(&first, now, DAY_US, 3).is_empty());
        // a day later one more is due
        let later = ranges_to_create(&first, now + DAY_US, DAY_US, 3);
        assert_eq!(later.len(), 1);
        assert_eq!(later[0].lo, first.last().unwrap().hi);
    }

    #[test]
    fn never_overlaps_ranges_made_with_another_interval() {
        let now = sample_now();
        let today = align_down(now, DAY_US);
        // an existing 7-day range starting today, then the interval shrinks to 1 day
        let week = Range { lo: today, hi: today + 7 * DAY_US };
        let got = ranges_to_create(&[week], now, DAY_US, 9);
        assert_eq!(got.first().unwrap().lo, week.hi);
        assert_eq!(got.len(), 3);
        // an existing range starting mid-interval truncates the new one before it
        let odd = Range { lo: today + 5 * HOUR, hi: today + DAY_US };
        let got = ranges_to_create(&[odd], now - 6 * HOUR, DAY_US, 0);
        assert_eq!(got, vec![Range { lo: today - DAY_US, hi: today }]);
        let got = ranges_to_create(&[odd], today, DAY_US, 0);
        assert_eq!(got, vec![Range { lo: today, hi: today + 5 * HOUR }]);
    }

    #[test]
    fn past_retention_takes_whole_partitions_older_than_the_shortest_retention() {
        let now = sample_now();
        let today = align_down(now, DAY_US);
        let days: Vec<Range> =
            (-40..3).map(|d| Range { lo: today + d * DAY_US, hi: today + (d + 1) * DAY_US }).rev().collect();
        let old = past_retention(&days, now, 30 * DAY_US);
        // the partition holding now - 30 days still has rows younger than that
        let cutoff = now - 30 * DAY_US;
        assert!(old.iter().all(|r| r.hi <= cutoff));
        assert_eq!(old.len(), 10, "days -40..-31 go, day -30 straddles the cutoff");
        assert!(old.windows(2).all(|w| w[0].lo < w[1].lo), "oldest first");
        // a boundary exactly at the cutoff: that partition goes
        let exact = [Range { lo: cutoff - DAY_US, hi: cutoff }];
        assert_eq!(past_retention(&exact, now, 30 * DAY_US), exact.to_vec());
        assert!(past_retention(&days, now, 50 * DAY_US).is_empty());
    }

    #[test]
    fn a_partition_goes_when_at_most_half_of_it_is_retained() {
        assert!(worth_dropping(0, 0), "an empty partition goes");
        assert!(worth_dropping(10, 0));
        assert!(worth_dropping(10, 5));
        assert!(!worth_dropping(10, 6));
        assert!(!worth_dropping(1, 1));
        assert!(worth_dropping(i64::MAX, i64::MAX / 2), "no overflow");
    }

    #[test]
    fn created_ranges_are_contiguous_and_disjoint() {
        for interval in [HOUR, DAY_US, 7 * DAY_US] {
            for premake in 0..5 {
                let got = ranges_to_create(&[], sample_now(), interval, premake);
                assert_eq!(got.len() as i64, premake + 1);
                for pair in got.windows(2) {
                    assert_eq!(pair[0].hi, pair[1].lo);
                }
                assert!(got[0].lo <= sample_now() && sample_now() < got[0].hi);
            }
        }
    }
}

/// A PostgreSQL timestamp as an unambiguous UTC literal,
/// `YYYY-MM-DD HH:MM:SS+00` (whole seconds; partition bounds are).
pub fn utc_literal(us: i64) -> String {
    let secs = us.div_euclid(1_000_000) + PG_EPOCH_UNIX_S;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}+00", s / 3_600, (s % 3_600) / 60, s % 60)
}

#[cfg(test)]
mod literal_tests {
    use super::*;

    #[test]
    fn utc_literals() {
        assert_eq!(utc_literal(0), "2000-01-01 00:00:00+00");
        assert_eq!(utc_literal(DAY_US + 3_723_000_000), "2000-01-02 01:02:03+00");
        assert_eq!(utc_literal(-1_000_000), "1999-12-31 23:59:59+00");
    }
}
