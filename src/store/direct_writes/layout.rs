//! The layout check: whether `webhook_dedup.keys` (or a local shard of
//! it) is exactly the table the extension created, so that a direct write
//! does what the SQL statement would ([`super`], the list of conditions);
//! checked once per relation cache generation.

#[allow(unused_imports)]
use super::*;

/// The columns of `webhook_dedup.keys`, in [`Col`] order: name, type,
/// whether a new key's row gives it a value (the others are NULL, as the
/// SQL insert leaves them to their defaults), and whether the extension's
/// schema declares it NOT NULL (the others are written NULL by some
/// transition, so a NOT NULL added to them would need the check the
/// executor makes and this module does not).
pub(super) const COLUMNS: [(&str, Oid, bool, bool); 25] = [
    ("source", pg_sys::TEXTOID, true, true),
    ("idem_key", pg_sys::TEXTOID, true, true),
    ("state", pg_sys::TEXTOID, true, true),
    ("attempt", pg_sys::INT4OID, true, true),
    ("claim_token", pg_sys::UUIDOID, true, false),
    ("lease_expires_at", pg_sys::TIMESTAMPTZOID, true, false),
    ("next_attempt_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("due_at", pg_sys::TIMESTAMPTZOID, true, false),
    ("fingerprint", pg_sys::BYTEAOID, false, false),
    ("event_type", pg_sys::TEXTOID, false, false),
    ("result", pg_sys::JSONBOID, false, false),
    ("last_step", pg_sys::TEXTOID, false, false),
    ("last_error", pg_sys::TEXTOID, false, false),
    ("deliveries", pg_sys::INT4OID, true, true),
    ("conflicts", pg_sys::INT4OID, true, true),
    ("first_seen_at", pg_sys::TIMESTAMPTZOID, true, true),
    ("last_seen_at", pg_sys::TIMESTAMPTZOID, true, true),
    ("completed_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("leased_at", pg_sys::TIMESTAMPTZOID, true, false),
    ("expires_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("redacted_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("redacted_by", pg_sys::TEXTOID, false, false),
    ("redriven_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("redrive_run", pg_sys::INT8OID, false, false),
    ("reconciled_at", pg_sys::TIMESTAMPTZOID, false, false),
];

/// A column of `webhook_dedup.keys` (an index into [`COLUMNS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    Source,
    IdemKey,
    State,
    Attempt,
    ClaimToken,
    LeaseExpiresAt,
    NextAttemptAt,
    DueAt,
    Fingerprint,
    EventType,
    Result,
    LastStep,
    LastError,
    Deliveries,
    Conflicts,
    FirstSeenAt,
    LastSeenAt,
    CompletedAt,
    LeasedAt,
    ExpiresAt,
    RedactedAt,
    RedactedBy,
    RedrivenAt,
    RedriveRun,
    ReconciledAt,
}

/// Where each of [`COLUMNS`] is in the table (0-based attribute index).
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    pub(super) at: [usize; COLUMNS.len()],
}

/// How many relations' layouts a backend keeps: the keys table, or on a
/// Citus node the shards of it that the node holds (32 by default across
/// the workers).
pub(super) const LAYOUTS_KEPT: usize = 64;

/// The checked layouts of the keys table or its shards: the relation cache
/// generation they were checked in, and (relation oid, layout or None when
/// the table is not as needed).
pub(super) type Layouts = (u64, Vec<(u32, Option<Layout>)>);

thread_local! {
    static LAYOUTS: std::cell::RefCell<Layouts> = const { std::cell::RefCell::new((0, Vec::new())) };
}

/// The table's layout, if it is the one the extension created.
///
/// # Safety
/// `rel` is an open relation.
pub(super) unsafe fn check_layout(rel: pg_sys::Relation) -> Option<Layout> {
    // SAFETY: `rel` is open (caller), so its relcache entry and tuple
    // descriptor are valid while we read them.
    unsafe {
        let class = &*(*rel).rd_rel;
        // A plain heap table, not a partition (its partition constraint),
        // without triggers or rules (the statements would fire or apply
        // them).
        if class.relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char
            || class.relispartition
            || class.relam != pg_sys::HEAP_TABLE_AM_OID
            || !(*rel).trigdesc.is_null()
            || !(*rel).rd_rules.is_null()
            || crate::citus::is_citus_table((*rel).rd_id)
        {
            return None;
        }
        let desc = (*rel).rd_att;
        let constr = (*desc).constr;
        if !constr.is_null() && ((*constr).num_check > 0 || (*constr).has_generated_stored) {
            return None;
        }
        let desc = PgTupleDesc::from_pg_unchecked(desc);
        let mut at = [usize::MAX; COLUMNS.len()];
        for (i, attr) in desc.iter().enumerate() {
            if attr.attisdropped {
                continue;
            }
            let (c, (_, type_oid, set, not_null)) =
                COLUMNS.iter().enumerate().find(|(_, (name, ..))| *name == attr.name())?;
            // The exact type, without a type modifier (a timestamptz(0)
            // would round what the SQL writes and this module would not).
            if attr.atttypid != *type_oid || attr.atttypmod != -1 || at[c] != usize::MAX || attr.attgenerated != 0 {
                return None;
            }
            // The key columns compare byte for byte, as their primary key
            // and the rows this module locks do ("C", the extension's own
            // collation): under a nondeterministic collation the index
            // would call 'ABC' and 'abc' one key while the row read back
            // has the other.
            if (c == Col::Source as usize || c == Col::IdemKey as usize) && attr.attcollation != pg_sys::C_COLLATION_OID
            {
                return None;
            }
            // NOT NULL only where the extension declares it (nothing here
            // writes NULL there), and no default on a column a new key
            // leaves NULL (the SQL insert would give it the default).
            if (attr.attnotnull && !not_null) || (!set && attr.atthasdef) {
                return None;
            }
            at[c] = i;
        }
        at.iter().all(|&i| i != usize::MAX).then_some(Layout { at })
    }
}

/// The layout of `rel` (cached per relation cache generation).
///
/// # Safety
/// `rel` is an open relation.
pub(super) unsafe fn layout(rel: pg_sys::Relation) -> Option<Layout> {
    // SAFETY: `rel` is open (caller).
    let oid = unsafe { (*rel).rd_id.to_u32() };
    let generation = crate::relcache::generation();
    let cached = LAYOUTS.with_borrow_mut(|(at, layouts)| {
        if *at != generation {
            *at = generation;
            layouts.clear();
        }
        layouts.iter().find(|(cached, _)| *cached == oid).map(|(_, layout)| *layout)
    });
    if let Some(layout) = cached {
        return layout;
    }
    // SAFETY: as above.
    let layout = unsafe { check_layout(rel) };
    LAYOUTS.with_borrow_mut(|(at, layouts)| {
        if *at == generation {
            if layouts.len() >= LAYOUTS_KEPT {
                layouts.clear();
            }
            layouts.push((oid, layout));
        }
    });
    layout
}

/// Whether this transaction may write here without SQL's own checks: not
/// read-only (`SET TRANSACTION READ ONLY`, `default_transaction_read_only`,
/// a standby), not in parallel mode, and not SERIALIZABLE (a completion
/// reads the row it decides on, and only the executor's scans take the
/// predicate locks serializable isolation needs), and
/// `ignore_system_indexes` off. Otherwise the statements run, and raise
/// what they raise (25006 in a read-only transaction).
pub(super) fn writable_here() -> bool {
    // SAFETY: backend globals and plain status functions.
    unsafe {
        // (ignore_system_indexes, which any login may set when it connects,
        // would turn a completion's look-up through the primary key,
        // systable_beginscan's, into a scan of the whole table)
        !pg_sys::IgnoreSystemIndexes
            && !pg_sys::XactReadOnly
            && !pg_sys::IsInParallelMode()
            && !pg_sys::RecoveryInProgress()
            && pg_sys::XactIsoLevel != pg_sys::XACT_SERIALIZABLE as i32
    }
}

/// Whether `user` has USAGE on `schema`.
///
/// # Safety
/// A plain catalog check; `schema` is an existing namespace.
pub(super) unsafe fn schema_usage(schema: Oid, user: Oid) -> bool {
    let usage = pg_sys::ACL_USAGE as pg_sys::AclMode;
    // SAFETY: per the contract.
    unsafe {
        #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
        let result = pg_sys::pg_namespace_aclcheck(schema, user, usage);
        #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
        let result = pg_sys::object_aclcheck(pg_sys::NamespaceRelationId, schema, user, usage);
        result == pg_sys::AclResult::ACLCHECK_OK
    }
}
