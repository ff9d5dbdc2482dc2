//! `#[pg_test]`s of the single-session security faults: settings bounded like
//! the arguments they stand for, replay windows compared in microseconds.
//! Hostile header maps and bodies (timing, cancels), the roles with real
//! logins, `search_path` attacks on every function and the worker, other
//! encodings and the counters' shares are in `tests/cluster/test_security.py`;
//! the dump round trip in `tests/cluster/test_backup.py`.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use pgrx::prelude::*;
    use pgrx::JsonB;

    /// Fault 6: `SET webhook_dedup.default_lease = 2147483647` gave 68-year
    /// leases while `lease => '366 days'` is 22023. Each setting now has the
    /// bounds of the argument or column it stands for.
    /// webhook_dedup.distribute() (src/sql/distribute.sql) needs Citus: on
    /// a server without it, 55000 and nothing changes; it is for superusers
    /// only (no grant to PUBLIC or to the extension's roles).
    #[pg_test]
    fn distribute_needs_citus_and_a_superuser() {
        let err = error_of("SELECT webhook_dedup.distribute()");
        assert!(err.starts_with("55000: webhook_dedup.distribute() needs Citus"), "{err}");
        // a NULL proacl would be the default: EXECUTE for PUBLIC
        let owner_only = Spi::get_one::<bool>(
            "SELECT p.proacl IS NOT NULL AND NOT EXISTS (
                      SELECT FROM aclexplode(p.proacl) a
                       WHERE a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE')
               FROM pg_proc p WHERE p.oid = 'webhook_dedup.distribute(integer)'::regprocedure",
        )
        .unwrap();
        assert_eq!(owner_only, Some(true), "EXECUTE granted to someone besides its owner");
    }

    #[pg_test]
    fn settings_have_the_bounds_of_their_arguments() {
        // (setting, min, max) in the setting's unit, seconds
        for (setting, min, max) in [
            ("webhook_dedup.default_lease", "1", "31536000"), // 1 s .. 365 days, as lease =>
            ("webhook_dedup.retention", "60", "315360000"),   // 1 minute .. 3650 days, as sources.retention
        ] {
            let bounds = Spi::get_two_with_args::<String, String>(
                "SELECT min_val, max_val FROM pg_catalog.pg_settings WHERE name = $1",
                &[setting.into()],
            )
            .unwrap();
            assert_eq!(bounds, (Some(min.into()), Some(max.into())), "{setting}");
        }
        // a user setting refuses more, as the argument does
        for over in ["31536001", "2147483647"] {
            let err = error_of(&format!("SET webhook_dedup.default_lease = {over}"));
            assert!(err.starts_with("22023: "), "{over}: {err}");
        }
        assert_eq!(error_of("SET webhook_dedup.default_lease = '365d'"), "no error");
        Spi::run("RESET webhook_dedup.default_lease").unwrap();
        // the argument and the column agree with the setting
        assert_eq!(
            error_of("SELECT webhook_dedup.webhook_claim('s', 'k', lease => '365 days 1 second')"),
            "22023: lease must be at most 365 days"
        );
        assert!(error_of("INSERT INTO webhook_dedup.sources (source, retention) VALUES ('s', '3650 days 1 second')")
            .starts_with("23514: "),);
        assert_eq!(
            error_of(
                "SELECT webhook_dedup.webhook_verify('github', ''::bytea, '{}', ARRAY['s'], tolerance => '366 days')"
            ),
            "22023: tolerance must be at most 365 days"
        );
    }

    /// Fault 7: `at` was floored to whole seconds, so a Slack request
    /// signed 300.5 s before `at` passed a 300 s window while one 300.5 s
    /// after failed. Both are rejected now; exactly 300 s passes.
    #[pg_test]
    fn replay_windows_compare_microseconds_symmetrically() {
        let headers = Spi::get_one::<JsonB>(
            "SELECT webhook_dedup.webhook_sign('slack', 'x'::bytea, 'sekrit', at => to_timestamp(1700000000))",
        )
        .unwrap()
        .unwrap();
        let verify = |at: &str| {
            Spi::get_one_with_args::<String>(
                &format!(
                    "SELECT reason FROM webhook_dedup.webhook_verify_detail('slack', 'x'::bytea, $1, ARRAY['sekrit'],
                                                              at => to_timestamp(1700000000) + interval '{at}')"
                ),
                &[JsonB(headers.0.clone()).into()],
            )
            .unwrap()
            .unwrap()
        };
        assert_eq!(verify("300.5 seconds"), "timestamp_too_old");
        assert_eq!(verify("300.9 seconds"), "timestamp_too_old");
        assert_eq!(verify("300.000001 seconds"), "timestamp_too_old");
        assert_eq!(verify("-300.5 seconds"), "timestamp_too_new");
        assert_eq!(verify("300 seconds"), "ok");
        assert_eq!(verify("-300 seconds"), "ok");
        assert_eq!(verify("299.999999 seconds"), "ok");
    }
}
