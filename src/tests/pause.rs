//! `#[pg_test]`s of pausing a source in one session (`webhook_dedup.pause`,
//! `resume`; src/api/pause.rs): what is parked and what is not, the keys
//! that become due during a pause, a batch filled from other sources,
//! resume's due times, repeated pauses, a deleted row, key_states, argument
//! errors. The race of a resume with a `webhook_next` that parks is
//! `tests/isolation/specs/pause_resume.spec`; the roles are
//! `tests/cluster/test_security.py`.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use crate::tests::support::{i64_of, text_of};
    use pgrx::prelude::*;

    fn enqueue(source: &str, key: &str) {
        Spi::run_with_args("SELECT webhook_dedup.webhook_enqueue($1, $2, 'body'::bytea)", &[source.into(), key.into()])
            .unwrap();
    }

    /// The keys webhook_next leased, as source/idem_key.
    fn next(batch: i32) -> Vec<String> {
        Spi::connect(|c| {
            c.select(
                "SELECT source || '/' || idem_key FROM webhook_dedup.webhook_next(batch => $1) ORDER BY 1",
                None,
                &[batch.into()],
            )
            .unwrap()
            .map(|r| r.get::<String>(1).unwrap().unwrap())
            .collect()
        })
    }

    fn due(source: &str, key: &str) -> String {
        Spi::get_one_with_args::<String>(
            "SELECT due_at::text FROM webhook_dedup.keys WHERE source = $1 AND idem_key = $2",
            &[source.into(), key.into()],
        )
        .unwrap()
        .unwrap_or_else(|| "NULL".into())
    }

    #[pg_test]
    fn a_paused_source_is_not_taken_and_resume_gives_its_keys_back_in_order() {
        enqueue("p1", "a");
        enqueue("p1", "b");
        enqueue("p2", "c");
        assert_eq!(i64_of("SELECT webhook_dedup.pause('p1', 'crm down')"), 2);
        assert_eq!(due("p1", "a"), "infinity");
        assert_eq!(due("p1", "b"), "infinity");
        assert_ne!(due("p2", "c"), "infinity");
        assert_eq!(
            text_of(
                "SELECT paused_by || ' ' || pause_reason || ' ' || (paused_at IS NOT NULL)
                   FROM webhook_dedup.sources WHERE source = 'p1'"
            ),
            Some(format!("{} crm down true", text_of("SELECT session_user::text").unwrap()))
        );
        // key_states: the paused backlog, outside oldest_pending_age
        assert_eq!(
            text_of(
                "SELECT keys || ' ' || paused_keys || ' ' || (paused_at IS NOT NULL) || ' ' || (oldest_pending_age IS NULL)
                   FROM webhook_dedup.key_states WHERE source = 'p1' AND state = 'pending'"
            ),
            Some("2 2 true true".into())
        );
        assert_eq!(
            text_of(
                "SELECT paused_keys || ' ' || (paused_at IS NULL)
                   FROM webhook_dedup.key_states WHERE source = 'p2' AND state = 'pending'"
            ),
            Some("0 true".into())
        );
        // intake goes on: a new delivery is stored and answered as before
        assert_eq!(text_of("SELECT webhook_dedup.webhook_enqueue('p1', 'd', 'body'::bytea)"), Some("accepted".into()));
        // the new key is due, and the webhook_next that meets it parks it and
        // fills its batch from the other source
        assert_eq!(next(5), vec!["p2/c".to_string()]);
        assert_eq!(due("p1", "d"), "infinity");
        assert_eq!(next(5), Vec::<String>::new());
        // resume: due again at their first delivery, oldest first
        assert_eq!(i64_of("SELECT webhook_dedup.resume('p1')"), 3);
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'p1' AND due_at = first_seen_at"), 3);
        assert_eq!(text_of("SELECT paused_at::text FROM webhook_dedup.sources WHERE source = 'p1'"), None);
        assert_eq!(next(5), vec!["p1/a".to_string(), "p1/b".to_string(), "p1/d".to_string()]);
        assert_eq!(i64_of("SELECT webhook_dedup.resume('p1')"), 0);
    }

    #[pg_test]
    fn failed_keys_wait_for_their_retry_and_leases_are_kept() {
        enqueue("pf", "f");
        enqueue("pf", "l");
        let taken = next(2);
        assert_eq!(taken, vec!["pf/f".to_string(), "pf/l".to_string()]);
        Spi::run(
            "SELECT webhook_dedup.webhook_fail('pf', 'f',
                    (SELECT claim_token FROM webhook_dedup.keys WHERE source = 'pf' AND idem_key = 'f'),
                    'timeout', retry_after => '2 hours')",
        )
        .unwrap();
        let retry_at = text_of("SELECT next_attempt_at::text FROM webhook_dedup.keys WHERE idem_key = 'f'");
        // pf/l is processing: its lease is left alone
        let lease = due("pf", "l");
        assert_eq!(i64_of("SELECT webhook_dedup.pause('pf')"), 1);
        assert_eq!(due("pf", "f"), "infinity");
        assert_eq!(due("pf", "l"), lease);
        // a lapsed lease of a paused source is not leased again by webhook_next
        Spi::run(
            "UPDATE webhook_dedup.keys SET lease_expires_at = now() - interval '1 minute',
                         due_at = now() - interval '1 minute' WHERE idem_key = 'l'",
        )
        .unwrap();
        assert_eq!(next(5), Vec::<String>::new());
        assert_eq!(text_of("SELECT state FROM webhook_dedup.keys WHERE idem_key = 'l'"), Some("processing".into()));
        assert_eq!(i64_of("SELECT webhook_dedup.resume('pf')"), 1);
        assert_eq!(Some(due("pf", "f")), retry_at);
    }

    #[pg_test]
    fn a_second_pause_keeps_the_first_and_a_deleted_row_leaves_nothing_parked() {
        enqueue("pd", "a");
        Spi::run("SELECT webhook_dedup.pause('pd', 'first')").unwrap();
        let first = text_of("SELECT paused_at::text FROM webhook_dedup.sources WHERE source = 'pd'");
        assert_eq!(i64_of("SELECT webhook_dedup.pause('pd', 'second')"), 0);
        assert_eq!(
            text_of("SELECT paused_at::text || ' ' || pause_reason FROM webhook_dedup.sources WHERE source = 'pd'"),
            first.map(|t| t + " second")
        );
        // the row is an ordinary row: deleting it ends the pause, not the parking
        Spi::run("DELETE FROM webhook_dedup.sources WHERE source = 'pd'").unwrap();
        // not paused any more, but its key stays parked until resume
        assert_eq!(next(5), Vec::<String>::new());
        assert_eq!(i64_of("SELECT webhook_dedup.resume('pd')"), 1);
        assert_eq!(next(5), vec!["pd/a".to_string()]);
        // a source configured before keeps its settings across pause and resume
        Spi::run("INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('pk', 3)").unwrap();
        Spi::run("SELECT webhook_dedup.pause('pk')").unwrap();
        Spi::run("SELECT webhook_dedup.resume('pk')").unwrap();
        assert_eq!(
            text_of("SELECT max_attempts || ' ' || (paused_at IS NULL) FROM webhook_dedup.sources WHERE source = 'pk'"),
            Some("3 true".into())
        );
    }

    #[pg_test]
    fn claims_are_not_refused_while_paused() {
        Spi::run("SELECT webhook_dedup.pause('pc')").unwrap();
        assert_eq!(text_of("SELECT outcome FROM webhook_dedup.webhook_claim('pc', 'k1')"), Some("claimed".into()));
        assert_eq!(text_of("SELECT outcome FROM webhook_dedup.webhook_claim('pc', 'k1')"), Some("in_progress".into()));
    }

    #[pg_test]
    fn bad_arguments() {
        for (sql, expected) in [
            ("SELECT webhook_dedup.pause(NULL)", "22004: source must not be NULL"),
            ("SELECT webhook_dedup.resume(NULL)", "22004: source must not be NULL"),
            ("SELECT webhook_dedup.pause('')", "22023: source must not be empty"),
            ("SELECT webhook_dedup.resume(repeat('x', 256))", "22023: source is 256 characters long; the limit is 255"),
        ] {
            let got = error_of(sql);
            assert!(got.starts_with(expected), "{sql}: {got}");
        }
        // nothing was written by the calls that failed
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.sources"), 0);
    }
}
