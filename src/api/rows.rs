//! The rows the SQL functions build: one-row results as values of a named
//! composite type (`webhook_claim`, `webhook_receive`), and the HTTP
//! answer's columns (`webhook_receive`, `webhook_dedup.http_answer`).

use crate::answer::{self, Kind};
use crate::claim::Outcome;
use crate::jsonb::Jsonb;
use pgrx::heap_tuple::PgHeapTuple;
use pgrx::{pg_sys, AllocatedByRust, PgTupleDesc};

/// The row a function declared `RETURNS <composite type>` returns, from
/// its columns' datums in the type's order. The row descriptor comes from
/// the type cache (the type is the called function's return type).
pub(crate) fn one_row(
    fcinfo: pg_sys::FunctionCallInfo,
    values: impl IntoIterator<Item = Option<pg_sys::Datum>>,
) -> PgHeapTuple<'static, AllocatedByRust> {
    // SAFETY: a function manager call's fcinfo has a valid flinfo whose
    // fn_oid is the function being called.
    let type_oid = unsafe { pg_sys::get_func_rettype((*(*fcinfo).flinfo).fn_oid) };
    // The type cache's descriptor itself, pinned until the row is boxed
    // (PgTupleDesc releases it): PgTupleDesc::for_composite_type_by_oid
    // copies it, a tenth of the CPU of a duplicate's answer.
    // SAFETY: lookup_rowtype_tupdesc returns a reference-counted
    // descriptor, or raises 42809 when the type is not a row type.
    let desc = unsafe { PgTupleDesc::from_pg(pg_sys::lookup_rowtype_tupdesc(type_oid, -1)) };
    // SAFETY: the callers pass one datum per column of the type, of the
    // column's type (the SQL types of their declared composite types).
    unsafe { PgHeapTuple::from_datums(desc, values) }
        .unwrap_or_else(|e| pgrx::error!("webhook_dedup: building the result row: {e}"))
}

/// The `http_status`, `http_headers` and `response` of `reply` for a
/// delivery of `kind`: the body is the stored `result` (a duplicate's),
/// the handshake's own answer, `{"status": <kind>}` or `{"error": ...}`;
/// NULL for `claimed`/`reclaimed`, whose body is the caller's own result
/// once its work committed. Shared by `webhook_receive` and
/// `webhook_dedup.http_answer`.
pub(crate) fn http_row(
    reply: &answer::Reply,
    kind: Kind,
    result: Option<&Jsonb>,
    handshake: Option<Jsonb>,
) -> (i32, Jsonb, Option<Jsonb>) {
    let headers: serde_json::Map<String, serde_json::Value> =
        reply.headers.iter().map(|(name, value)| (name.to_string(), serde_json::Value::from(value.as_str()))).collect();
    let status_body = || Jsonb::from_text(&serde_json::json!({ "status": kind.name() }).to_string());
    let body = match reply.body {
        answer::Body::Result if matches!(kind, Kind::Claim(Outcome::Claimed | Outcome::Reclaimed)) => None,
        answer::Body::Result => Some(result.cloned().unwrap_or_else(status_body)),
        answer::Body::Status => Some(status_body()),
        answer::Body::Error(text) => Some(Jsonb::from_text(&serde_json::json!({ "error": text }).to_string())),
        answer::Body::Handshake => Some(handshake.unwrap_or_else(status_body)),
    };
    (i32::from(reply.status), Jsonb::from_text(&serde_json::Value::Object(headers).to_string()), body)
}
