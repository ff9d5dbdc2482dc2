//! The partitions of `webhook_dedup.keys`: creating them ahead of time and
//! dropping them past retention (the argument is in `docs/design.md`,
//! "Uniqueness across partitions, and retention"). The arithmetic is in
//! [`crate::partition`]; this file runs the DDL.
//!
//! Every lock wait is bounded by the pass's lock timeout
//! ([`super::lock_timeout_ms`]: 500 ms, and at most half of
//! `deadlock_timeout`). Where a claim may start waiting for this step while
//! the step may still wait for that claim, the whole window, from the first
//! lock the step takes to the last one it waits for, shares that one budget
//! (see [`Window`]): the step gives way (rolls back, releasing its locks)
//! before any waiting claim's deadlock check could run, so it is never the
//! claim that PostgreSQL aborts.

use super::{Retention, Step};
use crate::api::protocol::try_lock_key;
use crate::partition::{self, Range};
use crate::spi::{self, arg, Conn, Snap, Statement};
use crate::subxact;
use crate::time::{clock_now, timestamptz};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys::{self, INT8OID, INTERVALOID, TEXTARRAYOID, TIMESTAMPTZOID};
use pgrx::spi::quote_identifier;
use std::cell::RefCell;
use std::collections::HashMap;

/// Partition names and bounds as `pg_get_expr` prints them: with the
/// settings of [`super::with_fixed_formats`] they are ISO timestamps in UTC.
static PARTITIONS: Statement = Statement::new(crate::sql_statement!("maintenance_partitions.sql"), &[]);

/// Keys stored in the default partition within a range, in lock order.
static STRAYS: Statement =
    Statement::new(crate::sql_statement!("maintenance_strays.sql"), &[TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID]);

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

static BLOCKED_BY_ME: Statement = Statement::new(crate::sql_statement!("maintenance_blocked_by_me.sql"), &[]);

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

/// The time a step may spend between taking a lock a claim may come to
/// wait for and getting the last lock it waits for itself.
struct Window {
    start: i64,
}

impl Window {
    /// Opens before the first such lock is requested: a claim that queues
    /// behind that request already waits for this step.
    fn open() -> Window {
        Window { start: clock_now() }
    }

