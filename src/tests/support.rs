//! Helpers the `#[pg_test]` modules share.

use pgrx::prelude::*;
use pgrx::JsonB;
use serde_json::Value;

/// The headers a sender would send for `body` (`webhook_sign(scheme, body,
/// secret, at => to_timestamp(at_unix) <sign_args>)`), plus the members of
/// `extra`.
pub(crate) fn signed(scheme: &str, body: &[u8], secret: &str, at_unix: i64, sign_args: &str, extra: Value) -> Value {
    let headers = Spi::get_one_with_args::<JsonB>(
        &format!("SELECT webhook_dedup.webhook_sign($1, $2, $3, at => to_timestamp($4){sign_args})"),
        &[scheme.into(), body.into(), secret.into(), (at_unix as f64).into()],
    )
    .unwrap()
    .unwrap()
    .0;
    let mut map = headers.as_object().unwrap().clone();
    map.extend(extra.as_object().unwrap().clone());
    Value::Object(map)
}

/// Run `sql` (a statement whose result is not needed).
pub(crate) fn run(sql: &str) {
    Spi::run(sql).unwrap();
}

/// The first column of the first row of `sql` as a bigint (-1 for NULL).
pub(crate) fn i64_of(sql: &str) -> i64 {
    Spi::get_one::<i64>(sql).unwrap().unwrap_or(-1)
}

/// The first column of the first row of `sql` as text.
pub(crate) fn text_of(sql: &str) -> Option<String> {
    Spi::get_one::<String>(sql).unwrap()
}

/// `SQLSTATE: message` of the error `query` raises, or `no error`. The
/// query runs in a subtransaction (a PL/pgSQL exception block), so the
/// test's transaction stays usable.
pub(crate) fn error_of(query: &str) -> String {
    Spi::run(
        "CREATE OR REPLACE FUNCTION pg_temp.error_of(q text) RETURNS text LANGUAGE plpgsql AS $$
         BEGIN EXECUTE q; RETURN 'no error';
         EXCEPTION WHEN others THEN RETURN SQLSTATE || ': ' || SQLERRM; END $$",
    )
    .unwrap();
    Spi::get_one_with_args::<String>("SELECT pg_temp.error_of($1)", &[query.into()]).unwrap().unwrap()
}

/// (outcome, claim_token, attempt, result) of a claim with `lease`.
pub(crate) fn claim(
    source: &str,
    key: &str,
    payload: Option<&str>,
    lease: &str,
) -> (String, Option<pgrx::Uuid>, i32, Option<JsonB>) {
    Spi::connect(|client| {
        let row = client
            .select(
                "SELECT outcome, claim_token, attempt, result
                   FROM webhook_dedup.webhook_claim($1, $2, convert_to($3, 'UTF8'), $4::interval)",
                None,
                &[source.into(), key.into(), payload.into(), lease.into()],
            )
            .unwrap()
            .first();
        (
            row.get::<String>(1).unwrap().unwrap(),
            row.get::<pgrx::Uuid>(2).unwrap(),
            row.get::<i32>(3).unwrap().unwrap(),
            row.get::<JsonB>(4).unwrap(),
        )
    })
}

/// `webhook_complete` with `result`: true when the token still held the lease.
pub(crate) fn complete(source: &str, key: &str, token: pgrx::Uuid, result: Value) -> bool {
    Spi::get_one_with_args::<bool>(
        "SELECT webhook_dedup.webhook_complete($1, $2, $3, $4)",
        &[source.into(), key.into(), token.into(), JsonB(result).into()],
    )
    .unwrap()
    .unwrap()
}
