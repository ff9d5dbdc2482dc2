//! `#[pg_test]`s of one maintenance pass in one session: the lease sweep,
//! deleting keys past retention (and keeping what must live on), pruning,
//! retention warnings, and the ID-07 vector (see `src/tests/mod.rs` for how
//! these tests run). The worker, concurrency and claims while keys are
//! deleted are tested against a real cluster in `tests/cluster/`.
//!
//! Time passing is simulated the only way a test in one transaction can:
//! rows are written with old times, as if they had been stored then.

#[pgrx::pg_schema]
mod tests {
    use crate::signature::vectors;
    use pgrx::prelude::*;
    use pgrx::JsonB;
    use serde_json::Value;

    fn claim(source: &str, key: &str, lease: &str) -> (String, Option<pgrx::Uuid>, i32) {
        Spi::connect(|client| {
            let row = client
                .select(
                    "SELECT outcome, claim_token, attempt FROM webhook_dedup.webhook_claim($1, $2, lease => $3::interval)",
                    None,
                    &[source.into(), key.into(), lease.into()],
                )
                .unwrap()
                .first();
            (row.get::<String>(1).unwrap().unwrap(), row.get(2).unwrap(), row.get::<i32>(3).unwrap().unwrap())
        })
    }

    fn state(source: &str, key: &str) -> Option<String> {
        Spi::get_one_with_args::<String>(
            "SELECT (SELECT state FROM webhook_dedup.keys WHERE source = $1 AND idem_key = $2)",
            &[source.into(), key.into()],
        )
        .unwrap()
    }

    /// One pass; the named integer columns of its row, in order.
    fn pass(columns: &[&str]) -> Vec<i64> {
        let select = columns.iter().map(|c| format!("{c}::bigint")).collect::<Vec<_>>().join(", ");
        Spi::connect(|client| {
            let row = client
                .select(&format!("SELECT {select} FROM webhook_dedup.run_maintenance()"), None, &[])
                .unwrap()
                .first();
            (1..=columns.len()).map(|i| row.get::<i64>(i).unwrap().unwrap()).collect()
        })
    }

    /// A key stored on 2020-`day` at noon in `state`, last active at
    /// `last_seen`; a completed key was completed then, under the default
    /// retention (expires_at = last_seen + 30 days, as webhook_complete sets it).
    fn old_key(source: &str, key: &str, day: &str, state: &str, last_seen: &str) {
        let processing = state == "processing";
        Spi::run_with_args(
            "INSERT INTO webhook_dedup.keys
                 (source, idem_key, state, attempt, claim_token, lease_expires_at, due_at,
                  first_seen_at, last_seen_at, completed_at, expires_at)
             VALUES ($1, $2, $4, 1,
                     CASE WHEN $5 THEN gen_random_uuid() END,
                     CASE WHEN $5 THEN now() + interval '1 hour' END,
                     CASE WHEN $5 THEN now() + interval '1 hour' END,
                     $3::timestamptz, $6::timestamptz,
                     CASE WHEN $4 = 'completed' THEN $3::timestamptz END,
                     CASE WHEN $4 = 'completed' THEN $3::timestamptz + interval '30 days' END)",
            &[
                source.into(),
                key.into(),
                format!("2020-{day} 12:00+00").into(),
                state.into(),
                processing.into(),
                last_seen.into(),
            ],
        )
        .unwrap();
    }

