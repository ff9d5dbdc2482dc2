//! `webhook_dedup.run_maintenance()`: the work the background worker
//! schedules, callable by hand or from pg_cron. One pass creates the
//! partitions of `webhook_dedup.keys` that are due (moving any keys that
//! landed in the default partition into them) and flushes the metrics
//! counters. Lease sweeping and dropping partitions past retention come
//! with the worker issue; see `docs/design.md`.
//!
//! Partition work runs in a subtransaction with a short `lock_timeout`:
//! creating a partition briefly needs locks that claims also take, and a
//! pass that cannot get them within the timeout gives up (a WARNING) and
//! leaves the partitions to the next pass, which `webhook_dedup.premake`
//! makes harmless. The metrics flush runs whatever happened before.

use crate::partition::{self, Range};
use crate::spi::{self, arg, Conn, Snap, Statement};
use crate::subxact;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::spi::quote_identifier;

/// Lock id (within this extension's advisory-lock class) that keeps two
/// maintenance runs from overlapping.
const MAINTENANCE_LOCK_ID: u32 = 1;

/// How long a pass waits for a lock before leaving the partition work to
/// the next pass. Below `deadlock_timeout` (1 s by default), so in a lock
/// cycle with a claim it is maintenance that gives way.
const LOCK_TIMEOUT: &str = "500ms";

/// Partition bounds as `pg_get_expr` prints them: with the settings of
/// [`with_fixed_formats`] they are ISO timestamps in UTC.
static PARTITIONS: Statement = Statement::new(crate::sql_statement!("maintenance_partitions.sql"), &[]);

/// Keys stored in the default partition within a range, in lock order.
static STRAYS: Statement =
    Statement::new(crate::sql_statement!("maintenance_strays.sql"), &[pg_sys::TIMESTAMPTZOID, pg_sys::TIMESTAMPTZOID]);

/// Run `body` with bound formats that do not depend on the session's
/// DateStyle or TimeZone, and with the pass's lock timeout.
fn with_fixed_formats<R>(body: impl FnOnce() -> R) -> R {
    subxact::with_settings(&[("DateStyle", "ISO, YMD"), ("TimeZone", "UTC"), ("lock_timeout", LOCK_TIMEOUT)], body)
}

fn existing_ranges(conn: &Conn<'_>) -> Vec<Range> {
    // The latest snapshot: a pass that committed partitions after this
    // transaction's snapshot (REPEATABLE READ) must still be seen.
    let rows = conn.execute(&PARTITIONS, &[], Snap::Latest);
    (0..rows.len())
        .map(|i| {
            let lo: TimestampWithTimeZone = rows.get(i, 1).expect("lower bound");
            let hi: TimestampWithTimeZone = rows.get(i, 2).expect("upper bound");
            Range { lo: lo.into(), hi: hi.into() }
        })
        .collect()
}

fn run(sql: &str, what: &str) {
    pgrx::spi::Spi::run(sql).unwrap_or_else(|e| pgrx::error!("webhook_dedup: {what}: {e}"));
}

/// Create the partition for `range`. Keys that already landed in the
/// default partition for this range are moved into it under their key
/// locks, so a concurrent claim of such a key waits and then finds it in
/// its new place; the move is one transaction, so nobody sees a key twice
/// or not at all.
fn create_partition(conn: &Conn<'_>, range: Range) {
    let name = partition::partition_name(range.lo);
    let table = format!("webhook_dedup.{}", quote_identifier(&name));
    let (lo, hi) = (partition::utc_literal(range.lo), partition::utc_literal(range.hi));
    // Bounds are integers this module computed, rendered as UTC literals;
    // names are quoted identifiers. DDL takes no parameters.
    run(
        &format!(
            "CREATE TABLE {table} (LIKE webhook_dedup.keys INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
                 CONSTRAINT {range_check} CHECK (partition_at >= '{lo}' AND partition_at < '{hi}'))
               WITH (fillfactor = 90);
             CREATE UNIQUE INDEX {index} ON {table} (source, idem_key);
             COMMENT ON TABLE {table} IS 'Keys stored in [{lo}, {hi}); created by webhook_dedup.run_maintenance().'",
            range_check = quote_identifier(format!("{name}_range")),
            index = quote_identifier(format!("{name}_key")),
        ),
        &format!("creating {table}"),
    );
    let bounds = [arg(crate::time::timestamptz(range.lo)), arg(crate::time::timestamptz(range.hi))];
    let strays = conn.execute(&STRAYS, &bounds, Snap::Latest);
    if !strays.is_empty() {
        let (sources, idem_keys): (Vec<String>, Vec<String>) = (0..strays.len())
            .map(|i| (strays.get::<String>(i, 1).expect("source"), strays.get::<String>(i, 2).expect("idem_key")))
            .unzip();
        for (source, idem_key) in sources.iter().zip(&idem_keys) {
            crate::api::protocol::lock_key(source, idem_key);
        }
        // Only the keys locked above move; a key stored in the range since
        // then keeps the attach below from succeeding, and the next pass
        // moves it (under its lock).
        pgrx::spi::Spi::run_with_args(
            &format!(
                "WITH moved AS (DELETE FROM webhook_dedup.keys_default
                                 WHERE partition_at >= '{lo}' AND partition_at < '{hi}'
                                   AND (source, idem_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                                 RETURNING *)
                 INSERT INTO {table} SELECT * FROM moved"
            ),
            &[sources.into(), idem_keys.into()],
        )
        .unwrap_or_else(|e| {
            pgrx::error!("webhook_dedup: moving keys from webhook_dedup.keys_default into {table}: {e}")
        });
        pgrx::log!("webhook_dedup: moved {} keys from the default partition into {table}", strays.len());
    }
    run(
        &format!("ALTER TABLE webhook_dedup.keys ATTACH PARTITION {table} FOR VALUES FROM ('{lo}') TO ('{hi}')"),
        &format!("attaching {table}"),
    );
}

