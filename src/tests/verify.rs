//! `#[pg_test]`s of signature verification through SQL: the documented
//! examples, the shared vectors, `webhook_verify_detail`, `webhook_sign`
//! round trips, the raw HMAC and header maps read from jsonb (see
//! `src/tests/mod.rs` for how these tests run).

#[pgrx::pg_schema]
mod tests {
    use crate::signature::vectors;
    use pgrx::prelude::*;
    use pgrx::JsonB;

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
}
