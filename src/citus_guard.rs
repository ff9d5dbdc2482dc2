//! A guard in front of Citus's function call delegation (docs/distributed.md).
//!
//! `webhook_dedup.distribute()` registers the single-key functions with
//! `create_distributed_function(..., distribution_arg_name => 'source')`.
//! Citus then plans `SELECT webhook_claim('github', ...)` as a call on the
//! node that holds the source's shard: after `standard_planner`, it takes
//! the (constant-folded) `source` argument and hashes it to find the shard.
//! Citus 13.2.2 hashes that constant without checking it for NULL
//! (`ShardPlacementForFunctionColocatedWithDistTable` in
//! `planner/function_call_delegation.c` passes `constvalue` to
//! `FindShardInterval`): `SELECT webhook_claim(NULL, 'k')` dereferences a
//! null pointer in the planner and the coordinator restarts, for any role
//! that can connect, since planning comes before the EXECUTE check (the
//! same crash with a parameter: citusdata/citus#7242).
//!
//! The guard sees the query at the point Citus will: PostgreSQL's
//! `create_upper_paths_hook`, called by `grouping_planner` inside
//! `standard_planner` once the query is preprocessed (parameters of a
//! custom plan bound, defaults inserted, constants folded, SQL functions
//! inlined, views and CTEs pulled up). When the top-level query has the
//! shape Citus delegates (`SELECT f(...)` or `SELECT ... FROM f(...)`), `f`
//! is one of the functions `distribute()` registers and its `source` is a
//! NULL constant, the guard changes that argument in place, in the tree
//! both the plan and Citus read, so that the call means what it means on
//! one server:
//!
//! - `webhook_receive`, whose NULL source is the scheme's name, gets that
//!   name (`Scheme::name`) when the scheme is a constant that parses: the
//!   call is delegated to the node that holds the scheme's source;
//! - in every other case the NULL is wrapped in an explicit no-op cast: no
//!   longer a constant, so Citus does not delegate the call; it runs here,
//!   and the function answers NULL as it does on one server (22004, or the
//!   42501 of a caller without EXECUTE, checked first).
//!
//! Installed only when Citus is in `shared_preload_libraries` (and so
//! loaded before this library, as Citus requires); otherwise no hook, no
//! cost.

use crate::signature::Scheme;
use pgrx::pg_sys;
use std::ffi::CStr;

/// The C symbols of the functions `distribute()` registers with
/// `distribution_arg_name => 'source'` (src/sql/distribute.sql; a unit
/// test compares the two lists). Where `source` (and `webhook_receive`'s
/// `scheme`) is among the arguments is read from the function's
/// `proargnames`.
const DELEGATED: [&str; 14] = [
    "webhook_claim_wrapper",
    "webhook_claim_many_wrapper",
    "webhook_complete_wrapper",
    "webhook_fail_wrapper",
    "webhook_mark_unknown_wrapper",
    "webhook_checkpoint_wrapper",
    "webhook_extend_lease_wrapper",
    "webhook_enqueue_wrapper",
    "webhook_advance_wrapper",
    "webhook_resolve_wrapper",
    "webhook_forget_wrapper",
    "webhook_receive_wrapper",
    "reconcile_wrapper",
    "unseen_wrapper",
];

/// Where a registered function takes its `source`, and its `scheme` when
/// it has one (`webhook_receive`, whose NULL source is the scheme's name).
struct Positions {
    source: usize,
    scheme: Option<usize>,
}

/// Whether a `shared_preload_libraries` value lists `library` (entries
/// separated by commas, with optional whitespace and double quotes, as
/// PostgreSQL's `SplitDirectoriesString` reads them; a path's last
/// component counts, as `$libdir/citus` loads citus).
pub fn lists_library(value: &str, library: &str) -> bool {
    value.split(',').map(|entry| entry.trim().trim_matches('"').trim()).any(|entry| {
        let name = entry.rsplit('/').next().unwrap_or(entry);
        name == library || name.strip_suffix(".so") == Some(library)
    })
}

