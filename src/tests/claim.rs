//! `#[pg_test]`s of the claim and its argument rules: duplicates, conflicts,
//! key bounds, leases and fencing, stored results, triggers on the keys
//! table, privileges and read-only transactions (see `src/tests/mod.rs` for
//! how these tests run; races are in `tests/isolation`).

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::{claim, complete, error_of};
    use pgrx::prelude::*;
    use pgrx::JsonB;
    use serde_json::json;

    #[pg_test]
    fn argument_errors_have_precise_sqlstates() {
        let cases = [
            // the metrics report overflowing counts under this name, so
            // no real source may have it
            (
                "SELECT * FROM webhook_dedup.webhook_claim('(overflow)', 'k')",
                "22023: source \"(overflow)\" is reserved: the metrics report the counts of sources past a database's share under it",
            ),
            (
                "SELECT * FROM webhook_dedup.webhook_receive('github', ''::bytea, '{}', ARRAY['s'], source => '(overflow)')",
                "22023: source \"(overflow)\" is reserved: the metrics report the counts of sources past a database's share under it",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('gitlab', ''::bytea, '{}', ARRAY['s'])",
                "22023: unknown webhook signature scheme \"gitlab\"",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('github', NULL, '{}', ARRAY['s'])",
                "22004: payload must not be NULL",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('github', ''::bytea, '[1]', ARRAY['s'])",
                "22023: headers must be a JSON object of header names to values, not an array",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('github', ''::bytea, '{\"a\": 1}', ARRAY['s'])",
                "22023: header \"a\" must be a string or an array of strings, not a number",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('github', ''::bytea, '{}', ARRAY['s', ''])",
                "22023: secret 2 of 2 is empty",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('stripe', ''::bytea, '{}', ARRAY['s\n'])",
                "22023: secret 1 of 1 has leading or trailing whitespace",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('github', ''::bytea, '{}', ARRAY[]::text[])",
                "22023: secrets must hold at least one secret",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('github', ''::bytea, '{}', ARRAY[NULL]::text[])",
                "22004: every element of secrets must not be NULL",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('stripe', ''::bytea, '{}', ARRAY['s'], '-1 s')",
                "22023: tolerance must not be negative",
            ),
            (
                "SELECT webhook_dedup.webhook_verify('stripe', ''::bytea, '{}', ARRAY['s'], at => 'infinity')",
                "22023: at must be a finite timestamp",
            ),
            ("SELECT webhook_dedup.webhook_key(NULL, 'e')", "22004: source must not be NULL"),
            ("SELECT webhook_dedup.webhook_key('s', '')", "22023: event_id must not be empty"),
            ("SELECT webhook_dedup.webhook_key('s', 'e', account => '')", "22023: account must not be empty"),
            ("SELECT * FROM webhook_dedup.webhook_claim(NULL, 'k')", "22004: source must not be NULL"),
            ("SELECT * FROM webhook_dedup.webhook_claim('s', NULL)", "22004: idem_key must not be NULL"),
            ("SELECT * FROM webhook_dedup.webhook_claim('', 'k')", "22023: source must not be empty"),
            ("SELECT * FROM webhook_dedup.webhook_claim('s', '')", "22023: idem_key must not be empty"),
            (
                "SELECT * FROM webhook_dedup.webhook_claim('s', repeat('k', 256))",
                "22023: idem_key is 256 characters long; the limit is 255",
            ),
            (
                "SELECT * FROM webhook_dedup.webhook_claim(repeat('s', 300), 'k')",
                "22023: source is 300 characters long; the limit is 255",
            ),
            (
                "SELECT * FROM webhook_dedup.webhook_claim('s', 'k', lease => '0 s')",
                "22023: lease must be a positive interval",
            ),
            (
                "SELECT * FROM webhook_dedup.webhook_claim('s', 'k', lease => '1 mon')",
                "22023: lease must not have a month or year part (use days, e.g. '30 days')",
            ),
            (
                "SELECT webhook_dedup.webhook_complete('s', 'missing', gen_random_uuid())",
                "P0002: no idempotency key \"missing\" for source \"s\"",
            ),
            ("SELECT webhook_dedup.webhook_complete('s', 'k', NULL)", "22004: claim_token must not be NULL"),
        ];
        for (query, want) in cases {
            assert_eq!(error_of(query), want, "{query}");
        }
        // nothing above stored a key
        assert_eq!(Spi::get_one::<i64>("SELECT count(*) FROM webhook_dedup.keys"), Ok(Some(0)));
    }

    /// ID-02: a duplicate after completion gets `duplicate` and the stored result.
    #[pg_test]
    fn duplicate_after_completion_returns_the_stored_result() {
        let (outcome, token, attempt, _) = claim("stripe", "evt_dup_0001", Some("{\"amount\":2000}"), "5 minutes");
        assert_eq!((outcome.as_str(), attempt), ("claimed", 1));
        assert!(complete("stripe", "evt_dup_0001", token.unwrap(), json!({"status": 200})));
        let (outcome, token, attempt, result) = claim("stripe", "evt_dup_0001", Some("{\"amount\":2000}"), "5 minutes");
        assert_eq!((outcome.as_str(), token, attempt), ("duplicate", None, 1));
        assert_eq!(result.map(|r| r.0), Some(json!({"status": 200})));
        // the key stayed one row that saw two deliveries
        let row = Spi::get_two::<String, i32>(
            "SELECT state, deliveries FROM webhook_dedup.keys WHERE idem_key = 'evt_dup_0001'",
        );
        assert_eq!(row, Ok((Some("completed".into()), Some(2))));
    }

    /// ID-03: the same key with another payload is a conflict: not
    /// processed, not answered with the first payload's result, recorded.
    #[pg_test]
    fn same_key_other_payload_is_a_conflict() {
        let (_, token, ..) = claim("shop", "order-42-charge", Some("{\"amount\":2000}"), "5 minutes");
        assert!(complete("shop", "order-42-charge", token.unwrap(), json!({"charged": 2000})));
        let (outcome, token, _, result) = claim("shop", "order-42-charge", Some("{\"amount\":20000}"), "5 minutes");
        assert_eq!((outcome.as_str(), token, result.map(|r| r.0)), ("conflict", None, None));
        // no payload given: nothing to compare, an ordinary duplicate
        assert_eq!(claim("shop", "order-42-charge", None, "5 minutes").0, "duplicate");
        let conflicts =
            Spi::get_one::<i32>("SELECT conflicts FROM webhook_dedup.keys WHERE idem_key = 'order-42-charge'");
        assert_eq!(conflicts, Ok(Some(1)));
    }

    /// ID-04: keys of 1 to 255 characters (characters, not bytes).
    #[pg_test]
    fn key_length_limits() {
        assert_eq!(claim("s", &"k".repeat(255), None, "1 minute").0, "claimed");
        assert_eq!(claim("s", &"é".repeat(255), None, "1 minute").0, "claimed");
        assert!(error_of("SELECT * FROM webhook_dedup.webhook_claim('s', repeat('é', 256))").starts_with("22023"));
    }

    /// ID-05 and ID-11: a lease that expires is reclaimed by the next
    /// delivery (attempt 2, new token); the first holder's late completion
    /// is refused; the new holder completes.
    #[pg_test]
    fn expired_lease_is_reclaimed_and_the_stale_token_fenced() {
        let (outcome, token_a, ..) = claim("svc", "evt_lease_0001", None, "50 milliseconds");
        assert_eq!(outcome, "claimed");
        assert_eq!(claim("svc", "evt_lease_0001", None, "30 seconds").0, "in_progress");
        Spi::run("SELECT pg_sleep(0.06)").unwrap();
        let (outcome, token_b, attempt, _) = claim("svc", "evt_lease_0001", None, "30 seconds");
        assert_eq!((outcome.as_str(), attempt), ("reclaimed", 2));
        assert_ne!(token_a, token_b);
        assert!(!complete("svc", "evt_lease_0001", token_a.unwrap(), json!({"by": "A"})));
        assert!(complete("svc", "evt_lease_0001", token_b.unwrap(), json!({"by": "B"})));
        let stored = Spi::get_one::<JsonB>("SELECT result FROM webhook_dedup.keys WHERE idem_key = 'evt_lease_0001'");
        assert_eq!(stored.unwrap().map(|r| r.0), Some(json!({"by": "B"})));
        // a completed key refuses every token
        assert!(!complete("svc", "evt_lease_0001", token_b.unwrap(), json!({"by": "B again"})));
    }

    /// A holder whose lease expired but was not reclaimed (or swept) still
    /// completes: fencing is by token, not by clock.
    #[pg_test]
    fn expired_but_unreclaimed_lease_still_completes() {
        let (_, token, ..) = claim("svc", "slow", None, "1 millisecond");
        Spi::run("SELECT pg_sleep(0.01)").unwrap();
        assert!(complete("svc", "slow", token.unwrap(), json!(null)));
    }

    /// ID-10: the key comes from the event id, not per-attempt transport
    /// headers, so two attempts with different X-Request-Id share it.
    #[pg_test]
    fn key_ignores_transport_headers() {
        let key_for = |request_id: &str| {
            Spi::get_one_with_args::<String>(
                "SELECT webhook_dedup.webhook_key('standard', $1::jsonb->>'webhook-id')",
                &[format!(r#"{{"webhook-id": "msg_redelivery_0001", "X-Request-Id": "{request_id}"}}"#).into()],
            )
            .unwrap()
        };
        assert_eq!(key_for("req-attempt-1"), key_for("req-attempt-2"));
        assert_eq!(key_for("req-attempt-1").as_deref(), Some("standard:msg_redelivery_0001"));
    }

    /// Sources scope keys: the same key under two sources is two keys.
    #[pg_test]
    fn sources_scope_keys() {
        assert_eq!(claim("stripe", "evt_1", None, "1 minute").0, "claimed");
        assert_eq!(claim("github", "evt_1", None, "1 minute").0, "claimed");
    }

    /// Every claim is counted by source and outcome.
    #[pg_test]
    fn claims_are_counted() {
        let before = Spi::get_one::<i64>(
            "SELECT coalesce(sum(deliveries), 0)::bigint FROM webhook_dedup.duplicate_metrics WHERE source = 'metered'",
        )
        .unwrap()
        .unwrap();
        let (_, token, ..) = claim("metered", "a", None, "1 minute");
        claim("metered", "a", None, "1 minute");
        complete("metered", "a", token.unwrap(), json!({}));
        claim("metered", "a", None, "1 minute");
        let row = Spi::get_three::<i64, i64, i64>(
            "SELECT sum(deliveries)::bigint, sum(first_claims)::bigint, sum(duplicates)::bigint
               FROM webhook_dedup.duplicate_metrics WHERE source = 'metered'",
        )
        .unwrap();
        assert_eq!(row, (Some(before + 3), Some(1), Some(2)));
    }

    /// A stored result reaches duplicates exactly: no float rounding of
    /// big or precise numbers on the way through.
    #[pg_test]
    fn stored_results_come_back_exactly() {
        let (_, token, ..) = claim("svc", "precise", None, "1 minute");
        let input = r#"{"a": 12345678901234567890123, "b": 1.10, "c": -0.000000000000000000001}"#;
        let done = Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_complete('svc', 'precise', $1, $2::jsonb)",
            &[token.unwrap().into(), input.into()],
        );
        assert_eq!(done, Ok(Some(true)));
        let back = Spi::get_two_with_args::<String, String>(
            "SELECT result::text, $1::jsonb::text FROM webhook_dedup.webhook_claim('svc', 'precise')",
            &[input.into()],
        )
        .unwrap();
        assert_eq!(back.0, back.1);
        assert!(back.0.unwrap().contains("12345678901234567890123"));
    }

    #[pg_test]
    fn leases_are_bounded() {
        assert_eq!(
            error_of("SELECT * FROM webhook_dedup.webhook_claim('s', 'k', lease => '366 days')"),
            "22023: lease must be at most 365 days"
        );
        assert_eq!(claim("s", "k", None, "365 days").0, "claimed");
    }

    /// A new key is stored without an SQL plan only while the keys table
    /// is as the extension made it: with a trigger on it (an audit trigger
    /// a DBA added), claims go through the SQL statement and the trigger
    /// sees every insert; without, the direct path stores it (the trigger
    /// is gone, so the audit table stays as it was). Same outcome both ways.
    #[pg_test]
    fn a_trigger_on_the_keys_table_sends_claims_through_sql() {
        Spi::run(
            "CREATE TABLE pg_temp.audit (k text);
             CREATE FUNCTION pg_temp.audit_fn() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO pg_temp.audit VALUES (NEW.idem_key); RETURN NEW; END $$;
             CREATE TRIGGER audit AFTER INSERT ON webhook_dedup.keys FOR EACH ROW EXECUTE FUNCTION pg_temp.audit_fn()",
        )
        .unwrap();
        assert_eq!(claim("trig", "k1", None, "1 minute").0, "claimed");
        assert_eq!(claim("trig", "k1", None, "1 minute").0, "in_progress");
        let audited = || Spi::get_one::<String>("SELECT string_agg(k, ',' ORDER BY k) FROM pg_temp.audit").unwrap();
        assert_eq!(audited(), Some("k1".into()), "the trigger saw the insert");
        Spi::run("DROP TRIGGER audit ON webhook_dedup.keys").unwrap();
        assert_eq!(claim("trig", "k2", None, "1 minute").0, "claimed");
        assert_eq!(claim("trig", "k2", None, "1 minute").0, "in_progress");
        assert_eq!(audited(), Some("k1".into()));
        // and with the direct path switched off, through SQL again
        Spi::run("SET LOCAL webhook_dedup.direct_writes = off").unwrap();
        assert_eq!(claim("trig", "k3", None, "1 minute").0, "claimed");
        assert_eq!(claim("trig", "k3", None, "1 minute").0, "in_progress");
    }

    /// A stored result large enough to live in its own block of memory
    /// reaches duplicates intact, from webhook_claim and from
    /// webhook_claim_many (whose rows are read after later keys' claims):
    /// the direct path copies it out of the SPI connection's memory.
    #[pg_test]
    fn large_stored_results_reach_duplicates_intact() {
        Spi::run(
            "SELECT webhook_dedup.webhook_complete('big', k, (SELECT claim_token FROM webhook_dedup.webhook_claim('big', k)),
                                     jsonb_build_object('blob', repeat(k, 100000)))
               FROM (VALUES ('k1'), ('k2'), ('k3')) AS t(k)",
        )
        .unwrap();
        for key in ["k1", "k2", "k3"] {
            let length = Spi::get_one_with_args::<i32>(
                "SELECT length(result ->> 'blob') FROM webhook_dedup.webhook_claim('big', $1)",
                &[key.into()],
            );
            assert_eq!(length, Ok(Some(200_000)), "{key}");
        }
        let many = Spi::get_one::<String>(
            "SELECT string_agg(idem_key || ':' || outcome || ':' || length(result ->> 'blob'), ',' ORDER BY idem_key)
               FROM webhook_dedup.webhook_claim_many('big', ARRAY['k1', 'k2', 'k3', 'k4'])",
        );
        assert_eq!(many, Ok(Some("k1:duplicate:200000,k2:duplicate:200000,k3:duplicate:200000".into())));
    }

    /// The direct path checks the table privileges of the user it runs as,
    /// as the statements do: made SECURITY INVOKER (as 0.1.0 was; rolled
    /// back with the test), a role that may only read the keys (or only
    /// insert them) is refused with 42501 by the direct path as by SQL,
    /// and changes nothing.
    #[pg_test]
    fn a_role_without_every_table_privilege_cannot_write_keys() {
        assert_eq!(claim("priv", "held", None, "1 minute").0, "claimed");
        Spi::run(
            "ALTER FUNCTION webhook_dedup.webhook_claim(text, text, bytea, interval, text) SECURITY INVOKER;
             ALTER FUNCTION webhook_dedup.webhook_complete(text, text, uuid, jsonb) SECURITY INVOKER;
             CREATE ROLE test_key_reader NOLOGIN; CREATE ROLE test_key_inserter NOLOGIN;
             GRANT webhook_dedup_receiver TO test_key_reader, test_key_inserter;
             GRANT SELECT ON webhook_dedup.keys, webhook_dedup.sources TO test_key_reader, test_key_inserter;
             GRANT INSERT ON webhook_dedup.keys TO test_key_inserter",
        )
        .unwrap();
        // error_of re-creates its function, which only its owner may do:
        // create it now, and call it as the role.
        error_of("SELECT 1");
        let as_role = |query: &str| {
            Spi::get_one_with_args::<String>("SELECT pg_temp.error_of($1)", &[query.into()]).unwrap().unwrap()
        };
        for role in ["test_key_reader", "test_key_inserter"] {
            Spi::run(&format!("SET LOCAL ROLE {role}")).unwrap();
            let new_key = as_role("SELECT webhook_dedup.webhook_claim('priv', 'new')");
            let known = as_role("SELECT webhook_dedup.webhook_claim('priv', 'held')");
            let complete = as_role(
                "SELECT webhook_dedup.webhook_complete('priv', 'held', '00000000-0000-0000-0000-000000000000'::uuid)",
            );
            Spi::run("RESET ROLE").unwrap();
            for (what, got) in [("new key", new_key), ("known key", known), ("complete", complete)] {
                assert!(got.starts_with("42501"), "{role}, {what}: {got}");
            }
        }
        let stored = Spi::get_one::<String>(
            "SELECT string_agg(idem_key || ':' || deliveries, ',') FROM webhook_dedup.keys WHERE source = 'priv'",
        );
        assert_eq!(stored, Ok(Some("held:1".into())));
    }

    /// A read-only transaction cannot claim or complete (25006, as the
    /// statements raise it), and writes nothing. (SERIALIZABLE, which also
    /// goes through the statements, is in the isolation spec claim_race.)
    #[pg_test]
    fn read_only_transactions_cannot_claim_or_complete() {
        let (_, token, ..) = claim("ro", "k", None, "1 minute");
        let token = token.expect("a claim token").to_string();
        error_of("SELECT 1"); // creates its function, which a read-only transaction cannot
        let try_ = |query: &str| {
            Spi::get_one_with_args::<String>("SELECT pg_temp.error_of($1)", &[query.into()]).unwrap().unwrap()
        };
        // (the test's transaction stays read-only to its end, then rolls back)
        Spi::run("SET LOCAL transaction_read_only = on").unwrap();
        let claimed = try_("SELECT webhook_dedup.webhook_claim('ro', 'new')");
        let completed = try_(&format!("SELECT webhook_dedup.webhook_complete('ro', 'k', '{token}'::uuid)"));
        assert!(claimed.starts_with("25006"), "{claimed}");
        assert!(completed.starts_with("25006"), "{completed}");
        assert_eq!(
            Spi::get_one::<i64>("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'ro'"),
            Ok(Some(1)),
            "nothing written"
        );
    }

    /// Per-source settings are cached in each backend; a change of
    /// webhook_dedup.sources reaches the next call, in the same transaction
    /// too (the trigger sources_changed invalidates the cache).
    #[pg_test]
    fn source_settings_changes_reach_the_next_call() {
        let lease = |key: &str| {
            Spi::get_one_with_args::<f64>(
                "SELECT extract(epoch FROM lease_expires_at - first_seen_at)::float8 FROM webhook_dedup.webhook_claim('cached', $1)",
                &[key.into()],
            )
            .unwrap()
            .unwrap()
        };
        assert_eq!(lease("a"), 300.0, "webhook_dedup.default_lease");
        Spi::run("INSERT INTO webhook_dedup.sources (source, lease) VALUES ('cached', '7 seconds')").unwrap();
        assert_eq!(lease("b"), 7.0);
        Spi::run("UPDATE webhook_dedup.sources SET lease = '9 seconds' WHERE source = 'cached'").unwrap();
        assert_eq!(lease("c"), 9.0);
        Spi::run("DELETE FROM webhook_dedup.sources WHERE source = 'cached'").unwrap();
        assert_eq!(lease("d"), 300.0);
        Spi::run("INSERT INTO webhook_dedup.sources (source, lease) VALUES ('cached', '11 seconds')").unwrap();
        Spi::run("TRUNCATE webhook_dedup.sources").unwrap();
        assert_eq!(lease("e"), 300.0);
    }
}
