//! `#[pg_test]`s of the state machine after the claim: failures and
//! retries, unknown outcomes, checkpoints, lease extension, operator
//! resolution, forgetting, and the persist-then-process queue. (Races are in
//! `tests/isolation`; see `src/tests/mod.rs` for how these tests run.)

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use pgrx::prelude::*;
    use pgrx::{JsonB, Uuid};
    use serde_json::json;

    /// (outcome, claim_token, attempt, last_step) of a claim.
    fn claim(key: &str, lease: &str) -> (String, Option<Uuid>, i32, Option<String>) {
        Spi::connect(|c| {
            let row = c
                .select(
                    "SELECT outcome, claim_token, attempt, last_step FROM webhook_dedup.webhook_claim('sm', $1, lease => $2::interval)",
                    None,
                    &[key.into(), lease.into()],
                )
                .unwrap()
                .first();
            (
                row.get::<String>(1).unwrap().unwrap(),
                row.get::<Uuid>(2).unwrap(),
                row.get::<i32>(3).unwrap().unwrap(),
                row.get::<String>(4).unwrap(),
            )
        })
    }

    fn state(key: &str) -> Option<String> {
        Spi::get_one_with_args::<String>(
            "SELECT state FROM webhook_dedup.keys WHERE source = 'sm' AND idem_key = $1",
            &[key.into()],
        )
        .unwrap()
    }

    fn fail(key: &str, token: Uuid, retryable: bool, retry_after: Option<&str>) -> Option<String> {
        Spi::get_one_with_args::<String>(
            "SELECT webhook_dedup.webhook_fail('sm', $1, $2, 'boom', $3, $4::interval)",
            &[key.into(), token.into(), retryable.into(), retry_after.into()],
        )
        .unwrap()
    }

    fn sleep(seconds: f64) {
        Spi::run(&format!("SELECT pg_sleep({seconds})")).unwrap();
    }

    #[pg_test]
    fn a_dead_letter_resolved_to_failed_gets_one_more_attempt() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('sm', 1)").unwrap();
        let (_, token, attempt, _) = claim("r1", "1 minute");
        assert_eq!(attempt, 1);
        assert_eq!(fail("r1", token.unwrap(), true, None).as_deref(), Some("dead_lettered"));
        // an operator retries it now: the next delivery processes it (it
        // used to be dead-lettered again at once, out of attempts)
        Spi::run("SELECT webhook_dedup.webhook_resolve('sm', 'r1', 'failed')").unwrap();
        let (outcome, token, attempt, _) = claim("r1", "1 minute");
        assert_eq!((outcome.as_str(), attempt), ("reclaimed", 2));
        // and a failure of that attempt is final again
        assert_eq!(fail("r1", token.unwrap(), true, None).as_deref(), Some("dead_lettered"));
        assert_eq!(state("r1").as_deref(), Some("dead_lettered"));
    }

    #[pg_test]
    fn retryable_failures_back_off_then_dead_letter_at_max_attempts() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('sm', 2)").unwrap();
        let (_, token, attempt, _) = claim("f1", "1 minute");
        assert_eq!(attempt, 1);
        assert_eq!(fail("f1", token.unwrap(), true, None).as_deref(), Some("failed"));
        // the default backoff after attempt 1 is 30 s: not due yet
        let due = Spi::get_one::<bool>(
            "SELECT next_attempt_at BETWEEN clock_timestamp() + interval '29 s' AND clock_timestamp() + interval '31 s'
               FROM webhook_dedup.keys WHERE idem_key = 'f1'",
        );
        assert_eq!(due, Ok(Some(true)));
        assert_eq!(claim("f1", "1 minute").0, "retry_later");
        // an operator makes it due now; the next delivery reclaims it
        assert_eq!(
            Spi::get_one::<String>("SELECT webhook_dedup.webhook_resolve('sm', 'f1', 'failed')"),
            Ok(Some("failed".into()))
        );
        let (outcome, token, attempt, _) = claim("f1", "1 minute");
        assert_eq!((outcome.as_str(), attempt), ("reclaimed", 2));
        // attempt 2 of max 2: dead-lettered even though retryable
        assert_eq!(fail("f1", token.unwrap(), true, Some("1 ms")).as_deref(), Some("dead_lettered"));
        assert_eq!(claim("f1", "1 minute").0, "dead_lettered");
        let error = Spi::get_one::<String>("SELECT last_error FROM webhook_dedup.keys WHERE idem_key = 'f1'");
        assert_eq!(error, Ok(Some("boom".into())));
    }

    #[pg_test]
    fn retry_after_sets_the_next_attempt_and_non_retryable_dead_letters() {
        let (_, token, ..) = claim("f2", "1 minute");
        assert_eq!(fail("f2", token.unwrap(), true, Some("20 ms")).as_deref(), Some("failed"));
        sleep(0.03);
        let (outcome, token, attempt, _) = claim("f2", "1 minute");
        assert_eq!((outcome.as_str(), attempt), ("reclaimed", 2));
        assert_eq!(fail("f2", token.unwrap(), false, None).as_deref(), Some("dead_lettered"));
    }

    #[pg_test]
    fn stale_tokens_change_nothing() {
        let (_, old, ..) = claim("s1", "10 ms");
        sleep(0.02);
        let (outcome, new, ..) = claim("s1", "1 minute");
        assert_eq!(outcome, "reclaimed");
        let old = old.unwrap();
        assert_eq!(fail("s1", old, true, None), None);
        let stale = Spi::get_three_with_args::<bool, bool, bool>(
            "SELECT webhook_dedup.webhook_mark_unknown('sm', 's1', $1, 'x'), webhook_dedup.webhook_checkpoint('sm', 's1', $1, 'step'),
                    webhook_dedup.webhook_extend_lease('sm', 's1', $1, '1 hour') IS NULL",
            &[old.into()],
        );
        assert_eq!(stale, Ok((Some(false), Some(false), Some(true))));
        assert_eq!(state("s1").as_deref(), Some("processing"));
        let holder = Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_complete('sm', 's1', $1)",
            &[new.unwrap().into()],
        );
        assert_eq!(holder, Ok(Some(true)));
    }

    #[pg_test]
    fn unknown_outcomes_wait_for_an_operator() {
        let (_, token, ..) = claim("u1", "1 minute");
        let marked = Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_mark_unknown('sm', 'u1', $1, 'timeout calling the bank')",
            &[token.unwrap().into()],
        );
        assert_eq!(marked, Ok(Some(true)));
        assert_eq!(claim("u1", "1 minute").0, "unknown_outcome");
        let previous = Spi::get_one::<String>(
            r#"SELECT webhook_dedup.webhook_resolve('sm', 'u1', 'completed', '{"charged": true}')"#,
        );
        assert_eq!(previous, Ok(Some("unknown_outcome".into())));
        let dup = Spi::get_two::<String, JsonB>("SELECT outcome, result FROM webhook_dedup.webhook_claim('sm', 'u1')")
            .unwrap();
        assert_eq!(dup.0.as_deref(), Some("duplicate"));
        assert_eq!(dup.1.map(|r| r.0), Some(json!({"charged": true})));
    }

    /// A crash after a checkpoint: the reclaiming delivery gets `last_step`.
    #[pg_test]
    fn a_reclaim_resumes_from_the_last_step() {
        let (_, token, ..) = claim("c1", "10 ms");
        let ok = Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_checkpoint('sm', 'c1', $1, 'charged')",
            &[token.unwrap().into()],
        );
        assert_eq!(ok, Ok(Some(true)));
        sleep(0.02);
        let (outcome, _, attempt, last_step) = claim("c1", "1 minute");
        assert_eq!((outcome.as_str(), attempt, last_step.as_deref()), ("reclaimed", 2, Some("charged")));
    }

    #[pg_test]
    fn extending_a_lease_keeps_others_out() {
        let (_, token, ..) = claim("e1", "30 ms");
        let later = Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_extend_lease('sm', 'e1', $1, '1 minute') > clock_timestamp() + interval '50 s'",
            &[token.unwrap().into()],
        );
        assert_eq!(later, Ok(Some(true)));
        sleep(0.05);
        assert_eq!(claim("e1", "1 minute").0, "in_progress");
    }

    #[pg_test]
    fn resolving_a_processing_key_fences_its_holder() {
        let (_, token, ..) = claim("r1", "1 minute");
        assert_eq!(
            Spi::get_one::<String>("SELECT webhook_dedup.webhook_resolve('sm', 'r1', 'dead_lettered')"),
            Ok(Some("processing".into()))
        );
        let late = Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_complete('sm', 'r1', $1)",
            &[token.unwrap().into()],
        );
        assert_eq!(late, Ok(Some(false)));
        assert_eq!(state("r1").as_deref(), Some("dead_lettered"));
        // and back to the queue
        Spi::run("SELECT webhook_dedup.webhook_resolve('sm', 'r1', 'pending')").unwrap();
        let next = Spi::get_two::<String, i32>("SELECT idem_key, attempt FROM webhook_dedup.webhook_next('sm')");
        assert_eq!(next, Ok((Some("r1".into()), Some(2))));
    }

    #[pg_test]
    fn forgetting_a_key_lets_a_replay_through() {
        let (_, token, ..) = claim("g1", "1 minute");
        Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_complete('sm', 'g1', $1)",
            &[token.unwrap().into()],
        )
        .unwrap();
        assert_eq!(claim("g1", "1 minute").0, "duplicate");
        assert_eq!(Spi::get_one::<bool>("SELECT webhook_dedup.webhook_forget('sm', 'g1')"), Ok(Some(true)));
        assert_eq!(Spi::get_one::<bool>("SELECT webhook_dedup.webhook_forget('sm', 'g1')"), Ok(Some(false)));
        assert_eq!(claim("g1", "1 minute").0, "claimed");
    }

    #[pg_test]
    fn enqueue_then_drain() {
        let accepted = Spi::get_one::<String>(
            r#"SELECT webhook_dedup.webhook_enqueue('q', 'evt_1', '{"n":1}'::bytea, 'invoice.paid', '{"webhook-id": "evt_1"}')"#,
        );
        assert_eq!(accepted, Ok(Some("accepted".into())));
        assert_eq!(
            Spi::get_one::<String>(r#"SELECT webhook_dedup.webhook_enqueue('q', 'evt_1', '{"n":1}'::bytea)"#),
            Ok(Some("duplicate".into()))
        );
        assert_eq!(
            Spi::get_one::<String>(r#"SELECT webhook_dedup.webhook_enqueue('q', 'evt_1', '{"n":2}'::bytea)"#),
            Ok(Some("conflict".into()))
        );
        assert_eq!(
            Spi::get_one::<i64>("SELECT count(*) FROM webhook_dedup.conflicts WHERE source = 'q' AND via = 'enqueue'"),
            Ok(Some(1))
        );
        Spi::run(r#"SELECT webhook_dedup.webhook_enqueue('q', 'evt_2', '{"n":3}'::bytea)"#).unwrap();
        let drained = Spi::connect(|c| {
            c.select(
                "SELECT idem_key, attempt, convert_from(payload, 'UTF8'), event_type, headers->>'webhook-id', claim_token
                   FROM webhook_dedup.webhook_next('q', batch => 10)",
                None,
                &[],
            )
            .unwrap()
            .map(|r| {
                (
                    r.get::<String>(1).unwrap().unwrap(),
                    r.get::<i32>(2).unwrap().unwrap(),
                    r.get::<String>(3).unwrap().unwrap(),
                    r.get::<String>(4).unwrap(),
                    r.get::<String>(5).unwrap(),
                    r.get::<Uuid>(6).unwrap().unwrap(),
                )
            })
            .collect::<Vec<_>>()
        });
        assert_eq!(drained.len(), 2, "both, oldest first");
        assert_eq!(
            (&drained[0].0[..], drained[0].1, &drained[0].2[..], drained[0].3.as_deref(), drained[0].4.as_deref()),
            ("evt_1", 1, r#"{"n":1}"#, Some("invoice.paid"), Some("evt_1"))
        );
        assert_eq!(drained[1].0, "evt_2");
        // leased now: nothing more is due, and a claim sees the live lease
        assert_eq!(Spi::get_one::<i64>("SELECT count(*) FROM webhook_dedup.webhook_next('q')"), Ok(Some(0)));
        let claimed = Spi::get_one::<String>("SELECT outcome FROM webhook_dedup.webhook_claim('q', 'evt_1')");
        assert_eq!(claimed, Ok(Some("in_progress".into())));
        let done = Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_complete('q', 'evt_1', $1)",
            &[drained[0].5.into()],
        );
        assert_eq!(done, Ok(Some(true)));
        // a failed drained key comes back through the queue when due
        let failed = Spi::get_one_with_args::<String>(
            "SELECT webhook_dedup.webhook_fail('q', 'evt_2', $1, 'db down', retry_after => '0 s')",
            &[drained[1].5.into()],
        );
        assert_eq!(failed, Ok(Some("failed".into())));
        let again = Spi::get_two::<String, i32>("SELECT idem_key, attempt FROM webhook_dedup.webhook_next('q')");
        assert_eq!(again, Ok((Some("evt_2".into()), Some(2))));
    }

    #[pg_test]
    fn the_queue_filters_by_source_and_bounds_batches() {
        Spi::run("SELECT webhook_dedup.webhook_enqueue('qa', 'a', 'x'::bytea), webhook_dedup.webhook_enqueue('qb', 'b', 'y'::bytea)").unwrap();
        assert_eq!(
            Spi::get_one::<String>("SELECT idem_key FROM webhook_dedup.webhook_next('qb')"),
            Ok(Some("b".into()))
        );
        assert_eq!(
            error_of("SELECT * FROM webhook_dedup.webhook_next(batch => 0)"),
            "22023: batch must be between 1 and 1000, not 0"
        );
    }

    #[pg_test]
    fn per_source_lease_applies_when_the_call_gives_none() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, lease) VALUES ('sm', '7 seconds')").unwrap();
        let lease = Spi::get_one::<bool>(
            "SELECT lease_expires_at - first_seen_at = interval '7 seconds' FROM webhook_dedup.webhook_claim('sm', 'l1')",
        );
        assert_eq!(lease, Ok(Some(true)));
        let given = Spi::get_one::<bool>(
            "SELECT lease_expires_at - first_seen_at = interval '9 seconds' FROM webhook_dedup.webhook_claim('sm', 'l2', lease => '9 s')",
        );
        assert_eq!(given, Ok(Some(true)));
    }

    #[pg_test]
    fn transition_errors_have_precise_sqlstates() {
        Spi::run("SELECT webhook_dedup.webhook_claim('sm', 'k')").unwrap();
        let cases = [
            (
                "SELECT webhook_dedup.webhook_resolve('sm', 'k', 'processing')",
                "22023: new_state must be completed, failed, dead_lettered or pending, not processing",
            ),
            ("SELECT webhook_dedup.webhook_resolve('sm', 'k', 'done')", "22023: unknown state \"done\""),
            (
                "SELECT webhook_dedup.webhook_resolve('sm', 'nope', 'failed')",
                "P0002: no idempotency key \"nope\" for source \"sm\"",
            ),
            (
                "SELECT webhook_dedup.webhook_fail('sm', 'k', gen_random_uuid(), 'e', retry_after => '-1 s')",
                "22023: retry_after must be between 0 and 365 days",
            ),
            (
                "SELECT webhook_dedup.webhook_fail('sm', 'k', gen_random_uuid(), 'e', retryable => NULL)",
                "22004: retryable must not be NULL",
            ),
            (
                "SELECT webhook_dedup.webhook_fail('sm', 'nope', gen_random_uuid(), 'e')",
                "P0002: no idempotency key \"nope\" for source \"sm\"",
            ),
            (
                "SELECT webhook_dedup.webhook_checkpoint('sm', 'k', gen_random_uuid(), '')",
                "22023: step must not be empty",
            ),
            (
                "SELECT webhook_dedup.webhook_extend_lease('sm', 'k', gen_random_uuid(), '0 s')",
                "22023: lease must be a positive interval",
            ),
            ("SELECT webhook_dedup.webhook_enqueue('sm', 'k2', NULL)", "22004: payload must not be NULL"),
            ("SELECT webhook_dedup.webhook_forget('sm', '')", "22023: idem_key must not be empty"),
        ];
        for (query, want) in cases {
            assert_eq!(error_of(query), want, "{query}");
        }
    }

    /// The metrics counters, the columns they are flushed to and the columns
    /// the `counters` view maps the live counts[] to agree, in order.
    #[pg_test]
    fn counter_columns_match_the_table_and_the_view() {
        let counters: Vec<&str> = crate::metrics::Counter::ALL.iter().map(|c| c.column()).collect();
        for relation in ["webhook_dedup.claim_counts", "webhook_dedup.counters"] {
            let columns: Vec<String> = Spi::connect(|c| {
                c.select(
                    "SELECT attname::text FROM pg_attribute WHERE attrelid = $1::regclass
                       AND attnum > 4 AND NOT attisdropped ORDER BY attnum",
                    None,
                    &[relation.into()],
                )
                .unwrap()
                .map(|r| r.get::<String>(1).unwrap().unwrap())
                .collect()
            });
            assert_eq!(columns, counters, "{relation}");
        }
    }

    /// due_at, the queue's index, agrees with the state after every write.
    #[pg_test]
    fn due_at_follows_every_transition() {
        let check = |key: &str, expected: &str| {
            let ok = Spi::get_one_with_args::<bool>(
                &format!("SELECT {expected} FROM webhook_dedup.keys WHERE source = 'sm' AND idem_key = $1"),
                &[key.into()],
            );
            assert_eq!(ok, Ok(Some(true)), "{key}: {expected}");
        };
        let (_, token, ..) = claim("d1", "1 minute");
        let token = token.unwrap();
        check("d1", "due_at = lease_expires_at");
        Spi::get_one_with_args::<bool>("SELECT webhook_dedup.webhook_checkpoint('sm', 'd1', $1, 's')", &[token.into()])
            .unwrap();
        check("d1", "due_at = lease_expires_at");
        Spi::get_one_with_args::<pgrx::datum::TimestampWithTimeZone>(
            "SELECT webhook_dedup.webhook_extend_lease('sm', 'd1', $1, '2 minutes')",
            &[token.into()],
        )
        .unwrap();
        check("d1", "due_at = lease_expires_at AND due_at > clock_timestamp() + interval '90 s'");
        fail("d1", token, true, Some("1 hour"));
        check("d1", "due_at = next_attempt_at AND lease_expires_at IS NULL");
        Spi::run("SELECT webhook_dedup.webhook_resolve('sm', 'd1', 'pending')").unwrap();
        check("d1", "due_at <= clock_timestamp() AND next_attempt_at IS NULL");
        let (_, token, ..) = claim("d1", "1 minute");
        check("d1", "state = 'processing' AND due_at = lease_expires_at");
        Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_mark_unknown('sm', 'd1', $1)",
            &[token.unwrap().into()],
        )
        .unwrap();
        check("d1", "due_at IS NULL");
        Spi::run("SELECT webhook_dedup.webhook_resolve('sm', 'd1', 'failed')").unwrap();
        check("d1", "due_at IS NOT NULL AND due_at = next_attempt_at");
        Spi::run("SELECT webhook_dedup.webhook_resolve('sm', 'd1', 'completed')").unwrap();
        check("d1", "due_at IS NULL");
        let (_, token, ..) = claim("d2", "1 minute");
        Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_complete('sm', 'd2', $1)",
            &[token.unwrap().into()],
        )
        .unwrap();
        check("d2", "due_at IS NULL");
        Spi::run("SELECT webhook_dedup.webhook_enqueue('sm', 'd3', 'x'::bytea)").unwrap();
        check("d3", "due_at = first_seen_at");
    }

    /// A key whose holders keep dying is dead-lettered when it is due again
    /// with no attempts left, by a claim or by the queue.
    #[pg_test]
    fn a_poison_key_is_dead_lettered_instead_of_redelivered() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('sm', 2)").unwrap();
        claim("p1", "10 ms");
        sleep(0.02);
        assert_eq!(claim("p1", "10 ms").2, 2, "attempt 2, the last");
        sleep(0.02);
        let (outcome, token, attempt, _) = claim("p1", "10 ms");
        assert_eq!((outcome.as_str(), token, attempt), ("dead_lettered", None, 2));
        assert_eq!(state("p1").as_deref(), Some("dead_lettered"));
        let error = Spi::get_one::<String>("SELECT last_error FROM webhook_dedup.keys WHERE idem_key = 'p1'");
        assert_eq!(error, Ok(Some("due again after attempt 2, the last allowed: dead-lettered".into())));
        // the same through the queue
        Spi::run("INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('pq', 1)").unwrap();
        Spi::run("SELECT webhook_dedup.webhook_enqueue('pq', 'p2', 'x'::bytea)").unwrap();
        assert_eq!(
            Spi::get_one::<i64>("SELECT count(*) FROM webhook_dedup.webhook_next('pq', lease => '10 ms')"),
            Ok(Some(1))
        );
        sleep(0.02);
        assert_eq!(Spi::get_one::<i64>("SELECT count(*) FROM webhook_dedup.webhook_next('pq')"), Ok(Some(0)));
        let parked = Spi::get_one::<String>("SELECT state FROM webhook_dedup.keys WHERE source = 'pq'");
        assert_eq!(parked, Ok(Some("dead_lettered".into())));
    }

    #[pg_test]
    fn a_source_lease_with_months_is_refused() {
        assert!(
            error_of("INSERT INTO webhook_dedup.sources (source, lease) VALUES ('m', '1 mon')").starts_with("23514")
        );
        assert!(error_of("INSERT INTO webhook_dedup.sources (source, lease) VALUES ('m', '0 s')").starts_with("23514"));
        assert_eq!(error_of("INSERT INTO webhook_dedup.sources (source, lease) VALUES ('m', '30 days')"), "no error");
    }

    #[pg_test]
    fn claim_many_claims_each_distinct_key_once() {
        let rows = Spi::connect(|c| {
            c.select(
                "SELECT idem_key, outcome FROM webhook_dedup.webhook_claim_many('sm', ARRAY['b', 'a', 'b'])",
                None,
                &[],
            )
            .unwrap()
            .map(|r| (r.get::<String>(1).unwrap().unwrap(), r.get::<String>(2).unwrap().unwrap()))
            .collect::<Vec<_>>()
        });
        assert_eq!(rows, vec![("a".into(), "claimed".into()), ("b".into(), "claimed".into())]);
        let again = Spi::get_one::<i64>(
            "SELECT count(*) FROM webhook_dedup.webhook_claim_many('sm', ARRAY['a', 'b']) WHERE outcome = 'in_progress'",
        );
        assert_eq!(again, Ok(Some(2)));
        assert_eq!(
            error_of("SELECT * FROM webhook_dedup.webhook_claim_many('sm', ARRAY['a', NULL])"),
            "22004: every element of idem_keys must not be NULL"
        );
    }

    /// Every table and column of the extension carries a COMMENT, and so
    /// does every function (docs/sql-reference.md says so).
    #[pg_test]
    fn every_object_is_commented() {
        let uncommented = Spi::get_one::<String>(
            "SELECT string_agg(c.relname || '.' || a.attname, ', ')
               FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'webhook_dedup'
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              WHERE c.relkind IN ('r', 'p', 'v') AND c.relname !~ '^keys_(p|default)' AND NOT c.relispartition
                AND col_description(c.oid, a.attnum) IS NULL AND c.relkind <> 'v'",
        );
        assert_eq!(uncommented, Ok(None));
        let functions = Spi::get_one::<String>(
            "SELECT string_agg(p.proname, ', ')
               FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
               JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
               JOIN pg_namespace n ON n.oid = p.pronamespace AND n.nspname <> 'tests'
              WHERE e.extname = 'webhook_dedup' AND d.deptype = 'e'
                AND obj_description(p.oid, 'pg_proc') IS NULL",
        );
        assert_eq!(functions, Ok(None));
    }
}