/// `ClanguageId`: the OID of language `c` (pg_language.dat, the same in
/// every version; not exported by pgrx).
const C_LANGUAGE: pg_sys::Oid = pg_sys::Oid::from_u32(13);

static mut PREVIOUS: pg_sys::create_upper_paths_hook_type = None;

/// Install the guard when Citus is preloaded. Called from `_PG_init`;
/// `preloading`: this library is being preloaded too (else it is loaded
/// in one backend, after that backend may already have planned a call:
/// warned about).
pub fn install(preloading: bool) {
    // SAFETY: reads a GUC's current value (a static string of the server).
    let preloaded = unsafe {
        let value = pg_sys::GetConfigOption(c"shared_preload_libraries".as_ptr(), true, false);
        !value.is_null() && lists_library(&CStr::from_ptr(value).to_string_lossy(), "citus")
    };
    if !preloaded {
        return;
    }
    if !preloading {
        pgrx::warning!(
            "webhook_dedup is not in shared_preload_libraries while citus is: distributed (webhook_dedup.distribute()), \
             a call with a NULL source planned before this library loads crashes the server (a Citus bug); \
             set shared_preload_libraries = 'citus,webhook_dedup' (docs/distributed.md)"
        );
    }
    // SAFETY: hooks are installed once, in _PG_init, before any query runs
    // in this process; the previous hook is kept and called.
    unsafe {
        PREVIOUS = pg_sys::create_upper_paths_hook;
        pg_sys::create_upper_paths_hook = Some(upper_paths);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn upper_paths(
    root: *mut pg_sys::PlannerInfo,
    stage: pg_sys::UpperRelationKind::Type,
    input_rel: *mut pg_sys::RelOptInfo,
    output_rel: *mut pg_sys::RelOptInfo,
    extra: *mut std::ffi::c_void,
) {
    // SAFETY: the planner passes a valid root whose parse tree is the query
    // being planned, in the planner's memory context.
    unsafe {
        if stage == pg_sys::UpperRelationKind::UPPERREL_FINAL && (*root).query_level == 1 {
            for call in delegable_calls(&*(*root).parse) {
                redirect_null_source(call);
            }
        }
        if let Some(previous) = PREVIOUS {
            // another extension's hook may raise an ERROR (a longjmp): not
            // across these Rust frames
            pg_sys::ffi::pg_guard_ffi_boundary(|| previous(root, stage, input_rel, output_rel, extra));
        }
    }
}

/// The function calls of `query` in the shapes Citus delegates
/// (`TryToDelegateFunctionCall`): alone in the select list of a SELECT
/// without WHERE, or alone in its FROM.
///
/// # Safety
/// `query` is a planner's preprocessed query.
unsafe fn delegable_calls(query: &pg_sys::Query) -> Vec<*mut pg_sys::FuncExpr> {
    let mut calls = Vec::new();
    if query.commandType != pg_sys::CmdType::CMD_SELECT || query.jointree.is_null() {
        return calls;
    }
    // SAFETY: the lists and nodes of a valid query tree.
    unsafe {
        if !(*query.jointree).quals.is_null() {
            return calls;
        }
        let func = |node: *mut pg_sys::Node| {
            (!node.is_null() && pgrx::is_a(node, pg_sys::NodeTag::T_FuncExpr)).then(|| node.cast::<pg_sys::FuncExpr>())
        };
        // SELECT f(...)
        let targets = pgrx::PgList::<pg_sys::TargetEntry>::from_pg(query.targetList);
        if targets.len() == 1 {
            calls.extend(targets.head().and_then(|entry| func((*entry).expr.cast())));
        }
        // SELECT ... FROM f(...)
        let from = pgrx::PgList::<pg_sys::Node>::from_pg((*query.jointree).fromlist);
        if from.len() == 1 {
            if let Some(item) = from.head().filter(|item| pgrx::is_a(*item, pg_sys::NodeTag::T_RangeTblRef)) {
                let index = (*item.cast::<pg_sys::RangeTblRef>()).rtindex;
                let rtes = pgrx::PgList::<pg_sys::RangeTblEntry>::from_pg(query.rtable);
                if let Some(rte) = rtes.get_ptr((index as usize).wrapping_sub(1)) {
                    if (*rte).rtekind == pg_sys::RTEKind::RTE_FUNCTION {
                        let functions = pgrx::PgList::<pg_sys::RangeTblFunction>::from_pg((*rte).functions);
                        if functions.len() == 1 {
                            calls.extend(functions.head().and_then(|f| func((*f).funcexpr)));
                        }
                    }
                }
            }
        }
    }
    calls
}

/// When `call` is of a function `distribute()` registers and its source is
/// a NULL constant, replace that argument: by the scheme's name for
/// `webhook_receive` with a constant scheme that parses, else by the NULL
/// under an explicit no-op cast (not a constant: Citus does not delegate).
///
/// # Safety
/// `call` is a node of the query being planned, in the planner's memory
/// context.
unsafe fn redirect_null_source(call: *mut pg_sys::FuncExpr) {
    // SAFETY: nodes of a valid tree; the new nodes are allocated in the
    // current (planner's) memory context.
    unsafe {
        let args = (*call).args;
        let arg =
            |index: usize| -> Option<*mut pg_sys::Node> { pgrx::PgList::<pg_sys::Node>::from_pg(args).get_ptr(index) };
        let null_const = |node: *mut pg_sys::Node| {
            let node = pg_sys::strip_implicit_coercions(node);
            pgrx::is_a(node, pg_sys::NodeTag::T_Const) && (*node.cast::<pg_sys::Const>()).constisnull
        };
        // (the catalog is looked at only when some argument is a NULL constant)
        let count = pgrx::PgList::<pg_sys::Node>::from_pg(args).len();
        if !(0..count).any(|i| arg(i).is_some_and(&null_const)) {
            return;
        }
        let Some(positions) = registered(&*call) else { return };
        let Some(source) = arg(positions.source).filter(|a| null_const(*a)) else { return };
        let scheme_name = positions.scheme.and_then(arg).and_then(|node| text_const(node));
        let replacement: *mut pg_sys::Node = match scheme_name.as_deref().map(Scheme::parse) {
            Some(Ok(scheme)) => {
                let name = std::ffi::CString::new(scheme.name()).expect("a scheme name has no NUL");
                pg_sys::makeConst(
                    pg_sys::TEXTOID,
                    -1,
                    pg_sys::DEFAULT_COLLATION_OID,
                    -1,
                    pg_sys::Datum::from(pg_sys::cstring_to_text(name.as_ptr())),
                    false,
                    false,
                )
                .cast()
            }
            _ => pg_sys::makeRelabelType(
                source.cast(),
                pg_sys::exprType(source),
                pg_sys::exprTypmod(source),
                pg_sys::exprCollation(source),
                pg_sys::CoercionForm::COERCE_EXPLICIT_CAST,
            )
            .cast(),
        };
        (*(*args).elements.add(positions.source)).ptr_value = replacement.cast();
    }
}

/// The value of `node` when it is a non-NULL text constant.
///
/// # Safety
/// `node` is a node of a valid expression tree.
unsafe fn text_const(node: *mut pg_sys::Node) -> Option<String> {
    // SAFETY: a text constant's value is a text datum.
    unsafe {
        let node = pg_sys::strip_implicit_coercions(node);
        if !pgrx::is_a(node, pg_sys::NodeTag::T_Const) {
            return None;
        }
        let constant = &*node.cast::<pg_sys::Const>();
        // (a scheme name is short: a longer text is no scheme, and is not copied)
        if constant.constisnull
            || constant.consttype != pg_sys::TEXTOID
            || pgrx::varlena::varsize_any_exhdr(constant.constvalue.cast_mut_ptr()) > 64
        {
            return None;
        }
        let cstring = pg_sys::text_to_cstring(constant.constvalue.cast_mut_ptr());
        Some(CStr::from_ptr(cstring).to_string_lossy().into_owned())
    }
}

/// Where `call`'s function takes `source` (and `scheme`), when it is one
/// of the C functions of [`DELEGATED`].
///
/// # Safety
/// In a transaction (a syscache look-up).
unsafe fn registered(call: &pg_sys::FuncExpr) -> Option<Positions> {
    const PROCOID: i32 = pg_sys::SysCacheIdentifier::PROCOID as i32;
    // SAFETY: syscache look-up by OID; the tuple is released before return;
    // proargnames is a text[] (deconstructed into palloc'd datums).
    unsafe {
        let tuple = pg_sys::SearchSysCache1(PROCOID, pg_sys::Datum::from(call.funcid));
        if tuple.is_null() {
            return None;
        }
        let form = &*(pg_sys::GETSTRUCT(tuple) as *const pg_sys::FormData_pg_proc);
        let mut isnull = false;
        let prosrc =
            pg_sys::SysCacheGetAttr(PROCOID, tuple, pg_sys::Anum_pg_proc_prosrc as pg_sys::AttrNumber, &mut isnull);
        let ours = form.prolang == C_LANGUAGE && !isnull && {
            let symbol = CStr::from_ptr(pg_sys::text_to_cstring(prosrc.cast_mut_ptr()));
            DELEGATED.iter().any(|d| d.as_bytes() == symbol.to_bytes())
        };
        let mut positions = None;
        if ours {
            let names = pg_sys::SysCacheGetAttr(
                PROCOID,
                tuple,
                pg_sys::Anum_pg_proc_proargnames as pg_sys::AttrNumber,
                &mut isnull,
            );
            if !isnull {
                let mut elements: *mut pg_sys::Datum = std::ptr::null_mut();
                let mut count = 0;
                pg_sys::deconstruct_array(
                    pg_sys::pg_detoast_datum(names.cast_mut_ptr()).cast(),
                    pg_sys::TEXTOID,
                    -1,
                    false,
                    pg_sys::TYPALIGN_INT as std::ffi::c_char,
                    &mut elements,
                    std::ptr::null_mut(),
                    &mut count,
                );
                let names: Vec<String> = (0..usize::try_from(count).unwrap_or(0))
                    .map(|i| {
                        let text = (*elements.add(i)).cast_mut_ptr();
                        CStr::from_ptr(pg_sys::text_to_cstring(text)).to_string_lossy().into_owned()
                    })
                    .collect();
                let find = |name: &str| names.iter().position(|n| n == name);
                positions = find("source").map(|source| Positions { source, scheme: find("scheme") });
            }
        }
        pg_sys::ReleaseSysCache(tuple);
        positions
    }
}

#[cfg(test)]
mod tests {
    use super::lists_library;

    #[test]
    fn guards_exactly_the_functions_distribute_registers() {
        let sql = include_str!("sql/distribute.sql");
        let start = sql.find("create_distributed_function").expect("distribute.sql registers functions");
        let list = &sql[sql[..start].rfind("FROM (VALUES").expect("the list of functions")..start];
        let mut registered: Vec<String> = list
            .split("('")
            .skip(1)
            .filter_map(|entry| entry.split('(').next())
            .map(|name| format!("{}_wrapper", name.strip_prefix("webhook_dedup.").expect("schema-qualified")))
            .collect();
        let mut guarded: Vec<String> = super::DELEGATED.iter().map(|s| s.to_string()).collect();
        registered.sort();
        guarded.sort();
        assert_eq!(registered, guarded);
    }

    #[test]
    fn finds_a_library_in_shared_preload_libraries() {
        assert!(lists_library("citus,webhook_dedup", "citus"));
        assert!(lists_library(" citus , webhook_dedup", "citus"));
        assert!(lists_library("\"citus\"", "citus"));
        assert!(lists_library("pg_stat_statements, $libdir/citus", "citus"));
        assert!(lists_library("citus.so", "citus"));
        assert!(!lists_library("webhook_dedup", "citus"));
        assert!(!lists_library("", "citus"));
        assert!(!lists_library("citus_columnar", "citus"));
        assert!(!lists_library("pg_citus", "citus"));
    }
}
