//! The verification keys of each source (`webhook_dedup.source_secrets`),
//! cached in each backend like its settings ([`super::sources`]): emptied
//! by a relation cache invalidation of the table, which the statement
//! trigger `source_secrets_changed` sends on every change. So a rotation
//! (a new key, a retired one) reaches every receiver when it commits,
//! without a redeploy. Only `webhook_receive` (run as the extension's
//! owner) reads them; no function returns a secret. The operator's
//! functions (`add_secret`, `retire_secret`, `list_secrets`,
//! `src/api/secrets.rs`) write and list them through [`add`], [`retire`]
//! and [`list`].

use super::cache::SourceCache;
use crate::relcache::Table;
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, INT4OID, TEXTOID, TIMESTAMPTZOID};
use std::rc::Rc;

static READ: Statement = Statement::returning(
    crate::sql_statement!("secrets_read.sql"),
    &[TEXTOID],
    &["id", "secret", "not_before", "not_after", "secrets", "scheme"],
);
static ADD: Statement = Statement::returning(
    crate::sql_statement!("secrets_add.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, TEXTOID],
    &["id"],
);
static RETIRE: Statement = Statement::returning(
    crate::sql_statement!("secrets_retire.sql"),
    &[TEXTOID, INT4OID, TIMESTAMPTZOID],
    &["not_before"],
);
static LIST: Statement = Statement::returning(
    crate::sql_statement!("secrets_list.sql"),
    &[TEXTOID, TIMESTAMPTZOID],
    &["id", "source", "not_before", "not_after", "created_at", "valid_now", "fingerprint", "note", "scheme"],
);

/// One stored key. Times in microseconds since 2000-01-01 UTC.
#[derive(Clone)]
pub struct StoredSecret {
    pub id: i32,
    pub secret: String,
    pub not_before: i64,
    pub not_after: Option<i64>,
    /// The scheme `add_secret` accepted it for (canonical name), if the
    /// source named one then.
    pub scheme: Option<String>,
}

impl std::fmt::Debug for StoredSecret {
    /// Never the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredSecret")
            .field("id", &self.id)
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl StoredSecret {
    /// Whether the key verifies a delivery at `at`: `not_before <= at <
    /// not_after`.
    pub fn valid_at(&self, at: i64) -> bool {
        self.not_before <= at && self.not_after.is_none_or(|end| at < end)
    }

    /// Whether the key may verify `scheme` (a canonical name): it was
    /// accepted for that scheme, or for none. A key is never used for
    /// another scheme than the one it was checked against, so a change of
    /// the source's provider cannot make it one (a Mailgun key
    /// answering X's unsigned CRC is a Mailgun signing oracle).
    pub fn serves(&self, scheme: &str) -> bool {
        self.scheme.as_deref().is_none_or(|accepted| accepted == scheme)
    }
}

thread_local! {
    static CACHE: SourceCache<Rc<[StoredSecret]>> = SourceCache::new(Table::Secrets);
}

/// Every key of `source`, oldest first (cached; read with `conn` on a miss).
pub fn of(conn: &Conn<'_>, source: &str) -> Rc<[StoredSecret]> {
    CACHE.with(|cache| cache.get(source, || read(conn, source)))
}

/// Every key of `source` as stored, and the table's oid (when it has one).
fn read(conn: &Conn<'_>, source: &str) -> (Rc<[StoredSecret]>, Option<pg_sys::Oid>) {
    let rows = conn.execute(&READ, &[arg(source)], Snap::Latest);
    let us = |t: Option<TimestampWithTimeZone>| t.map(pg_sys::TimestampTz::from);
    let found: Rc<[StoredSecret]> = (0..rows.len())
        .filter_map(|row| {
            Some(StoredSecret {
                id: rows.get(row, 1)?,
                secret: rows.get(row, 2)?,
                not_before: us(rows.get(row, 3))?,
                not_after: us(rows.get(row, 4)),
                scheme: rows.get(row, 6),
            })
        })
        .collect();
    let oid = (!rows.is_empty()).then(|| rows.get::<pg_sys::Oid>(0, 5)).flatten();
    (found, oid)
}

/// A key to store ([`add`]), checked by the caller: `source` 1 to 255
/// characters, `secret` a key of `scheme` when that is known, the window
/// finite and `not_before < not_after`. Times in microseconds since
/// 2000-01-01 UTC.
#[derive(Clone, Copy)]
pub struct NewSecret<'a> {
    pub source: &'a str,
    pub secret: &'a str,
    pub not_before: i64,
    /// None: no end.
    pub not_after: Option<i64>,
    pub note: Option<&'a str>,
    /// The canonical name of the scheme it was accepted for (None: none
    /// known; it then verifies any).
    pub scheme: Option<&'a str>,
}

/// Store `new`, made at `now` (microseconds); its id. One insert on the
/// statement snapshot (the cache of the source's keys is emptied when it
/// commits). Errors: PostgreSQL's (a constraint of the table).
pub fn add(conn: &Conn<'_>, new: &NewSecret<'_>, now: i64) -> i32 {
    let rows = conn.execute(
        &ADD,
        &[
            arg(new.source),
            arg(new.secret),
            arg(timestamptz(new.not_before)),
            arg(new.not_after.map(timestamptz)),
            arg(new.note),
            arg(timestamptz(now)),
            arg(new.scheme),
        ],
        Snap::Statement,
    );
    rows.get::<i32>(0, 1).expect("INSERT ... RETURNING id returns one row")
}

/// End the validity of key `id` of `source` at `not_after` (microseconds,
/// exclusive); the key's `not_before` (microseconds), None when the source
/// has no such key (nothing changed). The caller checks the order of the
/// two and raises after the update when it is wrong (the error rolls it
/// back).
pub fn retire(conn: &Conn<'_>, source: &str, id: i32, not_after: i64) -> Option<i64> {
    let rows = conn.execute(&RETIRE, &[arg(source), arg(id), arg(timestamptz(not_after))], Snap::Statement);
    (!rows.is_empty()).then(|| rows.get::<TimestampWithTimeZone>(0, 1)).flatten().map(pg_sys::TimestampTz::from)
}

/// A stored key without its value, as [`list`] returns it.
#[derive(Debug, Clone)]
pub struct ListedSecret {
    pub id: i32,
    pub source: String,
    pub not_before: TimestampWithTimeZone,
    pub not_after: Option<TimestampWithTimeZone>,
    pub created_at: TimestampWithTimeZone,
    /// Whether a delivery at the time [`list`] was given would verify with it.
    pub valid_now: bool,
    /// `sha256:` and the first 8 hex digits of the secret's SHA-256.
    pub fingerprint: String,
    pub note: Option<String>,
    /// The scheme it was accepted for (None: any).
    pub scheme: Option<String>,
}

/// The keys of `source` (None: of every source) by source and id, without
/// their values, `valid_now` as of `now` (microseconds). A read on the
/// statement snapshot.
pub fn list(conn: &Conn<'_>, source: Option<&str>, now: i64) -> Vec<ListedSecret> {
    let rows = conn.execute(&LIST, &[arg(source), arg(timestamptz(now))], Snap::Statement);
    (0..rows.len())
        .map(|r| ListedSecret {
            id: rows.get::<i32>(r, 1).expect("id"),
            source: rows.get::<String>(r, 2).expect("source"),
            not_before: rows.get::<TimestampWithTimeZone>(r, 3).expect("not_before"),
            not_after: rows.get::<TimestampWithTimeZone>(r, 4),
            created_at: rows.get::<TimestampWithTimeZone>(r, 5).expect("created_at"),
            valid_now: rows.get::<bool>(r, 6).unwrap_or(false),
            fingerprint: rows.get::<String>(r, 7).expect("fingerprint"),
            note: rows.get::<String>(r, 8),
            scheme: rows.get::<String>(r, 9),
        })
        .collect()
}
