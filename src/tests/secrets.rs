//! `#[pg_test]`s of verification keys kept in the database
//! (`webhook_dedup.source_secrets`): rotation with an overlap, a retired
//! key, the checks of the management functions. Roles and dumps:
//! `tests/cluster/test_security.py`, `test_backup.py`.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use crate::tests::support::signed;
    use pgrx::prelude::*;
    use pgrx::JsonB;
    use serde_json::{json, Value};

    const T0: i64 = 1_700_000_000;
    const HOUR: i64 = 3_600;

    /// (verified, reject_reason, secret_index) of a Stripe delivery signed
    /// with `secret` at `at`, received with the source's stored keys.
    fn receive_stored(source: &str, secret: &str, at: i64, id: &str) -> (bool, Option<String>, Option<i32>) {
        let body = format!(r#"{{"id":"{id}","type":"invoice.paid","created":{at},"data":{{}}}}"#);
        let headers: Value = signed("stripe", body.as_bytes(), secret, at, "", json!({}));
        Spi::connect(|c| {
            let row = c
                .select(
                    "SELECT verified, reject_reason, secret_index
                       FROM webhook_dedup.webhook_receive('stripe', $1, $2, source => $3, at => to_timestamp($4))",
                    None,
                    &[body.as_bytes().into(), JsonB(headers).into(), source.into(), (at as f64).into()],
                )
                .unwrap()
                .first();
            (row.get::<bool>(1).unwrap().unwrap(), row.get(2).unwrap(), row.get(3).unwrap())
        })
    }

    fn add(source: &str, secret: &str, not_before: i64) -> i32 {
        Spi::get_one_with_args::<i32>(
            "SELECT webhook_dedup.add_secret($1, $2, to_timestamp($3))",
            &[source.into(), secret.into(), (not_before as f64).into()],
        )
        .unwrap()
        .unwrap()
    }

    /// Rotation: the old key alone, then both during the overlap, then
    /// the new one alone once the old is retired; secret_index names the
    /// key that verified.
    #[pg_test]
    fn a_rotation_with_an_overlap_then_the_new_key_only() {
        let old = add("rot", "whsec_old", T0);
        assert_eq!(receive_stored("rot", "whsec_old", T0 + HOUR, "evt_1"), (true, None, Some(old)));
        let new = add("rot", "whsec_new", T0 + 2 * HOUR);
        assert!(new > old);
        assert!(!receive_stored("rot", "whsec_new", T0 + HOUR, "evt_2").0, "not valid before not_before");
        // the overlap: both verify
        assert_eq!(receive_stored("rot", "whsec_old", T0 + 3 * HOUR, "evt_3"), (true, None, Some(old)));
        assert_eq!(receive_stored("rot", "whsec_new", T0 + 3 * HOUR, "evt_4"), (true, None, Some(new)));
        let retired = Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.retire_secret('rot', $1, to_timestamp($2)) = to_timestamp($2)",
            &[old.into(), ((T0 + 27 * HOUR) as f64).into()],
        );
        assert_eq!(retired, Ok(Some(true)));
        // a delivery before the end still verifies with it (a late retry)
        assert!(receive_stored("rot", "whsec_old", T0 + 26 * HOUR, "evt_5").0);
        // then only the new key
        assert_eq!(
            receive_stored("rot", "whsec_old", T0 + 27 * HOUR, "evt_6"),
            (false, Some("no_matching_signature".into()), None)
        );
        assert_eq!(receive_stored("rot", "whsec_new", T0 + 27 * HOUR, "evt_7"), (true, None, Some(new)));
        let listed = Spi::connect(|c| {
            c.select("SELECT id, fingerprint, valid_now FROM webhook_dedup.list_secrets('rot') ORDER BY id", None, &[])
                .unwrap()
                .map(|r| {
                    (
                        r.get::<i32>(1).unwrap().unwrap(),
                        r.get::<String>(2).unwrap().unwrap(),
                        r.get::<bool>(3).unwrap().unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        });
        assert_eq!(listed.len(), 2);
        assert_eq!((listed[0].0, listed[0].2), (old, false), "retired");
        assert!(listed.iter().all(|(_, fp, _)| fp.starts_with("sha256:") && fp.len() == 15 && !fp.contains("whsec")));
        // explicit secrets keep working, with their positions
        let body = br#"{"id":"evt_x","type":"t","created":1700000000,"data":{}}"#;
        let headers = signed("stripe", body, "whsec_given", T0, "", json!({}));
        let given = Spi::get_one_with_args::<i32>(
            "SELECT secret_index FROM webhook_dedup.webhook_receive('stripe', $1, $2, ARRAY['whsec_a', 'whsec_given'],
                                                       source => 'rot', at => to_timestamp($3))",
            &[body.as_slice().into(), JsonB(headers).into(), (T0 as f64).into()],
        );
        assert_eq!(given, Ok(Some(2)), "1-based, as webhook_verify_detail");
    }

    /// Without a key valid at the delivery's time the delivery cannot be
    /// verified: 55000 (a provider retries it); a stored key that cannot be
    /// a key of the scheme is 22023 naming its id, never its value.
    #[pg_test]
    fn missing_or_unusable_stored_keys_are_errors() {
        let none =
            error_of("SELECT * FROM webhook_dedup.webhook_receive('github', 'x'::bytea, '{}', source => 'no-keys')");
        assert!(none.starts_with("55000: source \"no-keys\" has no verification key"), "{none}");
        let id = add("sw", "whsec_not base64!", T0);
        let bad = error_of(&format!(
            "SELECT * FROM webhook_dedup.webhook_receive('standard', 'x'::bytea, '{{}}', source => 'sw', at => to_timestamp({T0}))"
        ));
        assert!(bad.starts_with(&format!("22023: key {id} of source \"sw\"")), "{bad}");
        assert!(!bad.contains("not base64"), "the secret is never echoed: {bad}");
    }

    /// A source whose provider, else its name, is a scheme gets only keys of
    /// that scheme: the error comes when the key is added, not as a 22023 on
    /// every delivery (which a provider would retry for days). The secret
    /// is never echoed.
    #[pg_test]
    fn a_key_is_checked_against_the_sources_scheme_when_added() {
        let by_name = error_of("SELECT webhook_dedup.add_secret('standard', 'whsec_not base64!')");
        assert!(
            by_name.starts_with("22023: the secret is not a key of scheme standard, the scheme of source \"standard\""),
            "{by_name}"
        );
        assert!(!by_name.contains("not base64!"), "the secret is never echoed: {by_name}");
        Spi::run("INSERT INTO webhook_dedup.sources (source, provider) VALUES ('billing', 'discord')").unwrap();
        let by_provider = error_of("SELECT webhook_dedup.add_secret('billing', 'not-a-public-key')");
        assert!(by_provider.starts_with("22023: the secret is not a key of scheme discord"), "{by_provider}");
        // keys of the scheme, and any secret of a source that names no scheme
        add("standard", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", T0);
        add("github", "any shared secret", T0);
        add("sw-custom", "whsec_not base64!", T0);
    }

    /// X's CRC is answered before any verification with a MAC of the
    /// caller's token: with stored keys, only a twitter source's keys may
    /// answer it, else a receiver could have another provider's key sign
    /// text of its choice (a Mailgun key signs "{timestamp}{token}").
    #[pg_test]
    fn the_crc_uses_only_a_twitter_sources_keys() {
        add("mailgun", "key-3ax6xnjp29jd6fds4gc373sgvjxteol0", T0);
        add("twitter", "z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu", T0);
        let crc = |source: &str| {
            Spi::get_two_with_args::<String, JsonB>(
                "SELECT reject_reason, response FROM webhook_dedup.webhook_receive('twitter', ''::bytea, '{}', source => $1,
                   url => 'https://x/hook?crc_token=14036452205egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6')",
                &[source.into()],
            )
            .unwrap()
        };
        // a Mailgun source's key is no key of X at all (keys carry their
        // scheme): 55000, no answer
        let refused = error_of(
            "SELECT reject_reason FROM webhook_dedup.webhook_receive('twitter', ''::bytea, '{}', source => 'mailgun',
               url => 'https://x/hook?crc_token=14036452205egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6')",
        );
        assert!(
            refused.starts_with("55000: source \"mailgun\" has no verification key for scheme twitter"),
            "{refused}"
        );
        let (reason, response) = crc("twitter");
        assert_eq!(reason, None);
        assert!(response.unwrap().0["response_token"].as_str().unwrap().starts_with("sha256="));
        Spi::run("INSERT INTO webhook_dedup.sources (source, provider) VALUES ('x-main', 'twitter')").unwrap();
        add("x-main", "z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu", T0);
        assert_eq!(crc("x-main").0, None, "a source whose provider is twitter");
    }

    /// The operator may change a source's provider at any time, and keys
    /// used to be checked against the scheme only when added. A Mailgun
    /// source whose provider became twitter answered the CRC with its
    /// Mailgun key: a valid Mailgun signature of a chosen timestamp and
    /// token. Keys now carry the scheme they were accepted for and verify
    /// (and answer) for that scheme only.
    #[pg_test]
    fn a_provider_change_never_turns_a_key_into_another_schemes_key() {
        Spi::run("INSERT INTO webhook_dedup.sources (source, provider) VALUES ('mail', 'mailgun')").unwrap();
        let key = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0";
        add("mail", key, T0);
        add("loose", "a secret of a source that names no scheme", T0);
        assert_eq!(
            Spi::get_one::<String>(
                "SELECT string_agg(source || '=' || coalesce(scheme, 'NULL'), ',' ORDER BY source)
                   FROM webhook_dedup.list_secrets() WHERE source IN ('mail', 'loose')"
            ),
            Ok(Some("loose=NULL,mail=mailgun".into()))
        );
        Spi::run("UPDATE webhook_dedup.sources SET provider = 'twitter' WHERE source = 'mail'").unwrap();
        Spi::run("INSERT INTO webhook_dedup.sources (source, provider) VALUES ('loose', 'twitter')").unwrap();
        // The Mailgun signature of timestamp 1403645220 and this token under
        // the key is 9cfc5c41...d33 (mailgun-php's own vector); X's CRC
        // answer is base64(HMAC-SHA256(key, token)) of the token alone, so
        // a timestamp glued in front of the token makes it that signature.
        let crc = |source: &str| {
            error_of(&format!(
                "SELECT reject_reason FROM webhook_dedup.webhook_receive('twitter', ''::bytea, '{{}}', source => '{source}',
                   url => 'https://x/hook?crc_token=14036452205egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6')"
            ))
        };
        let refused = crc("mail");
        assert!(
            refused.starts_with("55000: source \"mail\" has no verification key for scheme twitter"),
            "the Mailgun key does not serve X: {refused}"
        );
        assert_eq!(crc("loose"), "no error", "a key accepted for no scheme...");
        assert_eq!(
            Spi::get_one::<String>(
                "SELECT coalesce(reject_reason, 'answered') FROM webhook_dedup.webhook_receive('twitter', ''::bytea, '{}',
                   source => 'loose', url => 'https://x/hook?crc_token=abc')"
            ),
            Ok(Some("refused_handshake".into())),
            "...never answers the unsigned CRC"
        );
        // and the Mailgun key still verifies Mailgun deliveries of the source
        let body = format!(
            r#"{{"signature":{{"timestamp":"{T0}","token":"tok-1","signature":"{}"}},"event-data":{{"id":"e1"}}}}"#,
            Spi::get_one_with_args::<JsonB>(
                "SELECT webhook_dedup.webhook_sign('mailgun', ''::bytea, $1, at => to_timestamp($2), msg_id => 'tok-1')",
                &[key.into(), (T0 as f64).into()],
            )
            .unwrap()
            .unwrap()
            .0["signature"]["signature"]
                .as_str()
                .unwrap()
        );
        assert_eq!(
            Spi::get_one_with_args::<bool>(
                "SELECT verified FROM webhook_dedup.webhook_receive('mailgun', $1, '{}', source => 'mail',
                   at => to_timestamp($2))",
                &[body.as_bytes().into(), (T0 as f64).into()],
            ),
            Ok(Some(true))
        );
    }

    #[pg_test]
    fn the_management_functions_check_their_arguments() {
        let cases = [
            ("SELECT webhook_dedup.add_secret('s', '')", "22023: the secret is empty"),
            ("SELECT webhook_dedup.add_secret('s', ' padded')", "22023: the secret has leading or trailing whitespace"),
            ("SELECT webhook_dedup.add_secret(NULL, 'k')", "22004: source must not be NULL"),
            ("SELECT webhook_dedup.add_secret('s', NULL)", "22004: secret must not be NULL"),
            ("SELECT webhook_dedup.add_secret('', 'k')", "22023: source must not be empty"),
            (
                "SELECT webhook_dedup.add_secret('s', 'k', now(), now() - interval '1 s')",
                "22023: not_after must be later than not_before",
            ),
            ("SELECT webhook_dedup.retire_secret('s', 424242)", "P0002: source \"s\" has no key 424242"),
        ];
        for (sql, want) in cases {
            let got = error_of(sql);
            assert!(got.starts_with(want), "{sql}: {got}");
        }
        let id = add("s", "k", T0);
        let early = error_of(&format!("SELECT webhook_dedup.retire_secret('s', {id}, to_timestamp({T0}))"));
        assert!(early.starts_with("22023: not_after must be later than not_before"), "{early}");
        let other_source = error_of(&format!("SELECT webhook_dedup.retire_secret('t', {id})"));
        assert!(other_source.starts_with("P0002"), "a key is retired through its own source: {other_source}");
        assert_eq!(
            Spi::get_one_with_args::<bool>(
                "SELECT not_after IS NULL FROM webhook_dedup.source_secrets WHERE id = $1",
                &[id.into()]
            ),
            Ok(Some(true)),
            "the failed retirements changed nothing"
        );
    }
}
