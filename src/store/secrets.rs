//! The verification keys of each source (`webhook_dedup.source_secrets`),
//! cached in each backend like its settings ([`super::sources`]): emptied
//! by a relation cache invalidation of the table, which the statement
//! trigger `source_secrets_changed` sends on every change. So a rotation
//! (a new key, a retired one) reaches every receiver when it commits,
//! without a redeploy. Only `webhook_receive` (run as the extension's
//! owner) reads them; no function returns a secret.

use super::cache;
use crate::spi::{arg, Conn, Snap, Statement};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, TEXTOID};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

static READ: Statement = Statement::returning(
    crate::sql_statement!("source_secrets.sql"),
    &[TEXTOID],
    &["id", "secret", "not_before", "not_after", "secrets", "scheme"],
);

/// How many sources one backend keeps the keys of.
pub const CAPACITY: usize = 1_024;

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
    /// the source's provider cannot make it one (issue 24: a Mailgun key
    /// answering X's unsigned CRC is a Mailgun signing oracle).
    pub fn serves(&self, scheme: &str) -> bool {
        self.scheme.as_deref().is_none_or(|accepted| accepted == scheme)
    }
}

/// The keys per source, and the [`cache::generation`] they were read under.
type Cache = (u64, HashMap<String, Rc<[StoredSecret]>>);

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new((0, HashMap::new()));
}

/// Every key of `source`, oldest first (cached; read with `conn` on a miss).
pub fn of(conn: &Conn<'_>, source: &str) -> Rc<[StoredSecret]> {
    let generation = cache::generation();
    let cached = CACHE.with_borrow_mut(|(built, c)| {
        if *built != generation {
            c.clear();
            *built = generation;
        }
        c.get(source).cloned()
    });
    if let Some(found) = cached {
        return found;
    }
    // The latest snapshot, not the statement's: under REPEATABLE READ the
    // transaction snapshot can predate an invalidation already processed
    // (the generation read above), and what it reads would stay cached.
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
    if let Some(oid) = (!rows.is_empty()).then(|| rows.get::<pg_sys::Oid>(0, 5)).flatten() {
        cache::watch(cache::Table::Secrets, oid);
    }
    // Keep it only if no invalidation arrived while it was read.
    if cache::generation() == generation {
        CACHE.with_borrow_mut(|(_, c)| {
            if c.len() >= CAPACITY {
                c.clear();
            }
            c.insert(source.to_owned(), found.clone());
        });
    }
    found
}
