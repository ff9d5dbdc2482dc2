//! Per-source settings (`webhook_dedup.sources`), cached in each backend so
//! that a claim, a completion or a `webhook_receive` reads no table for
//! them.
//!
//! The cache follows PostgreSQL's own: it is emptied by a relation cache
//! invalidation of `webhook_dedup.sources`, which the statement trigger
//! `sources_changed` sends on every INSERT, UPDATE, DELETE and TRUNCATE
//! (`CacheInvalidateRelcacheByRelid`). Other backends receive it when the
//! change commits and process it at their next transaction start (or lock
//! acquisition); the changing transaction itself at its next command. So a
//! call sees every change committed before its transaction began, as a
//! query of the table would under READ COMMITTED ([`super::cache`]).

use super::cache::SourceCache;
use crate::error::{Error, OrRaise, Raise};
use crate::intake::{Columns, SourceIntake};
use crate::relcache::Table;
use crate::spi::{arg, Conn, Snap, Statement};
use pgrx::datum::Interval;
use pgrx::pg_sys::{self, TEXTOID, TIMESTAMPTZOID};
use std::rc::Rc;

static SETTINGS: Statement = Statement::returning(
    crate::sql_statement!("sources_settings.sql"),
    &[TEXTOID],
    &[
        "lease",
        "max_attempts",
        "retention",
        "tolerance",
        "sources",
        "configured",
        "event_id_from",
        "event_type_from",
        "event_time_from",
        "event_time_format",
        "fingerprint_pointers",
        "replay_guard",
        "accept_event_types",
        "provider",
        "paused",
        "keep_payload",
        "payload_retention",
    ],
);
static PAUSE: Statement = Statement::returning(
    crate::sql_statement!("sources_pause.sql"),
    &[TEXTOID, TIMESTAMPTZOID, TEXTOID, TEXTOID],
    &["paused_at"],
);
static RESUME: Statement = Statement::new(crate::sql_statement!("sources_resume.sql"), &[TEXTOID]);
static PAUSED: Statement = Statement::returning(crate::sql_statement!("sources_paused.sql"), &[TEXTOID], &["paused"]);

/// A source's own settings; `None` falls back to the `webhook_dedup.*`
/// setting of the same name.
#[derive(Debug, Clone, Default)]
pub struct SourceSettings {
    pub lease: Option<Interval>,
    pub max_attempts: Option<i32>,
    pub retention: Option<Interval>,
    pub tolerance: Option<Interval>,
    /// Whether the source has a row in `webhook_dedup.sources` (the
    /// metrics keep room for such sources, [`crate::metrics`]).
    pub configured: bool,
    /// How `webhook_receive` reads the source's deliveries (`None`: every
    /// intake column is NULL; `Err`: a row that does not check, which the
    /// constraint `sources_intake` let through under other rules, e.g. an
    /// older version's; raised when used).
    pub intake: Option<Rc<Result<SourceIntake, String>>>,
    /// The provider profile the source names (`webhook_dedup.sources.provider`).
    pub provider: Option<Rc<str>>,
    /// Whether `webhook_dedup.pause` paused the source (as cached: confirm
    /// with [`paused_locked`] before acting on it).
    pub paused: bool,
    /// Whether the source's deliveries are archived
    /// (`webhook_dedup.sources.keep_payload`).
    pub keep_payload: bool,
    /// How long they are (`payload_retention`; None: the key's retention).
    pub payload_retention: Option<Interval>,
}

impl SourceSettings {
    /// The lease a claim gets when it passes none, in microseconds.
    /// Converted only when used, so that a bad row fails only the calls
    /// that need it (22023).
    pub fn default_lease_us(&self) -> i64 {
        match self.lease {
            Some(lease) => crate::time::duration_us(lease, "webhook_dedup.sources.lease").or_raise(),
            None => crate::guc::default_lease_us(),
        }
    }

