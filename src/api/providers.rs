//! `webhook_dedup.provider_profiles()`: the built-in provider profiles
//! (`crate::profile`) as rows, read through the view `webhook_dedup.providers`.

/// SQL functions in schema `webhook_dedup`.
#[pgrx::pg_schema]
mod webhook_dedup {
    use crate::profile::PROFILES;
    use pgrx::prelude::*;

    /// The built-in provider profiles (read them through the view
    /// `webhook_dedup.providers`).
    #[pg_extern(immutable, parallel_safe)]
    #[allow(clippy::type_complexity)]
    fn provider_profiles() -> TableIterator<
        'static,
        (
            name!(scheme, String),
            name!(event_id, Option<String>),
            name!(event_type, Option<String>),
            name!(event_time, Option<String>),
            name!(retry_horizon, Option<pgrx::datum::Interval>),
            name!(response_deadline, Option<pgrx::datum::Interval>),
            name!(default_wait, pgrx::datum::Interval),
            name!(retries_4xx, String),
            name!(disable_rule, String),
            name!(stop_signal, Option<String>),
            name!(fingerprint, String),
            name!(replay_guard, bool),
            name!(handshake, Option<String>),
            name!(notes, String),
            name!(sources, String),
        ),
    > {
        TableIterator::new(PROFILES.iter().map(|p| {
            let time =
                p.event_time.map(|(location, format)| format!("{} ({})", location.describe(), format.describe()));
            let horizon = p.retry_horizon_s.map(|s| {
                pgrx::datum::Interval::new(0, (s / 86_400) as i32, (s % 86_400) * 1_000_000)
                    .expect("a horizon of days and seconds is a valid interval")
            });
            let millis = |ms: i64| pgrx::datum::Interval::new(0, 0, ms * 1_000).expect("a few seconds");
            (
                p.scheme.name().to_string(),
                p.event_id.map(|l| l.describe()),
                p.event_type.map(|l| l.describe()),
                time,
                horizon,
                p.response_deadline_ms.map(millis),
                millis(crate::profile::default_wait_ms(Some(p))),
                p.retries_4xx.describe(),
                p.disable_rule.to_string(),
                p.stop_signal.map(|s| s.describe()),
                p.fingerprint.describe(),
                p.replay_guard,
                p.handshake.map(str::to_string),
                p.notes.to_string(),
                p.sources.to_string(),
            )
        }))
    }
}
