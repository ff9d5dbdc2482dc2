//! The trigger that keeps every backend's cache of `webhook_dedup.sources`
//! ([`crate::store::sources`]) true to the table.

/// SQL functions in schema `webhook_dedup`.
#[pgrx::pg_schema]
mod webhook_dedup {
    use pgrx::prelude::*;

    /// `AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ... FOR EACH STATEMENT`
    /// on `webhook_dedup.sources` (the trigger `sources_changed`): sends a
    /// relation cache invalidation of the table, which empties each
    /// backend's cache of per-source settings when the change commits (and
    /// in the changing transaction at its next command).
    #[pg_trigger]
    fn sources_changed<'a>(
        trigger: &'a PgTrigger<'a>,
    ) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, pgrx::trigger_support::PgTriggerError> {
        crate::store::cache::invalidate(trigger.relid()?);
        Ok(None)
    }
}
