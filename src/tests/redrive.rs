//! `#[pg_test]`s of bulk redrive in one session (src/api/redrive.rs,
//! src/maintenance/redrive.rs): what a dry run counts, what a run moves
//! (dead letters of the queue and of claims with an archived payload,
//! conflicts), what it skips (changed, without a payload), its progress in
//! redrive_runs and key_history, a paused source waiting, cancel, argument
//! errors. Races with live deliveries and the worker are
//! tests/cluster/test_redrive.py.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use crate::tests::support::{i64_of, run, text_of};
    use pgrx::prelude::*;

    fn state(key: &str) -> String {
        Spi::get_one_with_args::<String>(
            "SELECT state FROM webhook_dedup.keys WHERE source = 'rd' AND idem_key = $1",
            &[key.into()],
        )
        .unwrap()
        .unwrap_or_else(|| "gone".into())
    }

    /// A key of source rd dead-lettered by its holder; its payload archived
    /// (claim) or queued (enqueue).
    fn dead_letter(key: &str, enqueue: bool) {
        let claim = if enqueue {
            Spi::run_with_args(
                "SELECT webhook_dedup.webhook_enqueue('rd', $1, ('body of ' || $1)::bytea)",
                &[key.into()],
            )
            .unwrap();
            "SELECT claim_token FROM webhook_dedup.webhook_next('rd', batch => 1)"
        } else {
            "SELECT claim_token FROM webhook_dedup.webhook_claim('rd', $1, ('body of ' || $1)::bytea)"
        };
        let token = if enqueue {
            Spi::get_one::<pgrx::Uuid>(claim).unwrap().unwrap()
        } else {
            Spi::get_one_with_args::<pgrx::Uuid>(claim, &[key.into()]).unwrap().unwrap()
        };
        Spi::run_with_args(
            "SELECT webhook_dedup.webhook_fail('rd', $1, $2, 'downstream 500', retryable => false)",
            &[key.into(), token.into()],
        )
        .unwrap();
        assert_eq!(state(key), "dead_lettered");
    }

    fn pass() {
        run("SELECT webhook_dedup.run_maintenance()");
    }

    #[pg_test]
    fn a_run_moves_dead_letters_with_their_payload_and_skips_those_without() {
        run("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES ('rd', true)");
        dead_letter("q1", true); // enqueued: its payload is in the queue
        dead_letter("c1", false); // claimed, archived
        run("UPDATE webhook_dedup.sources SET keep_payload = false WHERE source = 'rd'");
        dead_letter("c2", false); // claimed, not archived: nothing to process it with
                                  // a dry run counts and changes nothing
        assert_eq!(i64_of("SELECT matched FROM webhook_dedup.redrive('rd', dry_run => true)"), 3);
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.redrive_runs"), 0);
        let id = i64_of("SELECT run FROM webhook_dedup.redrive('rd')");
        assert_eq!(
            text_of(&format!(
                "SELECT status || ' ' || matched || ' ' || remaining FROM webhook_dedup.redrive_runs WHERE id = {id}"
            )),
            Some("running 3 3".into())
        );
        // nothing moves until maintenance does it
        assert_eq!(state("q1"), "dead_lettered");
        pass();
        assert_eq!(
            (state("q1"), state("c1"), state("c2")),
            ("pending".into(), "pending".into(), "dead_lettered".into())
        );
        assert_eq!(
            text_of(&format!(
                "SELECT status || ' ' || moved || ' ' || skipped FROM webhook_dedup.redrive_runs WHERE id = {id}"
            )),
            Some("done 2 1".into())
        );
        assert_eq!(
            text_of("SELECT outcome FROM webhook_dedup.redrive_keys WHERE idem_key = 'c2'"),
            Some("no_payload".into())
        );
        assert_eq!(
            i64_of(&format!(
                "SELECT count(*) FROM webhook_dedup.key_history WHERE redrive_run = {id} AND redriven_at IS NOT NULL"
            )),
            2
        );
        // the workers get each with its payload (the claimed one's from the
        // archive), with a new attempt
        let got: Vec<(String, String)> = Spi::connect(|c| {
            c.select(
                "SELECT idem_key, convert_from(payload, 'UTF8') FROM webhook_dedup.webhook_next('rd', batch => 10) ORDER BY 1",
                None,
                &[],
            )
            .unwrap()
            .map(|r| (r.get::<String>(1).unwrap().unwrap(), r.get::<String>(2).unwrap().unwrap()))
            .collect()
        });
        assert_eq!(got, vec![("c1".into(), "body of c1".into()), ("q1".into(), "body of q1".into())]);
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.maintenance_runs WHERE keys_redriven = 3"), 1);
    }

    #[pg_test]
    fn a_key_that_changed_since_it_matched_is_skipped() {
        dead_letter("q1", true);
        dead_letter("q2", true);
        let id = i64_of("SELECT run FROM webhook_dedup.redrive('rd')");
        // an operator got there first: it is completed now
        run("SELECT webhook_dedup.webhook_resolve('rd', 'q1', 'completed')");
        pass();
        assert_eq!(state("q1"), "completed");
        assert_eq!(state("q2"), "pending");
        assert_eq!(
            text_of(&format!("SELECT moved || ' ' || skipped FROM webhook_dedup.redrive_runs WHERE id = {id}")),
            Some("1 1".into())
        );
        assert_eq!(
            text_of("SELECT outcome FROM webhook_dedup.redrive_keys WHERE idem_key = 'q1'"),
            Some("changed".into())
        );
    }

    #[pg_test]
    fn filters_and_states() {
        dead_letter("q1", true);
        dead_letter("q2", true);
        run("SELECT webhook_dedup.webhook_claim('rd', 'u1')");
        run("UPDATE webhook_dedup.keys SET state = 'unknown_outcome', due_at = NULL WHERE idem_key = 'u1'");
        // unknown outcomes only when named
        assert_eq!(i64_of("SELECT matched FROM webhook_dedup.redrive('rd', dry_run => true)"), 2);
        assert_eq!(
            i64_of("SELECT matched FROM webhook_dedup.redrive('rd', ARRAY['dead_lettered', 'unknown_outcome'], dry_run => true)"),
            3
        );
        assert_eq!(i64_of("SELECT matched FROM webhook_dedup.redrive('rd', max => 1, dry_run => true)"), 1);
        assert_eq!(
            i64_of("SELECT matched FROM webhook_dedup.redrive('rd', since => clock_timestamp(), dry_run => true)"),
            0
        );
        assert_eq!(
            i64_of("SELECT matched FROM webhook_dedup.redrive('rd', event_types => ARRAY['x'], dry_run => true)"),
            0
        );
        for (sql, sqlstate) in [
            ("SELECT webhook_dedup.redrive('rd', ARRAY[]::text[])", "22023"),
            ("SELECT webhook_dedup.redrive('rd', ARRAY['completed'])", "22023"),
            ("SELECT webhook_dedup.redrive('rd', max => 0)", "22023"),
            ("SELECT webhook_dedup.redrive('rd', since => now(), until => now() - interval '1 s')", "22023"),
            ("SELECT webhook_dedup.redrive(NULL)", "22004"),
            ("SELECT webhook_dedup.redrive('rd', NULL)", "22004"),
            ("SELECT webhook_dedup.cancel_redrive(424242)", "P0002"),
        ] {
            let e = error_of(sql);
            assert!(e.starts_with(sqlstate), "{sql}: {e}");
        }
    }

    #[pg_test]
    fn a_conflict_is_redriven_with_the_archived_conflicting_delivery() {
        run("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES ('rd', true)");
        let token = Spi::get_one::<pgrx::Uuid>(
            "SELECT claim_token FROM webhook_dedup.webhook_claim('rd', 'k', 'version 1'::bytea)",
        )
        .unwrap()
        .unwrap();
        Spi::run_with_args("SELECT webhook_dedup.webhook_complete('rd', 'k', $1)", &[token.into()]).unwrap();
        run("SELECT webhook_dedup.webhook_claim('rd', 'k', 'version 2'::bytea)"); // a conflict
        assert_eq!(i64_of("SELECT matched FROM webhook_dedup.redrive('rd', ARRAY['conflict'], dry_run => true)"), 1);
        run("SELECT webhook_dedup.redrive('rd', ARRAY['conflict'])");
        pass();
        assert_eq!(state("k"), "pending");
        assert_eq!(
            text_of("SELECT convert_from(payload, 'UTF8') FROM webhook_dedup.webhook_next('rd')"),
            Some("version 2".into())
        );
        // version 2 is the key's content now: its redelivery is no conflict
        assert_ne!(
            text_of("SELECT outcome FROM webhook_dedup.webhook_claim('rd', 'k', 'version 2'::bytea)"),
            Some("conflict".into())
        );
        // done once: a second run finds nothing to do
        let token = Spi::get_one::<pgrx::Uuid>("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 'k'")
            .unwrap()
            .unwrap();
        Spi::run_with_args("SELECT webhook_dedup.webhook_complete('rd', 'k', $1)", &[token.into()]).unwrap();
        assert_eq!(i64_of("SELECT matched FROM webhook_dedup.redrive('rd', ARRAY['conflict'], dry_run => true)"), 0);
    }

    #[pg_test]
    fn a_conflict_is_not_redriven_from_unknown_outcome_and_forgets_the_old_checkpoint() {
        run("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES ('rd', true)");
        for (key, state) in [("u", "unknown_outcome"), ("d", "dead_lettered")] {
            let token = Spi::get_one_with_args::<pgrx::Uuid>(
                "SELECT claim_token FROM webhook_dedup.webhook_claim('rd', $1, 'v1'::bytea)",
                &[key.into()],
            )
            .unwrap()
            .unwrap();
            Spi::run_with_args(
                "SELECT webhook_dedup.webhook_checkpoint('rd', $1, $2, 'step-of-v1')",
                &[key.into(), token.into()],
            )
            .unwrap();
            if state == "unknown_outcome" {
                Spi::run_with_args(
                    "SELECT webhook_dedup.webhook_mark_unknown('rd', $1, $2)",
                    &[key.into(), token.into()],
                )
                .unwrap();
            } else {
                Spi::run_with_args(
                    "SELECT webhook_dedup.webhook_fail('rd', $1, $2, 'e', retryable => false)",
                    &[key.into(), token.into()],
                )
                .unwrap();
            }
            Spi::run_with_args("SELECT webhook_dedup.webhook_claim('rd', $1, 'v2'::bytea)", &[key.into()]).unwrap();
        }
        // the unknown outcome is not a settled key: only the dead letter
        assert_eq!(i64_of("SELECT matched FROM webhook_dedup.redrive('rd', ARRAY['conflict'], dry_run => true)"), 1);
        run("SELECT webhook_dedup.redrive('rd', ARRAY['conflict'])");
        pass();
        assert_eq!((state("u"), state("d")), ("unknown_outcome".into(), "pending".into()));
        assert_eq!(
            text_of("SELECT coalesce(last_step, 'none') FROM webhook_dedup.webhook_next('rd')").as_deref(),
            Some("none"),
            "the new content starts from the beginning"
        );
    }

    #[pg_test]
    fn a_paused_source_waits_and_cancel_stops_a_run() {
        dead_letter("q1", true);
        let id = i64_of("SELECT run FROM webhook_dedup.redrive('rd')");
        run("SELECT webhook_dedup.pause('rd')");
        pass();
        assert_eq!(state("q1"), "dead_lettered", "a paused source's run waits");
        assert_eq!(i64_of(&format!("SELECT webhook_dedup.cancel_redrive({id})")), 0);
        run("SELECT webhook_dedup.resume('rd')");
        pass();
        assert_eq!(state("q1"), "dead_lettered", "a cancelled run moves nothing");
        assert_eq!(
            text_of(&format!(
                "SELECT status || ' ' || (cancelled_by IS NOT NULL) FROM webhook_dedup.redrive_runs WHERE id = {id}"
            )),
            Some("cancelled true".into())
        );
        // cancelling again changes nothing
        assert_eq!(i64_of(&format!("SELECT webhook_dedup.cancel_redrive({id})")), 0);
    }
}
