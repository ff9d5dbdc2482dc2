//! The payload archive's reads and writes (`webhook_dedup.archive`): a
//! delivery archived, the day partitions made and dropped, the paced
//! removal of a source's rows past its payload retention, and the
//! operator's erasure ([`redact`], which also clears the keys' results and
//! deletes their payloads: it is the archive's because erasing archived
//! deliveries is what it is for). The calendar (which partitions, how
//! long) is [`crate::archive`]'s.

use super::Key;
use crate::jsonb::Jsonb;
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys::{self, BOOLOID, BYTEAOID, INT8OID, INTERVALOID, JSONBOID, TEXTOID, TIMESTAMPTZOID};

static INSERT: Statement = Statement::new(
    crate::sql_statement!("archive_insert.sql"),
    &[TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID, BYTEAOID, JSONBOID],
);
static PARTITIONS: Statement = Statement::returning(crate::sql_statement!("archive_partitions.sql"), &[], &["name"]);
static DEFAULT_DAYS: Statement =
    Statement::returning(crate::sql_statement!("archive_default_days.sql"), &[TIMESTAMPTZOID], &["day"]);
static DEFAULT_EXPIRE: Statement =
    Statement::returning(crate::sql_statement!("archive_default_expire.sql"), &[TIMESTAMPTZOID, INT8OID], &["count"]);
static LONGEST: Statement =
    Statement::returning(crate::sql_statement!("archive_longest_retention.sql"), &[INTERVALOID], &["longest"]);
static TO_PRUNE: Statement = Statement::returning(
    crate::sql_statement!("archive_sources_to_prune.sql"),
    &[INTERVALOID, INTERVALOID],
    &["source", "retention"],
);
static PRUNE_SOURCE: Statement = Statement::returning(
    crate::sql_statement!("archive_prune_source.sql"),
    &[TEXTOID, TIMESTAMPTZOID, INT8OID],
    &["count"],
);
static FORGET: Statement =
    Statement::new(crate::sql_statement!("archive_forget.sql"), &[TEXTOID, TEXTOID, TIMESTAMPTZOID]);