    /// ID-05's crash case without a second delivery: the sweep moves an
    /// expired lease to failed (due at once), fences the holder out, and
    /// the next claim reclaims it.
    #[pg_test]
    fn an_expired_lease_is_swept_to_failed_and_its_holder_fenced() {
        let (_, token, _) = claim("sweep", "k", "10 milliseconds");
        let (_, _, _) = claim("sweep", "live", "1 hour");
        Spi::run("SELECT pg_sleep(0.05)").unwrap();
        assert_eq!(pass(&["leases_expired", "dead_lettered"]), vec![1, 0]);
        assert_eq!(state("sweep", "k").as_deref(), Some("failed"));
        assert_eq!(state("sweep", "live").as_deref(), Some("processing"), "a live lease stays");
        let (error, due_now) = Spi::get_two::<String, bool>(
            "SELECT last_error, due_at <= clock_timestamp() AND next_attempt_at = due_at
               FROM webhook_dedup.keys WHERE idem_key = 'k'",
        )
        .unwrap();
        assert!(error.unwrap().starts_with("lease of attempt 1 expired at "));
        assert_eq!(due_now, Some(true));
        let late =
            Spi::get_one_with_args::<bool>("SELECT webhook_dedup.webhook_complete('sweep', 'k', $1)", &[token.into()]);
        assert_eq!(late, Ok(Some(false)), "the swept holder is fenced out");
        let again = claim("sweep", "k", "1 minute");
        assert_eq!((again.0.as_str(), again.2), ("reclaimed", 2));
        // the pass is recorded
        let recorded =
            Spi::get_one::<i32>("SELECT leases_expired FROM webhook_dedup.maintenance_runs ORDER BY id DESC LIMIT 1");
        assert_eq!(recorded, Ok(Some(1)));
    }

