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
