//! Conversions between SQL `timestamptz`/`interval` and the microsecond
//! integers the pure modules work with.

use crate::error::Error;
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys;

/// Microseconds in a day, the length `interval` arithmetic gives a day
/// when converting to an absolute duration.
const DAY_US: i64 = 86_400 * 1_000_000;

/// The database clock now (`clock_timestamp()`), microseconds since
/// 2000-01-01 UTC.
pub fn clock_now() -> i64 {
    // SAFETY: reads the system clock; no preconditions.
    unsafe { pg_sys::GetCurrentTimestamp() }
}

/// A `timestamptz` as microseconds. Infinite values are 22023.
pub fn micros(ts: TimestampWithTimeZone, what: &str) -> Result<i64, Error> {
    if ts.is_infinity() || ts.is_neg_infinity() {
        return Err(Error::invalid(format!("{what} must be a finite timestamp")));
    }
    Ok(pg_sys::TimestampTz::from(ts))
}

/// Microseconds as a `timestamptz`.
pub fn timestamptz(us: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(us).expect("finite timestamps convert")
}

/// A duration given as an `interval`, in microseconds. Months have no fixed
/// length, so an interval with a month part is 22023; a day counts 24 h.
pub fn duration_us(interval: Interval, what: &str) -> Result<i64, Error> {
    if interval.months() != 0 {
        return Err(Error::invalid(format!("{what} must not have a month or year part (use days, e.g. '30 days')")));
    }
    i64::from(interval.days())
        .checked_mul(DAY_US)
        .and_then(|days| days.checked_add(interval.micros()))
        .ok_or_else(|| Error::invalid(format!("{what} is out of range")))
}

/// Unix time in microseconds of a PostgreSQL timestamp (microseconds since
/// 2000-01-01); saturates at the ends of `i64`, far outside any timestamp.
pub fn unix_micros(us: i64) -> i64 {
    us.saturating_add(crate::calendar::PG_EPOCH_UNIX_S * 1_000_000)
}

/// Unix seconds (floor) of a PostgreSQL timestamp.
pub fn unix_seconds(us: i64) -> i64 {
    us.div_euclid(1_000_000) + crate::calendar::PG_EPOCH_UNIX_S
}
