//! `#[pg_test]`s of how `webhook_receive` reads what providers really
//! send: the replay guard, custom sources configured in
//! `webhook_dedup.sources`, handshakes and intake filters. See
//! `src/tests/mod.rs` for how these tests run.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use crate::tests::support::signed;
    use pgrx::prelude::*;
    use pgrx::JsonB;
    use serde_json::{json, Value};

    /// The columns of `webhook_receive` these tests look at.
    #[derive(Debug, PartialEq)]
    struct Got {
        verified: bool,
        reject_reason: Option<String>,
        idem_key: Option<String>,
        outcome: Option<String>,
        event_type: Option<String>,
        event_time: Option<String>,
        result: Option<Value>,
        response: Option<Value>,
        token: Option<String>,
    }

    fn receive(scheme: &str, body: &[u8], headers: &Value, secret: &str, at_unix: i64, extra: &str) -> Got {
        Spi::connect(|c| {
            let row = c
                .select(
                    &format!(
                        "SELECT verified, reject_reason, idem_key, outcome, event_type,
                                to_char(event_time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US'),
                                result, response, claim_token::text
                           FROM webhook_dedup.webhook_receive($1, $2, $3, ARRAY[$4], at => to_timestamp($5){extra})"
                    ),
                    None,
                    &[
                        scheme.into(),
                        body.into(),
                        JsonB(headers.clone()).into(),
                        secret.into(),
                        (at_unix as f64).into(),
                    ],
                )
                .unwrap()
                .first();
            Got {
                verified: row.get::<bool>(1).unwrap().unwrap(),
                reject_reason: row.get(2).unwrap(),
                idem_key: row.get(3).unwrap(),
                outcome: row.get(4).unwrap(),
                event_type: row.get(5).unwrap(),
                event_time: row.get(6).unwrap(),
                result: row.get::<JsonB>(7).unwrap().map(|j| j.0),
                response: row.get::<JsonB>(8).unwrap().map(|j| j.0),
                token: row.get(9).unwrap(),
            }
        })
    }

    fn s(text: &str) -> Option<String> {
        Some(text.to_string())
    }

    fn count(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).unwrap().unwrap()
    }

    fn complete(source: &str, idem_key: &str, token: &str, result: &str) {
        let done = Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_complete($1, $2, $3::uuid, $4::jsonb)",
            &[source.into(), idem_key.into(), token.into(), result.into()],
        );
        assert_eq!(done, Ok(Some(true)));
    }

    const GITHUB_SECRET: &str = "gh-secret";

    fn github(body: &[u8], delivery: &str) -> Value {
        signed("github", body, GITHUB_SECRET, 0, "", json!({"X-GitHub-Delivery": delivery, "X-GitHub-Event": "push"}))
    }

    /// GitHub signs the body but not X-GitHub-Delivery, so a captured
    /// delivery re-sent under a new id was claimed and processed again. The
    /// replay guard answers it from the key the body first came with; a
    /// redelivery with the same id behaves as before.
    #[pg_test]
    fn a_github_body_resent_under_a_new_delivery_id_is_a_duplicate() {
        const SRC: &str = ", source => 'gh-replay'";
        let body = include_bytes!("../../tests/fixtures/github/push/payload.json");
        let first = receive("github", body, &github(body, "d-1"), GITHUB_SECRET, 0, SRC);
        assert_eq!((first.outcome.as_deref(), first.idem_key.as_deref()), (Some("claimed"), Some("gh-replay:d-1")));

        // while the first is processed: in progress, nothing claimed
        let racing = receive("github", body, &github(body, "d-2"), GITHUB_SECRET, 0, SRC);
        assert_eq!(
            (racing.outcome.as_deref(), racing.idem_key.as_deref()),
            (Some("in_progress"), Some("gh-replay:d-1"))
        );
        assert_eq!(racing.token, None);

        complete("gh-replay", "gh-replay:d-1", first.token.as_deref().unwrap(), r#"{"done": true}"#);
        let replay = receive("github", body, &github(body, "d-3"), GITHUB_SECRET, 0, SRC);
        assert_eq!(
            (replay.outcome.as_deref(), replay.idem_key.as_deref(), replay.result),
            (Some("duplicate"), Some("gh-replay:d-1"), Some(json!({"done": true})))
        );
        // the provider's own redelivery (same id) answers as it always did
        let redelivery = receive("github", body, &github(body, "d-1"), GITHUB_SECRET, 0, SRC);
        assert_eq!(
            (redelivery.outcome.as_deref(), redelivery.idem_key.as_deref()),
            (Some("duplicate"), Some("gh-replay:d-1"))
        );
        assert_eq!(
            count("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'gh-replay'"),
            1,
            "no key for d-2, d-3"
        );
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.replay_guards WHERE idem_key = 'gh-replay:d-1'"), 1);
        // another body is another event
        let other = br#"{"ref":"refs/heads/other"}"#;
        assert_eq!(receive("github", other, &github(other, "d-4"), GITHUB_SECRET, 0, SRC).outcome, s("claimed"));
        // counted as replayed, not as deliveries or duplicates (the 4 claims)
        let (replayed, deliveries) = Spi::get_two::<i64, i64>(
            "SELECT sum(replayed)::bigint, sum(deliveries)::bigint FROM webhook_dedup.counters
              WHERE source = 'gh-replay' AND bucket_width = '1 hour'",
        )
        .unwrap();
        assert_eq!((replayed, deliveries), (Some(2), Some(3)));
    }

    /// A body whose key failed (its side effect did not happen) is taken
    /// over by the next delivery that carries it, whatever its id: else a
    /// replay that won the race and then failed would keep the genuine
    /// delivery from ever being processed. In enqueue mode the workers
    /// retry the failed key, so the replay stays a duplicate.
    #[pg_test]
    fn a_failed_owner_is_taken_over_and_a_gone_one_too() {
        let body = br#"{"action":"opened","number":7}"#;
        let first = receive("github", body, &github(body, "f-1"), GITHUB_SECRET, 0, "");
        let failed = Spi::get_one_with_args::<String>(
            "SELECT webhook_dedup.webhook_fail('github', 'github:f-1', $1::uuid, 'boom', retry_after => '0')",
            &[first.token.as_deref().unwrap().into()],
        );
        assert_eq!(failed, Ok(s("failed")));
        let second = receive("github", body, &github(body, "f-2"), GITHUB_SECRET, 0, "");
        assert_eq!((second.outcome.as_deref(), second.idem_key.as_deref()), (Some("claimed"), Some("github:f-2")));
        assert_eq!(
            Spi::get_one::<String>("SELECT idem_key FROM webhook_dedup.replay_guards WHERE idem_key LIKE 'github:f-%'"),
            Ok(s("github:f-2"))
        );
        // now f-1's own retry is answered from f-2
        let retry = receive("github", body, &github(body, "f-1"), GITHUB_SECRET, 0, "");
        assert_eq!((retry.outcome.as_deref(), retry.idem_key.as_deref()), (Some("in_progress"), Some("github:f-2")));

        // a key forgotten by an operator gives its body up too
        Spi::run("SELECT webhook_dedup.webhook_forget('github', 'github:f-2')").unwrap();
        let third = receive("github", body, &github(body, "f-3"), GITHUB_SECRET, 0, "");
        assert_eq!(third.outcome, s("claimed"));

        let queued = br#"{"action":"queued"}"#;
        let q = receive("github", queued, &github(queued, "q-1"), GITHUB_SECRET, 0, ", mode => 'enqueue'");
        assert_eq!(q.outcome, s("accepted"));
        let q2 = receive("github", queued, &github(queued, "q-2"), GITHUB_SECRET, 0, ", mode => 'enqueue'");
        assert_eq!((q2.outcome.as_deref(), q2.idem_key.as_deref()), (Some("duplicate"), Some("github:q-1")));
    }

    /// Maintenance prunes a guard past the source's retention only once its
    /// key is gone: a key that lives on (here still processing; a dead
    /// letter or an unknown outcome can live for ever) keeps its body's
    /// replays answered.
    #[pg_test]
    fn a_guard_is_kept_while_its_key_lives() {
        const SRC: &str = ", source => 'gh-prune'";
        let body = br#"{"action":"kept"}"#;
        assert_eq!(receive("github", body, &github(body, "p-1"), GITHUB_SECRET, 0, SRC).outcome, s("claimed"));
        Spi::run(
            "UPDATE webhook_dedup.replay_guards SET seen_at = now() - interval '400 days' WHERE source = 'gh-prune'",
        )
        .unwrap();
        let guards = || count("SELECT count(*) FROM webhook_dedup.replay_guards WHERE source = 'gh-prune'");
        Spi::run("SELECT * FROM webhook_dedup.run_maintenance()").unwrap();
        assert_eq!(guards(), 1, "its key lives");
        assert_eq!(receive("github", body, &github(body, "p-2"), GITHUB_SECRET, 0, SRC).outcome, s("in_progress"));
        Spi::run("SELECT webhook_dedup.webhook_forget('gh-prune', 'gh-prune:p-1')").unwrap();
        Spi::run("SELECT * FROM webhook_dedup.run_maintenance()").unwrap();
        assert_eq!(guards(), 0, "its key is gone");
    }

    /// Shopify signs no id either: the same guard, on by default; a source
    /// can turn it off (and turn it on for any other provider).
    #[pg_test]
    fn shopify_replays_are_duplicates_and_the_guard_is_configurable() {
        let body = br#"{"id":820982911946154508,"email":"jon@example.com"}"#;
        let headers = |id: &str| {
            signed(
                "shopify",
                body,
                "shpss_x",
                0,
                "",
                json!({"X-Shopify-Event-Id": id, "X-Shopify-Topic": "orders/create",
                       "X-Shopify-Triggered-At": "2024-01-01T00:00:00Z"}),
            )
        };
        assert_eq!(receive("shopify", body, &headers("e-1"), "shpss_x", 0, "").outcome, s("claimed"));
        let replay = receive("shopify", body, &headers("e-2"), "shpss_x", 0, "");
        assert_eq!((replay.outcome.as_deref(), replay.idem_key.as_deref()), (Some("in_progress"), Some("shopify:e-1")));

        Spi::run("INSERT INTO webhook_dedup.sources (source, replay_guard) VALUES ('shop-noguard', false)").unwrap();
        let src = ", source => 'shop-noguard'";
        assert_eq!(receive("shopify", body, &headers("e-1"), "shpss_x", 0, src).outcome, s("claimed"));
        assert_eq!(receive("shopify", body, &headers("e-2"), "shpss_x", 0, src).outcome, s("claimed"), "guard off");

        // Stripe signs its ids: no guard unless a source asks for one
        let evt = br#"{"id":"evt_1","type":"invoice.paid","created":0,"data":{}}"#;
        let evt2 = br#"{"id":"evt_2","type":"invoice.paid","created":0,"data":{}}"#;
        let stripe = |b: &[u8], extra: &str| {
            receive("stripe", b, &signed("stripe", b, "whsec_s", 0, "", json!({})), "whsec_s", 0, extra).outcome
        };
        assert_eq!(stripe(evt, ""), s("claimed"));
        assert_eq!(
            Spi::get_one::<bool>("SELECT replay_guard FROM webhook_dedup.providers WHERE scheme = 'stripe'"),
            Ok(Some(false))
        );
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.replay_guards WHERE source = 'stripe'"), 0);
        Spi::run("INSERT INTO webhook_dedup.sources (source, replay_guard) VALUES ('stripe-guarded', true)").unwrap();
        assert_eq!(stripe(evt, ", source => 'stripe-guarded'"), s("claimed"));
        assert_eq!(stripe(evt2, ", source => 'stripe-guarded'"), s("claimed"), "another body");
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.replay_guards WHERE source = 'stripe-guarded'"), 2);
    }

    /// A provider without a profile, configured in SQL only, keys,
    /// types, orders and fingerprints its events like a built-in one.
    #[pg_test]
    fn a_custom_source_defined_in_sql_reads_like_a_provider() {
        Spi::run(
            "INSERT INTO webhook_dedup.sources (source, event_id_from, event_type_from, event_time_from,
                                                event_time_format, fingerprint_pointers)
             VALUES ('acme', 'header:X-Acme-Delivery', '/kind', '/at', 'unix_milliseconds', '{/kind,/data}')",
        )
        .unwrap();
        let spec = ", source => 'acme', signature_header => 'X-Acme-Signature', signature_prefix => 'sha256='";
        let send = |body: &str, delivery: &str| {
            let headers = signed(
                "hmac",
                body.as_bytes(),
                "acme-secret",
                0,
                ", signature_header => 'X-Acme-Signature', signature_prefix => 'sha256='",
                json!({"X-Acme-Delivery": delivery}),
            );
            receive("hmac", body.as_bytes(), &headers, "acme-secret", 0, spec)
        };
        let first = send(r#"{"kind":"order.paid","at":1700000000123,"data":{"order":1},"attempt":1}"#, "a-1");
        assert_eq!(
            (first.verified, first.idem_key, first.outcome, first.event_type, first.event_time),
            (true, s("acme:a-1"), s("claimed"), s("order.paid"), s("2023-11-14T22:13:20.123000"))
        );
        complete("acme", "acme:a-1", first.token.as_deref().unwrap(), r#"{"ok": 1}"#);
        // a retry with another attempt counter is the same content
        let retry = send(r#"{"attempt":2,"data":{"order":1},"kind":"order.paid","at":1700000000999}"#, "a-1");
        assert_eq!((retry.outcome, retry.result), (s("duplicate"), Some(json!({"ok": 1}))));
        let changed = send(r#"{"kind":"order.paid","at":1700000000123,"data":{"order":2}}"#, "a-1");
        assert_eq!(changed.outcome, s("conflict"));
        let no_id = send(r#"{"kind":"order.paid"}"#, "");
        assert_eq!(no_id.reject_reason, s("missing_event_id"));
        let forged = {
            let body = br#"{"kind":"order.paid"}"#;
            let headers = json!({"X-Acme-Delivery": "a-9", "X-Acme-Signature": format!("sha256={}", "0".repeat(64))});
            receive("hmac", body, &headers, "acme-secret", 0, spec)
        };
        assert_eq!((forged.verified, forged.reject_reason), (false, s("no_matching_signature")));
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'acme'"), 1);

        // a source can override a built-in profile as well: Stripe's raw body
        Spi::run("INSERT INTO webhook_dedup.sources (source, fingerprint_pointers) VALUES ('stripe-raw', '{}')")
            .unwrap();
        let stripe = |b: &str| {
            let headers = signed("stripe", b.as_bytes(), "whsec_s", 0, "", json!({}));
            receive("stripe", b.as_bytes(), &headers, "whsec_s", 0, ", source => 'stripe-raw'").outcome
        };
        assert_eq!(stripe(r#"{"id":"evt_r","type":"t","pending_webhooks":2,"data":{}}"#), s("claimed"));
        assert_eq!(stripe(r#"{"id":"evt_r","type":"t","pending_webhooks":1,"data":{}}"#), s("conflict"), "raw bytes");
    }

    /// A key stored with the SHA-256 of the raw body (as 0.1.0's
    /// webhook_receive stored every key, and as webhook_claim does) is no
    /// conflict with a byte-identical redelivery under Stripe's rule; a
    /// re-rendered one cannot be told from other content by such a key.
    #[pg_test]
    fn a_key_stored_under_the_raw_body_rule_still_knows_its_bytes() {
        let body = br#"{"id":"evt_legacy","object":"event","type":"invoice.paid","pending_webhooks":2,"data":{"object":{"id":"in_1"}}}"#;
        let key =
            Spi::get_one::<String>("SELECT webhook_dedup.webhook_key('stripe-legacy', 'evt_legacy')").unwrap().unwrap();
        let token = Spi::get_one_with_args::<String>(
            "SELECT claim_token::text FROM webhook_dedup.webhook_claim('stripe-legacy', $1, $2)",
            &[key.as_str().into(), body.as_slice().into()],
        )
        .unwrap()
        .unwrap();
        complete("stripe-legacy", &key, &token, r#"{"ok": "legacy"}"#);
        let send = |b: &[u8], mode: &str| {
            let headers = signed("stripe", b, "whsec_l", 0, "", json!({}));
            receive("stripe", b, &headers, "whsec_l", 0, &format!(", source => 'stripe-legacy', mode => '{mode}'"))
        };
        let again = send(body, "claim");
        assert_eq!((again.outcome.as_deref(), again.result), (Some("duplicate"), Some(json!({"ok": "legacy"}))));
        assert_eq!(send(body, "enqueue").outcome.as_deref(), Some("duplicate"));
        let rerendered = br#"{"id":"evt_legacy","object":"event","type":"invoice.paid","pending_webhooks":1,"data":{"object":{"id":"in_1"}}}"#;
        assert_eq!(send(rerendered, "claim").outcome.as_deref(), Some("conflict"));
    }

    /// Invalid intake settings are 22023 when configured, naming the column.
    #[pg_test]
    fn invalid_intake_settings_are_refused_when_configured() {
        let cases = [
            ("event_id_from", "'id'", "event_id_from \"id\" is neither header:<name> nor a JSON pointer"),
            ("event_type_from", "'/a~2'", "event_type_from \"/a~2\" is neither"),
            ("event_id_from", "'header:X Id'", "names no valid header field"),
            ("event_time_from", "'/t'", "event_time_format must be set when event_time_from is"),
            ("fingerprint_pointers", "'{/ok,bad}'", "fingerprint_pointers holds \"bad\""),
            ("accept_event_types", "'{}'", "accept_event_types is empty"),
            ("accept_event_types", "'{a*b}'", "accept_event_types holds \"a*b\""),
        ];
        for (column, value, message) in cases {
            let got =
                error_of(&format!("INSERT INTO webhook_dedup.sources (source, {column}) VALUES ('bad', {value})"));
            assert!(got.starts_with("22023: webhook_dedup.sources.") && got.contains(message), "{column}: {got}");
        }
        Spi::run("INSERT INTO webhook_dedup.sources (source) VALUES ('fine')").unwrap();
        let got = error_of("UPDATE webhook_dedup.sources SET event_time_format = 'iso' WHERE source = 'fine'");
        assert!(got.starts_with("22023: ") && got.contains("without event_time_from"), "{got}");
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.sources WHERE source = 'bad'"), 0);
    }

    /// Slack's url_verification, signed like any request, is answered with
    /// the challenge and stores nothing.
    #[pg_test]
    fn slack_url_verification_is_a_handshake() {
        // Slack's documented example (https://api.slack.com/events/url_verification)
        let body = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        let headers = signed("slack", body, "slack-secret", 1_700_000_000, "", json!({}));
        let got = receive("slack", body, &headers, "slack-secret", 1_700_000_000, "");
        assert_eq!(
            got,
            Got {
                verified: true,
                reject_reason: None,
                idem_key: None,
                outcome: s("handshake"),
                event_type: None,
                event_time: None,
                result: None,
                response: Some(json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})),
                token: None,
            }
        );
        let text = Spi::get_one_with_args::<String>(
            "SELECT response::text FROM webhook_dedup.webhook_receive('slack', $1, $2, ARRAY['slack-secret'], at => to_timestamp(1700000000))",
            &[body.as_slice().into(), JsonB(headers.clone()).into()],
        );
        assert_eq!(text, Ok(s(r#"{"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}"#)));
        // unsigned, it is no handshake: refused with 401
        let forged = receive("slack", body, &json!({}), "slack-secret", 1_700_000_000, "");
        assert_eq!(
            (forged.verified, forged.outcome, forged.response),
            (false, None, Some(json!({"error": "invalid signature"})))
        );
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.keys"), 0);
    }

    /// Zoom's endpoint.url_validation (its documented plainToken), signed
    /// like any event: the token and its HMAC under the secret token.
    /// Zoom's events carry no id: they are keyed on the body.
    #[pg_test]
    fn zoom_url_validation_is_a_handshake_and_events_are_keyed_on_the_body() {
        let at = 1_700_000_000;
        let body = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
        let headers = signed("zoom", body, "secretValueTest", at, "", json!({}));
        let got = receive("zoom", body, &headers, "secretValueTest", at, "");
        assert_eq!((got.verified, got.outcome.as_deref(), got.idem_key), (true, Some("handshake"), None));
        assert_eq!(
            got.response,
            Some(json!({"plainToken": "qgg8vlvZRS6UYooatFL8Aw",
                        "encryptedToken": "70c1f2e2e6ca2d39297490d1f9142c7d701415ea8e6151f6562a08fa657a40ff"}))
        );
        // a token that could be a signed message is refused, even signed
        let oracle = br#"{"payload":{"plainToken":"v0:1:x"},"event":"endpoint.url_validation"}"#;
        let refused = receive(
            "zoom",
            oracle,
            &signed("zoom", oracle, "secretValueTest", at, "", json!({})),
            "secretValueTest",
            at,
            "",
        );
        assert_eq!(
            (refused.verified, refused.reject_reason.as_deref(), refused.response),
            (true, Some("refused_handshake"), Some(json!({"error": "refused handshake"})))
        );

        let event =
            br#"{"event":"meeting.started","event_ts":1700000000123,"payload":{"object":{"id":"85746065432"}}}"#;
        let send = || {
            receive(
                "zoom",
                event,
                &signed("zoom", event, "secretValueTest", at, "", json!({})),
                "secretValueTest",
                at,
                "",
            )
        };
        let first = send();
        let key = Spi::get_one_with_args::<String>(
            "SELECT webhook_dedup.webhook_body_key('zoom', $1)",
            &[event.as_slice().into()],
        );
        assert_eq!((first.outcome.as_deref(), first.idem_key), (Some("claimed"), key.unwrap()));
        assert_eq!(
            (first.event_type.as_deref(), first.event_time.as_deref()),
            (Some("meeting.started"), Some("2023-11-14T22:13:20.123000"))
        );
        assert_eq!(send().outcome.as_deref(), Some("in_progress"), "Zoom's retry of the same body");
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'zoom'"), 1);
    }

    /// X's CRC is a GET without a signature: answered before verification
    /// with the first secret (Twitter developer relations' example), and
    /// refused for a token that could be a body to sign; nothing stored.
    #[pg_test]
    fn twitter_crc_is_answered_before_verification() {
        let secret = "z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu";
        let crc = |url: &str| receive("twitter", b"", &json!({}), secret, 0, &format!(", url => '{url}'"));
        let got = crc("https://example.com/webhooks/x?crc_token=9b4507b3-9040-4669-9ca3-6b94edb50553&nonce=1");
        assert_eq!((got.verified, got.outcome.as_deref()), (false, Some("handshake")));
        assert_eq!(
            got.response,
            Some(json!({"response_token": "sha256=Cytd4Sq+NvEcV3MMrXxWJGJx5A+y/lXzzU2Maartkx8="}))
        );
        let forged = crc("https://example.com/x?crc_token=%7B%22for_user_id%22%3A1%7D");
        assert_eq!(
            (forged.reject_reason.as_deref(), forged.outcome, forged.response),
            (Some("refused_handshake"), None, Some(json!({"error": "refused handshake"})))
        );
        // a signed POST is an event, keyed on its body; the URL is not signed
        let body = br#"{"for_user_id":"2244994945","tweet_create_events":[]}"#;
        let headers = signed("twitter", body, secret, 0, "", json!({}));
        let event = receive("twitter", body, &headers, secret, 0, ", url => 'https://example.com/webhooks/x'");
        assert_eq!((event.verified, event.outcome.as_deref()), (true, Some("claimed")));
        // the CRC answer as a signature of the token as a body never verifies
        let as_body = b"9b4507b3-9040-4669-9ca3-6b94edb50553";
        let replayed = receive(
            "twitter",
            as_body,
            &json!({"x-twitter-webhooks-signature": "sha256=Cytd4Sq+NvEcV3MMrXxWJGJx5A+y/lXzzU2Maartkx8="}),
            secret,
            0,
            "",
        );
        assert_eq!((replayed.verified, replayed.reject_reason.as_deref()), (false, Some("no_matching_signature")));
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'twitter'"), 1);
    }

    /// A source that lists its event types answers the others `ignored`
    /// (2xx), stores nothing and counts them.
    #[pg_test]
    fn event_types_a_source_does_not_accept_are_ignored() {
        Spi::run(
            "INSERT INTO webhook_dedup.sources (source, accept_event_types) VALUES ('gh-push', '{push,pull_request*}')",
        )
        .unwrap();
        let send = |event: &str, delivery: &str| {
            let body = format!(r#"{{"delivery":"{delivery}"}}"#);
            let headers = signed(
                "github",
                body.as_bytes(),
                GITHUB_SECRET,
                0,
                "",
                json!({"X-GitHub-Delivery": delivery, "X-GitHub-Event": event}),
            );
            receive("github", body.as_bytes(), &headers, GITHUB_SECRET, 0, ", source => 'gh-push'")
        };
        assert_eq!(send("push", "p-1").outcome, s("claimed"));
        assert_eq!(send("pull_request_review", "p-2").outcome, s("claimed"), "prefix");
        let ping = send("ping", "p-3");
        assert_eq!(
            (ping.verified, ping.outcome, ping.idem_key, ping.event_type),
            (true, s("ignored"), None, s("ping"))
        );
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'gh-push'"), 2);
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.replay_guards WHERE source = 'gh-push'"), 2);
        let ignored = Spi::get_one::<i64>(
            "SELECT sum(ignored)::bigint FROM webhook_dedup.counters WHERE source = 'gh-push' AND bucket_width = '1 hour'",
        );
        assert_eq!(ignored, Ok(Some(1)));
    }

    /// What webhook_dedup.providers says about the rules.
    #[pg_test]
    fn providers_show_fingerprint_rules_replay_guards_and_handshakes() {
        let rows = Spi::connect(|c| {
            c.select("SELECT scheme, fingerprint, replay_guard, handshake IS NOT NULL FROM webhook_dedup.providers ORDER BY scheme", None, &[])
                .unwrap()
                .map(|r| {
                    (
                        r.get::<String>(1).unwrap().unwrap(),
                        r.get::<String>(2).unwrap().unwrap(),
                        r.get::<bool>(3).unwrap().unwrap(),
                        r.get::<bool>(4).unwrap().unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        });
        let find = |scheme: &str| rows.iter().find(|r| r.0 == scheme).cloned().unwrap();
        assert_eq!(find("stripe"), ("stripe".into(), "canonical JSON (RFC 8785) of /type, /data".into(), false, false));
        assert_eq!(find("github"), ("github".into(), "raw body".into(), true, false));
        assert!(find("shopify").2);
        assert!(find("slack").3);
        assert_eq!(
            rows.iter().filter(|r| r.2).map(|r| r.0.as_str()).collect::<Vec<_>>(),
            ["github", "linear", "shopify", "twilio"],
            "the schemes whose event id is in a header they do not sign"
        );
        assert_eq!(
            find("twilio").1,
            "signed text: the URL and the form parameters sorted by name",
            "Twilio signs its form's parameters, not their order"
        );
        assert_eq!(
            rows.iter().filter(|r| r.3).map(|r| r.0.as_str()).collect::<Vec<_>>(),
            ["discord", "slack", "twitter", "zoom"]
        );
    }

    /// A conflicting delivery leaves a guard for a body its key never took
    /// (a captured body whose own delivery never committed, sent under an
    /// existing id): the provider's own delivery of that body takes it over
    /// instead of being answered from the unrelated key.
    #[pg_test]
    fn a_conflict_does_not_take_the_body() {
        const SRC: &str = ", source => 'gh-conflict'";
        let b1 = br#"{"action":"opened","number":1}"#;
        let b2 = br#"{"action":"opened","number":2}"#;
        let first = receive("github", b1, &github(b1, "c-1"), GITHUB_SECRET, 0, SRC);
        complete("gh-conflict", "gh-conflict:c-1", first.token.as_deref().unwrap(), r#"{"n": 1}"#);
        let forged = receive("github", b2, &github(b2, "c-1"), GITHUB_SECRET, 0, SRC);
        assert_eq!(forged.outcome, s("conflict"));
        let genuine = receive("github", b2, &github(b2, "c-2"), GITHUB_SECRET, 0, SRC);
        assert_eq!(
            (genuine.outcome.as_deref(), genuine.idem_key.as_deref()),
            (Some("claimed"), Some("gh-conflict:c-2")),
            "c-2 was never processed: it must not be answered from c-1"
        );
    }

    /// Whether a failed owner is taken over depends on who retries it, not
    /// on the mode of the call: an enqueued key that failed is retried by
    /// webhook_next, so a claim-mode replay of its body must not claim it.
    #[pg_test]
    fn a_claim_does_not_take_over_a_key_the_workers_retry() {
        let body = br#"{"action":"mixed"}"#;
        let queued = receive(
            "github",
            body,
            &github(body, "m-1"),
            GITHUB_SECRET,
            0,
            ", source => 'gh-mixed', mode => 'enqueue'",
        );
        assert_eq!(queued.outcome, s("accepted"));
        let token = Spi::get_one::<String>("SELECT claim_token::text FROM webhook_dedup.webhook_next('gh-mixed')")
            .unwrap()
            .unwrap();
        Spi::get_one_with_args::<String>(
            "SELECT webhook_dedup.webhook_fail('gh-mixed', 'gh-mixed:m-1', $1::uuid, 'boom', retry_after => '0')",
            &[token.as_str().into()],
        )
        .unwrap();
        let replay = receive("github", body, &github(body, "m-2"), GITHUB_SECRET, 0, ", source => 'gh-mixed'");
        assert_eq!(
            (replay.outcome.as_deref(), replay.idem_key.as_deref()),
            (Some("in_progress"), Some("gh-mixed:m-1"))
        );
        assert_eq!(count("SELECT count(*) FROM webhook_dedup.webhook_next('gh-mixed')"), 1, "the workers retry m-1");
        // the other way round: a claim-mode key that failed has no payload,
        // so an enqueue-mode delivery of its body takes it over
        let claimed = br#"{"action":"claimed-then-failed"}"#;
        let c = receive("github", claimed, &github(claimed, "n-1"), GITHUB_SECRET, 0, ", source => 'gh-mixed'");
        Spi::get_one_with_args::<String>(
            "SELECT webhook_dedup.webhook_fail('gh-mixed', 'gh-mixed:n-1', $1::uuid, 'boom', retry_after => '0')",
            &[c.token.as_deref().unwrap().into()],
        )
        .unwrap();
        let queued = receive(
            "github",
            claimed,
            &github(claimed, "n-2"),
            GITHUB_SECRET,
            0,
            ", source => 'gh-mixed', mode => 'enqueue'",
        );
        assert_eq!((queued.outcome.as_deref(), queued.idem_key.as_deref()), (Some("accepted"), Some("gh-mixed:n-2")));
    }

    /// A body-keyed delivery claims the guard too: with body_key_fallback
    /// on, a captured GitHub body re-sent without its X-GitHub-Delivery
    /// header gets the body key, a second key for the body.
    #[pg_test]
    fn a_body_key_fallback_does_not_bypass_the_guard() {
        const SRC: &str = ", source => 'gh-bodykey', body_key_fallback => true";
        let body = br#"{"action":"bodykey"}"#;
        let first = receive("github", body, &github(body, "k-1"), GITHUB_SECRET, 0, SRC);
        assert_eq!(first.outcome, s("claimed"));
        let stripped = signed("github", body, GITHUB_SECRET, 0, "", json!({"X-GitHub-Event": "push"}));
        let replay = receive("github", body, &stripped, GITHUB_SECRET, 0, SRC);
        assert_ne!(
            replay.outcome,
            s("claimed"),
            "the body of gh-bodykey:k-1 claimed again under {:?}",
            replay.idem_key
        );
    }
}
