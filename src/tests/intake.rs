//! `#[pg_test]`s of keys, provider profiles and the one-call intake
//! `webhook_receive` (see `src/tests/mod.rs` for how these tests run).

#[pgrx::pg_schema]
mod tests {
    use crate::signature::vectors;
    use crate::tests::support::signed;
    use pgrx::prelude::*;
    use pgrx::JsonB;
    use serde_json::{json, Value};

    /// (verified, reject_reason, idem_key, outcome, event_type, event_time as ISO UTC text).
    type Received = (bool, Option<String>, Option<String>, Option<String>, Option<String>, Option<String>);

    fn receive(scheme: &str, body: &[u8], headers: &Value, secret: &str, at_unix: f64, extra: &str) -> Received {
        Spi::connect(|c| {
            let row = c
                .select(
                    &format!(
                        "SELECT verified, reject_reason, idem_key, outcome, event_type,
                                to_char(event_time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')
                           FROM webhook_dedup.webhook_receive($1, $2, $3, ARRAY[$4], at => to_timestamp($5){extra})"
                    ),
                    None,
                    &[scheme.into(), body.into(), JsonB(headers.clone()).into(), secret.into(), at_unix.into()],
                )
                .unwrap()
                .first();
            (
                row.get::<bool>(1).unwrap().unwrap(),
                row.get::<String>(2).unwrap(),
                row.get::<String>(3).unwrap(),
                row.get::<String>(4).unwrap(),
                row.get::<String>(5).unwrap(),
                row.get::<String>(6).unwrap(),
            )
        })
    }

    fn vector(id: &str) -> Value {
        vectors::all().into_iter().chain(vectors::own()).find(|v| v["id"] == id).unwrap()
    }

    fn s(text: &str) -> Option<String> {
        Some(text.to_string())
    }

    /// Stripe renders an event anew for each attempt, so a retry of `evt_X`
    /// whose `pending_webhooks` (and `request`) changed was answered
    /// `conflict` (422) and Stripe retried for three days. The fingerprint
    /// covers the event's `type` and `data` now: the retry is a `duplicate`
    /// with the stored result, in both modes; a different `data` under the
    /// same id is still a `conflict`.
    #[pg_test]
    fn a_stripe_retry_with_a_rerendered_envelope_is_a_duplicate() {
        let at = 1_700_000_000;
        for (mode, first_outcome, source) in [("claim", "claimed", "stripe-fp"), ("enqueue", "accepted", "stripe-fq")] {
            let send = |body: &str| {
                let headers = signed("stripe", body.as_bytes(), "whsec_x", at, "", json!({}));
                receive(
                    "stripe",
                    body.as_bytes(),
                    &headers,
                    "whsec_x",
                    at as f64,
                    &format!(", source => '{source}', mode => '{mode}'"),
                )
                .3
            };
            let first = r#"{"id":"evt_X","object":"event","type":"invoice.paid","pending_webhooks":2,"data":{"object":{"id":"in_1"}}}"#;
            let retry = r#"{"id":"evt_X","object":"event","type":"invoice.paid","pending_webhooks":1,"request":{"id":null},"data":{"object":{"id":"in_1"}}}"#;
            let other = r#"{"id":"evt_X","object":"event","type":"invoice.paid","pending_webhooks":1,"data":{"object":{"id":"in_2"}}}"#;
            assert_eq!(send(first), s(first_outcome), "{mode}");
            if mode == "claim" {
                let done = Spi::get_one_with_args::<bool>(
                    "SELECT webhook_dedup.webhook_complete($1, k.idem_key, k.claim_token, '{\"ok\": 1}')
                       FROM webhook_dedup.keys AS k WHERE k.source = $1",
                    &[source.into()],
                );
                assert_eq!(done, Ok(Some(true)));
                let result = Spi::get_one_with_args::<JsonB>(
                    "SELECT result FROM webhook_dedup.webhook_receive('stripe', $1, $2, ARRAY['whsec_x'], at => to_timestamp($3),
                                                        source => $4)",
                    &[
                        retry.as_bytes().into(),
                        JsonB(signed("stripe", retry.as_bytes(), "whsec_x", at, "", json!({}))).into(),
                        (at as f64).into(),
                        source.into(),
                    ],
                );
                assert_eq!(result.unwrap().unwrap().0, json!({"ok": 1}), "the stored result");
            }
            assert_eq!(send(retry), s("duplicate"), "{mode}: a re-rendered retry");
            assert_eq!(send(other), s("conflict"), "{mode}: other data under the same id");
        }
    }

