//! `#[pg_test]`s of the HTTP answer: `webhook_receive`'s
//! `http_status`, `http_headers` and `response` for every outcome one
//! session can reach, and `webhook_dedup.http_answer`.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::signed;
    use pgrx::prelude::*;
    use pgrx::JsonB;
    use serde_json::{json, Value};

    const SECRET: &str = "answer-secret";
    const AT: i64 = 1_700_000_000;

    /// (outcome or reject_reason, http_status, http_headers, response) of
    /// one webhook_receive call of `scheme` at AT.
    fn answer(scheme: &str, body: &[u8], headers: &Value, extra: &str) -> (Option<String>, i32, Value, Option<Value>) {
        Spi::connect(|c| {
            let row = c
                .select(
                    &format!(
                        "SELECT coalesce(outcome, reject_reason), http_status, http_headers, response
                           FROM webhook_dedup.webhook_receive($1, $2, $3, ARRAY[$4], at => to_timestamp($5){extra})"
                    ),
                    None,
                    &[scheme.into(), body.into(), JsonB(headers.clone()).into(), SECRET.into(), (AT as f64).into()],
                )
                .unwrap()
                .first();
            (
                row.get::<String>(1).unwrap(),
                row.get::<i32>(2).unwrap().unwrap(),
                row.get::<JsonB>(3).unwrap().unwrap().0,
                row.get::<JsonB>(4).unwrap().map(|j| j.0),
            )
        })
    }

    fn github(id: &str, body: &[u8]) -> Value {
        signed("github", body, SECRET, AT, "", json!({"X-GitHub-Delivery": id, "X-GitHub-Event": "issues"}))
    }

    const JSON: &str = "application/json";

    /// Claimed, duplicate (with the stored result), conflict, a bad
    /// signature and a missing event id, as webhook_receive answers them:
    /// never 409 or 422.
    #[pg_test]
    fn receive_answers_every_outcome_with_its_http_row() {
        let body = br#"{"action":"opened","n":1}"#;
        let (outcome, status, headers, response) = answer("github", body, &github("a-1", body), "");
        assert_eq!((outcome.as_deref(), status, response), (Some("claimed"), 200, None));
        assert_eq!(headers, json!({"Content-Type": JSON}));
        let token =
            Spi::get_one::<String>("SELECT claim_token::text FROM webhook_dedup.keys WHERE idem_key = 'github:a-1'")
                .unwrap()
                .unwrap();
        Spi::run(&format!(
            "SELECT webhook_dedup.webhook_complete('github', 'github:a-1', '{token}', '{{\"order\": 7}}')"
        ))
        .unwrap();
        let again = answer("github", body, &github("a-1", body), "");
        assert_eq!(again, (Some("duplicate".into()), 200, json!({"Content-Type": JSON}), Some(json!({"order": 7}))));
        let other = br#"{"action":"opened","n":2}"#;
        let conflict = answer("github", other, &github("a-1", other), "");
        assert_eq!(
            conflict,
            (Some("conflict".into()), 200, json!({"Content-Type": JSON}), Some(json!({"status": "conflict"})))
        );
        let forged =
            answer("github", body, &json!({"X-GitHub-Delivery": "a-2", "X-Hub-Signature-256": "sha256=00"}), "");
        assert_eq!((forged.1, forged.3), (401, Some(json!({"error": "invalid signature"}))));
        let no_id = answer("github", b"{}", &signed("github", b"{}", SECRET, AT, "", json!({})), "");
        assert_eq!(
            (no_id.0.as_deref(), no_id.1, no_id.3),
            (Some("missing_event_id"), 400, Some(json!({"error": "no event id"})))
        );
        // enqueue mode: accepted, then duplicate without a stored result
        let queued = br#"{"action":"closed"}"#;
        let first = answer("github", queued, &github("q-1", queued), ", mode => 'enqueue'");
        assert_eq!(
            (first.0.as_deref(), first.1, first.3),
            (Some("accepted"), 200, Some(json!({"status": "accepted"})))
        );
        let dup = answer("github", queued, &github("q-1", queued), ", mode => 'enqueue'");
        assert_eq!((dup.0.as_deref(), dup.1, dup.3), (Some("duplicate"), 200, Some(json!({"status": "duplicate"}))));
    }

    /// A retry_later answer carries the backoff's real remaining time, and
    /// a parked key is answered 200.
    #[pg_test]
    fn retry_later_says_how_long_and_parked_keys_are_200() {
        let body = br#"{"action":"opened","n":3}"#;
        answer("github", body, &github("b-1", body), "");
        let token =
            Spi::get_one::<String>("SELECT claim_token::text FROM webhook_dedup.keys WHERE idem_key = 'github:b-1'")
                .unwrap()
                .unwrap();
        Spi::run(&format!(
            "SELECT webhook_dedup.webhook_fail('github', 'github:b-1', '{token}', 'boom', retry_after => '90 seconds')"
        ))
        .unwrap();
        let (outcome, status, headers, response) = answer("github", body, &github("b-1", body), "");
        assert_eq!(
            (outcome.as_deref(), status, response),
            (Some("retry_later"), 503, Some(json!({"status": "retry_later"})))
        );
        let after: i64 = headers["Retry-After"].as_str().unwrap().parse().unwrap();
        assert!((85..=90).contains(&after), "{after}");
        Spi::run("SELECT webhook_dedup.webhook_resolve('github', 'github:b-1', 'dead_lettered')").unwrap();
        let parked = answer("github", body, &github("b-1", body), "");
        assert_eq!((parked.0.as_deref(), parked.1), (Some("dead_lettered"), 200));
    }

    /// The providers' stop signals go with a final refusal: Mailgun's 406
    /// for a delivery without an event id, Slack's header.
    #[pg_test]
    fn a_final_refusal_carries_the_providers_stop_signal() {
        let row = |sql: &str| {
            Spi::connect(|c| {
                let r = c.select(sql, None, &[]).unwrap().first();
                (r.get::<i32>(1).unwrap().unwrap(), r.get::<JsonB>(2).unwrap().unwrap().0)
            })
        };
        assert_eq!(
            row("SELECT http_status, http_headers FROM webhook_dedup.http_answer('missing_event_id', 'mailgun')"),
            (406, json!({"Content-Type": JSON}))
        );
        assert_eq!(
            row("SELECT http_status, http_headers FROM webhook_dedup.http_answer('missing_event_id', 'slack')"),
            (400, json!({"Content-Type": JSON, "X-Slack-No-Retry": "1"}))
        );
        assert_eq!(
            row("SELECT http_status, http_headers FROM webhook_dedup.http_answer('conflict', 'svix')"),
            (200, json!({"Content-Type": JSON})),
            "a 200 needs no stop signal"
        );
        assert_eq!(
            row("SELECT http_status, http_headers FROM webhook_dedup.http_answer('lease_lost', 'github', retry_after => '2.2 s')"),
            (503, json!({"Content-Type": JSON, "Retry-After": "3"}))
        );
        assert_eq!(
            row("SELECT http_status, http_headers FROM webhook_dedup.http_answer('error')"),
            (500, json!({"Content-Type": JSON}))
        );
        let completed = Spi::get_one::<JsonB>(
            "SELECT response FROM webhook_dedup.http_answer('completed', 'github', '{\"id\": 1}')",
        );
        assert_eq!(completed.unwrap().unwrap().0, json!({"id": 1}));
    }

    #[pg_test(
        error = "unknown outcome \"processing\": one of claimed, reclaimed, in_progress, duplicate, conflict, retry_later, unknown_outcome, dead_lettered, accepted, handshake, ignored, rejected, missing_event_id, repeated_header, refused_handshake, completed, lease_lost, error"
    )]
    fn http_answer_refuses_an_unknown_outcome() {
        Spi::run("SELECT * FROM webhook_dedup.http_answer('processing')").unwrap();
    }

    #[pg_test(error = "outcome reclaimed does not happen in mode enqueue")]
    fn http_answer_refuses_an_outcome_of_the_other_mode() {
        Spi::run("SELECT * FROM webhook_dedup.http_answer('reclaimed', mode => 'enqueue')").unwrap();
    }

    #[pg_test(error = "wait must be between 0 and 60 seconds")]
    fn receive_refuses_a_wait_over_a_minute() {
        Spi::run("SELECT webhook_dedup.webhook_receive('github', '{}'::bytea, '{}', ARRAY['s'], wait => '61 s')")
            .unwrap();
    }

    /// The providers view shows how each provider takes answers.
    #[pg_test]
    fn providers_show_deadlines_and_default_waits() {
        let got = Spi::get_one::<String>(
            "SELECT response_deadline::text || ' ' || default_wait::text || ' ' || coalesce(stop_signal, '-')
               FROM webhook_dedup.providers WHERE scheme = 'slack'",
        );
        assert_eq!(got, Ok(Some("00:00:03 00:00:02 header X-Slack-No-Retry: 1".into())));
    }

    /// A handshake's answer is its body when given, else the status body
    /// the function documents (it was NULL).
    #[pg_test]
    fn a_handshake_without_a_body_answers_its_status() {
        let body = |sql: &str| Spi::get_one::<JsonB>(sql).unwrap().map(|j| j.0);
        assert_eq!(
            body("SELECT response FROM webhook_dedup.http_answer('handshake')"),
            Some(json!({"status": "handshake"}))
        );
        assert_eq!(
            body("SELECT response FROM webhook_dedup.http_answer('handshake', result => '{\"challenge\": \"x\"}')"),
            Some(json!({"challenge": "x"}))
        );
    }
}
