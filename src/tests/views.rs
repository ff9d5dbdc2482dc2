//! `#[pg_test]`s of the metrics and operational views in one session:
//! `duplicate_rate_alerts` on known flushed counts, its errors, and the
//! views' shapes. The scripted scenario with concurrent duplicates, the
//! live-versus-flushed numbers, pg_monitor's access and the plans on a
//! million keys are in `tests/cluster/test_metrics.py`.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use pgrx::prelude::*;

    /// Flushed counts for `source`: `deliveries` and duplicates of completed
    /// keys in the bucket `bucket` (an SQL expression) of `width`.
    fn counts(source: &str, bucket: &str, width: &str, deliveries: i64, duplicates: i64) {
        Spi::run_with_args(
            &format!(
                "INSERT INTO webhook_dedup.claim_counts (bucket, source, bucket_width, deliveries, first_claims,
                                                         duplicates_of_completed)
                 VALUES ({bucket}, $1, $2::interval, $3, $3 - $4, $4)"
            ),
            &[source.into(), width.into(), deliveries.into(), duplicates.into()],
        )
        .unwrap();
    }

    fn alerts(threshold: f64, window: &str) -> Vec<(String, String, i64, i64)> {
        Spi::connect(|c| {
            c.select(
                "SELECT source, alert, deliveries, duplicates FROM webhook_dedup.duplicate_rate_alerts($1, $2::interval)
                  WHERE source LIKE 'al\\_%' ORDER BY source",
                None,
                &[threshold.into(), window.into()],
            )
            .unwrap()
            .map(|r| (r.get(1).unwrap().unwrap(), r.get(2).unwrap().unwrap(), r.get(3).unwrap().unwrap(), r.get(4).unwrap().unwrap()))
            .collect()
        })
    }

    #[pg_test]
    fn duplicate_rate_alerts_report_a_high_ratio_and_duplicates_that_stopped() {
        let hour = "date_trunc('hour', now())";
        counts("al_up", hour, "1 hour", 100, 10);
        counts("al_ok", hour, "1 hour", 100, 1);
        counts("al_stop", &format!("{hour} - interval '3 hours'"), "1 hour", 50, 5);
        counts("al_stop", hour, "1 hour", 40, 0);
        // an old high ratio outside both windows is not reported
        counts("al_old", &format!("{hour} - interval '30 hours'"), "1 hour", 10, 9);
        assert_eq!(
            alerts(0.02, "2 hours"),
            vec![
                ("al_stop".into(), "duplicates_stopped".into(), 40, 0),
                ("al_up".into(), "ratio_above_threshold".into(), 100, 10),
            ]
        );
        assert_eq!(alerts(0.2, "2 hours"), vec![("al_stop".into(), "duplicates_stopped".into(), 40, 0)]);
        // up to an hour, the per-minute counts are read (hourly rows are not)
        counts("al_min", "date_trunc('minute', now())", "1 minute", 10, 5);
        assert_eq!(alerts(0.02, "10 minutes"), vec![("al_min".into(), "ratio_above_threshold".into(), 10, 5)]);
    }

    #[pg_test]
    fn duplicate_rate_alerts_reject_bad_arguments() {
        for (query, sqlstate) in [
            ("SELECT * FROM webhook_dedup.duplicate_rate_alerts(NULL)", "22004"),
            ("SELECT * FROM webhook_dedup.duplicate_rate_alerts(0.1, NULL)", "22004"),
            ("SELECT * FROM webhook_dedup.duplicate_rate_alerts(1.5)", "22023"),
            ("SELECT * FROM webhook_dedup.duplicate_rate_alerts(-0.1)", "22023"),
            ("SELECT * FROM webhook_dedup.duplicate_rate_alerts('NaN')", "22023"),
            ("SELECT * FROM webhook_dedup.duplicate_rate_alerts(0.1, '0 seconds')", "22023"),
            ("SELECT * FROM webhook_dedup.duplicate_rate_alerts(0.1, '400 days')", "22023"),
        ] {
            let error = error_of(query);
            assert!(error.starts_with(sqlstate), "{query}: {error}");
        }
    }

    /// No view a monitoring role reads shows a payload or headers.
    #[pg_test]
    fn no_view_shows_payloads() {
        let leaks = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
              WHERE c.relnamespace = 'webhook_dedup'::regnamespace AND c.relkind = 'v'
                AND a.attname IN ('payload', 'headers', 'claim_token')",
        );
        assert_eq!(leaks, Ok(Some(0)));
        let readable = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_class c
              WHERE c.relnamespace = 'webhook_dedup'::regnamespace AND c.relkind = 'v'
                AND has_table_privilege('pg_monitor', c.oid, 'SELECT')",
        );
        let views = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_class WHERE relnamespace = 'webhook_dedup'::regnamespace AND relkind = 'v'",
        );
        assert_eq!(readable.unwrap().unwrap(), views.unwrap().unwrap(), "pg_monitor reads every view");
    }

    /// A pending key and an in-flight lease show their ages in key_states.
    #[pg_test]
    fn key_states_show_the_oldest_pending_key_and_lease() {
        Spi::run(
            "SELECT webhook_dedup.webhook_enqueue('ks', 'p1', '\\x01'::bytea);
             SELECT webhook_dedup.webhook_claim('ks', 'c1');
             UPDATE webhook_dedup.keys SET due_at = now() - interval '5 minutes' WHERE idem_key = 'p1';
             UPDATE webhook_dedup.keys SET leased_at = now() - interval '2 minutes' WHERE idem_key = 'c1'",
        )
        .unwrap();
        let pending = Spi::get_two::<i64, pgrx::datum::Interval>(
            "SELECT keys, oldest_pending_age FROM webhook_dedup.key_states WHERE source = 'ks' AND state = 'pending'",
        )
        .unwrap();
        assert_eq!(pending.0, Some(1));
        assert_eq!(pending.1.map(|i| i.micros()), Some(300_000_000));
        let processing = Spi::get_two::<pgrx::datum::Interval, i64>(
            "SELECT oldest_lease_age, expired_leases FROM webhook_dedup.key_states
              WHERE source = 'ks' AND state = 'processing'",
        )
        .unwrap();
        assert_eq!(processing.0.map(|i| i.micros()), Some(120_000_000));
        assert_eq!(processing.1, Some(0));
    }
}
