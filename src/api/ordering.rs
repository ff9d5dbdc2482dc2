//! The out-of-order guard: `webhook_advance` (a watermark per entity) and
//! the trigger `webhook_monotonic_guard` for the caller's own tables.
//! Deduplication stops a retried event from being applied twice; it does
//! not stop an older event, retried, from overwriting a newer one. These
//! two do. The tie rule is in `src/sql/statements/watermarks_advance.sql`
//! (run by [`crate::store::watermarks`]) and `docs/ordering.md`.

use crate::error::{required, Error, OrRaise, Raise};
use crate::key::check_bounded;
use crate::spi;
use crate::store::watermarks;
use crate::time::{clock_now, micros};
use pgrx::datum::{Timestamp, TimestampWithTimeZone};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::WhoAllocated;

/// True when the event with `source_updated_at` (and optionally its
/// `event_id` and a tie-breaking `sequence`) is newer than every event seen
/// for (`source`, `entity_id`): apply it; the watermark moves to it. False
/// when it is older (skip it; nothing changed). Ties: the same
/// `source_updated_at` with the same `event_id` is an idempotent re-apply
/// (true); with both sequences given, the greater sequence wins; any other
/// tie is refused (false: the event applied first stays). One atomic upsert
/// in the caller's transaction; concurrent advances of one entity end at the
/// newest event in any order. Errors: 22004 NULL `source`, `entity_id` or
/// `source_updated_at`; 22023 empty or over 255 characters, an infinite time.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_advance(
    source: Option<&str>,
    entity_id: Option<&str>,
    source_updated_at: Option<TimestampWithTimeZone>,
    event_id: default!(Option<&str>, "NULL"),
    sequence: default!(Option<i64>, "NULL"),
) -> bool {
    let source = required(source, "source");
    let entity_id = required(entity_id, "entity_id");
    crate::key::check_source(source).or_raise();
    check_bounded("entity_id", entity_id).or_raise();
    let at = micros(required(source_updated_at, "source_updated_at"), "source_updated_at").or_raise();
    spi::connected(|conn| watermarks::advance(conn, source, entity_id, at, event_id, sequence, clock_now()))
}

/// A comparable value of a timestamp column (both types count microseconds).
fn column_time(tuple: &PgHeapTuple<'_, impl WhoAllocated>, column: &str, type_oid: pg_sys::Oid) -> Option<i64> {
    let failed = |e| -> ! { pgrx::error!("webhook_monotonic_guard: reading {column}: {e}") };
    if type_oid == pg_sys::TIMESTAMPTZOID {
        tuple.get_by_name::<TimestampWithTimeZone>(column).unwrap_or_else(|e| failed(e)).map(pg_sys::TimestampTz::from)
    } else {
        tuple.get_by_name::<Timestamp>(column).unwrap_or_else(|e| failed(e)).map(pg_sys::Timestamp::from)
    }
}

/// `BEFORE UPDATE` (or `BEFORE INSERT OR UPDATE`) row trigger for the
/// caller's own tables: `EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('source_updated_at')`.
/// An update whose new value of the named column is older than the stored
/// one is skipped (the statement reports zero rows for it), including the
/// update of an `INSERT ... ON CONFLICT DO UPDATE`. A stored NULL lets any
/// update through; an incoming NULL over a stored value is skipped (an
/// update that does not know its time must not erase the guard); an equal
/// value passes. Inserts pass. Errors when the trigger is used wrongly:
/// 22023 no or several arguments; 42703 the column does not exist; 42804
/// it is not `timestamptz` or `timestamp`; 39P01 not a row-level BEFORE
/// trigger on INSERT or UPDATE, or called other than by a trigger
/// ([`crate::api::trigger`]).
fn webhook_monotonic_guard<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, impl WhoAllocated>>, PgHeapTupleError> {
    use pgrx::trigger_support::{PgTriggerLevel, PgTriggerOperation, PgTriggerWhen};
    fn protocol(message: &str) -> ! {
        Error::TriggerProtocolViolated { message: message.into() }.raise()
    }
    if !matches!(trigger.level(), PgTriggerLevel::Row) || !matches!(trigger.when(), Ok(PgTriggerWhen::Before)) {
        protocol("webhook_monotonic_guard must be a BEFORE ... FOR EACH ROW trigger");
    }
    let args = trigger.extra_args().unwrap_or_default();
    let [column] = args.as_slice() else {
        Error::invalid_with_hint(
            format!("webhook_monotonic_guard needs one argument, the column to guard, not {}", args.len()),
            "EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('source_updated_at')",
        )
        .raise();
    };
    let new = trigger.new().unwrap_or_else(|| protocol("webhook_monotonic_guard fires on INSERT or UPDATE"));
    let table = trigger.table_name().unwrap_or_default();
    let Some((_, attribute)) = new.get_attribute_by_name(column) else {
        Error::UndefinedColumn { message: format!("column \"{column}\" of relation \"{table}\" does not exist") }
            .raise();
    };
    let type_oid = attribute.atttypid;
    if type_oid != pg_sys::TIMESTAMPTZOID && type_oid != pg_sys::TIMESTAMPOID {
        Error::DatatypeMismatch {
            message: format!(
                "column \"{column}\" of relation \"{table}\" must be timestamptz or timestamp to be guarded"
            ),
        }
        .raise();
    }
    match trigger.op() {
        Ok(PgTriggerOperation::Update) => {}
        Ok(PgTriggerOperation::Insert) => return Ok(Some(new)),
        _ => protocol("webhook_monotonic_guard fires on INSERT or UPDATE"),
    }
    let old = trigger.old().expect("an UPDATE trigger has the old row");
    let stored = column_time(&old, column, type_oid);
    let incoming = column_time(&new, column, type_oid);
    let apply = match (stored, incoming) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(stored), Some(incoming)) => incoming >= stored,
    };
    Ok(apply.then_some(new))
}

crate::trigger_function!(
    "webhook_dedup.webhook_monotonic_guard",
    webhook_monotonic_guard_wrapper,
    pg_finfo_webhook_monotonic_guard_wrapper,
    webhook_monotonic_guard
);

extension_sql!(
    r#"
CREATE FUNCTION webhook_dedup.webhook_monotonic_guard() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_monotonic_guard_wrapper';
"#,
    name = "webhook_monotonic_guard",
    requires = ["schema"]
);
