//! `#[pg_test]`s: the SQL functions in one session (each test runs in a
//! transaction that is rolled back). Races, commit visibility and the
//! receiver are tested against a real cluster in `tests/`. Compiled only
//! with the `pg_test` feature (`cargo pgrx test` sets it), so plain
//! `cargo test` runs the pure unit tests alone. Run them one at a time
//! (`RUST_TEST_THREADS=1`, as `scripts/test.sh` does): the maintenance tests
//! take the maintenance lock and delete keys of the shared keys table, which
//! tests in other backends would contend for.

#[pgrx::pg_schema]
pub(crate) mod tests {
    use crate::signature::vectors;
    use pgrx::prelude::*;
    use pgrx::JsonB;
    use serde_json::{json, Value};

    /// `SQLSTATE: message` of the error `query` raises, or `no error`. The
    /// query runs in a subtransaction (a PL/pgSQL exception block), so the
    /// test's transaction stays usable.
    /// "SQLSTATE: message" of the error `query` raises, or "no error" (run
    /// in a subtransaction of a plpgsql block, so the test goes on).
    pub fn error_of(query: &str) -> String {
        Spi::run(
            "CREATE OR REPLACE FUNCTION pg_temp.error_of(q text) RETURNS text LANGUAGE plpgsql AS $$
             BEGIN EXECUTE q; RETURN 'no error';
             EXCEPTION WHEN others THEN RETURN SQLSTATE || ': ' || SQLERRM; END $$",
        )
        .unwrap();
        Spi::get_one_with_args::<String>("SELECT pg_temp.error_of($1)", &[query.into()]).unwrap().unwrap()
    }

    fn claim(
        source: &str,
        key: &str,
        payload: Option<&str>,
        lease: &str,
    ) -> (String, Option<pgrx::Uuid>, i32, Option<JsonB>) {
        Spi::connect(|client| {
            let row = client
                .select(
                    "SELECT outcome, claim_token, attempt, result
                       FROM webhook_dedup.webhook_claim($1, $2, convert_to($3, 'UTF8'), $4::interval)",
                    None,
                    &[source.into(), key.into(), payload.into(), lease.into()],
                )
                .unwrap()
                .first();
            (
                row.get::<String>(1).unwrap().unwrap(),
                row.get::<pgrx::Uuid>(2).unwrap(),
                row.get::<i32>(3).unwrap().unwrap(),
                row.get::<JsonB>(4).unwrap(),
            )
        })
    }