    #[pg_test]
    fn github_fixture_through_receive() {
        let body = include_bytes!("../../tests/fixtures/github/push/payload.json");
        let headers = signed(
            "github",
            body,
            "gh-secret",
            0,
            "",
            json!({"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event": "push"}),
        );
        let got = receive("github", body, &headers, "gh-secret", 0.0, "");
        assert_eq!(got, (true, None, s("github:72d3162e-cc78-11e3-81ab-4c9367dc0958"), s("claimed"), s("push"), None));
    }

    #[pg_test]
    fn stripe_vector_through_receive() {
        let v = vector("ST-01");
        let got =
            receive("stripe", &vectors::body(&v), &v["headers"], v["secret"].as_str().unwrap(), 1_700_000_000.0, "");
        let expected = (
            true,
            None,
            s("stripe:evt_test_vector_0001"),
            s("claimed"),
            s("payment_intent.succeeded"),
            s("2023-11-14T22:13:10.000000"),
        );
        assert_eq!(got, expected);
    }

    /// A source's `webhook_dedup.sources.tolerance` replaces the provider's
    /// default window when the call gives none; a call's own tolerance wins.
    #[pg_test]
    fn a_source_tolerance_applies_when_the_call_gives_none() {
        let v = vector("ST-01");
        let (body, secret) = (vectors::body(&v), v["secret"].as_str().unwrap());
        // ten minutes after the signature: outside Stripe's 300 s
        let late = 1_700_000_000.0 + 600.0;
        let reason = |extra: &str| receive("stripe", &body, &v["headers"], secret, late, extra).1;
        assert_eq!(reason(""), s("timestamp_too_old"));
        Spi::run("INSERT INTO webhook_dedup.sources (source, tolerance) VALUES ('stripe', '15 minutes')").unwrap();
        assert_eq!(reason(""), None, "the source's 15 minutes apply");
        assert_eq!(reason(", tolerance => '1 minute'"), s("timestamp_too_old"), "the call's own tolerance wins");
    }

    #[pg_test]
    fn shopify_vector_with_its_headers_through_receive() {
        let v = vector("SH-01");
        let mut headers = v["headers"].clone();
        headers.as_object_mut().unwrap().extend(
            json!({
                "X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
                "X-Shopify-Event-Id": "98880550-7158-44d4-b7cd-2c97c8a091b5",
                "X-Shopify-Topic": "orders/create",
                "X-Shopify-Triggered-At": "2023-03-29T18:00:27.877041743Z"
            })
            .as_object()
            .unwrap()
            .clone(),
        );
        let got = receive("shopify", &vectors::body(&v), &headers, v["secret"].as_str().unwrap(), 0.0, "");
        assert_eq!(
            got,
            (
                true,
                None,
                s("shopify:98880550-7158-44d4-b7cd-2c97c8a091b5"),
                s("claimed"),
                s("orders/create"),
                s("2023-03-29T18:00:27.877041")
            )
        );
    }