    /// The source's intake settings, if any column is set (22023 for a
    /// row that does not check).
    pub fn intake(&self) -> Option<&SourceIntake> {
        match self.intake.as_deref()? {
            Ok(intake) => Some(intake),
            Err(message) => Error::invalid(message.clone()).raise(),
        }
    }

    /// Attempts after which a failing key is dead-lettered.
    pub fn max_attempts(&self) -> i32 {
        self.max_attempts.unwrap_or_else(crate::guc::max_attempts)
    }

    /// How long a completed key is kept after its last activity, in
    /// microseconds.
    pub fn retention_us(&self) -> i64 {
        match self.retention {
            Some(r) => crate::time::duration_us(r, "webhook_dedup.sources.retention").or_raise(),
            None => crate::guc::retention_us(),
        }
    }
}

thread_local! {
    static CACHE: SourceCache<SourceSettings> = SourceCache::new(Table::Sources);
}

/// The settings of `source` (cached; read with `conn` on a miss).
pub fn settings(conn: &Conn<'_>, source: &str) -> SourceSettings {
    CACHE.with(|cache| cache.get(source, || read(conn, source)))
}

/// The settings of `source` as stored, and the table's oid.
fn read(conn: &Conn<'_>, source: &str) -> (SourceSettings, Option<pg_sys::Oid>) {
    let rows = conn.execute(&SETTINGS, &[arg(source)], Snap::Latest);
    let found = SourceSettings {
        lease: rows.get(0, 1),
        max_attempts: rows.get(0, 2),
        retention: rows.get(0, 3),
        tolerance: rows.get(0, 4),
        configured: rows.get(0, 6).unwrap_or(false),
        intake: None,
        provider: rows.get::<String>(0, 14).map(Rc::from),
        paused: rows.get(0, 15).unwrap_or(false),
        keep_payload: rows.get(0, 16).unwrap_or(false),
        payload_retention: rows.get(0, 17),
    };
    let columns = Columns {
        event_id_from: rows.get(0, 7),
        event_type_from: rows.get(0, 8),
        event_time_from: rows.get(0, 9),
        event_time_format: rows.get(0, 10),
        fingerprint_pointers: rows.get(0, 11),
        replay_guard: rows.get(0, 12),
        accept_event_types: rows.get(0, 13),
    };
    let found = SourceSettings {
        intake: match SourceIntake::parse(source, columns) {
            Ok(intake) if intake.is_default() => None,
            parsed => Some(Rc::new(parsed.map_err(|e| e.to_string()))),
        },
        ..found
    };
    (found, rows.get::<pg_sys::Oid>(0, 5))
}

/// Record a pause of `source` by `by` (its row made when it has none; a
/// source paused already keeps its first pause's time and user, and takes
/// `reason`). The row stays locked until the transaction ends. Returns
/// when the source has been paused since.
pub fn pause(conn: &Conn<'_>, source: &str, now: i64, by: &str, reason: Option<&str>) -> i64 {
    let rows =
        conn.execute(&PAUSE, &[arg(source), arg(crate::time::timestamptz(now)), arg(by), arg(reason)], Snap::Statement);
    rows.get::<pgrx::datum::TimestampWithTimeZone>(0, 1).map(pg_sys::TimestampTz::from).expect("paused_at was set")
}

/// Clear the pause of `source` (nothing when it has no row). The row stays
/// locked until the transaction ends, so that every transaction that held
/// it FOR SHARE ([`paused_locked`]) has committed first.
pub fn resume(conn: &Conn<'_>, source: &str) {
    conn.execute(&RESUME, &[arg(source)], Snap::Statement);
}

/// Whether `source` is paused, read from its latest committed row and
/// locked FOR SHARE until the transaction ends (a concurrent pause or
/// resume is waited for; 40001 under REPEATABLE READ when it committed
/// after the snapshot).
pub fn paused_locked(conn: &Conn<'_>, source: &str) -> bool {
    let rows = conn.execute(&PAUSED, &[arg(source)], Snap::Statement);
    !rows.is_empty() && rows.get::<bool>(0, 1).unwrap_or(false)
}
