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
    let desc = PgTupleDesc::for_composite_type_by_oid(type_oid)
        .unwrap_or_else(|| pgrx::error!("webhook_dedup: the function's return type {type_oid:?} is not a row type"));
    // SAFETY: the callers pass one datum per column of the type, of the
    // column's type (the SQL types of their declared composite types).
    unsafe { PgHeapTuple::from_datums(desc, values) }
        .unwrap_or_else(|e| pgrx::error!("webhook_dedup: building the result row: {e}"))
}
