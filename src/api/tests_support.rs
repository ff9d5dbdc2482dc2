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
