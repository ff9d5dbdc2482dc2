//! `#[pg_test]`s of the payload archive in one session (src/engine/archive.rs, src/api/archive.rs,
//! src/maintenance/archive.rs): what each intake path archives and what it
//! does not, the partitions a pass makes and drops, paced removal of a
//! shorter payload retention, rows moved out of the default partition,
//! redaction by key, by time and by account, `unseen`, argument errors.
//! The roles are tests/cluster/test_security.py; the worker dropping
//! partitions on its own is tests/cluster/test_archive.py.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use crate::tests::support::{i64_of, run, text_of};
    use pgrx::prelude::*;

    fn texts(sql: &str) -> Vec<String> {
        Spi::connect(|c| c.select(sql, None, &[]).unwrap().map(|r| r.get::<String>(1).unwrap().unwrap()).collect())
    }

    fn keep(source: &str, retention: &str) {
        Spi::run_with_args(
            "INSERT INTO webhook_dedup.sources (source, keep_payload, payload_retention) VALUES ($1, true, $2::interval)",
            &[source.into(), retention.into()],
        )
        .unwrap();
    }

    /// (conflict, payload as text) of each archived row of a key, oldest first.
    fn archived(source: &str, key: &str) -> Vec<(bool, String)> {
        Spi::connect(|c| {
            c.select(
                "SELECT conflict, convert_from(payload, 'UTF8') FROM webhook_dedup.archive
                  WHERE source = $1 AND idem_key = $2 ORDER BY received_at",
                None,
                &[source.into(), key.into()],
            )
            .unwrap()
            .map(|r| (r.get::<bool>(1).unwrap().unwrap(), r.get::<String>(2).unwrap().unwrap()))
            .collect()
        })
    }

    #[pg_test]
    fn a_claim_archives_the_first_delivery_and_conflicts_not_duplicates() {
        keep("ar", "1 day");
        run("SELECT webhook_dedup.webhook_claim('ar', 'k', 'first'::bytea, event_type => 'order.paid')");
        run("SELECT webhook_dedup.webhook_claim('ar', 'k', 'first'::bytea)");
        run("SELECT webhook_dedup.webhook_claim('ar', 'k', 'changed'::bytea)");
        assert_eq!(archived("ar", "k"), vec![(false, "first".into()), (true, "changed".into())]);
        // the first delivery's arrival is the key's first_seen_at (its lookup)
        assert_eq!(
            i64_of(
                "SELECT count(*) FROM webhook_dedup.archive AS a JOIN webhook_dedup.keys AS k
                    ON k.source = a.source AND k.idem_key = a.idem_key AND k.first_seen_at = a.received_at
                 WHERE NOT a.conflict AND a.event_type = 'order.paid'"
            ),
            1
        );
        // the conflict's arrival is its conflict_log row's
        assert_eq!(
            i64_of(
                "SELECT count(*) FROM webhook_dedup.archive AS a JOIN webhook_dedup.conflict_log AS c
                    ON c.source = a.source AND c.idem_key = a.idem_key AND c.seen_at = a.received_at
                 WHERE a.conflict"
            ),
            1
        );
    }

    #[pg_test]
    fn a_claim_of_a_pending_key_archives_nothing_more() {
        keep("ar", "1 day");
        // enqueued (archived once), then claimed by a provider's retry
        // while still pending: the claim is not a first delivery
        run("SELECT webhook_dedup.webhook_enqueue('ar', 'p', 'body'::bytea)");
        assert_eq!(
            text_of("SELECT outcome FROM webhook_dedup.webhook_claim('ar', 'p', 'body'::bytea)").as_deref(),
            Some("claimed")
        );
        assert_eq!(archived("ar", "p"), vec![(false, "body".into())]);
        // so a redaction finds every archived copy
        run("SELECT webhook_dedup.redact('ar', idem_key => 'p')");
        assert!(archived("ar", "p").is_empty());
    }

    #[pg_test]
    fn a_key_redacted_while_processed_is_dead_lettered_when_due_again() {
        keep("ar", "1 day");
        run("SELECT webhook_dedup.webhook_enqueue('ar', 'held', 'secret'::bytea)");
        let token =
            Spi::get_one::<pgrx::Uuid>("SELECT claim_token FROM webhook_dedup.webhook_next('ar')").unwrap().unwrap();
        run("SELECT webhook_dedup.redact('ar', idem_key => 'held')");
        // its holder had the payload; it fails, the key is due again
        Spi::run_with_args(
            "SELECT webhook_dedup.webhook_fail('ar', 'held', $1, 'e', retry_after => '0 s')",
            &[token.into()],
        )
        .unwrap();
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.webhook_next('ar')"), 0, "never handed out empty");
        assert_eq!(
            text_of("SELECT state || ' ' || last_error FROM webhook_dedup.keys WHERE idem_key = 'held'").as_deref(),
            Some("dead_lettered payload erased by webhook_dedup.redact")
        );
    }

    #[pg_test]
    fn nothing_is_archived_for_a_source_that_does_not_keep_payloads() {
        run("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES ('off', false)");
        run("SELECT webhook_dedup.webhook_claim('off', 'k', 'x'::bytea)");
        run("SELECT webhook_dedup.webhook_claim('none', 'k', 'x'::bytea)");
        run("SELECT webhook_dedup.webhook_enqueue('none', 'e', 'x'::bytea)");
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.archive"), 0);
        // a claim without a payload has nothing to archive
        keep("ar", "1 day");
        run("SELECT webhook_dedup.webhook_claim('ar', 'nopayload')");
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.archive"), 0);
    }

    #[pg_test]
    fn an_enqueue_archives_with_its_headers_and_a_rollback_archives_nothing() {
        keep("ar", "1 day");
        run("SELECT webhook_dedup.webhook_enqueue('ar', 'e', 'body'::bytea, 'x.y', '{\"h\": \"v\"}')");
        run("SELECT webhook_dedup.webhook_enqueue('ar', 'e', 'body'::bytea)");
        assert_eq!(archived("ar", "e"), vec![(false, "body".into())]);
        assert_eq!(
            text_of("SELECT headers->>'h' FROM webhook_dedup.archive WHERE idem_key = 'e'").as_deref(),
            Some("v")
        );
        // the payload for the worker is there as before
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.payloads WHERE idem_key = 'e'"), 1);
        run("DO $$ BEGIN
               PERFORM webhook_dedup.webhook_claim('ar', 'rolled', 'x'::bytea);
               RAISE EXCEPTION 'roll back';
             EXCEPTION WHEN raise_exception THEN NULL;
             END $$");
        assert!(archived("ar", "rolled").is_empty());
    }

    #[pg_test]
    fn a_receive_archives_the_raw_body_headers_and_event_id() {
        keep("github", "1 day");
        let body = br#"{"action":"opened","number":1}"#;
        let signed = crate::tests::support::signed(
            "github",
            body,
            "It's a Secret to Everybody",
            0,
            "",
            serde_json::json!({"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "d-1"}),
        );
        let headers = pgrx::JsonB(signed);
        Spi::run_with_args(
            "SELECT webhook_dedup.webhook_receive('github', $1, $2, ARRAY['It''s a Secret to Everybody'])",
            &[body.as_slice().into(), headers.into()],
        )
        .unwrap();
        assert_eq!(text_of("SELECT event_id FROM webhook_dedup.archive").as_deref(), Some("d-1"));
        assert_eq!(text_of("SELECT event_type FROM webhook_dedup.archive").as_deref(), Some("pull_request"));
        assert_eq!(
            Spi::get_one::<Vec<u8>>("SELECT payload FROM webhook_dedup.archive").unwrap().as_deref(),
            Some(body.as_slice())
        );
        assert!(text_of("SELECT headers::text FROM webhook_dedup.archive").unwrap().contains("X-Hub-Signature-256"));
    }

    #[pg_test]
    fn a_payload_retention_longer_than_the_keys_is_refused() {
        let e = error_of(
            "INSERT INTO webhook_dedup.sources (source, retention, payload_retention) VALUES ('x', '1 day', '2 days')",
        );
        assert!(e.starts_with("23514"), "{e}");
        let e = error_of("INSERT INTO webhook_dedup.sources (source, payload_retention) VALUES ('x', '1 mon')");
        assert!(e.starts_with("23514"), "{e}");
    }

    /// The day partitions (names) of the archive.
    fn partitions() -> Vec<String> {
        texts(
            "SELECT c.relname::text FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
              WHERE i.inhparent = 'webhook_dedup.archive'::regclass AND c.relname <> 'archive_default' ORDER BY 1",
        )
    }

    fn day_name(offset_days: i64) -> String {
        let now = crate::time::clock_now();
        crate::archive::partition_name(crate::archive::day_of(now) + offset_days)
    }

    #[pg_test]
    fn a_pass_makes_partitions_ahead_and_drops_those_past_the_longest_retention() {
        keep("ar", "2 days");
        run("SELECT webhook_dedup.run_maintenance()");
        let made = partitions();
        assert_eq!(made, (0..=crate::archive::AHEAD_DAYS).map(day_name).collect::<Vec<_>>());
        // rows of 10 days ago: their day gets a partition only while within
        // retention; an old partition made by hand is dropped whole
        let old = day_name(-10);
        let ten_days_ago = "(now() - interval '10 days')";
        run(&format!(
            "CREATE TABLE webhook_dedup.{old} PARTITION OF webhook_dedup.archive
               FOR VALUES FROM (date_trunc('day', {ten_days_ago}, 'UTC')) TO (date_trunc('day', {ten_days_ago}, 'UTC') + interval '1 day')"
        ));
        run(&format!(
            "INSERT INTO webhook_dedup.archive VALUES ({ten_days_ago}, 'ar', 'old', NULL, NULL, false, 'x', NULL)"
        ));
        let pass = Spi::get_two::<i32, i32>(
            "SELECT partitions_created, partitions_dropped FROM webhook_dedup.run_maintenance()",
        )
        .unwrap();
        assert_eq!(pass, (Some(0), Some(1)));
        assert!(!partitions().contains(&old));
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.archive WHERE idem_key = 'old'"), 0);
        assert_eq!(
            i64_of("SELECT partitions_dropped::bigint FROM webhook_dedup.maintenance_runs ORDER BY id DESC LIMIT 1"),
            1
        );
    }

    #[pg_test]
    fn a_shorter_payload_retention_is_applied_row_by_row() {
        keep("long", "3 days");
        keep("short", "1 hour");
        run("SELECT webhook_dedup.run_maintenance()");
        // two hours ago: past short's retention, within long's
        for (source, key) in [("short", "s1"), ("short", "s2"), ("short", "s3"), ("long", "l1")] {
            Spi::run_with_args(
                "INSERT INTO webhook_dedup.archive VALUES (now() - interval '2 hours', $1, $2, NULL, NULL, false, 'x', NULL)",
                &[source.into(), key.into()],
            )
            .unwrap();
        }
        run("SELECT webhook_dedup.webhook_claim('short', 'fresh', 'x'::bytea)");
        let pruned = i64_of("SELECT payloads_pruned FROM webhook_dedup.run_maintenance()");
        assert_eq!(pruned, 3);
        assert_eq!(
            texts("SELECT source || '/' || idem_key FROM webhook_dedup.archive ORDER BY 1"),
            vec!["long/l1".to_string(), "short/fresh".to_string()]
        );
    }

    #[pg_test]
    fn rows_that_arrived_with_no_partition_are_moved_to_their_day() {
        keep("ar", "2 days");
        // no pass has run: the claim lands in the default partition
        run("SELECT webhook_dedup.webhook_claim('ar', 'k', 'x'::bytea)");
        assert_eq!(
            text_of("SELECT tableoid::regclass::text FROM webhook_dedup.archive").as_deref(),
            Some("webhook_dedup.archive_default")
        );
        run("SELECT webhook_dedup.run_maintenance()");
        assert_eq!(
            text_of("SELECT tableoid::regclass::text FROM webhook_dedup.archive"),
            Some(format!("webhook_dedup.{}", day_name(0)))
        );
        assert_eq!(archived("ar", "k"), vec![(false, "x".into())]);
        // nobody but the owner holds a privilege on a new partition
        assert_eq!(
            i64_of(&format!(
                "SELECT count(*) FROM pg_class AS c, aclexplode(c.relacl) AS a
                  WHERE c.oid = 'webhook_dedup.{}'::regclass AND a.grantee <> c.relowner",
                day_name(0)
            )),
            0
        );
    }

    #[pg_test]
    fn redact_erases_payloads_and_result_and_keeps_the_tombstone() {
        keep("ar", "1 day");
        let token = Spi::get_one::<pgrx::Uuid>(
            "SELECT claim_token FROM webhook_dedup.webhook_claim('ar', 'k', 'secret body'::bytea)",
        )
        .unwrap()
        .unwrap();
        Spi::run_with_args(
            "SELECT webhook_dedup.webhook_complete('ar', 'k', $1, '{\"email\": \"a@example.com\"}')",
            &[token.into()],
        )
        .unwrap();
        run("SELECT webhook_dedup.webhook_claim('ar', 'k', 'another body'::bytea)");
        let (keys, deliveries) =
            Spi::get_two::<i64, i64>("SELECT keys, deliveries FROM webhook_dedup.redact('ar', idem_key => 'k')")
                .unwrap();
        assert_eq!((keys, deliveries), (Some(1), Some(2)));
        assert!(archived("ar", "k").is_empty());
        let (result, by) = Spi::get_two::<String, String>(
            "SELECT result::text, redacted_by FROM webhook_dedup.key_history WHERE idem_key = 'k' AND redacted_at IS NOT NULL",
        )
        .unwrap();
        assert_eq!(result, None);
        assert_eq!(by, text_of("SELECT session_user::text"));
        // a redelivery is still a duplicate (no result to hand back), a
        // changed one still a conflict
        assert_eq!(
            text_of("SELECT outcome FROM webhook_dedup.webhook_claim('ar', 'k', 'secret body'::bytea)").as_deref(),
            Some("duplicate")
        );
        assert_eq!(
            text_of("SELECT outcome FROM webhook_dedup.webhook_claim('ar', 'k', 'third body'::bytea)").as_deref(),
            Some("conflict")
        );
        // redacting again erases what arrived since (the conflicting
        // delivery's archived copy) and counts no key: its tombstone had
        // nothing left to erase
        assert_eq!(
            Spi::get_two::<i64, i64>("SELECT keys, deliveries FROM webhook_dedup.redact('ar', idem_key => 'k')")
                .unwrap(),
            (Some(0), Some(1))
        );
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.redactions"), 2);
        // a third time erases nothing and records nothing; nor does an
        // unknown key
        assert_eq!(
            Spi::get_two::<i64, i64>("SELECT keys, deliveries FROM webhook_dedup.redact('ar', idem_key => 'k')")
                .unwrap(),
            (Some(0), Some(0))
        );
        assert_eq!(i64_of("SELECT keys FROM webhook_dedup.redact('ar', idem_key => 'nope')"), 0);
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.redactions"), 2);
        assert_eq!(
            text_of("SELECT redacted_by FROM webhook_dedup.keys WHERE source = 'ar' AND idem_key = 'k'"),
            text_of("SELECT session_user::text")
        );
    }

    #[pg_test]
    fn a_key_gone_past_retention_is_redacted_from_the_archive_and_forget_takes_it_along() {
        keep("ar", "1 day");
        run("SELECT webhook_dedup.webhook_claim('ar', 'expired', 'old body'::bytea)");
        run("SELECT webhook_dedup.webhook_claim('ar', 'expired', 'conflicting body'::bytea)");
        // as retention deletes a key: its archived deliveries outlive it
        // until their day's partition is dropped
        run("DELETE FROM webhook_dedup.keys WHERE idem_key = 'expired'");
        assert_eq!(archived("ar", "expired").len(), 2);
        let (keys, deliveries) =
            Spi::get_two::<i64, i64>("SELECT keys, deliveries FROM webhook_dedup.redact('ar', idem_key => 'expired')")
                .unwrap();
        assert_eq!((keys, deliveries), (Some(0), Some(2)));
        assert!(archived("ar", "expired").is_empty());
        // webhook_forget deletes a key's archived deliveries with it
        run("SELECT webhook_dedup.webhook_claim('ar', 'forgotten', 'a'::bytea)");
        run("SELECT webhook_dedup.webhook_claim('ar', 'forgotten', 'b'::bytea)");
        run("SELECT webhook_dedup.webhook_claim('ar', 'other', 'c'::bytea)");
        run("SELECT webhook_dedup.webhook_forget('ar', 'forgotten')");
        assert!(archived("ar", "forgotten").is_empty());
        assert_eq!(archived("ar", "other").len(), 1);
    }

    #[pg_test]
    fn redact_by_time_and_by_account() {
        keep("ar", "1 day");
        run("SELECT webhook_dedup.webhook_enqueue('ar', webhook_dedup.webhook_key('ar', 'e1', account => 'acct:1'), 'a'::bytea)");
        run("SELECT webhook_dedup.webhook_enqueue('ar', webhook_dedup.webhook_key('ar', 'e2', account => 'acct:2'), 'b'::bytea)");
        run("SELECT webhook_dedup.webhook_enqueue('ar', webhook_dedup.webhook_key('ar', 'e3'), 'c'::bytea)");
        run("SELECT webhook_dedup.webhook_enqueue('other', webhook_dedup.webhook_key('ar', 'e4', account => 'acct:1'), 'd'::bytea)");
        let (keys, deliveries) =
            Spi::get_two::<i64, i64>("SELECT keys, deliveries FROM webhook_dedup.redact('ar', account => 'acct:1')")
                .unwrap();
        // the key and its payload for the worker, and its archived delivery
        assert_eq!((keys, deliveries), (Some(1), Some(2)));
        assert_eq!(
            texts("SELECT idem_key FROM webhook_dedup.keys WHERE redacted_at IS NOT NULL"),
            vec![text_of("SELECT webhook_dedup.webhook_key('ar', 'e1', account => 'acct:1')").unwrap()]
        );
        // a source's keys first seen before a time: here, every key of ar
        // (the one redacted above had nothing left to erase: not counted)
        let (keys, _) = Spi::get_two::<i64, i64>(
            "SELECT keys, deliveries FROM webhook_dedup.redact('ar', before => clock_timestamp())",
        )
        .unwrap();
        assert_eq!(keys, Some(2));
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.archive WHERE source = 'ar'"), 0);
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.payloads WHERE source = 'ar'"), 0);
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.payloads WHERE source = 'other'"), 1);
        // a key waiting for a worker cannot be processed without its
        // payload: dead-lettered, never handed out empty
        assert_eq!(
            i64_of(
                "SELECT count(*) FROM webhook_dedup.keys WHERE source = 'ar' AND state = 'dead_lettered'
                    AND last_error = 'payload erased by webhook_dedup.redact' AND due_at IS NULL"
            ),
            3
        );
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.webhook_next('ar', batch => 10)"), 0);
    }

    #[pg_test]
    fn redact_takes_exactly_one_scope() {
        for sql in [
            "SELECT webhook_dedup.redact('ar')",
            "SELECT webhook_dedup.redact('ar', idem_key => 'k', account => 'a')",
            "SELECT webhook_dedup.redact('ar', account => '')",
            "SELECT webhook_dedup.redact('ar', before => 'infinity')",
            "SELECT webhook_dedup.redact('', idem_key => 'k')",
        ] {
            let e = error_of(sql);
            assert!(e.starts_with("22023"), "{sql}: {e}");
        }
        assert!(error_of("SELECT webhook_dedup.redact(NULL, idem_key => 'k')").starts_with("22004"));
    }

    #[pg_test]
    fn a_reconciled_event_is_enqueued_marked_and_counted_apart() {
        // (a source of its own: the shared counters outlive each test)
        let source = "reconcile-pgtest";
        let unseen = |ids: &str| texts(&format!("SELECT * FROM webhook_dedup.unseen('{source}', ARRAY[{ids}])"));
        assert_eq!(unseen("'evt_1', 'evt_2'"), vec!["evt_1".to_string(), "evt_2".to_string()]);
        let reconcile = |id: &str| {
            text_of(&format!(
                "SELECT webhook_dedup.reconcile('{source}', '{id}', '{{\"id\": \"{id}\"}}'::bytea, 'invoice.paid')"
            ))
        };
        assert_eq!(reconcile("evt_2").as_deref(), Some("accepted"));
        assert_eq!(unseen("'evt_1', 'evt_2'"), vec!["evt_1".to_string()]);
        // the key webhook_receive would have derived, marked reconciled
        assert_eq!(
            i64_of(&format!(
                "SELECT count(*) FROM webhook_dedup.key_history
                  WHERE idem_key = webhook_dedup.webhook_key('{source}', 'evt_2') AND source = '{source}'
                    AND state = 'pending' AND reconciled_at IS NOT NULL"
            )),
            1
        );
        // the workers get it with its payload
        assert_eq!(
            text_of(&format!("SELECT convert_from(payload, 'UTF8') FROM webhook_dedup.webhook_next('{source}')")),
            Some("{\"id\": \"evt_2\"}".into())
        );
        // a second reconcile of the same event finds the key
        assert_eq!(reconcile("evt_2").as_deref(), Some("duplicate"));
        // counted as reconciled, not as a delivery; a leaky endpoint alert
        assert_eq!(
            text_of(&format!(
                "SELECT sum(reconciled) || ' ' || sum(enqueued) FROM webhook_dedup.duplicate_metrics WHERE source = '{source}'"
            )),
            Some("1 0".into())
        );
        assert_eq!(
            i64_of(&format!(
                "SELECT count(*) FROM webhook_dedup.duplicate_rate_alerts(0.5, '1 hour')
                  WHERE source = '{source}' AND alert = 'reconciled_above_threshold' AND reconciled = 1"
            )),
            1
        );
        // a source's rules apply: its accepted types, its fingerprint rule
        // (Stripe's covers /type and /data: a retry Stripe re-rendered, or
        // the API's copy, is the same event)
        run("INSERT INTO webhook_dedup.sources (source, provider, accept_event_types)
             VALUES ('stripe-rc', 'stripe', ARRAY['invoice.*'])");
        assert_eq!(
            text_of(r#"SELECT webhook_dedup.reconcile('stripe-rc', 'evt_9', '{"id":"evt_9","type":"charge.x"}'::bytea, 'charge.x')"#)
                .as_deref(),
            Some("ignored")
        );
        assert_eq!(
            text_of(
                r#"SELECT webhook_dedup.reconcile('stripe-rc', 'evt_8',
                     '{"id":"evt_8","type":"invoice.paid","data":{"o":1},"pending_webhooks":0}'::bytea, 'invoice.paid')"#
            )
            .as_deref(),
            Some("accepted")
        );
        assert_eq!(
            text_of(
                r#"SELECT webhook_dedup.reconcile('stripe-rc', 'evt_8',
                     '{"id":"evt_8","type":"invoice.paid","data":{"o":1},"pending_webhooks":3}'::bytea, 'invoice.paid')"#
            )
            .as_deref(),
            Some("duplicate")
        );
        for (sql, state) in [
            (format!("SELECT webhook_dedup.reconcile('{source}', NULL, 'x'::bytea)"), "22004"),
            (format!("SELECT webhook_dedup.reconcile('{source}', '', 'x'::bytea)"), "22023"),
            (format!("SELECT webhook_dedup.reconcile('{source}', 'e', NULL)"), "22004"),
        ] {
            let e = error_of(&sql);
            assert!(e.starts_with(state), "{sql}: {e}");
        }
    }

    #[pg_test]
    fn unseen_says_which_listed_ids_have_no_key() {
        run("SELECT webhook_dedup.webhook_claim('stripe', webhook_dedup.webhook_key('stripe', 'evt_1'))");
        run("SELECT webhook_dedup.webhook_claim('stripe', webhook_dedup.webhook_key('stripe', 'evt_3', account => 'acct_9'))");
        assert_eq!(
            texts("SELECT * FROM webhook_dedup.unseen('stripe', ARRAY['evt_2', 'evt_1', 'evt_3', 'evt_2'])"),
            vec!["evt_2".to_string(), "evt_3".to_string()]
        );
        assert_eq!(
            texts("SELECT * FROM webhook_dedup.unseen('stripe', ARRAY['evt_3', 'evt_1'], account => 'acct_9')"),
            vec!["evt_1".to_string()]
        );
        assert!(texts("SELECT * FROM webhook_dedup.unseen('stripe', ARRAY[]::text[])").is_empty());
        for (sql, state) in [
            ("SELECT webhook_dedup.unseen('stripe', ARRAY['a', NULL])", "22004"),
            ("SELECT webhook_dedup.unseen('stripe', ARRAY[''])", "22023"),
            ("SELECT webhook_dedup.unseen('stripe', NULL)", "22004"),
        ] {
            let e = error_of(sql);
            assert!(e.starts_with(state), "{sql}: {e}");
        }
    }
}
