//! `#[pg_test]`s of the transactional outbox and downstream keys in one
//! session: fencing of `webhook_outbox_put` by the key's lease, one intent
//! per operation, the sender's lease and its token, failures, unknown
//! outcomes, lapsed leases (idempotent and not), operators' resolutions,
//! maintenance, the views and the counters, argument errors. Races between
//! senders and crashes of a sender are in `tests/cluster/test_outbox.py`.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use pgrx::prelude::*;
    use pgrx::Uuid;

    fn claim(key: &str) -> Uuid {
        Spi::get_one_with_args::<Uuid>(
            "SELECT claim_token FROM webhook_dedup.webhook_claim('ob', $1, lease => '1 hour')",
            &[key.into()],
        )
        .unwrap()
        .expect("claimed")
    }

    fn put(key: &str, token: Uuid, operation: &str, target: &str) -> Option<i64> {
        Spi::get_one_with_args::<i64>(
            "SELECT webhook_dedup.webhook_outbox_put('ob', $1, $2, $3, $4, '{\"amount\": 500}')",
            &[key.into(), token.into(), operation.into(), target.into()],
        )
        .unwrap()
    }

    /// (id, lease_token, downstream_key, attempt) of each intent taken.
    fn next(target: Option<&str>, lease: &str, batch: i32) -> Vec<(i64, Uuid, String, i32)> {
        Spi::connect(|c| {
            c.select(
                "SELECT id, lease_token, downstream_key, attempt
                   FROM webhook_dedup.webhook_outbox_next($1, $2::interval, $3)",
                None,
                &[target.into(), lease.into(), batch.into()],
            )
            .unwrap()
            .map(|r| {
                (
                    r.get::<i64>(1).unwrap().unwrap(),
                    r.get::<Uuid>(2).unwrap().unwrap(),
                    r.get::<String>(3).unwrap().unwrap(),
                    r.get::<i32>(4).unwrap().unwrap(),
                )
            })
            .collect()
        })
    }

    fn state(id: i64) -> String {
        Spi::get_one_with_args::<String>("SELECT state FROM webhook_dedup.outbox WHERE id = $1", &[id.into()])
            .unwrap()
            .unwrap()
    }

    fn count(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).unwrap().unwrap_or(0)
    }

    fn ack(id: i64, token: Uuid) -> bool {
        Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_outbox_ack($1, $2, '{\"refund\": \"re_1\"}')",
            &[id.into(), token.into()],
        )
        .unwrap()
        .unwrap()
    }

    #[pg_test]
    fn only_the_holder_of_the_key_writes_an_intent_and_once_per_operation() {
        let token = claim("e1");
        let id = put("e1", token, "refund", "payments").expect("written");
        // the same operation again (a retry of the handler): the first intent
        assert_eq!(put("e1", token, "refund", "payments"), Some(id));
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.outbox WHERE idem_key = 'e1'"), 1);
        // another operation of the event: another intent
        let email = put("e1", token, "email:receipt", "email").expect("written");
        assert_ne!(email, id);
        // a stale token writes nothing, even for a new operation
        assert_eq!(put("e1", Uuid::from_bytes([7; 16]), "ship", "shipping"), None);
        // nor does the holder once the key is completed
        Spi::run_with_args("SELECT webhook_dedup.webhook_complete('ob', 'e1', $1)", &[token.into()]).unwrap();
        assert_eq!(put("e1", token, "ship", "shipping"), None);
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.outbox WHERE idem_key = 'e1'"), 2);
        // the downstream key is the operation key of the event, stored
        let stored = Spi::get_one_with_args::<String>(
            "SELECT downstream_key FROM webhook_dedup.outbox WHERE id = $1",
            &[id.into()],
        )
        .unwrap()
        .unwrap();
        assert_eq!(stored, "refund:ob:e1");
        assert!(error_of("SELECT webhook_dedup.webhook_outbox_put('ob', 'nope', gen_random_uuid(), 'x', 't', '{}')")
            .starts_with("P0002"));
    }

    #[pg_test]
    fn an_intent_rolls_back_with_the_transaction_that_wrote_it() {
        let token = claim("e2");
        // a handler's transaction that writes the intent, then fails
        Spi::run_with_args("SELECT set_config('wd.token', $1, false)", &[token.to_string().into()]).unwrap();
        Spi::run(
            "DO $$ BEGIN
               PERFORM webhook_dedup.webhook_outbox_put('ob', 'e2', current_setting('wd.token')::uuid, 'refund', 'payments', '{}');
               RAISE EXCEPTION 'the business write failed';
             EXCEPTION WHEN raise_exception THEN NULL; END $$",
        )
        .unwrap();
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.outbox WHERE idem_key = 'e2'"), 0);
        // and the next attempt of the handler writes it
        assert!(put("e2", token, "refund", "payments").is_some());
    }

    #[pg_test]
    fn senders_take_due_intents_of_their_target_and_only_the_lease_holder_finishes_one() {
        let token = claim("e3");
        let pay = put("e3", token, "refund", "payments").unwrap();
        let mail = put("e3", token, "email", "email").unwrap();
        let taken = next(Some("payments"), "1 minute", 10);
        assert_eq!(taken.len(), 1);
        let (id, lease, key, attempt) = taken[0].clone();
        assert_eq!((id, key.as_str(), attempt), (pay, "refund:ob:e3", 1));
        assert_eq!(state(pay), "processing");
        // taken: not handed out again while leased
        assert!(next(Some("payments"), "1 minute", 10).is_empty());
        // a wrong token changes nothing
        assert!(!ack(pay, Uuid::from_bytes([9; 16])));
        assert_eq!(state(pay), "processing");
        assert!(ack(pay, lease));
        assert_eq!(state(pay), "completed");
        assert!(!ack(pay, lease), "a second ack is stale");
        let response = Spi::get_one_with_args::<String>(
            "SELECT response->>'refund' FROM webhook_dedup.outbox WHERE id = $1",
            &[pay.into()],
        )
        .unwrap();
        assert_eq!(response.as_deref(), Some("re_1"));
        // every target
        let rest = next(None, "1 minute", 10);
        assert_eq!(rest.iter().map(|t| t.0).collect::<Vec<_>>(), vec![mail]);
        assert!(error_of("SELECT webhook_dedup.webhook_outbox_ack(987654321, gen_random_uuid())").starts_with("P0002"));
    }

    #[pg_test]
    fn failures_back_off_then_dead_letter_and_operators_resolve() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('ob', 2)").unwrap();
        let token = claim("e4");
        let id = put("e4", token, "refund", "payments").unwrap();
        let (_, lease, _, _) = next(Some("payments"), "1 minute", 1)[0].clone();
        let failed = Spi::get_one_with_args::<String>(
            "SELECT webhook_dedup.webhook_outbox_fail($1, $2, '503 from the API')",
            &[id.into(), lease.into()],
        )
        .unwrap();
        assert_eq!(failed.as_deref(), Some("failed"));
        // backoff: 30 s after attempt 1, not due yet
        assert!(next(Some("payments"), "1 minute", 1).is_empty());
        let wait = Spi::get_one_with_args::<bool>(
            "SELECT next_attempt_at - now() BETWEEN '29 seconds' AND '31 seconds' FROM webhook_dedup.outbox WHERE id = $1",
            &[id.into()],
        )
        .unwrap();
        assert_eq!(wait, Some(true));
        // an operator sends it again now
        assert_eq!(
            Spi::get_one_with_args::<String>(
                "SELECT webhook_dedup.webhook_outbox_resolve($1, 'pending')",
                &[id.into()]
            )
            .unwrap()
            .as_deref(),
            Some("failed")
        );
        // sent again, its attempts start over; the same key on every attempt
        let (_, lease1, key, attempt) = next(Some("payments"), "1 minute", 1)[0].clone();
        assert_eq!((key.as_str(), attempt), ("refund:ob:e4", 1));
        let fail_now = |lease: Uuid| {
            Spi::get_one_with_args::<String>(
                "SELECT webhook_dedup.webhook_outbox_fail($1, $2, '503', retry_after => '0')",
                &[id.into(), lease.into()],
            )
            .unwrap()
        };
        assert_eq!(fail_now(lease1).as_deref(), Some("failed"));
        let (_, lease2, key, attempt) = next(Some("payments"), "1 minute", 1)[0].clone();
        assert_eq!((key.as_str(), attempt), ("refund:ob:e4", 2), "the same key on every attempt");
        // the last allowed attempt fails: dead-lettered, shown, never taken
        assert_eq!(fail_now(lease2).as_deref(), Some("dead_lettered"));
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.outbox_dead_letters WHERE idem_key = 'e4'"), 1);
        assert!(next(None, "1 minute", 10).is_empty());
        // the old tokens are stale for every call
        assert_eq!(fail_now(lease), None);
        assert!(
            error_of(&format!("SELECT webhook_dedup.webhook_outbox_resolve({id}, 'processing')")).starts_with("22023")
        );
        // an operator retries the dead letter: it is sent, not dead-lettered again
        assert_eq!(
            Spi::get_one_with_args::<String>("SELECT webhook_dedup.webhook_outbox_resolve($1, 'failed')", &[id.into()])
                .unwrap()
                .as_deref(),
            Some("dead_lettered")
        );
        let (_, lease3, _, attempt) = next(Some("payments"), "1 minute", 1)[0].clone();
        assert_eq!(attempt, 1);
        assert_eq!(state(id), "processing");
        assert_eq!(
            Spi::get_one_with_args::<String>(
                "SELECT webhook_dedup.webhook_outbox_resolve($1, 'completed', '{\"by\": \"operator\"}')",
                &[id.into()]
            )
            .unwrap()
            .as_deref(),
            Some("processing")
        );
        assert!(!ack(id, lease3), "the operator's resolution fenced the sender out");
        assert_eq!(state(id), "completed");
    }

    #[pg_test]
    fn an_unknown_outcome_is_never_sent_again_automatically() {
        let token = claim("e5");
        let id = put("e5", token, "email", "email").unwrap();
        let (_, lease, _, _) = next(Some("email"), "1 minute", 1)[0].clone();
        assert!(Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_outbox_unknown($1, $2, 'timeout after sending')",
            &[id.into(), lease.into()]
        )
        .unwrap()
        .unwrap());
        assert_eq!(state(id), "unknown_outcome");
        assert!(next(None, "1 minute", 10).is_empty());
        Spi::run("SELECT * FROM webhook_dedup.run_maintenance()").unwrap();
        assert!(next(None, "1 minute", 10).is_empty());
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.outbox_unknown_outcomes WHERE id IS NOT NULL"), 1);
    }

    #[pg_test]
    fn a_lapsed_lease_is_retried_only_where_the_downstream_deduplicates() {
        let token = claim("e6");
        let idempotent = put("e6", token, "refund", "payments").unwrap();
        let plain = Spi::get_one_with_args::<i64>(
            "SELECT webhook_dedup.webhook_outbox_put('ob', 'e6', $1, 'email', 'email', '{}', downstream_idempotent => false)",
            &[token.into()],
        )
        .unwrap()
        .unwrap();
        let first = next(None, "1 millisecond", 10);
        assert_eq!(first.len(), 2);
        Spi::run("SELECT pg_sleep(0.01)").unwrap();
        // idempotent: taken again by the next sender, with the same key
        let again = next(None, "1 minute", 10);
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].0, again[0].3), (idempotent, 2));
        let old = first.iter().find(|t| t.0 == idempotent).unwrap().1;
        assert!(!ack(idempotent, old), "the lapsed sender is fenced out");
        assert!(ack(idempotent, again[0].1));
        // not idempotent: parked, because the lost sender may have sent it
        assert_eq!(state(plain), "unknown_outcome");
        let error = Spi::get_one_with_args::<String>(
            "SELECT last_error FROM webhook_dedup.outbox WHERE id = $1",
            &[plain.into()],
        )
        .unwrap()
        .unwrap();
        assert!(error.contains("not idempotent"), "{error}");
    }

    #[pg_test]
    fn maintenance_sweeps_lapsed_leases_and_prunes_delivered_intents_past_retention() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, retention) VALUES ('ob', '1 day')").unwrap();
        let token = claim("e7");
        let lapsing = put("e7", token, "refund", "payments").unwrap();
        let plain = Spi::get_one_with_args::<i64>(
            "SELECT webhook_dedup.webhook_outbox_put('ob', 'e7', $1, 'sms', 'sms', '{}', downstream_idempotent => false)",
            &[token.into()],
        )
        .unwrap()
        .unwrap();
        let delivered = put("e7", token, "email", "email").unwrap();
        next(Some("payments"), "1 millisecond", 1);
        next(Some("sms"), "1 millisecond", 1);
        let (_, lease, _, _) = next(Some("email"), "1 minute", 1)[0].clone();
        assert!(ack(delivered, lease));
        // delivered two days ago: past the source's retention
        Spi::run_with_args(
            "UPDATE webhook_dedup.outbox SET delivered_at = now() - interval '2 days' WHERE id = $1",
            &[delivered.into()],
        )
        .unwrap();
        Spi::run("SELECT pg_sleep(0.01)").unwrap();
        let (expired, pruned) = Spi::connect(|c| {
            let row = c
                .select("SELECT intents_expired, intents_pruned FROM webhook_dedup.run_maintenance()", None, &[])
                .unwrap()
                .first();
            (row.get::<i32>(1).unwrap().unwrap(), row.get::<i64>(2).unwrap().unwrap())
        });
        assert_eq!((expired, pruned), (2, 1));
        assert_eq!(state(lapsing), "failed");
        assert_eq!(state(plain), "unknown_outcome");
        assert_eq!(count(&format!("SELECT count(*) FROM webhook_dedup.outbox WHERE id = {delivered}")), 0);
        // the swept one is due at once
        assert_eq!(next(Some("payments"), "1 minute", 1)[0].3, 2);
    }

    /// (intents_written, intents_delivered) counted for source ob so far
    /// (counters are not transactional: other tests' counts stay).
    fn outbox_counts() -> (i64, i64) {
        Spi::connect(|c| {
            let row = c
                .select(
                    "SELECT coalesce(sum(intents_written), 0)::bigint, coalesce(sum(intents_delivered), 0)::bigint
                       FROM webhook_dedup.duplicate_metrics WHERE source = 'ob'",
                    None,
                    &[],
                )
                .unwrap()
                .first();
            (row.get::<i64>(1).unwrap().unwrap(), row.get::<i64>(2).unwrap().unwrap())
        })
    }

    #[pg_test]
    fn the_backlog_view_and_the_counters_show_the_outbox() {
        let before = outbox_counts();
        let token = claim("e8");
        let a = put("e8", token, "a", "t1").unwrap();
        put("e8", token, "b", "t1").unwrap();
        put("e8", token, "c", "t2").unwrap();
        let (_, lease, _, _) = next(Some("t1"), "1 minute", 1)[0].clone();
        // the view compares with now(), this test transaction's start:
        // make the pending intents a second older than it
        Spi::run(
            "UPDATE webhook_dedup.outbox SET created_at = created_at - interval '1 second',
                    due_at = due_at - interval '1 second'
              WHERE idem_key = 'e8' AND state = 'pending'",
        )
        .unwrap();
        let backlog = Spi::connect(|c| {
            c.select(
                "SELECT target, undelivered, pending, in_flight, due, oldest_undelivered_age >= '0'
                   FROM webhook_dedup.outbox_backlog ORDER BY target",
                None,
                &[],
            )
            .unwrap()
            .map(|r| {
                (
                    r.get::<String>(1).unwrap().unwrap(),
                    r.get::<i64>(2).unwrap().unwrap(),
                    r.get::<i64>(3).unwrap().unwrap(),
                    r.get::<i64>(4).unwrap().unwrap(),
                    r.get::<i64>(5).unwrap().unwrap(),
                    r.get::<bool>(6).unwrap().unwrap(),
                )
            })
            .collect::<Vec<_>>()
        });
        assert_eq!(backlog, vec![("t1".into(), 2, 1, 1, 1, true), ("t2".into(), 1, 1, 0, 1, true)]);
        assert!(ack(a, lease));
        let (written, delivered) = outbox_counts();
        assert_eq!((written - before.0, delivered - before.1), (3, 1));
    }

    #[pg_test]
    fn bad_arguments_get_precise_sqlstates() {
        let token = claim("e9");
        let put = |args: &str| error_of(&format!("SELECT webhook_dedup.webhook_outbox_put({args})"));
        assert!(put(&format!("'ob', 'e9', '{token}', NULL, 't', '{{}}'")).starts_with("22004"));
        assert!(put(&format!("'ob', 'e9', '{token}', 'op', 't', NULL")).starts_with("22004"));
        assert!(put(&format!("'ob', 'e9', '{token}', '', 't', '{{}}'")).starts_with("22023"));
        assert!(put(&format!("'ob', 'e9', '{token}', 'op', repeat('t', 256), '{{}}'")).starts_with("22023"));
        assert!(put(&format!("'ob', 'e9', '{token}', 'op', 't', '{{}}', max_length => 20")).starts_with("22023"));
        assert!(put(&format!("'ob', 'e9', '{token}', 'op', 't', '{{}}', downstream => 'nope'")).starts_with("22023"));
        assert!(put(&format!("'ob', 'e9', '{token}', 'op', 't', '{{}}', max_length => 60, downstream => 'adyen'"))
            .starts_with("22023"));
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.outbox WHERE idem_key = 'e9'"), 0);
        let next = |args: &str| error_of(&format!("SELECT * FROM webhook_dedup.webhook_outbox_next({args})"));
        assert!(next("batch => 0").starts_with("22023"));
        assert!(next("batch => NULL").starts_with("22004"));
        assert!(next("lease => '-1 second'").starts_with("22023"));
        assert!(next("target => ''").starts_with("22023"));
        assert!(error_of("SELECT webhook_dedup.webhook_outbox_ack(NULL, gen_random_uuid())").starts_with("22004"));
        assert!(error_of(
            "SELECT webhook_dedup.webhook_outbox_fail(1, gen_random_uuid(), 'e', retry_after => '1 mon')"
        )
        .starts_with("22023"));
        assert!(error_of("SELECT webhook_dedup.webhook_outbox_unknown(424242, gen_random_uuid())").starts_with("P0002"));
    }

    #[pg_test]
    fn operation_keys_in_sql_follow_the_presets() {
        let key = |sql: &str| Spi::get_one::<String>(sql).unwrap().unwrap();
        assert_eq!(
            key("SELECT webhook_dedup.webhook_operation_key('stripe', 'evt_1', 'refund')"),
            "refund:stripe:evt_1"
        );
        let long = key(
            "SELECT webhook_dedup.webhook_operation_key('shop', repeat('k', 200), 'refund', downstream => 'square_payments')",
        );
        assert!(long.len() <= 45 && long.starts_with("refund-"), "{long}");
        assert_eq!(
            key("SELECT webhook_dedup.webhook_operation_key('shop', repeat('k', 200), 'refund', 45)"),
            long,
            "a preset is its limit"
        );
        assert!(error_of("SELECT webhook_dedup.webhook_operation_key('s', 'k', 'op', 100, 'square_orders')")
            .starts_with("22023"));
        assert!(error_of("SELECT webhook_dedup.webhook_operation_key('s', NULL, 'op')").starts_with("22004"));
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.downstream_key_limits"), 6);
    }
}
