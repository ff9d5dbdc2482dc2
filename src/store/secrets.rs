//! The verification keys of each source (`webhook_dedup.source_secrets`),
//! cached in each backend like its settings ([`super::sources`]): emptied
//! by a relation cache invalidation of the table, which the statement
//! trigger `source_secrets_changed` sends on every change. So a rotation
//! (a new key, a retired one) reaches every receiver when it commits,
//! without a redeploy. Only `webhook_receive` (run as the extension's
//! owner) reads them; no function returns a secret.

use super::cache::SourceCache;
use crate::relcache::Table;
use crate::spi::{arg, Conn, Snap, Statement};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, TEXTOID};
use std::rc::Rc;

static READ: Statement = Statement::returning(
    crate::sql_statement!("source_secrets.sql"),
    &[TEXTOID],
    &["id", "secret", "not_before", "not_after", "secrets", "scheme"],
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