/// Run `body` with `creating_extension` off, so the tables it creates are
/// not members of the extension even when the pass runs inside
/// `CREATE EXTENSION` (the first partitions): every partition is then an
/// ordinary table that maintenance may later detach and drop, and
/// `DROP EXTENSION` still removes them with their parent.
fn outside_extension_script<R>(body: impl FnOnce() -> R + std::panic::UnwindSafe) -> R {
    // SAFETY: a backend-global flag of this backend only; restored on every
    // path out, including an ERROR unwinding through `body`.
    let saved = unsafe { pg_sys::creating_extension };
    unsafe { pg_sys::creating_extension = false };
    pgrx::PgTryBuilder::new(body).finally(move || unsafe { pg_sys::creating_extension = saved }).execute()
}

/// Create the partitions due now; returns how many were created.
fn create_partitions(now: i64) -> i32 {
    outside_extension_script(|| {
        with_fixed_formats(|| {
            spi::connected(|conn| {
                let due = partition::ranges_to_create(
                    &existing_ranges(conn),
                    now,
                    crate::guc::partition_interval_us(),
                    crate::guc::premake(),
                );
                for range in &due {
                    create_partition(conn, *range);
                }
                due.len() as i32
            })
        })
    })
}

/// Try to take the maintenance lock for this transaction.
fn try_lock_maintenance() -> bool {
    // SAFETY: tag initialised as in SET_LOCKTAG_ADVISORY; dontWait = true
    // makes LockAcquire return LOCKACQUIRE_NOT_AVAIL instead of waiting.
    unsafe {
        let tag = pg_sys::LOCKTAG {
            locktag_field1: pg_sys::MyDatabaseId.to_u32(),
            locktag_field2: 0,
            locktag_field3: MAINTENANCE_LOCK_ID,
            locktag_field4: crate::api::protocol::LOCK_CLASS + 1,
            locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
            locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
        };
        pg_sys::LockAcquire(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, false, true)
            != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
    }
}

/// SQL functions in schema `webhook_dedup`.
#[pgrx::pg_schema]
mod webhook_dedup {
    use super::{create_partitions, try_lock_maintenance};
    use crate::subxact;
    use pgrx::prelude::*;

    /// One maintenance pass. `ran` is false (and nothing is done) when
    /// another pass holds the maintenance lock. `partitions_created` is
    /// NULL when the partition work failed (the WARNING says why; the next
    /// pass retries it); `metrics_flushed` counts the entries flushed.
    #[pg_extern(volatile, parallel_unsafe)]
    fn run_maintenance(
    ) -> TableIterator<'static, (name!(ran, bool), name!(partitions_created, Option<i32>), name!(metrics_flushed, i64))>
    {
        if !try_lock_maintenance() {
            return TableIterator::once((false, Some(0), 0));
        }
        let now = crate::time::clock_now();
        let created = match subxact::attempt(|| create_partitions(now)) {
            Ok(created) => Some(created),
            Err(failure) => {
                pgrx::warning!(
                    "webhook_dedup: creating partitions failed, the next maintenance pass retries: {} ({:?})",
                    failure.message,
                    failure.sqlstate
                );
                None
            }
        };
        let flushed = crate::metrics::flush();
        TableIterator::once((true, created, flushed))
    }
}
