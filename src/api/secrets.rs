//! Verification keys kept in the database, per source
//! (`webhook_dedup.source_secrets`, [`crate::store::secrets`]):
//! `webhook_dedup.add_secret`, `retire_secret` and `list_secrets`, for the
//! operator role. `webhook_receive(..., secrets => NULL)` uses them.

/// SQL functions in schema `webhook_dedup`.
#[pgrx::pg_schema]
mod webhook_dedup {
    use crate::error::{required, Error, OrRaise, Raise};
    use crate::spi;
    use crate::store::secrets::{self, NewSecret};
    use crate::time::{clock_now, micros, timestamptz};
    use pgrx::datum::TimestampWithTimeZone;
    use pgrx::prelude::*;

    /// The scheme of `source` (its provider in `webhook_dedup.sources`,
    /// else its name, the rule X's CRC answer uses too), with 22023 when
    /// `secret` cannot be a key of it; `None` for a source whose name is no
    /// scheme (`webhook_receive` checks its keys against the scheme it is
    /// called with). The key is stored with the scheme returned, and only
    /// ever verifies that one (`StoredSecret::serves`).
    fn check_key_of_scheme(conn: &spi::Conn<'_>, source: &str, secret: &str) -> Option<crate::signature::Scheme> {
        let settings = crate::store::sources::settings(conn, source);
        let named = settings.provider.as_deref().unwrap_or(source);
        let scheme = crate::signature::Scheme::parse(named).ok()?;
        if let Err(e) = crate::signature::keys(scheme, &[secret]) {
            Error::invalid_with_hint(
                format!("the secret is not a key of scheme {}, the scheme of source \"{source}\": {e}", scheme.name()),
                "Use the secret (or public key) the provider shows for this endpoint; \
                 set webhook_dedup.sources.provider if the source is verified with another scheme.",
            )
            .raise()
        }
        Some(scheme)
    }

    /// `not_after` must come after `not_before` (22023).
    fn check_window(not_before: i64, not_after: Option<i64>) {
        if not_after.is_some_and(|end| end <= not_before) {
            Error::invalid("not_after must be later than not_before").raise();
        }
    }

    /// Store a verification key for `source`, valid from `not_before`
    /// (inclusive) until `not_after` (exclusive; NULL: no end); returns its
    /// id. The secret is stored as given (a provider's secret, or for an
    /// asymmetric scheme its public key) and never returned. When the
    /// source's scheme is known (its `webhook_dedup.sources.provider`, else
    /// its name, is a scheme), the secret must be a key of that scheme (a
    /// Standard Webhooks `whsec_` secret in canonical base64, an Ed25519 or
    /// P-256 public key), the check `webhook_receive` would otherwise make
    /// on every delivery. Errors: 22004 NULL source or secret; 22023 a
    /// source of 0 or more than 255 characters, an empty or
    /// whitespace-padded secret or one that is no key of the source's scheme
    /// (never echoed), infinite times, `not_after` not after `not_before`.
    #[pg_extern(volatile, parallel_unsafe)]
    fn add_secret(
        source: Option<&str>,
        secret: Option<&str>,
        not_before: default!(Option<TimestampWithTimeZone>, "now()"),
        not_after: default!(Option<TimestampWithTimeZone>, "NULL"),
        note: default!(Option<&str>, "NULL"),
    ) -> i32 {
        let source = required(source, "source");
        crate::key::check_source(source).or_raise();
        let secret = required(secret, "secret");
        crate::signature::check_secret(secret).map_err(|p| p.named("the secret")).or_raise();
        let from = micros(required(not_before, "not_before"), "not_before").or_raise();
        let until = not_after.map(|t| micros(t, "not_after").or_raise());
        check_window(from, until);
        spi::connected(|conn| {
            let scheme = check_key_of_scheme(conn, source, secret);
            let new = NewSecret {
                source,
                secret,
                not_before: from,
                not_after: until,
                note,
                scheme: scheme.map(|s| s.name()),
            };
            secrets::add(conn, &new, clock_now())
        })
    }

    /// End the validity of key `key_id` of `source` at `not_after`
    /// (exclusive; default now): deliveries at or after it no longer verify
    /// with it. Returns `not_after`. Errors: 22004 NULL arguments; P0002 no
    /// such key of the source; 22023 `not_after` not after the key's
    /// `not_before`, or infinite.
    #[pg_extern(volatile, parallel_unsafe)]
    fn retire_secret(
        source: Option<&str>,
        key_id: Option<i32>,
        not_after: default!(Option<TimestampWithTimeZone>, "now()"),
    ) -> TimestampWithTimeZone {
        let source = required(source, "source");
        let key_id = required(key_id, "key_id");
        let until = micros(required(not_after, "not_after"), "not_after").or_raise();
        spi::connected(|conn| {
            let Some(from) = secrets::retire(conn, source, key_id, until) else {
                Error::NoDataFound { message: format!("source \"{source}\" has no key {key_id}") }.raise()
            };
            // raised after the update: the error rolls it back
            check_window(from, Some(until));
        });
        timestamptz(until)
    }

    /// The keys of `source` (NULL: of every source), without their values:
    /// id, source, not_before, not_after, created_at, valid_now (whether a
    /// delivery now would verify with it) and fingerprint (`sha256:` and the
    /// first 8 hex digits of the secret's SHA-256, 32 bits: enough to tell
    /// keys apart, and to confirm a guess of a weak secret, so keep this
    /// function to operators), note, and scheme (the scheme the key was
    /// accepted for, the only one it verifies; NULL: any).
    #[pg_extern(stable, parallel_safe)]
    #[allow(clippy::type_complexity)]
    fn list_secrets(
        source: default!(Option<&str>, "NULL"),
    ) -> TableIterator<
        'static,
        (
            name!(id, i32),
            name!(source, String),
            name!(not_before, TimestampWithTimeZone),
            name!(not_after, Option<TimestampWithTimeZone>),
            name!(created_at, TimestampWithTimeZone),
            name!(valid_now, bool),
            name!(fingerprint, String),
            name!(note, Option<String>),
            name!(scheme, Option<String>),
        ),
    > {
        let listed = spi::connected(|conn| secrets::list(conn, source, clock_now()));
        TableIterator::new(listed.into_iter().map(|k| {
            (k.id, k.source, k.not_before, k.not_after, k.created_at, k.valid_now, k.fingerprint, k.note, k.scheme)
        }))
    }
}
