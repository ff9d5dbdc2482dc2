//! Bulk redrive (docs/operations.md "Redriving after a fix"):
//! `webhook_dedup.redrive` matches keys (dead letters by default, failed
//! keys, unknown outcomes when named, conflicts whose delivery is
//! archived), counts them (a dry run) or records a run that the
//! maintenance worker moves back to due in paced batches
//! ([`crate::maintenance::redrive`]); `webhook_dedup.cancel_redrive` stops
//! one; the view `webhook_dedup.redrive_runs` shows their progress.

#[pgrx::pg_schema]
mod webhook_dedup {
    use crate::error::{required, Error, OrRaise, Raise};
    use crate::spi;
    use crate::store::redrive::{self as store, Filter};
    use crate::time::{clock_now, micros};
    use pgrx::datum::{Array, TimestampWithTimeZone};
    use pgrx::prelude::*;

    /// The states a redrive may name: the key states that wait for an
    /// operator or a retry, and `conflict`.
    const STATES: [&str; 4] = ["dead_lettered", "failed", "unknown_outcome", "conflict"];

    fn check_not_distributed() {
        crate::api::args::one_server_only("bulk redrive", "docs/operations.md, \"Redriving after a fix\".");
    }

    /// Move keys of `source` back to due after a fix, so that the workers
    /// (`webhook_next`) process them again with their payload:
    ///
    /// - `states`: `dead_lettered` (the default), `failed`,
    ///   `unknown_outcome` (only when named: its effect may have happened),
    ///   `conflict` (keys whose latest conflicting delivery is archived: it
    ///   is processed, and becomes the key's content);
    /// - `since`, `until`: first seen (a conflict: received) in [since,
    ///   until); `event_types`: of these types; `max`: at most this many,
    ///   oldest first;
    /// - `dry_run`: count the keys, change nothing.
    ///
    /// A real run is recorded (`webhook_dedup.redrive_runs`) and its keys
    /// are moved by the maintenance worker, `webhook_dedup.batch_size` per
    /// pass; a key a live delivery or an operator changed first is skipped,
    /// as is one without a payload for the workers (claimed, not enqueued,
    /// and not archived: `keep_payload`). One row: `run` (NULL for a dry
    /// run) and `matched`. For operators. Errors: 22004 NULL source, states
    /// or dry_run; 22023 a bad source, no state or another one, since not
    /// before until, an infinite time, max below 1; 0A000 on a distributed
    /// install.
    #[pg_extern(volatile, parallel_unsafe)]
    #[allow(clippy::too_many_arguments)]
    fn redrive(
        source: Option<&str>,
        states: default!(Option<Array<'_, &str>>, "ARRAY['dead_lettered']"),
        since: default!(Option<TimestampWithTimeZone>, "NULL"),
        until: default!(Option<TimestampWithTimeZone>, "NULL"),
        event_types: default!(Option<Array<'_, &str>>, "NULL"),
        max: default!(Option<i64>, "NULL"),
        dry_run: default!(Option<bool>, false),
    ) -> TableIterator<'static, (name!(run, Option<i64>), name!(matched, i64))> {
        let source = required(source, "source");
        crate::key::check_source(source).or_raise();
        let states = required(states, "states");
        let listed: Vec<&str> = states.iter().map(|s| required(s, "an element of states")).collect();
        if listed.is_empty() {
            Error::invalid("states must name at least one state").raise();
        }
        if let Some(bad) = listed.iter().find(|s| !STATES.contains(s)) {
            Error::invalid(format!("a redrive cannot take keys in state \"{bad}\" (one of {})", STATES.join(", ")))
                .raise();
        }
        let since = since.map(|t| micros(t, "since").or_raise());
        let until = until.map(|t| micros(t, "until").or_raise());
        if let (Some(s), Some(u)) = (since, until) {
            if s >= u {
                Error::invalid("since must be before until").raise();
            }
        }
        if max.is_some_and(|m| m < 1) {
            Error::invalid("max must be at least 1").raise();
        }
        let dry_run = required(dry_run, "dry_run");
        check_not_distributed();
        let filter = Filter {
            source,
            states: listed.iter().filter(|s| **s != "conflict").map(|s| s.to_string()).collect(),
            conflicts: listed.contains(&"conflict"),
            since,
            until,
            event_types: event_types.map(|a| a.iter().flatten().map(str::to_owned).collect()),
            max,
        };
        let by = crate::api::args::session_user();
        let (matched, keeps_payload) = spi::connected(|conn| {
            let keeps = crate::store::sources::settings(conn, source).keep_payload;
            (store::start(conn, &filter, dry_run, clock_now(), &by), keeps)
        });
        warn_without_payload(source, matched, keeps_payload);
        TableIterator::once((matched.run, matched.keys))
    }

    /// The NOTICEs of a redrive whose keys cannot all be processed again:
    /// how many matched keys have no payload for the workers
    /// (the move skips them as `no_payload`, `redrive_keys.outcome`), and
    /// that a source which keeps no payloads has only its enqueued keys'.
    fn warn_without_payload(source: &str, matched: store::Matched, keeps_payload: bool) {
        if !keeps_payload {
            crate::error::notice(
                format!("source \"{source}\" keeps no payloads (webhook_dedup.sources.keep_payload is not on)"),
                "A key claimed without its body (webhook_claim, webhook_receive in claim mode) has nothing for \
                 webhook_next to hand over unless its delivery was archived; only enqueued keys carry theirs. \
                 Set keep_payload for the source (docs/operations.md, \"The payload archive\").",
            );
        }
        if matched.without_payload > 0 {
            crate::error::notice(
                format!(
                    "{} of the {} keys matched have no payload to redrive: the run will skip them as no_payload",
                    matched.without_payload, matched.keys
                ),
                "They were claimed without their body and not archived (or past payload_retention), or redacted. \
                 See them, once the run reaches them, in webhook_dedup.redrive_keys (outcome no_payload); \
                 docs/operations.md, \"A dead letter without a payload\".",
            );
        }
    }

    /// Stop the bulk redrive `run`: the keys it has not moved yet stay as
    /// they are (a batch the worker is moving finishes first). Returns how
    /// many keys it moved. A run already done or cancelled is left as it
    /// is. For operators. Errors: 22004 NULL run; P0002 unknown run; 0A000
    /// on a distributed install.
    #[pg_extern(volatile, parallel_unsafe)]
    fn cancel_redrive(run: Option<i64>) -> i64 {
        let run = required(run, "run");
        check_not_distributed();
        let by = crate::api::args::session_user();
        match spi::connected(|conn| store::cancel(conn, run, clock_now(), &by)) {
            Some((_, moved)) => moved,
            None => Error::NoDataFound { message: format!("no bulk redrive {run}") }.raise(),
        }
    }
}
