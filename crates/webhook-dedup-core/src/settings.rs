//! The `webhook_dedup.*` settings a call reads: each one's name, default,
//! bounds and unit, the one source for both editions (the native
//! extension's `src/guc.rs` defines them as PostgreSQL settings from these;
//! the SQL edition's generator writes them as rows its helpers read,
//! `crates/webhook-dedup-sql-edition/src/data.rs`).

use crate::claim::MAX_LEASE_US;

/// One integer setting. `seconds`: its unit is the second (PostgreSQL's
/// `GUC_UNIT_S`: a value may be written with a unit, `5min`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub name: &'static str,
    pub default: i32,
    pub min: i32,
    pub max: i32,
    pub seconds: bool,
}

/// The longest lease a setting may give, seconds: 365 days
/// ([`MAX_LEASE_US`]), so a setting cannot give a lease no argument may.
pub const MAX_LEASE_S: i32 = (MAX_LEASE_US / 1_000_000) as i32;

/// The longest retention, seconds: 3650 days, the bound of
/// `webhook_dedup.sources.retention` too.
pub const MAX_RETENTION_S: i32 = 3650 * 86_400;

/// How long a completed key (and other history) is kept after its last
/// activity, seconds, unless `webhook_dedup.sources.retention` says
/// otherwise. Source of the default: issue "background worker" (30 days),
/// ten times Stripe's three-day retry horizon.
pub const RETENTION: Setting =
    Setting { name: "webhook_dedup.retention", default: 30 * 86_400, min: 60, max: MAX_RETENTION_S, seconds: true };

/// Rows one maintenance step handles per pass (expired leases swept,
/// expired keys deleted, history rows pruned), so that a backlog never
/// holds locks for long.
pub const BATCH_SIZE: Setting =
    Setting { name: "webhook_dedup.batch_size", default: 1_000, min: 1, max: 1_000_000, seconds: false };

/// Seconds after a key's last recorded activity during which a duplicate
/// of it (a delivery answered from the stored state: `duplicate`,
/// `in_progress`, `retry_later`, `unknown_outcome`, `dead_lettered`) is
/// answered with a read alone: no write, no transaction id, no WAL, no
/// commit flush (a retry storm arrives when the database is already under
/// stress, and the plain `INSERT ... ON CONFLICT DO NOTHING` writes
/// nothing for a duplicate). The per-source counters count every delivery;
/// the key's `deliveries` and `last_seen_at` record at most one such
/// duplicate per interval. 0: every duplicate is recorded on its key.
pub const DUPLICATE_RECORD_INTERVAL: Setting =
    Setting { name: "webhook_dedup.duplicate_record_interval", default: 60, min: 0, max: 86_400, seconds: true };

/// Lease given by `webhook_claim` when the call passes none, seconds.
/// Source of the default: issue "claim state machine" (5 minutes), long
/// enough for a slow handler, short enough that a crashed one is retried
/// within a provider's first retry.
pub const DEFAULT_LEASE: Setting =
    Setting { name: "webhook_dedup.default_lease", default: 300, min: 1, max: MAX_LEASE_S, seconds: true };

/// Processing attempts after which `webhook_fail` dead-letters a key,
/// unless `webhook_dedup.sources` sets another number for its source.
pub const MAX_ATTEMPTS: Setting =
    Setting { name: "webhook_dedup.max_attempts", default: 10, min: 1, max: i32::MAX, seconds: false };

/// Every setting above, for the SQL edition's generator.
pub const ALL: [Setting; 5] = [RETENTION, BATCH_SIZE, DUPLICATE_RECORD_INTERVAL, DEFAULT_LEASE, MAX_ATTEMPTS];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_within_its_bounds_and_names_are_distinct() {
        for s in ALL {
            assert!(s.min <= s.default && s.default <= s.max, "{s:?}");
            assert!(s.name.starts_with("webhook_dedup."), "{s:?}");
        }
        let mut names: Vec<_> = ALL.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        assert_eq!(i64::from(MAX_LEASE_S) * 1_000_000, MAX_LEASE_US);
    }
}
