//! Signed tokens bound to the content they arrived with
//! (`webhook_dedup.signature_tokens`). A scheme whose signature does not
//! cover the body ([`crate::signature::Coverage::Nothing`]: Mailgun signs
//! its timestamp and token only) proves that the provider sent *a* request
//! at that time, not what it said: whoever saw one genuine request can put
//! its signature block on other content for the whole window. Mailgun's
//! own advice is to cache the token and refuse it the second time
//! (<https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks>).
//! Here a token is remembered per source with the SHA-256 of the exact
//! bytes it first came with: the same token with the same bytes is an
//! ordinary duplicate, with other bytes a forgery.
//!
//! The protocol, as the replay guard's ([`super::replay_guards`]): a new
//! token is one insert, arbitrated by the primary key (of two concurrent
//! first uses, the second waits for the first's transaction and then finds
//! its row, or inserts if it rolled back); a known token's row is read on
//! the latest snapshot. Rows are pruned by maintenance once their signed
//! time is older than the source's retention and their signature's window
//! has closed; `webhook_receive` refuses a signature older than the
//! retention, so a pruned token never verifies again.
//!
//! Per source, as the replay guard: sources that verify with one key (one
//! Mailgun account's signing key, several sources) do not see each other's
//! tokens (docs/security.md, "What it does not protect").

use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::pg_sys::{BYTEAOID, TEXTOID, TIMESTAMPTZOID};

static BIND: Statement = Statement::returning(
    crate::sql_statement!("signature_tokens_bind.sql"),
    &[TEXTOID, BYTEAOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID],
    &["inserted"],
);
static READ: Statement =
    Statement::returning(crate::sql_statement!("signature_tokens_read.sql"), &[TEXTOID, BYTEAOID], &["body_sha256"]);

/// What a signed token's use is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// The token is new (now bound to this body), or was seen with these
    /// same bytes: go on.
    Same,
    /// The token was seen with other bytes: refuse the delivery.
    Other,
}

/// The times of a token's signature, microseconds since the PostgreSQL
/// epoch.
#[derive(Debug, Clone, Copy)]
pub struct Signed {
    /// The signed timestamp.
    pub at: i64,
    /// When its window closes (the signed time plus the tolerance it was
    /// verified with).
    pub window_until: i64,
}

/// Bind `token_sha256` of `source` to `body_sha256` if it is new, else say
/// whether it was bound to these bytes. `now` in microseconds. Writes at
/// most the binding row, in the caller's transaction.
pub fn bind(
    conn: &Conn<'_>,
    source: &str,
    token_sha256: &[u8],
    body_sha256: &[u8],
    signed: Signed,
    now: i64,
) -> Binding {
    // A round ends unless the row was pruned between the insert that found
    // it and the read, which cannot keep happening; three rounds are plenty.
    for _ in 0..3 {
        let inserted = conn.execute(
            &BIND,
            &[
                arg(source),
                arg(token_sha256),
                arg(body_sha256),
                arg(timestamptz(signed.at)),
                arg(timestamptz(signed.window_until)),
                arg(timestamptz(now)),
            ],
            Snap::Statement,
        );
        if !inserted.is_empty() {
            return Binding::Same;
        }
        let rows = conn.execute(&READ, &[arg(source), arg(token_sha256)], Snap::Latest);
        match (!rows.is_empty()).then(|| rows.get::<Vec<u8>>(0, 1)).flatten() {
            Some(first) if first == body_sha256 => return Binding::Same,
            Some(_) => return Binding::Other,
            None => continue,
        }
    }
    super::serialization_failure()
}
