//! The partitions of `webhook_dedup.keys`: creating them ahead of time and
//! dropping them past retention (the argument is in `docs/design.md`,
//! "Uniqueness across partitions, retention"). The arithmetic is in
//! [`crate::partition`]; this file runs the DDL.
//!
//! Locks, in the order taken, and why no claim waits long for them:
//! - creating: the new table is built standalone, then attached
//!   (`SHARE UPDATE EXCLUSIVE` on the parent, `ACCESS EXCLUSIVE` on the
//!   default partition, which claims read);
//! - dropping: `SHARE` on the partition (only its writers wait: a duplicate
//!   of an old key, `webhook_forget`), then the locks of the keys to carry
//!   (tried, never waited for), then `ACCESS EXCLUSIVE` on the parent, which
//!   `DROP TABLE` of a partition needs in any case (PostgreSQL's
//!   `heap_drop_with_catalog`).
//!
//! Every wait is bounded by the pass's `lock_timeout` (500 ms, and below
//! `deadlock_timeout`: [`super::lock_timeout_ms`], so in a lock cycle with a
//! claim it is maintenance that gives way), and a pass drops at most one partition: locks last until
//! the pass commits, so a second drop would keep claims out for longer.

use super::{Retention, Step};
use crate::partition::{self, Range};
use crate::spi::{self, arg, Conn, Snap, Statement};
use crate::time::{clock_now, timestamptz};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys::{self, INT8OID, INTERVALOID, TEXTARRAYOID, TIMESTAMPTZOID};
use pgrx::spi::quote_identifier;

/// Partition names and bounds as `pg_get_expr` prints them: with the
/// settings of [`super::with_fixed_formats`] they are ISO timestamps in UTC.
static PARTITIONS: Statement = Statement::new(crate::sql_statement!("maintenance_partitions.sql"), &[]);

/// Keys stored in the default partition within a range, in lock order.
static STRAYS: Statement =
    Statement::new(crate::sql_statement!("maintenance_strays.sql"), &[TIMESTAMPTZOID, TIMESTAMPTZOID]);

static ROWS: Statement = Statement::new(
    crate::sql_statement!("maintenance_partition_rows.sql"),
    &[TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INTERVALOID],
);

static CARRY_CANDIDATES: Statement = Statement::new(
    crate::sql_statement!("maintenance_carry_candidates.sql"),
    &[TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INTERVALOID, INT8OID],
);

static CARRY_FORWARD: Statement = Statement::new(
    crate::sql_statement!("maintenance_carry_forward.sql"),
    &[TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID],
);

/// A partition of `webhook_dedup.keys` (not the default one).
#[derive(Debug, Clone)]
struct Partition {
    /// Schema-qualified and quoted, ready for DDL.
    table: String,
    range: Range,
}