    /// Slack's documented Events API envelope (api.slack.com/apis/events-api,
    /// "Callback field overview"); the shared Slack vectors are slash
    /// commands, which carry no event id.
    #[pg_test]
    fn slack_events_and_slash_commands_through_receive() {
        let body = br#"{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"app_mention","user":"U123ABC456","text":"hi","ts":"1515449522.000016","channel":"C123ABC456","event_ts":"1515449522000016"},"type":"event_callback","authed_users":["U123ABC456"],"event_id":"Ev123ABC456","event_time":1515449522}"#;
        let headers = signed("slack", body, "8f742231b10e8888abcd99yyyzzz85a5", 1_515_449_522, "", json!({}));
        let got = receive("slack", body, &headers, "8f742231b10e8888abcd99yyyzzz85a5", 1_515_449_530.0, "");
        assert_eq!(
            got,
            (true, None, s("slack:Ev123ABC456"), s("claimed"), s("app_mention"), s("2018-01-08T22:12:02.000000"))
        );
        let v = vector("SL-01");
        let (body, secret) = (vectors::body(&v), v["secret"].as_str().unwrap());
        let missing = receive("slack", &body, &v["headers"], secret, 1_531_420_678.0, "");
        assert_eq!(missing, (true, s("missing_event_id"), None, None, None, None));
        let fallback = receive("slack", &body, &v["headers"], secret, 1_531_420_678.0, ", body_key_fallback => true");
        let key = Spi::get_one_with_args::<String>(
            "SELECT webhook_dedup.webhook_body_key('slack', $1)",
            &[body.as_slice().into()],
        );
        assert_eq!(fallback.2, key.unwrap());
        assert_eq!(fallback.3, s("claimed"));
    }

    #[pg_test]
    fn standard_webhooks_through_receive() {
        let v = vector("SW-01");
        let got =
            receive("svix", &vectors::body(&v), &v["headers"], v["secret"].as_str().unwrap(), 1_614_265_330.0, "");
        assert_eq!(got, (true, None, s("standard:msg_p5jXN8AQM9LWM0D4loKWxJek"), s("claimed"), None, None));
        // a payload with the specification's type and timestamp fields
        let body = br#"{"type":"invoice.paid","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"in_1"}}"#;
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let headers = signed("standard", body, secret, 1_700_000_000, ", msg_id => 'msg_2'", json!({}));
        let got = receive("standard", body, &headers, secret, 1_700_000_000.0, ", source => 'billing'");
        assert_eq!(
            got,
            (true, None, s("billing:msg_2"), s("claimed"), s("invoice.paid"), s("2022-11-03T20:26:10.344522"))
        );
    }

    #[pg_test]
    fn paddle_and_twilio_through_receive() {
        let v = vector("PD-01");
        let got =
            receive("paddle", &vectors::body(&v), &v["headers"], v["secret"].as_str().unwrap(), 1_692_619_065.0, "");
        assert_eq!(
            got,
            (
                true,
                None,
                s("paddle:evt_01h8bkrvsbagykhm1b0pq2wjvz"),
                s("claimed"),
                s("subscription.updated"),
                s("2023-08-21T11:57:42.337000")
            )
        );
        let v = vector("TW-01");
        let mut headers = v["headers"].clone();
        headers["I-Twilio-Idempotency-Token"] = json!("ae7c1d5a-2f1b-4d2e-9d6c-0b6a1c9e0f11");
        let extra = format!(", url => '{}'", v["url"].as_str().unwrap());
        let got = receive("twilio", &vectors::body(&v), &headers, "12345", 0.0, &extra);
        assert_eq!(got, (true, None, s("twilio:ae7c1d5a-2f1b-4d2e-9d6c-0b6a1c9e0f11"), s("claimed"), None, None));
    }

    /// ID-10 through the intake: two attempts that differ only in a
    /// per-attempt transport header share one key.
    #[pg_test]
    fn transport_headers_do_not_change_the_key() {
        let v = vector("SW-01");
        let (body, secret) = (vectors::body(&v), v["secret"].as_str().unwrap());
        let mut first = v["headers"].clone();
        first["X-Request-Id"] = json!("req-attempt-1");
        let mut second = v["headers"].clone();
        second["X-Request-Id"] = json!("req-attempt-2");
        let a = receive("standard", &body, &first, secret, 1_614_265_330.0, "");
        let b = receive("standard", &body, &second, secret, 1_614_265_330.0, "");
        assert_eq!(a.2, b.2);
        assert_eq!((a.3.as_deref(), b.3.as_deref()), (Some("claimed"), Some("in_progress")));
    }

