//! `#[pg_test]`s of one maintenance pass in one session: the lease sweep,
//! dropping a partition past retention with its carry-forward, pruning,
//! retention warnings, and the ID-07 vector (see `src/api/tests.rs` for how
//! these tests run). The worker, concurrency and claims during drops are
//! tested against a real cluster in `tests/cluster/`.
//!
//! Time passing is simulated the only way a test in one transaction can:
//! rows are written with old times into a partition made for 2020 (or
//! moved there), as if they had been stored then.

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
                    "SELECT outcome, claim_token, attempt FROM webhook_claim($1, $2, lease => $3::interval)",
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

    /// A partition of webhook_dedup.keys for one day of 2020 (in the past
    /// of every retention), with the unique index maintenance gives its own.
    fn old_partition(day: &str) -> String {
        let name = format!("webhook_dedup.keys_p2020{}_0000", day.replace('-', ""));
        Spi::run(&format!(
            "CREATE TABLE {name} PARTITION OF webhook_dedup.keys
               FOR VALUES FROM ('2020-{day} 00:00+00') TO (('2020-{day} 00:00+00'::timestamptz + interval '1 day'));
             CREATE UNIQUE INDEX ON {name} (source, idem_key)"
        ))
        .unwrap();
        name
    }

    /// A key stored on 2020-`day` at noon in `state`, last active at `last_seen`.
    fn old_key(source: &str, key: &str, day: &str, state: &str, last_seen: &str) {
        let processing = state == "processing";
        Spi::run_with_args(
            "INSERT INTO webhook_dedup.keys
                 (source, idem_key, partition_at, state, attempt, claim_token, lease_expires_at, due_at,
                  first_seen_at, last_seen_at, completed_at)
             VALUES ($1, $2, $3::timestamptz, $4, 1,
                     CASE WHEN $5 THEN gen_random_uuid() END,
                     CASE WHEN $5 THEN now() + interval '1 hour' END,
                     CASE WHEN $5 THEN now() + interval '1 hour' END,
                     $3::timestamptz, $6::timestamptz,
                     CASE WHEN $4 = 'completed' THEN $6::timestamptz END)",
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

    fn exists(table: &str) -> bool {
        Spi::get_one_with_args::<bool>("SELECT to_regclass($1) IS NOT NULL", &[table.into()]).unwrap().unwrap()
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
        let late = Spi::get_one_with_args::<bool>("SELECT webhook_complete('sweep', 'k', $1)", &[token.into()]);
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

    /// A partition past retention is dropped; the keys in it that must
    /// live on (not completed, or completed but active within retention)
    /// are carried into the current partition first, unchanged.
    #[pg_test]
    fn a_partition_past_retention_is_dropped_and_what_must_live_on_is_carried() {
        let table = old_partition("01-01");
        for key in ["gone1", "gone2", "gone3"] {
            old_key("old", key, "01-01", "completed", "2020-01-01 12:00+00");
        }
        old_key("old", "recent", "01-01", "completed", "now");
        old_key("old", "working", "01-01", "processing", "2020-01-01 12:00+00");
        old_key("old", "parked", "01-01", "dead_lettered", "2020-01-01 12:00+00");
        let token_before =
            Spi::get_one::<pgrx::Uuid>("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 'working'");

        assert_eq!(pass(&["partitions_dropped", "keys_carried_forward"]), vec![1, 3]);
        assert!(!exists(&table), "the partition is gone");
        let carried = Spi::get_one::<i64>(
            "SELECT count(*) FROM webhook_dedup.keys
              WHERE source = 'old' AND partition_at > now() - interval '1 minute'
                AND tableoid <> 'webhook_dedup.keys_default'::regclass",
        );
        assert_eq!(carried, Ok(Some(3)), "carried into the current partition");
        assert_eq!(state("old", "parked").as_deref(), Some("dead_lettered"));
        let token_after =
            Spi::get_one::<pgrx::Uuid>("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 'working'");
        assert_eq!(token_before, token_after, "a carried lease keeps its token");
        assert_eq!(claim("old", "recent", "1 minute").0, "duplicate");
        assert_eq!(claim("old", "working", "1 minute").0, "in_progress");
        // a key past retention is forgotten with its partition: by design, a
        // delivery after the retention is new
        assert_eq!(claim("old", "gone1", "1 minute").0, "claimed");
        let recorded = Spi::get_two::<i32, i64>(
            "SELECT partitions_dropped, keys_carried_forward FROM webhook_dedup.maintenance_runs ORDER BY id DESC LIMIT 1",
        );
        assert_eq!(recorded, Ok((Some(1), Some(3))));
    }

    /// A pass that creates a partition leaves the drop to the next pass
    /// (both hold locks claims need until commit), and says so with `more`.
    #[pg_test]
    fn creating_and_dropping_never_share_a_transaction() {
        let newest = crate::api::tests::tests::newest_partition();
        Spi::run(&format!("ALTER TABLE webhook_dedup.keys DETACH PARTITION {newest}; DROP TABLE {newest}")).unwrap();
        let old = old_partition("01-07");
        old_key("old7", "k", "01-07", "completed", "2020-01-07 12:00+00");
        assert_eq!(pass(&["partitions_created", "partitions_dropped", "more::int"]), vec![1, 0, 1]);
        assert!(exists(&old));
        assert_eq!(pass(&["partitions_created", "partitions_dropped", "more::int"]), vec![0, 1, 0]);
        assert!(!exists(&old));
    }

    /// A partition past retention whose keys are mostly still retained (a
    /// source with a longer retention) waits instead of carrying them all.
    #[pg_test]
    fn a_partition_mostly_retained_waits() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, retention) VALUES ('long', '3650 days')").unwrap();
        let table = old_partition("01-03");
        for key in ["a", "b", "c"] {
            old_key("long", key, "01-03", "completed", "2020-01-03 12:00+00");
        }
        old_key("short", "x", "01-03", "completed", "2020-01-03 12:00+00");
        assert_eq!(pass(&["partitions_dropped", "keys_carried_forward"]), vec![0, 0]);
        assert!(exists(&table));
        // once those keys are no longer retained, it goes
        Spi::run("UPDATE webhook_dedup.sources SET retention = '30 days' WHERE source = 'long'").unwrap();
        assert_eq!(pass(&["partitions_dropped", "keys_carried_forward"]), vec![1, 0]);
        assert!(!exists(&table));
    }

    /// Expired completed keys stranded in the default partition are deleted;
    /// other keys there stay.
    #[pg_test]
    fn expired_keys_in_the_default_partition_are_pruned() {
        Spi::run(
            "INSERT INTO webhook_dedup.keys (source, idem_key, partition_at, state, first_seen_at, last_seen_at)
             VALUES ('dflt', 'done', '2019-06-01', 'completed', '2019-06-01', '2019-06-01'),
                    ('dflt', 'broken', '2019-06-01', 'dead_lettered', '2019-06-01', '2019-06-01')",
        )
        .unwrap();
        let home =
            Spi::get_one::<String>("SELECT tableoid::regclass::text FROM webhook_dedup.keys WHERE idem_key = 'done'");
        assert_eq!(home, Ok(Some("webhook_dedup.keys_default".into())));
        assert_eq!(pass(&["keys_pruned"]), vec![1]);
        assert_eq!(state("dflt", "done"), None);
        assert_eq!(state("dflt", "broken").as_deref(), Some("dead_lettered"));
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
                "SELECT verified, outcome FROM webhook_receive('standard', $1, $2, ARRAY[$3], at => to_timestamp($4))",
                &[body.as_slice().into(), JsonB(step["headers"].clone()).into(), secret.into(), at.into()],
            )
            .map(|(verified, outcome)| (verified.unwrap(), outcome))
            .unwrap()
        };
        assert_eq!(deliver(&steps[0]), (true, Some("claimed".into())));
        Spi::run(
            "SELECT webhook_complete('standard', idem_key, claim_token)
               FROM webhook_dedup.keys WHERE source = 'standard'",
        )
        .unwrap();
        assert_eq!(deliver(&steps[2]), (true, Some("duplicate".into())), "t = 2105 s");
        // 75 h 36 min pass: the key was stored then, in a partition since past
        // retention, with two expired neighbours so that the partition goes.
        old_partition("02-01");
        Spi::run(
            "UPDATE webhook_dedup.keys
                SET partition_at = '2020-02-01 12:00+00',
                    first_seen_at = clock_timestamp() - interval '75 hours 36 minutes',
                    last_seen_at = clock_timestamp() - interval '75 hours 36 minutes',
                    completed_at = clock_timestamp() - interval '75 hours 36 minutes'
              WHERE source = 'standard'",
        )
        .unwrap();
        old_key("expired", "a", "02-01", "completed", "2020-02-01 12:00+00");
        old_key("expired", "b", "02-01", "completed", "2020-02-01 12:00+00");
        assert_eq!(pass(&["partitions_dropped", "keys_carried_forward", "retention_warnings"]), vec![1, 1, 0]);
        assert_eq!(deliver(&steps[3]), (true, Some("duplicate".into())), "t = 272105 s, 75 h 35 min later");

        // The same with a retention of 72 hours: the key expires with its
        // partition, and the pass warns that the retention is too short.
        old_partition("02-02");
        Spi::run(
            "UPDATE webhook_dedup.keys SET partition_at = '2020-02-02 12:00+00',
                    last_seen_at = clock_timestamp() - interval '75 hours 36 minutes'
              WHERE source = 'standard';
             INSERT INTO webhook_dedup.sources (source, retention) VALUES ('standard', '72 hours')",
        )
        .unwrap();
        assert_eq!(pass(&["partitions_dropped", "keys_carried_forward", "retention_warnings"]), vec![1, 0, 1]);
        assert_eq!(deliver(&steps[3]), (true, Some("claimed".into())), "processed again: the retention was too short");
    }
}