    /// Wait for a lock with what is left of the budget. When nobody waits
    /// for this backend, no claim's wait started earlier, so the whole
    /// timeout is safe: a claim that starts waiting from now on waits less
    /// than the timeout before this step gets its lock or gives way. False
    /// (nothing requested) when the budget is spent.
    fn lock(&self, conn: &Conn<'_>, sql: &str, what: &str) -> bool {
        let budget = i64::from(super::lock_timeout_ms());
        let blocked = conn.execute(&BLOCKED_BY_ME, &[], Snap::Latest).get::<bool>(0, 1).unwrap_or(true);
        let left = if blocked { budget - (clock_now() - self.start) / 1_000 } else { budget };
        if left < 1 {
            return false;
        }
        subxact::with_settings(&[("lock_timeout", &format!("{left}ms"))], || run(sql, what));
        true
    }
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

/// Create the partitions due at `now` (`webhook_dedup.premake` ahead), each
/// in its own subtransaction: one that cannot be made now (its locks are
/// busy, too many keys wait in the default partition) does not keep the
/// others from being made.
pub(super) fn create(now: i64, batch: i64, step: &mut Step) {
    let due = spi::connected(|conn| {
        let ranges: Vec<Range> = existing(conn).iter().map(|p| p.range).collect();
        partition::ranges_to_create(&ranges, now, crate::guc::partition_interval_us(), crate::guc::premake())
    });
    for range in due {
        let table = format!("webhook_dedup.{}", quote_identifier(partition::partition_name(range.lo)));
        let made = subxact::attempt(|| {
            outside_extension_script(|| spi::connected(|conn| create_partition(conn, &table, range, now, batch)))
        });
        match made {
            Ok(()) => step.partitions_created += 1,
            Err(failure) => {
                pgrx::warning!(
                    "webhook_dedup: creating partition {table} failed, the next pass retries it: {} ({:?})",
                    failure.message,
                    failure.sqlstate
                );
                step.errors.push(format!("creating partitions: {table}: {} ({:?})", failure.message, failure.sqlstate));
            }
        }
    }
}

/// Create the partition for `range` as a standalone table and attach it.
///
/// Only the range holding `now` can have keys in the default partition
/// already (keys are stored at the current time; maintenance did not run
/// for longer than the premade partitions lasted). Those keys are moved into
/// the new table under their key locks, in two rounds:
///
/// 1. with no table lock, so claims go on: the strays there are now, each
///    under its key lock (tried: a key being claimed right now is left for
///    round 2). A claim of a moved key waits for its lock, so it finds the
///    key only after this transaction commits, in the attached partition
///    (and the lock-timeout window counts from here, see [`Window`]);
/// 2. with the default partition locked against writes (claims still read
///    it), the few stored since round 1 (a key being claimed now makes the
///    pass give way), then the table is attached before anyone can store
///    another. Only this round makes claims that store new keys wait, so
///    it is short whatever the number of strays (a claim of a key moved in
///    round 1 waits for its lock until this transaction ends).
///
/// At most `batch` keys move (each stays locked until commit): a range with
/// more stays unpartitioned (its keys stay correct in the default
/// partition, and expire from there); the next range, made ahead, takes
/// over at its start.
fn create_partition(conn: &Conn<'_>, table: &str, range: Range, now: i64, batch: i64) {
    let name = partition::partition_name(range.lo);
    let (lo, hi) = (partition::utc_literal(range.lo), partition::utc_literal(range.hi));
    // Bounds are integers this module computed, rendered as UTC literals;
    // names are quoted identifiers. DDL takes no parameters.
    run(
        &format!(
            "CREATE TABLE {table} (LIKE webhook_dedup.keys INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
                 CONSTRAINT {range_check} CHECK (partition_at >= '{lo}' AND partition_at < '{hi}'))
               WITH (fillfactor = 90);
             CREATE UNIQUE INDEX {index} ON {table} (idem_key, source);
             COMMENT ON TABLE {table} IS 'Keys stored in [{lo}, {hi}); created by webhook_dedup.run_maintenance().'",
            range_check = quote_identifier(format!("{name}_range")),
            index = quote_identifier(format!("{name}_key")),
        ),
        &format!("creating {table}"),
    );
    let attach =
        format!("ALTER TABLE webhook_dedup.keys ATTACH PARTITION {table} FOR VALUES FROM ('{lo}') TO ('{hi}')");
    if range.lo > now {
        // Nothing can be stored in the future: no keys to move.
        run(&attach, &format!("attaching {table}"));
        return;
    }
    let strays = Strays { conn, table, range, batch };
    // A claim of a key moved in round 1 waits for this pass from then on.
    let window = Window::open();
    let early = strays.move_some(0, Busy::Skip);
    if !window.lock(conn, "LOCK TABLE webhook_dedup.keys_default IN EXCLUSIVE MODE", "locking the default") {
        pgrx::error!("webhook_dedup: moving keys into {table}: gave way to claims waiting for this pass");
    }
    let late = strays.move_some(early, Busy::GiveWay);
    if early + late > 0 {
        pgrx::log!("webhook_dedup: moved {} keys from the default partition into {table}", early + late);
    }
    if !window.lock(conn, "LOCK TABLE webhook_dedup.keys_default IN ACCESS EXCLUSIVE MODE", "locking the default") {
        pgrx::error!("webhook_dedup: attaching {table}: gave way to claims waiting for this pass");
    }
    run(&attach, &format!("attaching {table}"));
}

/// What to do with a stray key whose lock another transaction holds.
#[derive(Clone, Copy, PartialEq)]
enum Busy {
    /// Leave it for the next round.
    Skip,
    /// Fail the step: its holder waits for this pass.
    GiveWay,
}

/// The keys of one range stored in the default partition, and the table
/// they move to.
struct Strays<'a, 'c> {
    conn: &'a Conn<'c>,
    table: &'a str,
    range: Range,
    batch: i64,
}

impl Strays<'_, '_> {
    /// Move the strays there are now (at most `batch - moved`; more is an
    /// error) under their key locks; returns how many moved.
    fn move_some(&self, moved: i64, busy: Busy) -> i64 {
        let (table, limit) = (self.table, self.batch - moved);
        let bounds = [arg(timestamptz(self.range.lo)), arg(timestamptz(self.range.hi))];
        let rows = self.conn.execute(&STRAYS, &[bounds[0], bounds[1], arg(limit.saturating_add(1))], Snap::Latest);
        if rows.len() as i64 > limit {
            pgrx::error!(
                "webhook_dedup: more than {} keys (webhook_dedup.batch_size) wait in the default partition \
                 for {table}; they stay there (still found by every claim) and the next partition takes over at \
                 its start",
                self.batch
            );
        }
        let mut keys: (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        for i in 0..rows.len() {
            let (source, idem_key): (String, String) =
                (rows.get(i, 1).expect("source"), rows.get(i, 2).expect("idem_key"));
            if try_lock_key(&source, &idem_key) {
                keys.0.push(source);
                keys.1.push(idem_key);
            } else if busy == Busy::GiveWay {
                pgrx::error!("webhook_dedup: key ({source}, {idem_key}) in the default partition is busy");
            }
        }
        if keys.0.is_empty() {
            return 0;
        }
        let (lo, hi) = (partition::utc_literal(self.range.lo), partition::utc_literal(self.range.hi));
        let count = keys.0.len() as i64;
        pgrx::spi::Spi::run_with_args(
            &format!(
                "WITH moved AS (DELETE FROM webhook_dedup.keys_default
                                 WHERE partition_at >= '{lo}' AND partition_at < '{hi}'
                                   AND (source, idem_key) IN
                                       (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])))
                                 RETURNING *)
                 INSERT INTO {table} SELECT * FROM moved"
            ),
            &[keys.0.into(), keys.1.into()],
        )
        .unwrap_or_else(|e| {
            pgrx::error!("webhook_dedup: moving keys from webhook_dedup.keys_default into {table}: {e}")
        });
        count
    }
}

