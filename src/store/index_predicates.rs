//! The compiled predicates of the keys table's partial indexes, kept per
//! backend across calls.
//!
//! `ExecInsertIndexTuples` evaluates a partial index's predicate for every
//! row it indexes, with an expression state it compiles on first use
//! (`ExecPrepareQual`: `expression_planner`, then `ExecInitQual`) and keeps
//! in the `IndexInfo`. The SQL statements build that `IndexInfo` once per
//! execution; [`super::direct_writes`] builds it once per call, so each new key
//! compiled both predicates of the extension's indexes (`keys_open`,
//! `keys_expiry`) again: 5% of a new key's CPU, measured with `perf`. Here the compiled state is kept in a memory context of the
//! backend and handed to the next call's `IndexInfo`.
//!
//! It is used only for the predicate it was compiled from: the call's
//! `IndexInfo` (built from the relation cache as the executor builds it)
//! must hold a predicate `equal()` to the kept one, so a dropped,
//! re-created or changed index never meets another index's state, with or
//! without an invalidation. It is kept only for predicates the executor
//! evaluates without any resource of a query or transaction: columns,
//! constants, boolean connectives, NULL tests and operators whose
//! functions are built into PostgreSQL (oid below `FirstNormalObjectId`);
//! any other predicate is compiled per call, as before (a whole-row column
//! would keep a tuple descriptor of the call's executor state).
//!
//! Nothing kept is freed while the backend lives (a state may be in use by
//! the current call's `IndexInfo`): at most [`KEPT`] predicates are kept,
//! and past that a new one is compiled per call. A predicate that does not
//! qualify is remembered without a state, and what planning it allocated
//! is freed at once. (A review of the first version found both: planning
//! garbage left in the backend's context for each call with such a
//! predicate, and a reset at the limit that could free a state handed out
//! earlier in the same call.)

use pgrx::pg_sys;
use std::cell::RefCell;

/// How many predicates a backend keeps (two per keys table, or per shard
/// of it a Citus node holds: 128 shards). Past this many, a predicate not
/// kept yet is compiled per call, as the executor does; nothing kept is
/// ever freed while the backend lives (a state may be in use by the
/// current call's `IndexInfo`), so the memory is bounded by this count.
const KEPT: usize = 256;

struct Kept {
    /// The index (a hint only: the predicate itself is compared).
    index: pg_sys::Oid,
    /// A copy of the predicate as the relation cache gave it.
    predicate: *mut pg_sys::List,
    /// Its compiled state, or null for a predicate that does not qualify
    /// (remembered so that it is not planned twice per call).
    state: *mut pg_sys::ExprState,
}

thread_local! {
    /// The memory context holding every kept copy and state (null until
    /// first used), and the entries.
    static KEPT_STATES: RefCell<(pg_sys::MemoryContext, Vec<Kept>)> =
        const { RefCell::new((std::ptr::null_mut(), Vec::new())) };
}

/// Give each partial index of `rri` (opened by `ExecOpenIndices`) the
/// compiled state of its predicate kept from an earlier call, compiling
/// and keeping it when there is none and the predicate qualifies.
///
/// # Safety
/// `rri` has its indexes open, with the `IndexInfo`s `ExecOpenIndices`
/// built (predicate states not yet made).
pub(super) unsafe fn reuse(rri: *mut pg_sys::ResultRelInfo) {
    // SAFETY: the arrays have ri_NumIndices entries (ExecOpenIndices); the
    // kept states live in a context of the backend's own that is never
    // reset.
    unsafe {
        for i in 0..(*rri).ri_NumIndices as usize {
            let info = *(*rri).ri_IndexRelationInfo.add(i);
            let predicate = (*info).ii_Predicate;
            if predicate.is_null() || !(*info).ii_PredicateState.is_null() {
                continue;
            }
            let index = (**(*rri).ri_IndexRelationDescs.add(i)).rd_id;
            (*info).ii_PredicateState = state_for(index, predicate);
        }
    }
}

