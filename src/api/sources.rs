//! What keeps `webhook_dedup.sources` sound: the check of each row's intake
//! settings ([`crate::intake`]) and the trigger that keeps every backend's
//! cache of the table ([`crate::store::sources`]) true to it.

/// SQL functions in schema `webhook_dedup`.
#[pgrx::pg_schema]
mod webhook_dedup {
    use crate::error::OrRaise;
    use crate::intake::{Columns, SourceIntake};
    use pgrx::datum::Array;
    use pgrx::prelude::*;

    /// The check constraint `sources_intake` of `webhook_dedup.sources`:
    /// `true` when the row's intake columns parse as `webhook_receive` reads
    /// them, else 22023 naming the column and what is wrong (never `false`),
    /// so that an invalid header name, JSON pointer, time format or
    /// event-type pattern fails when it is configured, not when a delivery
    /// arrives. Rules: `crates/webhook-dedup-core/src/intake.rs`, docs/providers.md.
    #[pg_extern(immutable, parallel_safe)]
    #[allow(clippy::too_many_arguments)]
    fn source_intake_valid(
        source: Option<&str>,
        event_id_from: Option<&str>,
        event_type_from: Option<&str>,
        event_time_from: Option<&str>,
        event_time_format: Option<&str>,
        fingerprint_pointers: Option<Array<'_, &str>>,
        accept_event_types: Option<Array<'_, &str>>,
    ) -> bool {
        let owned = |t: Option<&str>| t.map(str::to_owned);
        let list = |a: Option<Array<'_, &str>>| a.map(|a| a.iter().map(owned).collect());
        let columns = Columns {
            event_id_from: owned(event_id_from),
            event_type_from: owned(event_type_from),
            event_time_from: owned(event_time_from),
            event_time_format: owned(event_time_format),
            fingerprint_pointers: list(fingerprint_pointers),
            replay_guard: None,
            accept_event_types: list(accept_event_types),
        };
        SourceIntake::parse(source.unwrap_or_default(), columns).or_raise();
        true
    }

    /// `AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ... FOR EACH STATEMENT`
    /// on `webhook_dedup.sources` and `source_secrets` (the triggers
    /// `sources_changed`, `source_secrets_changed`): sends a relation cache
    /// invalidation of both tables, which empties each backend's cache of
    /// per-source settings and keys when the change commits (and in the
    /// changing transaction at its next command). Both by name, not only the
    /// trigger's relation: on a Citus node the trigger fires on the local
    /// copy of the reference table (`sources_102008`), while the caches
    /// watch the tables the extension's statements name.
    pub(crate) fn sources_changed<'a>(
        trigger: &'a PgTrigger<'a>,
    ) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, pgrx::trigger_support::PgTriggerError> {
        crate::relcache::invalidate(trigger.relid()?);
        crate::relcache::invalidate_settings_tables();
        Ok(None)
    }
}

crate::trigger_function!(
    "webhook_dedup.sources_changed",
    sources_changed_wrapper,
    pg_finfo_sources_changed_wrapper,
    webhook_dedup::sources_changed
);

pgrx::extension_sql!(
    r#"
CREATE FUNCTION webhook_dedup.sources_changed() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'sources_changed_wrapper';
"#,
    name = "sources_changed",
    requires = ["schema"]
);
