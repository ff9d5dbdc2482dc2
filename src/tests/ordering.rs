//! `#[pg_test]`s of the out-of-order guard (see `src/tests/mod.rs` for how
//! these tests run; the race is in `tests/isolation/specs/ordering_race.spec`).

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use pgrx::prelude::*;

    fn advance(entity: &str, at: &str, event_id: Option<&str>, sequence: Option<i64>) -> bool {
        Spi::get_one_with_args::<bool>(
            "SELECT webhook_dedup.webhook_advance('stripe', $1, $2::timestamptz, $3, $4)",
            &[entity.into(), at.into(), event_id.into(), sequence.into()],
        )
        .unwrap()
        .unwrap()
    }

    /// The stale-ordering case: `payment_intent.payment_failed` (newer) is
    /// applied, then an older `payment_intent.processing` about the same
    /// intent arrives (a retry); the intent stays `payment_failed`.
    #[pg_test]
    fn an_older_event_arriving_later_is_skipped_by_the_function() {
        Spi::run("CREATE TABLE pg_temp.intents (id text PRIMARY KEY, status text)").unwrap();
        let apply = |event: &str, status: &str, at: &str| {
            if advance("pi_1", at, Some(event), None) {
                Spi::run_with_args(
                    "INSERT INTO pg_temp.intents VALUES ('pi_1', $1) ON CONFLICT (id) DO UPDATE SET status = $1",
                    &[status.into()],
                )
                .unwrap();
                true
            } else {
                false
            }
        };
        assert!(apply("evt_failed", "payment_failed", "2026-01-01 10:00:04+00"));
        assert!(!apply("evt_processing", "processing", "2026-01-01 10:00:01+00"));
        let status = Spi::get_one::<String>("SELECT status FROM pg_temp.intents WHERE id = 'pi_1'");
        assert_eq!(status, Ok(Some("payment_failed".into())));
        let watermark = Spi::get_one::<String>(
            "SELECT event_id FROM webhook_dedup.watermarks WHERE source = 'stripe' AND entity_id = 'pi_1'",
        );
        assert_eq!(watermark, Ok(Some("evt_failed".into())));
    }

    /// The same case with the trigger on the caller's own table, written
    /// with INSERT ... ON CONFLICT DO UPDATE as receivers do.
    #[pg_test]
    fn an_older_event_arriving_later_is_skipped_by_the_trigger() {
        Spi::run(
            "CREATE TABLE pg_temp.intents (id text PRIMARY KEY, status text, source_updated_at timestamptz);
             CREATE TRIGGER guard BEFORE INSERT OR UPDATE ON pg_temp.intents
               FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('source_updated_at')",
        )
        .unwrap();
        let upsert = |status: &str, at: &str| {
            Spi::get_one_with_args::<i64>(
                "WITH u AS (INSERT INTO pg_temp.intents VALUES ('pi_1', $1, $2::timestamptz)
                            ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status,
                                                          source_updated_at = EXCLUDED.source_updated_at
                            RETURNING 1)
                 SELECT count(*) FROM u",
                &[status.into(), at.into()],
            )
            .unwrap()
            .unwrap()
        };
        assert_eq!(upsert("payment_failed", "2026-01-01 10:00:04+00"), 1);
        assert_eq!(upsert("processing", "2026-01-01 10:00:01+00"), 0, "the statement reports zero rows");
        assert_eq!(upsert("succeeded", "2026-01-01 10:00:09+00"), 1);
        let status = Spi::get_one::<String>("SELECT status FROM pg_temp.intents");
        assert_eq!(status, Ok(Some("succeeded".into())));
    }

    #[pg_test]
    fn the_tie_rule() {
        let t = "2026-01-01 10:00:00+00";
        assert!(advance("a", t, Some("evt_1"), None));
        assert!(advance("a", t, Some("evt_1"), None), "the same event again: an idempotent re-apply");
        assert!(!advance("a", t, Some("evt_2"), None), "another event at the same instant, no sequence: refused");
        assert!(!advance("a", t, None, None), "an unnamed event at the same instant: refused");
        // with sequences the greater one wins
        assert!(advance("b", t, Some("evt_1"), Some(5)));
        assert!(advance("b", t, Some("evt_2"), Some(6)));
        assert!(!advance("b", t, Some("evt_3"), Some(4)));
        assert!(!advance("b", t, Some("evt_4"), None), "a tie needs both sequences");
        let seq = Spi::get_one::<i64>("SELECT sequence FROM webhook_dedup.watermarks WHERE entity_id = 'b'");
        assert_eq!(seq, Ok(Some(6)));
        // entities are independent, and a later time always wins
        assert!(advance("c", "2026-01-01 09:00:00+00", None, None));
        assert!(advance("a", "2026-01-01 10:00:00.000001+00", None, None));
    }

    #[pg_test]
    fn trigger_nulls_ties_and_inserts() {
        Spi::run(
            "CREATE TABLE pg_temp.t (id int PRIMARY KEY, v text, at timestamp);
             CREATE TRIGGER guard BEFORE UPDATE ON pg_temp.t FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('at');
             INSERT INTO pg_temp.t VALUES (1, 'a', NULL)",
        )
        .unwrap();
        let update = |v: &str, at: &str| {
            Spi::get_one_with_args::<i64>(
                "WITH u AS (UPDATE pg_temp.t SET v = $1, at = $2::timestamp WHERE id = 1 RETURNING 1) SELECT count(*) FROM u",
                &[v.into(), at.into()],
            )
            .unwrap()
            .unwrap()
        };
        assert_eq!(update("b", "2026-01-01 10:00"), 1, "a stored NULL lets the update through");
        assert_eq!(update("c", "2026-01-01 10:00"), 1, "an equal time passes");
        assert_eq!(update("d", "2026-01-01 09:59"), 0, "an older time is skipped");
        let null_incoming = Spi::get_one::<i64>(
            "WITH u AS (UPDATE pg_temp.t SET v = 'e', at = NULL WHERE id = 1 RETURNING 1) SELECT count(*) FROM u",
        );
        assert_eq!(null_incoming, Ok(Some(0)), "an incoming NULL over a stored time is skipped");
        // an update that leaves the column alone passes
        let untouched = Spi::get_one::<i64>(
            "WITH u AS (UPDATE pg_temp.t SET v = 'f' WHERE id = 1 RETURNING 1) SELECT count(*) FROM u",
        );
        assert_eq!(untouched, Ok(Some(1)));
        assert_eq!(Spi::get_one::<String>("SELECT v FROM pg_temp.t"), Ok(Some("f".into())));
    }

    #[pg_test]
    fn misuse_has_precise_sqlstates() {
        Spi::run("CREATE TABLE pg_temp.m (id int PRIMARY KEY, at timestamptz, label text); INSERT INTO pg_temp.m VALUES (1, now(), 'x')").unwrap();
        let with_trigger = |definition: &str| {
            Spi::run("DROP TRIGGER IF EXISTS g ON pg_temp.m").unwrap();
            let (when, rest) = definition.split_once(" FOR EACH ").unwrap();
            Spi::run(&format!("CREATE TRIGGER g {when} ON pg_temp.m FOR EACH {rest}")).unwrap();
            error_of("UPDATE pg_temp.m SET label = 'y'")
        };
        assert_eq!(
            with_trigger("BEFORE UPDATE FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('nope')"),
            "42703: column \"nope\" of relation \"m\" does not exist"
        );
        assert_eq!(
            with_trigger("BEFORE UPDATE FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('label')"),
            "42804: column \"label\" of relation \"m\" must be timestamptz or timestamp to be guarded"
        );
        assert_eq!(
            with_trigger("BEFORE UPDATE FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard()"),
            "22023: webhook_monotonic_guard needs one argument, the column to guard, not 0"
        );
        assert_eq!(
            with_trigger("AFTER UPDATE FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('at')"),
            "39P01: webhook_monotonic_guard must be a BEFORE ... FOR EACH ROW trigger"
        );
        assert_eq!(
            with_trigger(
                "BEFORE UPDATE FOR EACH STATEMENT EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('at')"
            ),
            "39P01: webhook_monotonic_guard must be a BEFORE ... FOR EACH ROW trigger"
        );
        // Called as a plain function, every trigger function of the
        // extension is 39P01, never pgrx's XX000
        // ("PgTrigger::from_fcinfo failed: NotTrigger").
        for name in ["webhook_dedup.webhook_monotonic_guard", "webhook_dedup.sources_changed"] {
            assert_eq!(
                error_of(&format!("SELECT {name}()")),
                format!("39P01: {name}() is a trigger function: it can only be called by a trigger")
            );
        }
        let trigger_functions = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
               JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'webhook_dedup'
              WHERE p.prorettype = 'trigger'::regtype",
        );
        assert_eq!(trigger_functions, Ok(Some(2)), "a new trigger function belongs in the loop above");
        let cases = [
            ("SELECT webhook_dedup.webhook_advance(NULL, 'e', now())", "22004: source must not be NULL"),
            ("SELECT webhook_dedup.webhook_advance('s', NULL, now())", "22004: entity_id must not be NULL"),
            ("SELECT webhook_dedup.webhook_advance('s', 'e', NULL)", "22004: source_updated_at must not be NULL"),
            ("SELECT webhook_dedup.webhook_advance('s', '', now())", "22023: entity_id must not be empty"),
            (
                "SELECT webhook_dedup.webhook_advance('s', 'e', 'infinity')",
                "22023: source_updated_at must be a finite timestamp",
            ),
        ];
        for (query, want) in cases {
            assert_eq!(error_of(query), want, "{query}");
        }
    }
}
