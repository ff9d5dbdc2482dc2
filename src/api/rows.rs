//! One-row results as values of a named composite type (the functions that
//! return one: `webhook_claim`, `webhook_receive`).

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
    // copies it, a tenth of the CPU of a duplicate's answer (issue 29).
    // SAFETY: lookup_rowtype_tupdesc returns a reference-counted
    // descriptor, or raises 42809 when the type is not a row type.
    let desc = unsafe { PgTupleDesc::from_pg(pg_sys::lookup_rowtype_tupdesc(type_oid, -1)) };
    // SAFETY: the callers pass one datum per column of the type, of the
    // column's type (the SQL types of their declared composite types).
    unsafe { PgHeapTuple::from_datums(desc, values) }
        .unwrap_or_else(|e| pgrx::error!("webhook_dedup: building the result row: {e}"))
}
