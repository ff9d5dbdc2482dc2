//! `webhook_dedup.run_maintenance()`: the work the background worker
//! schedules, callable by hand or from pg_cron. It creates partitions of
//! `webhook_dedup.keys` ahead of time and flushes the metrics counters.
//! (Lease sweeping and dropping partitions past retention come with the
//! worker issue; see `docs/design.md`.)

use crate::partition::{self, Range};
use crate::spi::{self, Snap, Statement};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::quote_identifier;

/// Lock id (within this extension's advisory-lock class) that keeps two
/// maintenance runs from overlapping.
const MAINTENANCE_LOCK_ID: u32 = 1;

static PARTITIONS: Statement = Statement::new(
    c"SELECT b.lo, b.hi
        FROM pg_catalog.pg_inherits i
        JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
        CROSS JOIN LATERAL pg_catalog.regexp_match(
               pg_catalog.pg_get_expr(c.relpartbound, c.oid),
               '^FOR VALUES FROM \\(''([^'']+)''\\) TO \\(''([^'']+)''\\)$') AS m(parts)
        CROSS JOIN LATERAL (SELECT m.parts[1]::pg_catalog.timestamptz AS lo,
                                   m.parts[2]::pg_catalog.timestamptz AS hi) AS b
       WHERE i.inhparent OPERATOR(pg_catalog.=) 'webhook_dedup.keys'::pg_catalog.regclass
         AND m.parts IS NOT NULL",
    &[],
);

fn existing_ranges() -> Vec<Range> {
    let rows = spi::execute(&PARTITIONS, &[], Snap::Statement);
    (0..rows.len())
        .map(|i| {
            let lo: TimestampWithTimeZone = rows.get(i, 1).expect("lower bound");
            let hi: TimestampWithTimeZone = rows.get(i, 2).expect("upper bound");
            Range {
                lo: lo.into(),
                hi: hi.into(),
            }
        })
        .collect()
}

/// Create the partitions due now; returns how many were created.
fn create_partitions(now: i64) -> i32 {
    let due = partition::ranges_to_create(
        &existing_ranges(),
        now,
        crate::guc::partition_interval_us(),
        crate::guc::premake(),
    );
    for range in &due {
        let name = partition::partition_name(range.lo);
        let table = format!("webhook_dedup.{}", quote_identifier(&name));
        // Bounds are integers this module computed, rendered as UTC literals;
        // names are quoted identifiers. DDL takes no parameters.
        let ddl = format!(
            "CREATE TABLE {table} PARTITION OF webhook_dedup.keys
               FOR VALUES FROM ('{}') TO ('{}') WITH (fillfactor = 90);
             CREATE UNIQUE INDEX {} ON {table} (source, idem_key);
             COMMENT ON TABLE {table} IS 'Keys first stored in [{}, {}); created by webhook_dedup.run_maintenance().'",
            partition::utc_literal(range.lo),
            partition::utc_literal(range.hi),
            quote_identifier(format!("{name}_key")),
            partition::utc_literal(range.lo),
            partition::utc_literal(range.hi),
        );
        Spi::run(&ddl).unwrap_or_else(|e| pgrx::error!("webhook_dedup: creating {table}: {e}"));
    }
    due.len() as i32
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
            locktag_field4: crate::api::claim::LOCK_CLASS + 1,
            locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
            locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
        };
        pg_sys::LockAcquire(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, false, true)
            != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
    }
}

/// SQL functions in schema `webhook_dedup`.
#[pg_schema]
mod webhook_dedup {
    use super::{create_partitions, try_lock_maintenance};
    use crate::spi;
    use pgrx::prelude::*;

    /// One maintenance pass. Returns `ran` = false (and does nothing) when
    /// another pass holds the maintenance lock; otherwise the number of
    /// partitions created and of metrics entries flushed.
    #[pg_extern(volatile, parallel_unsafe)]
    fn run_maintenance() -> TableIterator<
        'static,
        (
            name!(ran, bool),
            name!(partitions_created, i32),
            name!(metrics_flushed, i64),
        ),
    > {
        if !try_lock_maintenance() {
            return TableIterator::once((false, 0, 0));
        }
        let created = spi::connected(|| create_partitions(crate::time::clock_now()));
        let flushed = crate::metrics::flush();
        TableIterator::once((true, created, flushed))
    }
}