    /// A lease that expires on the last allowed attempt is dead-lettered.
    #[pg_test]
    fn an_expired_last_attempt_is_dead_lettered() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('sweep1', 1)").unwrap();
        claim("sweep1", "k", "10 milliseconds");
        Spi::run("SELECT pg_sleep(0.05)").unwrap();
        assert_eq!(pass(&["leases_expired", "dead_lettered"]), vec![0, 1]);
        assert_eq!(state("sweep1", "k").as_deref(), Some("dead_lettered"));
        assert_eq!(claim("sweep1", "k", "1 minute").0, "dead_lettered");
    }

    /// Completed keys past retention are deleted, with their payloads; the
    /// keys that must live on stay, unchanged: those not completed, and a
    /// completed key active within its retention (a late duplicate), which
    /// is looked at again when that retention ends.
    #[pg_test]
    fn keys_past_retention_are_deleted_and_what_must_live_on_stays() {
        for key in ["gone1", "gone2", "gone3"] {
            old_key("old", key, "01-01", "completed", "2020-01-01 12:00+00");
        }
        old_key("old", "recent", "01-01", "completed", "now");
        old_key("old", "working", "01-01", "processing", "2020-01-01 12:00+00");
        old_key("old", "parked", "01-01", "dead_lettered", "2020-01-01 12:00+00");
        Spi::run(
            "INSERT INTO webhook_dedup.payloads (source, idem_key, payload) VALUES ('old', 'gone1', '\\x01'),
                    ('old', 'parked', '\\x02')",
        )
        .unwrap();
        let token_before =
            Spi::get_one::<pgrx::Uuid>("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 'working'");

        assert_eq!(pass(&["keys_pruned", "keys_kept", "more::int"]), vec![3, 1, 0]);
        let left = Spi::get_one::<i64>("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'old'");
        assert_eq!(left, Ok(Some(3)));
        let payloads = Spi::get_one::<String>(
            "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM webhook_dedup.payloads WHERE source = 'old'",
        );
        assert_eq!(payloads, Ok(Some("parked".into())), "a deleted key's payload goes with it");
        let rescheduled = Spi::get_one::<bool>(
            "SELECT expires_at = last_seen_at + interval '30 days' FROM webhook_dedup.keys WHERE idem_key = 'recent'",
        );
        assert_eq!(rescheduled, Ok(Some(true)), "kept until its retention ends");
        assert_eq!(state("old", "parked").as_deref(), Some("dead_lettered"));
        let token_after =
            Spi::get_one::<pgrx::Uuid>("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 'working'");
        assert_eq!(token_before, token_after, "a lease is left alone");
        assert_eq!(claim("old", "recent", "1 minute").0, "duplicate");
        assert_eq!(claim("old", "working", "1 minute").0, "in_progress");
        // a key past retention is forgotten: by design, a delivery after the
        // retention is new
        assert_eq!(claim("old", "gone1", "1 minute").0, "claimed");
        let recorded = Spi::get_two::<i64, i64>(
            "SELECT keys_pruned, keys_kept FROM webhook_dedup.maintenance_runs ORDER BY id DESC LIMIT 1",
        );
        assert_eq!(recorded, Ok((Some(3), Some(1))));
        // a second pass finds nothing due
        assert_eq!(pass(&["keys_pruned", "keys_kept"]), vec![0, 0]);
    }

    /// A pass deletes at most webhook_dedup.batch_size keys (1,000 by
    /// default) and says with `more` that the next pass has work.
    #[pg_test]
    fn a_pass_deletes_one_batch_and_asks_for_more() {
        Spi::run(
            "INSERT INTO webhook_dedup.keys (source, idem_key, state, first_seen_at, last_seen_at, completed_at,
                                             expires_at)
             SELECT 'many', 'k' || i, 'completed', '2020-01-01', '2020-01-01', '2020-01-01', '2020-01-31'
               FROM generate_series(1, 1001) AS i",
        )
        .unwrap();
        assert_eq!(pass(&["keys_pruned", "more::int"]), vec![1000, 1]);
        assert_eq!(pass(&["keys_pruned", "more::int"]), vec![1, 0]);
    }

    /// A source with a longer retention keeps its completed keys past the
    /// default retention: each is looked at again when its own ends.
    #[pg_test]
    fn a_longer_source_retention_keeps_its_keys() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, retention) VALUES ('long', '3650 days')").unwrap();
        for key in ["a", "b", "c"] {
            old_key("long", key, "01-03", "completed", "2020-01-03 12:00+00");
        }
        old_key("short", "x", "01-03", "completed", "2020-01-03 12:00+00");
        assert_eq!(pass(&["keys_pruned", "keys_kept"]), vec![1, 3]);
        assert_eq!(state("short", "x"), None);
        let until = Spi::get_one::<bool>(
            "SELECT bool_and(expires_at = last_seen_at + interval '3650 days') FROM webhook_dedup.keys
              WHERE source = 'long'",
        );
        assert_eq!(until, Ok(Some(true)));
        // completed now, the key is kept for its source's retention
        let (_, token, _) = claim("long", "fresh", "1 minute");
        Spi::run_with_args("SELECT webhook_dedup.webhook_complete('long', 'fresh', $1)", &[token.into()]).unwrap();
        let kept = Spi::get_one::<bool>(
            "SELECT expires_at = completed_at + interval '3650 days' FROM webhook_dedup.keys WHERE idem_key = 'fresh'",
        );
        assert_eq!(kept, Ok(Some(true)));
    }

    /// Watermarks, conflicts and hourly claim counts past their source's
    /// retention go, per-minute counts after two hours; newer ones stay.
    #[pg_test]
    fn history_past_retention_is_pruned() {
        Spi::run(
            "INSERT INTO webhook_dedup.watermarks (source, entity_id, source_updated_at, updated_at)
             VALUES ('h', 'old', '2020-01-01', '2020-01-01'), ('h', 'new', now(), now());
             INSERT INTO webhook_dedup.conflict_log (source, idem_key, seen_at, stored_fingerprint, fingerprint, via)
             VALUES ('h', 'k', '2020-01-01', '\\x00', '\\x01', 'claim'), ('h', 'k', now(), '\\x00', '\\x01', 'claim');
             INSERT INTO webhook_dedup.claim_counts (bucket, source, deliveries)
             VALUES ('2020-01-01', 'h', 1), (date_trunc('hour', now()), 'h', 1);
             INSERT INTO webhook_dedup.claim_counts (bucket, bucket_width, source, deliveries)
             VALUES (date_trunc('minute', now()) - interval '3 hours', '1 minute', 'h', 1),
                    (date_trunc('minute', now()) - interval '90 minutes', '1 minute', 'h', 1)",
        )
        .unwrap();
        assert_eq!(pass(&["history_pruned"]), vec![4]);
        let left = Spi::get_one::<i64>(
            "SELECT (SELECT count(*) FROM webhook_dedup.watermarks WHERE source = 'h')
                  + (SELECT count(*) FROM webhook_dedup.conflicts WHERE source = 'h')
                  + (SELECT count(*) FROM webhook_dedup.claim_counts WHERE source = 'h')",
        );
        assert_eq!(left, Ok(Some(4)), "the new rows stay");
    }

    /// A source kept for less than its provider's retry horizon is listed by
    /// the view and counted by the pass; so is an unknown provider.
    #[pg_test]
    fn retention_shorter_than_the_retry_horizon_is_warned_about() {
        assert_eq!(Spi::get_one::<i64>("SELECT count(*) FROM webhook_dedup.retention_warnings"), Ok(Some(0)));
        Spi::run(
            "INSERT INTO webhook_dedup.sources (source, retention, provider) VALUES
               ('stripe', '1 day', NULL),
               ('billing', '30 days', 'stripe'),
               ('payments-eu', '2 days', 'stripe'),
               ('mystery', NULL, 'nope')",
        )
        .unwrap();
        let rows: Vec<(String, String)> = Spi::connect(|c| {
            c.select("SELECT source, coalesce(retry_horizon::text, '-') FROM webhook_dedup.retention_warnings ORDER BY source", None, &[])
                .unwrap()
                .map(|r| (r.get::<String>(1).unwrap().unwrap(), r.get::<String>(2).unwrap().unwrap()))
                .collect()
        });
        assert_eq!(
            rows,
            vec![
                ("mystery".to_string(), "-".to_string()),
                ("payments-eu".to_string(), "3 days".to_string()),
                ("stripe".to_string(), "3 days".to_string())
            ]
        );
        let message =
            Spi::get_one::<String>("SELECT message FROM webhook_dedup.retention_warnings WHERE source = 'stripe'");
        assert_eq!(
            message,
            Ok(Some(
                "source stripe keeps keys for 1 day after their last activity, less than the stripe retry horizon of \
                 3 days: a retry that comes later is processed again (raise webhook_dedup.sources.retention or \
                 webhook_dedup.retention)"
                    .into()
            ))
        );
        assert_eq!(pass(&["retention_warnings"]), vec![3]);
    }

    /// ID-07: a Standard Webhooks retry 75 h 35 min after the first
    /// delivery, re-signed with a fresh timestamp, is still a duplicate
    /// after maintenance ran with the default retention (30 days); with a
    /// retention of 72 hours (shorter than the horizon, and warned about)
    /// the key is gone and the retry would be processed again.
    #[pg_test]
    fn id_07_a_retry_after_75_hours_is_still_a_duplicate() {
        let v = vectors::all().into_iter().find(|v| v["id"] == "ID-07").unwrap();
        let secret = v["signing_secret"].as_str().unwrap();
        let body = vectors::body(&v);
        let steps = v["steps"].as_array().unwrap();
        let deliver = |step: &Value| -> (bool, Option<String>) {
            let at = step["headers"]["webhook-timestamp"].as_str().unwrap().parse::<f64>().unwrap();
            Spi::get_two_with_args::<bool, String>(
                "SELECT verified, outcome FROM webhook_dedup.webhook_receive('standard', $1, $2, ARRAY[$3], at => to_timestamp($4))",
                &[body.as_slice().into(), JsonB(step["headers"].clone()).into(), secret.into(), at.into()],
            )
            .map(|(verified, outcome)| (verified.unwrap(), outcome))
            .unwrap()
        };
        assert_eq!(deliver(&steps[0]), (true, Some("claimed".into())));
        Spi::run(
            "SELECT webhook_dedup.webhook_complete('standard', idem_key, claim_token)
               FROM webhook_dedup.keys WHERE source = 'standard'",
        )
        .unwrap();
        assert_eq!(deliver(&steps[2]), (true, Some("duplicate".into())), "t = 2105 s");
        // 75 h 36 min pass: the key was stored and completed then, under
        // the default retention.
        Spi::run(
            "UPDATE webhook_dedup.keys
                SET first_seen_at = clock_timestamp() - interval '75 hours 36 minutes',
                    last_seen_at = clock_timestamp() - interval '75 hours 36 minutes',
                    completed_at = clock_timestamp() - interval '75 hours 36 minutes',
                    expires_at = clock_timestamp() - interval '75 hours 36 minutes' + interval '30 days'
              WHERE source = 'standard'",
        )
        .unwrap();
        old_key("expired", "a", "02-01", "completed", "2020-02-01 12:00+00");
        old_key("expired", "b", "02-01", "completed", "2020-02-01 12:00+00");
        assert_eq!(pass(&["keys_pruned", "keys_kept", "retention_warnings"]), vec![2, 0, 0]);
        assert_eq!(deliver(&steps[3]), (true, Some("duplicate".into())), "t = 272105 s, 75 h 35 min later");

        // The same with a retention of 72 hours: the key was completed
        // under it, expires, and the pass warns that the retention is too
        // short.
        Spi::run(
            "INSERT INTO webhook_dedup.sources (source, retention) VALUES ('standard', '72 hours');
             UPDATE webhook_dedup.keys SET last_seen_at = clock_timestamp() - interval '75 hours 36 minutes',
                    expires_at = clock_timestamp() - interval '75 hours 36 minutes' + interval '72 hours'
              WHERE source = 'standard'",
        )
        .unwrap();
        assert_eq!(pass(&["keys_pruned", "keys_kept", "retention_warnings"]), vec![1, 0, 1]);
        assert_eq!(deliver(&steps[3]), (true, Some("claimed".into())), "processed again: the retention was too short");
    }

    /// A pass pins its search_path: objects of the session's schemas never
    /// stand in for catalog ones, and the session's settings survive.
    #[pg_test]
    fn maintenance_ignores_the_session_search_path_and_formats() {
        Spi::run(
            "CREATE SCHEMA shadow; SET LOCAL search_path = shadow, public;
             SET LOCAL DateStyle = 'SQL, DMY'; SET LOCAL TimeZone = 'Asia/Kolkata'",
        )
        .unwrap();
        let pass = Spi::get_two::<bool, String>(
            "SELECT ran, array_to_string(errors, ' | ') FROM webhook_dedup.run_maintenance()",
        );
        assert_eq!(pass, Ok((Some(true), Some(String::new()))));
        assert_eq!(Spi::get_one::<String>("SHOW search_path"), Ok(Some("shadow, public".into())));
    }

    /// A failing step is rolled back on its own: the pass warns, lists it
    /// in `errors`, still flushes metrics, and the transaction goes on.
    #[pg_test]
    fn a_failed_step_does_not_stop_the_pass() {
        // the history step's statement names this column: it cannot run now
        Spi::run("ALTER TABLE webhook_dedup.watermarks DROP COLUMN updated_at CASCADE").unwrap();
        claim("metered2", "m", "1 minute");
        let pass = Spi::get_three::<bool, String, i64>(
            "SELECT ran, array_to_string(errors, ' | '), metrics_flushed FROM webhook_dedup.run_maintenance()",
        )
        .unwrap();
        assert_eq!(pass.0, Some(true));
        let errors = pass.1.unwrap();
        assert!(errors.starts_with("pruning history: "), "the history step failed: {errors}");
        assert!(!errors.contains(" | "), "only that step failed: {errors}");
        assert!(pass.2.unwrap() >= 1, "metrics were flushed anyway");
        assert_eq!(
            Spi::get_one::<i64>(
                "SELECT sum(deliveries)::bigint FROM webhook_dedup.claim_counts WHERE source = 'metered2'
                   AND bucket_width = '1 hour'"
            ),
            Ok(Some(1))
        );
        assert_eq!(Spi::get_one::<i32>("SELECT 1"), Ok(Some(1)), "the transaction is still usable");
    }
}