    #[pg_test]
    fn enqueue_mode_stores_for_the_workers() {
        let v = vector("ST-01");
        let (body, secret) = (vectors::body(&v), v["secret"].as_str().unwrap());
        let enqueue = ", mode => 'enqueue'";
        let first = receive("stripe", &body, &v["headers"], secret, 1_700_000_000.0, enqueue);
        let again = receive("stripe", &body, &v["headers"], secret, 1_700_000_000.0, enqueue);
        assert_eq!((first.3.as_deref(), again.3.as_deref()), (Some("accepted"), Some("duplicate")));
        let drained = Spi::get_two::<String, String>(
            "SELECT idem_key, convert_from(payload, 'UTF8') FROM webhook_dedup.webhook_next('stripe')",
        )
        .unwrap();
        assert_eq!(drained.0, s("stripe:evt_test_vector_0001"));
        assert_eq!(drained.1.unwrap().as_bytes(), body.as_slice(), "the raw body, byte for byte");
    }

    /// A delivery that does not verify writes nothing at all: no key, no
    /// conflict, no count.
    #[pg_test]
    fn unverified_deliveries_leave_every_table_unchanged() {
        let counts = || {
            Spi::get_one::<String>(
                "SELECT (SELECT count(*) FROM webhook_dedup.keys) || '/' ||
                        (SELECT count(*) FROM webhook_dedup.conflicts) || '/' ||
                        (SELECT coalesce(sum(deliveries), 0) FROM webhook_dedup.duplicate_metrics)",
            )
            .unwrap()
        };
        let before = counts();
        let v = vector("ST-01");
        let (body, secret) = (vectors::body(&v), v["secret"].as_str().unwrap());
        let tampered = [body.as_slice(), b" "].concat();
        let cases: [(&[u8], &Value, &str, f64); 4] = [
            (&tampered, &v["headers"], secret, 1_700_000_000.0),
            (&body, &v["headers"], "whsec_wrong", 1_700_000_000.0),
            (&body, &v["headers"], secret, 1_700_001_000.0),
            (&body, &json!({}), secret, 1_700_000_000.0),
        ];
        let reasons: Vec<Option<String>> = cases
            .iter()
            .map(|(b, h, sec, at)| {
                let got = receive("stripe", b, h, sec, *at, "");
                assert!(!got.0);
                assert_eq!((got.2, got.3), (None, None));
                got.1
            })
            .collect();
        assert_eq!(
            reasons,
            vec![s("no_matching_signature"), s("no_matching_signature"), s("timestamp_too_old"), s("missing_header")]
        );
        assert_eq!(counts(), before);
    }

    #[pg_test]
    fn providers_view_lists_every_profile() {
        let rows = Spi::get_one::<i64>("SELECT count(*) FROM webhook_dedup.providers WHERE sources LIKE 'https://%'");
        assert_eq!(rows, Ok(Some(crate::profile::PROFILES.len() as i64)));
        let stripe = Spi::get_two::<String, String>(
            "SELECT event_id, retry_horizon::text FROM webhook_dedup.providers WHERE scheme = 'stripe'",
        );
        assert_eq!(stripe, Ok((s("body /id"), s("3 days"))));
        let bad_mode = Spi::get_one::<String>(
            "CREATE FUNCTION pg_temp.e() RETURNS text LANGUAGE plpgsql AS $$ BEGIN
               PERFORM webhook_dedup.webhook_receive('github', ''::bytea, '{}', ARRAY['s'], mode => 'later');
               RETURN 'no error'; EXCEPTION WHEN others THEN RETURN SQLSTATE || ': ' || SQLERRM; END $$;
             SELECT pg_temp.e()",
        );
        assert_eq!(bad_mode, Ok(s("22023: mode must be claim or enqueue, not \"later\"")));
    }
}