/// The kept state of `predicate`, compiled now if needed; null (the
/// executor then compiles it per call) when the predicate does not
/// qualify or the backend keeps [`KEPT`] already.
///
/// # Safety
/// `predicate` is a valid implicit-AND list of an index's predicate.
unsafe fn state_for(index: pg_sys::Oid, predicate: *mut pg_sys::List) -> *mut pg_sys::ExprState {
    KEPT_STATES.with_borrow_mut(|(context, kept)| {
        // SAFETY: node trees compared read-only; compiled as
        // ExecPrepareQual compiles, in contexts of the backend's own.
        unsafe {
            if let Some(found) =
                kept.iter().find(|k| k.index == index && pg_sys::equal(k.predicate.cast(), predicate.cast()))
            {
                return found.state;
            }
            if kept.len() >= KEPT {
                return std::ptr::null_mut();
            }
            if context.is_null() {
                *context = pg_sys::AllocSetContextCreateInternal(
                    pg_sys::TopMemoryContext,
                    c"webhook_dedup index predicates".as_ptr(),
                    pg_sys::ALLOCSET_SMALL_MINSIZE as usize,
                    pg_sys::ALLOCSET_SMALL_INITSIZE as usize,
                    pg_sys::ALLOCSET_SMALL_MAXSIZE as usize,
                );
            }
            // The copy compared with is kept in the backend's context; the
            // predicate is planned and compiled in a context of its own
            // (ExecPrepareQual plans the copy it is given in place), kept
            // when it qualifies and deleted, with what planning allocated,
            // when it does not.
            let previous = pg_sys::MemoryContextSwitchTo(*context);
            let kept_predicate: *mut pg_sys::List = pg_sys::copyObjectImpl(predicate.cast()).cast();
            let compiled = pg_sys::AllocSetContextCreateInternal(
                *context,
                c"webhook_dedup index predicate".as_ptr(),
                pg_sys::ALLOCSET_SMALL_MINSIZE as usize,
                pg_sys::ALLOCSET_SMALL_INITSIZE as usize,
                pg_sys::ALLOCSET_SMALL_MAXSIZE as usize,
            );
            pg_sys::MemoryContextSwitchTo(compiled);
            let copy: *mut pg_sys::List = pg_sys::copyObjectImpl(predicate.cast()).cast();
            let planned: *mut pg_sys::List = pg_sys::expression_planner(copy.cast()).cast();
            let state = if self_contained(planned.cast()) {
                pg_sys::ExecInitQual(planned, std::ptr::null_mut())
            } else {
                std::ptr::null_mut()
            };
            pg_sys::MemoryContextSwitchTo(previous);
            if state.is_null() {
                pg_sys::MemoryContextDelete(compiled);
            }
            kept.push(Kept { index, predicate: kept_predicate, state });
            state
        }
    })
}

/// Whether the compiled `node` holds no resource of a query or a
/// transaction: only lists, columns (not the whole row), constants, boolean connectives, NULL
/// tests, binary-compatible relabelling, and operators whose functions are
/// built in (not `= ANY (...)`, whose hashed form builds its table at the
/// first evaluation, in that evaluation's memory).
///
/// # Safety
/// `node` is null or a valid expression tree.
unsafe fn self_contained(node: *mut pg_sys::Node) -> bool {
    let built_in = |oid: pg_sys::Oid| oid != pg_sys::InvalidOid && oid.to_u32() < pg_sys::FirstNormalObjectId;
    // SAFETY: each node is read as the type its tag says.
    unsafe {
        if node.is_null() {
            return true;
        }
        let all = |list: *mut pg_sys::List| {
            list.is_null()
                || (0..(*list).length as usize).all(|i| self_contained((*(*list).elements.add(i)).ptr_value.cast()))
        };
        match (*node).type_ {
            pg_sys::NodeTag::T_List => all(node.cast()),
            // a column, not the whole row (whose evaluation keeps a tuple
            // descriptor in the executor state's memory) nor a system one
            pg_sys::NodeTag::T_Var => (*node.cast::<pg_sys::Var>()).varattno > 0,
            pg_sys::NodeTag::T_Const => true,
            pg_sys::NodeTag::T_OpExpr => {
                let op = &*node.cast::<pg_sys::OpExpr>();
                built_in(op.opfuncid) && !op.opretset && all(op.args)
            }
            pg_sys::NodeTag::T_BoolExpr => all((*node.cast::<pg_sys::BoolExpr>()).args),
            pg_sys::NodeTag::T_NullTest => self_contained((*node.cast::<pg_sys::NullTest>()).arg.cast()),
            pg_sys::NodeTag::T_RelabelType => self_contained((*node.cast::<pg_sys::RelabelType>()).arg.cast()),
            _ => false,
        }
    }
}