    fn complete(source: &str, key: &str, token: pgrx::Uuid, result: Value) -> bool {
        Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_complete($1, $2, $3, $4)",
            &[source.into(), key.into(), token.into(), JsonB(result).into()],
        )
        .unwrap()
        .unwrap()
    }

    #[pg_test]
    fn github_documented_example_verifies_in_sql() {
        let ok = Spi::get_one::<bool>(
            r#"SELECT webhook_dedup.webhook_verify('github', convert_to('Hello, World!', 'UTF8'),
                 '{"x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}',
                 ARRAY['It''s a Secret to Everybody'])"#,
        );
        assert_eq!(ok, Ok(Some(true)));
        let tampered = Spi::get_one::<bool>(
            r#"SELECT webhook_dedup.webhook_verify('github', convert_to('Hello, World?', 'UTF8'),
                 '{"X-Hub-Signature-256": ["sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"]}',
                 ARRAY['It''s a Secret to Everybody'])"#,
        );
        assert_eq!(tampered, Ok(Some(false)));
    }

    /// Every signature vector (the shared ones and our Paddle/Twilio ones)
    /// through the SQL function: header map as jsonb, secrets as text[],
    /// the vector's clock, tolerance, URL and generic-HMAC description.
    #[pg_test]
    fn signature_vectors_through_sql() {
        Spi::run(
            "CREATE OR REPLACE FUNCTION pg_temp.verify_or_sqlstate(
                 s text, b bytea, h jsonb, k text[], tol interval, at timestamptz, u text, sh text)
             RETURNS text LANGUAGE plpgsql AS $$
             BEGIN RETURN webhook_dedup.webhook_verify(s, b, h, k, tol, at, url => u, signature_header => sh)::text;
             EXCEPTION WHEN others THEN RETURN SQLSTATE; END $$",
        )
        .unwrap();
        let mut checked = 0;
        for v in vectors::all().into_iter().chain(vectors::own()) {
            let Some((scheme, hmac)) = vectors::scheme_of(&v) else {
                continue;
            };
            let secrets: Vec<Option<String>> =
                vectors::secrets(&v).into_iter().map(|s| s.map(str::to_string)).collect();
            let got = Spi::get_one_with_args::<String>(
                "SELECT pg_temp.verify_or_sqlstate($1, $2, $3, $4, make_interval(secs => $5),
                                                   to_timestamp($6), $7, $8)",
                &[
                    scheme.name().into(),
                    vectors::body(&v).as_slice().into(),
                    JsonB(v["headers"].clone()).into(),
                    secrets.into(),
                    v["tolerance_s"].as_f64().into(),
                    v["now_unix"].as_f64().unwrap_or(0.0).into(),
                    v["url"].as_str().into(),
                    hmac.map(|h| h.header).into(),
                ],
            )
            .unwrap()
            .unwrap();
            let expected = v["expected_valid"].as_bool().unwrap();
            // A misconfigured secret is an error (22023), never a silent false.
            let ok = match got.as_str() {
                "true" => expected,
                "false" => !expected,
                "22023" => !expected,
                other => panic!("{}: unexpected {other}", v["id"]),
            };
            assert!(ok, "{}: got {got}, expected {expected}: {}", v["id"], v["reason"]);
            checked += 1;
        }
        assert_eq!(checked, 45 + 14);
    }

    /// The detailed variant says why, and which secret matched (1-based).
    #[pg_test]
    fn verify_detail_reports_reason_secret_and_time() {
        let detail = |headers: &str, at: i64| {
            Spi::get_three_with_args::<bool, String, i32>(
                "SELECT valid, reason, secret_index FROM webhook_dedup.webhook_verify_detail('stripe', 'body'::bytea, $1::jsonb,
                        ARRAY['whsec_old', 'whsec_new'], at => to_timestamp($2))",
                &[headers.into(), (at as f64).into()],
            )
            .unwrap()
        };
        let signed = Spi::get_one::<String>(
            "SELECT webhook_dedup.webhook_sign('stripe', 'body'::bytea, 'whsec_new', at => to_timestamp(1700000000))::text",
        )
        .unwrap()
        .unwrap();
        assert_eq!(detail(&signed, 1_700_000_000), (Some(true), Some("ok".into()), Some(2)));
        assert_eq!(detail(&signed, 1_700_000_301), (Some(false), Some("timestamp_too_old".into()), Some(2)));
        assert_eq!(detail(&signed, 1_699_999_699), (Some(false), Some("timestamp_too_new".into()), Some(2)));
        assert_eq!(detail("{}", 1_700_000_000), (Some(false), Some("missing_header".into()), None));
        assert_eq!(
            detail(r#"{"Stripe-Signature": "t=1700000000,v0=00"}"#, 1_700_000_000),
            (Some(false), Some("unsupported_version".into()), None)
        );
        let signed_at = Spi::get_one_with_args::<String>(
            "SELECT to_char(signed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')
               FROM webhook_dedup.webhook_verify_detail('stripe', 'body'::bytea, $1::jsonb, ARRAY['whsec_new'],
                                          at => to_timestamp(1700000000))",
            &[signed.as_str().into()],
        );
        assert_eq!(signed_at, Ok(Some("2023-11-14 22:13:20".into())));
    }

    /// webhook_sign produces what webhook_verify accepts, for every scheme,
    /// and the typed conveniences agree with the header-map form.
    #[pg_test]
    fn sign_then_verify_in_sql_for_every_scheme() {
        let cases = [
            ("github", "", "webhook_dedup.webhook_verify_github($1, $2->>'X-Hub-Signature-256', 'sekrit')"),
            ("stripe", "", "webhook_dedup.webhook_verify_stripe($1, $2->>'Stripe-Signature', 'sekrit', at => to_timestamp(1700000000))"),
            ("shopify", "", "webhook_dedup.webhook_verify_shopify($1, $2->>'X-Shopify-Hmac-Sha256', 'sekrit')"),
            ("slack", "", "webhook_dedup.webhook_verify_slack($1, $2->>'X-Slack-Request-Timestamp', $2->>'X-Slack-Signature', 'sekrit', at => to_timestamp(1700000000))"),
            ("standard", ", msg_id => 'msg_1'", "webhook_dedup.webhook_verify_standard($1, $2->>'webhook-id', $2->>'webhook-timestamp', $2->>'webhook-signature', 'whsec_c2Vrcml0', at => to_timestamp(1700000000))"),
            ("paddle", "", "webhook_dedup.webhook_verify_paddle($1, $2->>'Paddle-Signature', 'sekrit', at => to_timestamp(1700000000))"),
            ("twilio", ", url => 'https://h.example/x?a=1'", "webhook_dedup.webhook_verify_twilio('https://h.example/x?a=1', $1, $2->>'X-Twilio-Signature', 'sekrit')"),
        ];
        for (scheme, extra, typed) in cases {
            let secret = if scheme == "standard" { "whsec_c2Vrcml0" } else { "sekrit" };
            let headers = Spi::get_one::<JsonB>(&format!(
                "SELECT webhook_dedup.webhook_sign('{scheme}', 'a=1&b=2'::bytea, '{secret}', at => to_timestamp(1700000000){extra})"
            ))
            .unwrap()
            .unwrap();
            let url = if scheme == "twilio" { "'https://h.example/x?a=1'" } else { "NULL" };
            let both = Spi::get_two_with_args::<bool, bool>(
                &format!(
                    "SELECT webhook_dedup.webhook_verify('{scheme}', $1, $2, ARRAY['{secret}'], at => to_timestamp(1700000000), url => {url}),
                            {typed}"
                ),
                &[b"a=1&b=2".as_slice().into(), JsonB(headers.0.clone()).into()],
            )
            .unwrap();
            assert_eq!(both, (Some(true), Some(true)), "{scheme}: {}", headers.0);
            let tampered = Spi::get_one_with_args::<bool>(
                &format!("SELECT {typed}"),
                &[b"a=1&b=3".as_slice().into(), JsonB(headers.0).into()],
            );
            assert_eq!(tampered, Ok(Some(false)), "{scheme}");
        }
        let generic = Spi::get_one::<bool>(
            "SELECT webhook_dedup.webhook_verify('hmac', 'x'::bytea,
                      webhook_dedup.webhook_sign('hmac', 'x'::bytea, 'k', signature_header => 'X-Sig', signature_prefix => 'sha1=', algorithm => 'sha1'),
                      ARRAY['k'], signature_header => 'x-sig', signature_prefix => 'sha1=', algorithm => 'sha1')",
        );
        assert_eq!(generic, Ok(Some(true)));
    }

    /// The worked examples of docs/signatures.md, verbatim.
    #[pg_test]
    fn documented_examples_verify() {
        let doc = include_str!("../../docs/signatures.md");
        let examples: Vec<&str> = doc
            .split("```sql\n")
            .skip(1)
            .map(|block| block.split("```").next().unwrap())
            .filter(|sql| sql.contains("-- true"))
            .collect();
        assert_eq!(examples.len(), 22, "one example per scheme (two for sendgrid)");
        for sql in examples {
            let query = sql.replace("-- true", "");
            assert_eq!(Spi::get_one::<bool>(query.trim()), Ok(Some(true)), "{sql}");
        }
    }

    #[pg_test]
    fn raw_hmac_matches_rfc_4231() {
        let mac = Spi::get_one::<String>(
            "SELECT encode(webhook_dedup.webhook_hmac(convert_to('what do ya want for nothing?', 'UTF8'), convert_to('Jefe', 'UTF8')), 'hex')",
        );
        assert_eq!(mac, Ok(Some("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843".into())));
        let sha1 = Spi::get_one::<i32>("SELECT length(webhook_dedup.webhook_hmac('x'::bytea, 'k'::bytea, 'SHA1'))");
        assert_eq!(sha1, Ok(Some(20)));
    }

    /// The header map read from the jsonb datum itself agrees with the one
    /// parsed from its text by serde, member for member and error for
    /// error, for every shape a caller can pass (a stored, compressed value
    /// included).
    #[pg_test]
    fn header_maps_read_from_jsonb_agree_with_parsed_text() {
        use crate::error::Error;
        use crate::jsonb::Jsonb;
        use crate::signature::Headers;
        let long = "v".repeat(5000);
        let cases = [
            r#"{}"#.to_string(),
            r#"{"X-Hub-Signature-256": "sha256=ab", "X-GitHub-Event": "push"}"#.into(),
            r#"{"X-Sig": "a", "x-sig": ["b", "c"], "X-SIG": []}"#.into(),
            r#"{"a": [], "b": [""], "": "empty name", "é-ü": "ünïcode"}"#.into(),
            format!(r#"{{"long": "{long}", "more": ["{long}", "{long}"]}}"#),
            r#""text""#.into(),
            "1".into(),
            "null".into(),
            "true".into(),
            "[]".into(),
            r#"["a"]"#.into(),
            r#"{"a": 1}"#.into(),
            r#"{"a": null}"#.into(),
            r#"{"a": false}"#.into(),
            r#"{"a": {"b": "c"}}"#.into(),
            r#"{"ok": "x", "a": ["b", 2]}"#.into(),
            r#"{"a": ["b", ["c"]]}"#.into(),
            r#"{"a": ["b", {"c": "d"}]}"#.into(),
            r#"{"a": ["b", null]}"#.into(),
            // jsonb orders "b" before "aa"; the error names "aa", as serde
            // (byte order) does
            r#"{"b": 1, "aa": 2, "ok": "x"}"#.into(),
            r#"{"zz": [1], "b": null}"#.into(),
        ];
        Spi::run("CREATE TEMP TABLE header_maps (h jsonb)").unwrap();
        for text in &cases {
            let parsed = Headers::from_json_text(text).map_err(|e| e.to_string());
            let read = Jsonb::from_text(text)
                .string_members()
                .map(Headers::from_members)
                .map_err(|e| Error::from(e).to_string());
            assert_eq!(read, parsed, "{text}");
            // The same value stored (compressed when long) and read back.
            Spi::run_with_args(
                "TRUNCATE header_maps; INSERT INTO header_maps VALUES ($1::jsonb)",
                &[text.as_str().into()],
            )
            .unwrap();
            let stored = Spi::connect(|client| {
                let rows = client.select("SELECT h FROM header_maps", None, &[]).unwrap();
                let datum = rows.first().get_datum_by_ordinal(1).unwrap().expect("a row");
                // SAFETY: a jsonb column's datum, read in this connection.
                let jsonb = unsafe { Jsonb::from_raw(datum) };
                jsonb.string_members().map(Headers::from_members).map_err(|e| Error::from(e).to_string())
            });
            assert_eq!(stored, parsed, "stored {text}");
        }
        // Where serde cannot hold the value the text path fails on that;
        // read from the datum, the member's kind is named.
        for (text, message) in [
            (r#"{"a": 1e400}"#.to_string(), r#"header "a" must be a string or an array of strings, not a number"#),
            (
                format!(r#"{{"a": {}{}}}"#, "[".repeat(200), "]".repeat(200)),
                r#"header "a" must be a string or an array of strings, not an array"#,
            ),
        ] {
            assert!(Headers::from_json_text(&text).is_err());
            let read = Jsonb::from_text(&text).string_members().map(Headers::from_members);
            assert_eq!(read.map_err(|e| Error::from(e).to_string()), Err(message.to_string()));
        }
    }

    #[pg_test]
    fn argument_errors_have_precise_sqlstates() {
        let cases = [
            // issue 24: the metrics report overflowing counts under this
            // name, so no real source may have it
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
        claim("metered2", "m", None, "1 minute");
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

    /// The README's function list and the catalog agree.
    #[pg_test]
    fn readme_lists_every_function() {
        let readme = include_str!("../../README.md");
        let in_catalog: Vec<String> = Spi::connect(|client| {
            client
                .select(
                    "SELECT DISTINCT CASE WHEN n.nspname = 'webhook_dedup' THEN 'webhook_dedup.' ELSE '' END || p.proname
                       FROM pg_depend d
                       JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                       JOIN pg_namespace n ON n.oid = p.pronamespace
                       JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
                      WHERE e.extname = 'webhook_dedup' AND d.deptype = 'e'
                        AND n.nspname <> 'tests' -- the pg_test build's own test functions
                      ORDER BY 1",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| row.get::<String>(1).unwrap().unwrap())
                .collect()
        });
        assert!(in_catalog.len() >= 7, "{in_catalog:?}");
        for name in &in_catalog {
            assert!(readme.contains(&format!("`{name}(")), "README does not list {name}");
        }
    }
}