static REDACT: Statement = Statement::returning(
    crate::sql_statement!("archive_redact.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, TEXTOID],
    &["keys", "deliveries"],
)
.custom_plan();
static REDACT_LOCK: Statement = Statement::returning(
    crate::sql_statement!("archive_redact_lock.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID],
    &["locked"],
)
.custom_plan();

/// One delivery to archive.
#[derive(Debug, Clone, Copy)]
pub struct Archived<'a> {
    pub key: Key<'a>,
    /// When it arrived (the key's `first_seen_at` for a first delivery, the
    /// conflict's `seen_at` for a conflicting one).
    pub received_at: i64,
    pub event_id: Option<&'a str>,
    pub event_type: Option<&'a str>,
    /// A conflicting delivery (not the content the key was processed with).
    pub conflict: bool,
    pub payload: &'a [u8],
    pub headers: Option<Jsonb>,
}

/// Archive `a` (one insert, routed to its day's partition).
pub fn insert(conn: &Conn<'_>, a: &Archived<'_>) {
    conn.execute(
        &INSERT,
        &[
            arg(timestamptz(a.received_at)),
            arg(a.key.source),
            arg(a.key.idem_key),
            arg(a.event_id),
            arg(a.event_type),
            arg(a.conflict),
            arg(a.payload),
            arg(a.headers),
        ],
        Snap::Statement,
    );
}

/// Delete the archived deliveries of `key`, a key just forgotten that was
/// first seen at `first_seen_at` (its first delivery, and its conflicts').
pub fn forget(conn: &Conn<'_>, key: Key<'_>, first_seen_at: TimestampWithTimeZone) {
    conn.execute(&FORGET, &[arg(key.source), arg(key.idem_key), arg(first_seen_at)], Snap::Statement);
}

/// Which keys of a source [`redact`] erases: exactly one scope (each is a
/// parameter of `archive_redact.sql`, the other two NULL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedactScope<'a> {
    /// That key (1 to 255 characters, checked by the caller), and its
    /// archived deliveries even when the key itself is gone.
    Key(&'a str),
    /// Every key first seen before this time (microseconds since
    /// 2000-01-01 UTC, finite), and every delivery archived before it.
    Before(i64),
    /// Every key whose account field (the third of the key's fields,
    /// escaped as [`crate::key::escape_part`] escapes it, not empty) is
    /// this.
    Account(&'a str),
}

/// What [`redact`] erased.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Redacted {
    /// Keys whose result and last error were cleared.
    pub keys: i64,
    /// Payloads for the workers and archived deliveries deleted.
    pub deliveries: i64,
}

/// Erase what the deliveries of the keys of `source` in `scope` carried,
/// keeping the keys (`webhook_dedup.redact`; the rules are in
/// `archive_redact.sql`): first the keys of the scope are locked
/// (`archive_redact_lock.sql`, `FOR NO KEY UPDATE`, waiting for their writers),
/// then one statement erases, on a newer snapshot that sees what those
/// writers committed, and records the redaction with `now` (microseconds)
/// and `by` (the session user). Both statements are planned for each
/// call's arguments (`Statement::custom_plan`). Errors: PostgreSQL's (a
/// lock timeout, 40001 under REPEATABLE READ).
pub fn redact(conn: &Conn<'_>, source: &str, scope: RedactScope<'_>, now: i64, by: &str) -> Redacted {
    let (idem_key, before, account) = match scope {
        RedactScope::Key(idem_key) => (Some(idem_key), None, None),
        RedactScope::Before(before) => (None, Some(timestamptz(before)), None),
        RedactScope::Account(account) => (None, None, Some(account)),
    };
    conn.execute(&REDACT_LOCK, &[arg(source), arg(idem_key), arg(before), arg(account)], Snap::Statement);
    let rows = conn.execute(
        &REDACT,
        &[arg(source), arg(idem_key), arg(before), arg(account), arg(timestamptz(now)), arg(by)],
        Snap::Statement,
    );
    Redacted { keys: rows.get::<i64>(0, 1).unwrap_or(0), deliveries: rows.get::<i64>(0, 2).unwrap_or(0) }
}

/// The names of the archive's partitions (day partitions and the default).
pub fn partitions(conn: &Conn<'_>) -> Vec<String> {
    let rows = conn.execute(&PARTITIONS, &[], Snap::Latest);
    (0..rows.len()).filter_map(|r| rows.get::<String>(r, 1)).collect()
}

/// The days (as their first microsecond) with rows in the default
/// partition that arrived at or after `since`, at most 32.
pub fn default_days(conn: &Conn<'_>, since: i64) -> Vec<i64> {
    let rows = conn.execute(&DEFAULT_DAYS, &[arg(timestamptz(since))], Snap::Statement);
    (0..rows.len()).filter_map(|r| rows.get::<TimestampWithTimeZone>(r, 1).map(pg_sys::TimestampTz::from)).collect()
}

/// Delete up to `batch` rows of the default partition that arrived before
/// `cutoff`; how many.
pub fn expire_default(conn: &Conn<'_>, cutoff: i64, batch: i64) -> i64 {
    let rows = conn.execute(&DEFAULT_EXPIRE, &[arg(timestamptz(cutoff)), arg(batch)], Snap::Statement);
    rows.get::<i64>(0, 1).unwrap_or(0)
}

/// The longest payload retention of the sources that keep payloads
/// (`default_retention`: `webhook_dedup.retention`), None when none does.
pub fn longest_retention(conn: &Conn<'_>, default_retention: Interval) -> Option<Interval> {
    let rows = conn.execute(&LONGEST, &[arg(default_retention)], Snap::Statement);
    rows.get(0, 1)
}

/// The sources whose payload retention is shorter than `longest`, with it.
pub fn sources_to_prune(conn: &Conn<'_>, default_retention: Interval, longest: Interval) -> Vec<(String, Interval)> {
    let rows = conn.execute(&TO_PRUNE, &[arg(default_retention), arg(longest)], Snap::Statement);
    (0..rows.len()).filter_map(|r| Some((rows.get::<String>(r, 1)?, rows.get::<Interval>(r, 2)?))).collect()
}

/// Delete about `batch` of the oldest rows of `source` that arrived
/// before `cutoff`; how many.
pub fn prune_source(conn: &Conn<'_>, source: &str, cutoff: i64, batch: i64) -> i64 {
    let rows = conn.execute(&PRUNE_SOURCE, &[arg(source), arg(timestamptz(cutoff)), arg(batch)], Snap::Statement);
    rows.get::<i64>(0, 1).unwrap_or(0)
}

/// Create the partition of `day` (its name from [`crate::archive`]),
/// moving into it the rows of the default partition that belong to it,
/// with its index (source, received_at), then attach it. The archive is
/// locked SHARE ROW EXCLUSIVE first (reads go on; a statement that writes
/// it, a claim archiving, `webhook_forget`, `redact`, waits, at most the
/// pass's lock_timeout): a DELETE or UPDATE planned before the attach
/// knows only the partitions of then, and would scan the emptied default
/// partition and miss the moved rows (a forgotten key's payload left
/// behind: `tests/cluster/test_archive.py`). Waiting at the archive itself,
/// before planning, it is planned after the attach and finds them. Then
/// the default partition is locked EXCLUSIVE: a row of the day inserted
/// between the move and the attach would make the attach fail.
/// `ATTACH PARTITION` takes SHARE UPDATE EXCLUSIVE on the archive (claims
/// that archive go on) and ACCESS EXCLUSIVE on the default partition,
/// which it scans for rows of the new range (none are left).
pub fn create_partition(day: i64) {
    let name = crate::archive::partition_name(day);
    let from = crate::calendar::utc_literal(crate::archive::day_start(day));
    let to = crate::calendar::utc_literal(crate::archive::day_start(day + 1));
    // The name is archive_ and eight digits, the bounds UTC literals: no
    // caller text reaches this SQL.
    let sql = format!(
        "LOCK TABLE webhook_dedup.archive IN SHARE ROW EXCLUSIVE MODE;
         CREATE TABLE webhook_dedup.{name} (LIKE webhook_dedup.archive INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION);
         LOCK TABLE webhook_dedup.archive_default IN EXCLUSIVE MODE;
         WITH moved AS (
           DELETE FROM webhook_dedup.archive_default AS d
            WHERE d.received_at OPERATOR(pg_catalog.>=) '{from}' AND d.received_at OPERATOR(pg_catalog.<) '{to}'
           RETURNING d.received_at, d.source, d.idem_key, d.event_id, d.event_type, d.conflict, d.payload, d.headers)
         INSERT INTO webhook_dedup.{name} (received_at, source, idem_key, event_id, event_type, conflict, payload, headers)
           SELECT * FROM moved;
         CREATE INDEX {name}_source ON webhook_dedup.{name} (source, received_at);
         ALTER TABLE webhook_dedup.archive ATTACH PARTITION webhook_dedup.{name} FOR VALUES FROM ('{from}') TO ('{to}');
         DO $$
         DECLARE
           g pg_catalog.oid;
         BEGIN
           -- the archive's owner owns it, and nobody else may read it
           -- directly (default privileges of the role running the pass)
           EXECUTE pg_catalog.format('ALTER TABLE webhook_dedup.{name} OWNER TO %I',
             (SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class AS c
               WHERE c.oid OPERATOR(pg_catalog.=) 'webhook_dedup.archive'::pg_catalog.regclass));
           REVOKE ALL ON webhook_dedup.{name} FROM PUBLIC;
           FOR g IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                     WHERE c.oid OPERATOR(pg_catalog.=) 'webhook_dedup.{name}'::pg_catalog.regclass
                       AND a.grantee OPERATOR(pg_catalog.<>) c.relowner AND a.grantee OPERATOR(pg_catalog.<>) 0 LOOP
             EXECUTE pg_catalog.format('REVOKE ALL ON webhook_dedup.{name} FROM %I', pg_catalog.pg_get_userbyid(g));
           END LOOP;
         END
         $$"
    );
    pgrx::spi::Spi::run(&sql).unwrap_or_else(|e| pgrx::error!("webhook_dedup: creating {name}: {e}"));
}

/// Drop the partition of `day` whole (ACCESS EXCLUSIVE on the archive for
/// the moment of the catalog change: the pass's lock_timeout bounds the
/// wait, and a claim that archives waits at most that long behind it).
pub fn drop_partition(day: i64) {
    let name = crate::archive::partition_name(day);
    pgrx::spi::Spi::run(&format!("DROP TABLE webhook_dedup.{name}"))
        .unwrap_or_else(|e| pgrx::error!("webhook_dedup: dropping {name}: {e}"));
}