fn existing(conn: &Conn<'_>) -> Vec<Partition> {
    // The latest snapshot: a pass that committed partitions after this
    // transaction's snapshot (REPEATABLE READ) must still be seen.
    let rows = conn.execute(&PARTITIONS, &[], Snap::Latest);
    (0..rows.len())
        .map(|i| {
            let lo: TimestampWithTimeZone = rows.get(i, 1).expect("lower bound");
            let hi: TimestampWithTimeZone = rows.get(i, 2).expect("upper bound");
            Partition { table: rows.get(i, 3).expect("name"), range: Range { lo: lo.into(), hi: hi.into() } }
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
    let bounds = [arg(timestamptz(range.lo)), arg(timestamptz(range.hi))];
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
/// ordinary table that maintenance may later drop, and `DROP EXTENSION`
/// still removes them with their parent.
fn outside_extension_script<R>(body: impl FnOnce() -> R + std::panic::UnwindSafe) -> R {
    // SAFETY: a backend-global flag of this backend only; restored on every
    // path out, including an ERROR unwinding through `body`.
    let saved = unsafe { pg_sys::creating_extension };
    unsafe { pg_sys::creating_extension = false };
    pgrx::PgTryBuilder::new(body).finally(move || unsafe { pg_sys::creating_extension = saved }).execute()
}

/// Create the partitions due at `now` (`webhook_dedup.premake` ahead).
pub(super) fn create(now: i64, step: &mut Step) {
    let created = outside_extension_script(|| {
        spi::connected(|conn| {
            let ranges: Vec<Range> = existing(conn).iter().map(|p| p.range).collect();
            let due =
                partition::ranges_to_create(&ranges, now, crate::guc::partition_interval_us(), crate::guc::premake());
            for range in &due {
                create_partition(conn, *range);
            }
            due.len() as i32
        })
    });
    step.partitions_created += created;
}

/// What happened to the partition a pass looked at.
enum Dropped {
    /// Dropped, after carrying this many keys forward.
    Yes { carried: i64 },
    /// Kept for now: too many of its completed keys are still retained.
    Waits,
    /// Kept for now: this many keys were carried, more remain (over the
    /// batch, or held by a transaction right now); the next pass goes on.
    Partly { carried: i64 },
}

/// Drop (at most) one partition past retention: the oldest that is worth
/// dropping ([`partition::worth_dropping`]). Keys that must live on are
/// carried forward into the current partition first.
pub(super) fn drop_one(now: i64, batch: i64, retention: &Retention, step: &mut Step) {
    spi::connected(|conn| {
        let candidates: Vec<Partition> = {
            let all = existing(conn);
            let old =
                partition::past_retention(&all.iter().map(|p| p.range).collect::<Vec<_>>(), now, retention.shortest_us);
            old.iter().filter_map(|r| all.iter().find(|p| p.range == *r).cloned()).collect()
        };
        let default = Interval::from_micros(retention.default_us);
        for (i, candidate) in candidates.iter().enumerate() {
            match drop_partition(conn, candidate, now, batch, default) {
                Dropped::Yes { carried } => {
                    step.partitions_dropped += 1;
                    step.keys_carried_forward += carried;
                    pgrx::log!(
                        "webhook_dedup: dropped partition {} past retention ({carried} keys carried forward)",
                        candidate.table
                    );
                    // One drop per pass; the worker runs the next pass at once.
                    step.more |= i + 1 < candidates.len();
                    return;
                }
                Dropped::Partly { carried } => {
                    step.keys_carried_forward += carried;
                    step.more = true;
                    return;
                }
                Dropped::Waits => {}
            }
        }
    });
}

fn drop_partition(conn: &Conn<'_>, p: &Partition, now: i64, batch: i64, default: Interval) -> Dropped {
    let (lo, hi) = (arg(timestamptz(p.range.lo)), arg(timestamptz(p.range.hi)));
    // Counted without a lock: only whether to try. Under the SHARE lock
    // below, the rows that must live on are read again and the answer holds.
    let counts = conn.execute(&ROWS, &[lo, hi, arg(timestamptz(now)), arg(default)], Snap::Latest);
    let total: i64 = counts.get(0, 1).unwrap_or(0);
    let retained: i64 = counts.get(0, 2).unwrap_or(0);
    if !partition::worth_dropping(total, retained) {
        return Dropped::Waits;
    }
    let table = &p.table;
    // Writers of this partition (a duplicate delivery of one of its keys,
    // webhook_forget) wait from here to the end of the pass; readers do not.
    run(&format!("LOCK TABLE {table} IN SHARE MODE"), &format!("locking {table}"));
    // From here a claim may wait for this pass (a writer of the partition,
    // or a claim of a key carried below). Until the parent's lock is held,
    // this pass may itself wait for such a claim: the whole window gets one
    // lock-timeout budget, so the pass gives way before any waiting claim's
    // deadlock check could run (the argument is in docs/design.md).
    let window_start = clock_now();
    let keep = conn.execute(
        &CARRY_CANDIDATES,
        &[lo, hi, arg(timestamptz(now)), arg(default), arg(batch.saturating_add(1))],
        Snap::Statement,
    );
    let over_batch = keep.len() as i64 > batch;
    let mut locked: (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let mut skipped = false;
    for i in 0..keep.len().min(batch as usize) {
        let source: String = keep.get(i, 1).expect("source");
        let idem_key: String = keep.get(i, 2).expect("idem_key");
        // A key whose lock is held is being claimed or worked on right now;
        // moving it under that transaction would make its next write fail.
        if crate::api::protocol::try_lock_key(&source, &idem_key) {
            locked.0.push(source);
            locked.1.push(idem_key);
        } else {
            skipped = true;
        }
    }
    let carried = if locked.0.is_empty() {
        0
    } else {
        let moved = conn.execute(
            &CARRY_FORWARD,
            &[lo, hi, arg(timestamptz(clock_now())), arg(locked.0), arg(locked.1)],
            Snap::Statement,
        );
        moved.len() as i64
    };
    if over_batch || skipped {
        return Dropped::Partly { carried };
    }
    let left_ms = i64::from(super::lock_timeout_ms()) - (clock_now() - window_start) / 1_000;
    if left_ms < 1 {
        return Dropped::Partly { carried };
    }
    crate::subxact::with_settings(&[("lock_timeout", &format!("{left_ms}ms"))], || {
        run("LOCK TABLE ONLY webhook_dedup.keys IN ACCESS EXCLUSIVE MODE", "locking webhook_dedup.keys")
    });
    run(&format!("DROP TABLE {table}"), &format!("dropping {table}"));
    Dropped::Yes { carried }
}