/// What happened to the partition a pass looked at.
enum Dropped {
    /// Dropped, after carrying this many keys forward.
    Yes { carried: i64 },
    /// Kept for now: too many of its completed keys are still retained.
    Waits,
    /// Kept for now: this many keys were carried, and the pass stopped
    /// (more than a batch to carry, a key busy, or its locks busy).
    Partly { carried: i64, batch_full: bool },
}

thread_local! {
    /// Partitions that waited, by table: the retention settings they were
    /// counted under, and when to count them again. Counting reads the whole
    /// partition, so a waiting partition is counted again after an hour, or
    /// at once when a retention changed.
    static WAITING: RefCell<HashMap<String, (String, i64)>> = RefCell::new(HashMap::new());
}

/// How long a partition that waits is left alone (in this backend).
const RECOUNT_AFTER_US: i64 = 3_600 * 1_000_000;

/// Drop (at most) one partition past retention: the oldest that is worth
/// dropping ([`partition::worth_dropping`]). Keys that must live on are
/// carried forward into the current partition first.
pub(super) fn drop_one(now: i64, batch: i64, retention: &Retention, step: &mut Step) {
    let settings = format!("{}/{}", retention.default_us, retention.per_source);
    spi::connected(|conn| {
        let all = existing(conn);
        let old =
            partition::past_retention(&all.iter().map(|p| p.range).collect::<Vec<_>>(), now, retention.shortest_us);
        let candidates: Vec<Partition> =
            old.iter().filter_map(|r| all.iter().find(|p| p.range == *r).cloned()).collect();
        let default = Interval::from_micros(retention.default_us);
        for (i, candidate) in candidates.iter().enumerate() {
            let skip = WAITING.with_borrow(|w| {
                w.get(&candidate.table).is_some_and(|(counted_under, until)| *counted_under == settings && now < *until)
            });
            if skip {
                continue;
            }
            match drop_partition(conn, candidate, now, batch, default) {
                Dropped::Yes { carried } => {
                    step.partitions_dropped += 1;
                    step.keys_carried_forward += carried;
                    pgrx::log!(
                        "webhook_dedup: dropped partition {} past retention ({carried} keys carried forward)",
                        candidate.table
                    );
                    WAITING.with_borrow_mut(|w| w.remove(&candidate.table));
                    // One drop per pass; the worker runs the next pass at once.
                    step.more |= i + 1 < candidates.len();
                    return;
                }
                Dropped::Partly { carried, batch_full } => {
                    step.keys_carried_forward += carried;
                    // Another pass at once only when this one got somewhere.
                    step.more |= batch_full || carried > 0;
                    return;
                }
                Dropped::Waits => {
                    WAITING.with_borrow_mut(|w| {
                        w.insert(candidate.table.clone(), (settings.clone(), now + RECOUNT_AFTER_US))
                    });
                }
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
    let window = Window::open();
    run(&format!("LOCK TABLE {table} IN SHARE MODE"), &format!("locking {table}"));
    // The latest snapshot: under REPEATABLE READ the transaction's own would
    // miss a key touched since it began, and the drop would lose it.
    let keep = conn.execute(
        &CARRY_CANDIDATES,
        &[lo, hi, arg(timestamptz(now)), arg(default), arg(batch.saturating_add(1))],
        Snap::Latest,
    );
    let batch_full = keep.len() as i64 > batch;
    let mut locked: (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let mut busy = false;
    for i in 0..keep.len().min(batch as usize) {
        let source: String = keep.get(i, 1).expect("source");
        let idem_key: String = keep.get(i, 2).expect("idem_key");
        // A key whose lock is held is being claimed or worked on right now;
        // moving it under that transaction would make its next write fail.
        if try_lock_key(&source, &idem_key) {
            locked.0.push(source);
            locked.1.push(idem_key);
        } else {
            busy = true;
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
    if batch_full || busy {
        return Dropped::Partly { carried, batch_full };
    }
    if !window.lock(conn, "LOCK TABLE ONLY webhook_dedup.keys IN ACCESS EXCLUSIVE MODE", "locking webhook_dedup.keys") {
        return Dropped::Partly { carried, batch_full: false };
    }
    run(&format!("DROP TABLE {table}"), &format!("dropping {table}"));
    Dropped::Yes { carried }
}
