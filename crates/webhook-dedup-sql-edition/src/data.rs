//! The rules that are data, written as SQL function bodies from the core
//! crate itself (never copied by hand): the SQL edition answers from the
//! same tables as the native one.
//!
//! - `downstream_key_limits_rows`: the presets of `webhook_operation_key`
//!   ([`webhook_dedup_core::operation_key::DOWNSTREAMS`]);
//! - helpers ([`helpers`]): the signature schemes with their properties
//!   and names ([`Scheme::ALL`], [`Scheme::STANDARD_ALIASES`]), and the
//!   characters Rust's `str::trim` trims (Unicode White_Space), which the
//!   header rules trim.

use std::collections::BTreeMap;
use std::path::PathBuf;

use webhook_dedup_core::answer::{self, Kind, Mode};
use webhook_dedup_core::intake::{MAX_ACCEPTED_TYPES, MAX_FINGERPRINT_POINTERS, MAX_POINTER_BYTES, MAX_TYPE_CHARS};
use webhook_dedup_core::operation_key::DOWNSTREAMS;
use webhook_dedup_core::profile::{default_wait_ms, TimeFormat, PROFILES};
use webhook_dedup_core::signature::{calendly, paddle, stripe, Coverage, Encoding, Scheme, TimestampedHeader};
use webhook_dedup_core::{claim, outbox, settings};

use crate::bodies::{Body, Language};

/// `text` as an SQL string literal.
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Where the generated bodies say they come from.
const FROM: &str = "crates/webhook-dedup-sql-edition/src/data.rs";

fn generated(text: String) -> Body {
    Body { language: Language::Sql, text, file: PathBuf::from(FROM), line: 0 }
}

/// The body of `downstream_key_limits_rows()`: one row per preset, in the
/// core's order.
fn downstream_key_limits_rows() -> Body {
    let rows: Vec<String> = DOWNSTREAMS
        .iter()
        .map(|d| {
            format!(
                "  ({}, {}, {}, {}, {})",
                literal(d.name),
                literal(d.carrier),
                d.max_length,
                literal(d.retention),
                literal(d.sources)
            )
        })
        .collect();
    generated(format!("VALUES\n{}\n", rows.join(",\n")))
}

/// The helpers written from the core: whole statements, each function
/// revoked from PUBLIC.
pub fn helpers() -> (PathBuf, String) {
    let mut sql = String::new();
    // the schemes: name, default window, what they need and cover
    let rows: Vec<String> = Scheme::ALL
        .iter()
        .map(|s| {
            let coverage = match s.coverage() {
                Coverage::Bytes => "bytes",
                Coverage::Content => "content",
                Coverage::Nothing => "nothing",
            };
            format!(
                "  ({}, {}, {}, {}, {})",
                literal(s.name()),
                s.default_tolerance_s().map_or("NULL".into(), |t| t.to_string()),
                s.signs_url(),
                s.signable(),
                literal(coverage)
            )
        })
        .collect();
    sql.push_str(&format!(
        "-- The signature schemes (webhook_dedup_core::signature::Scheme::ALL, in its order): name,\n\
         -- the provider's replay window in seconds, whether the URL is signed, whether webhook_sign\n\
         -- signs it, what its signature covers of the body.\n\
         CREATE FUNCTION webhook_dedup._schemes()\n  RETURNS TABLE (name text, default_tolerance_s bigint, signs_url \
         boolean, signable boolean, coverage text)\nLANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$\nVALUES\n{}\n$$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._schemes() FROM PUBLIC;\n\n",
        rows.join(",\n")
    ));
    // the schemes of one timestamped header (frame.rs, TimestampedHeader)
    let frames: [(Scheme, &TimestampedHeader); 3] =
        [(Scheme::Stripe, &stripe::FRAME), (Scheme::Paddle, &paddle::FRAME), (Scheme::Calendly, &calendly::FRAME)];
    let rows: Vec<String> = frames
        .iter()
        .map(|(scheme, f)| {
            format!(
                "  ({}, {}, {}, {}, {}, {}, {})",
                literal(scheme.name()),
                literal(f.header),
                literal(&f.separator.to_string()),
                literal(f.timestamp_key),
                literal(f.signature_key),
                literal(f.joiner),
                literal(match f.encoding {
                    Encoding::Hex => "hex",
                    Encoding::Base64 => "base64",
                })
            )
        })
        .collect();
    sql.push_str(&format!(
        "-- The schemes whose one header is a key=value list of a signed Unix time and signatures\n\
         -- (webhook_dedup_core::signature::TimestampedHeader: stripe::FRAME, paddle::FRAME, calendly::FRAME).\n\
         CREATE FUNCTION webhook_dedup._timestamped_frames()\n  RETURNS TABLE (scheme text, header text, separator \
         text, timestamp_key text, signature_key text, joiner text, encoding text)\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$\nVALUES\n{}\n$$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._timestamped_frames() FROM PUBLIC;\n\n",
        rows.join(",\n")
    ));
    // the intake rules' limits and the time formats (intake.rs, profile.rs)
    let formats: Vec<String> = TimeFormat::ALL.iter().map(|f| literal(f.name())).collect();
    sql.push_str(&format!(
        "-- The limits of a source's intake columns (webhook_dedup_core::intake: MAX_POINTER_BYTES,\n\
         -- MAX_FINGERPRINT_POINTERS, MAX_ACCEPTED_TYPES, MAX_TYPE_CHARS) and the names of the time\n\
         -- formats (profile.rs, TimeFormat::ALL).\n\
         CREATE FUNCTION webhook_dedup._intake_limits(OUT max_pointer_bytes integer, OUT max_fingerprint_pointers \
         integer,\n  OUT max_accepted_types integer, OUT max_type_chars integer, OUT time_formats text[])\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$ SELECT {MAX_POINTER_BYTES}, {MAX_FINGERPRINT_POINTERS}, \
         {MAX_ACCEPTED_TYPES}, {MAX_TYPE_CHARS}, ARRAY[{}] $$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._intake_limits() FROM PUBLIC;\n\n",
        formats.join(", ")
    ));
    // the HTTP answers (answer.rs, reply): every outcome, mode and scheme
    // (or none), with its status, headers, body and whether a Retry-After
    // goes with it; or the error of an outcome that does not happen in a mode
    let mut rows = Vec::new();
    let schemes: Vec<Option<Scheme>> = std::iter::once(None).chain(Scheme::ALL.iter().copied().map(Some)).collect();
    for kind in Kind::all() {
        for (mode, mode_name) in [(Mode::Claim, "claim"), (Mode::Enqueue, "enqueue")] {
            for scheme in &schemes {
                let profile = scheme.and_then(webhook_dedup_core::profile::profile);
                let name = nullable(scheme.map(|s| s.name().to_string()));
                match (answer::reply(kind, mode, profile, None), answer::reply(kind, mode, profile, Some(1))) {
                    (Ok(reply), Ok(with)) => {
                        let headers: serde_json::Map<String, serde_json::Value> = reply
                            .headers
                            .iter()
                            .map(|(n, v)| (n.to_string(), serde_json::Value::from(v.as_str())))
                            .collect();
                        let (body, text) = match reply.body {
                            answer::Body::Result => ("result", None),
                            answer::Body::Status => ("status", None),
                            answer::Body::Error(t) => ("error", Some(t.to_string())),
                            answer::Body::Handshake => ("handshake", None),
                        };
                        rows.push(format!(
                            "  ({}, {}, {name}, {}, {}::jsonb, {}, {}, {}, NULL)",
                            literal(kind.name()),
                            literal(mode_name),
                            reply.status,
                            literal(&serde_json::Value::Object(headers).to_string()),
                            literal(body),
                            nullable(text),
                            with.headers.len() > reply.headers.len()
                        ));
                    }
                    (Err(e), _) | (_, Err(e)) => rows.push(format!(
                        "  ({}, {}, {name}, NULL, NULL, NULL, NULL, NULL, {})",
                        literal(kind.name()),
                        literal(mode_name),
                        literal(&e.to_string())
                    )),
                }
            }
        }
    }
    let kinds: Vec<&str> = Kind::all().map(Kind::name).collect();
    sql.push_str(&format!(
        "-- The HTTP answers (webhook_dedup_core::answer::reply, for every outcome, mode and scheme or\n\
         -- none): status, headers, what the body is (result, status, error with its text, handshake),\n\
         -- whether a Retry-After goes with it; or the error of an outcome that does not happen in the mode.\n\
         -- The outcomes in Kind::all's order: {}.\n\
         CREATE FUNCTION webhook_dedup._answers()\n  RETURNS TABLE (outcome text, mode text, scheme text, status \
         integer, headers jsonb, body text, error text, retry_after boolean, refused text)\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$\nVALUES\n{}\n$$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._answers() FROM PUBLIC;\n\n\
         -- The outcomes' names in that order (what an unknown outcome's error lists).\n\
         CREATE FUNCTION webhook_dedup._outcome_names() RETURNS text[]\nLANGUAGE sql IMMUTABLE PARALLEL SAFE\n\
         RETURN ARRAY[{}];\nREVOKE ALL ON FUNCTION webhook_dedup._outcome_names() FROM PUBLIC;\n\n",
        kinds.join(", "),
        rows.join(",\n"),
        kinds.iter().map(|k| literal(k)).collect::<Vec<_>>().join(", ")
    ));
    // Scheme::parse: the aliases of standard, then every name, compared
    // with ASCII case folding (eq_ignore_ascii_case)
    let names: Vec<&str> = Scheme::ALL.iter().map(|s| s.name()).collect();
    let hint = format!(
        "Supported schemes: {} ({} are aliases of standard).",
        names.join(", "),
        match Scheme::STANDARD_ALIASES {
            [a, b, c] => format!("{a}, {b} and {c}"),
        }
    );
    let aliases: Vec<String> = Scheme::STANDARD_ALIASES.iter().map(|a| literal(a)).collect();
    sql.push_str(&format!(
        "-- The scheme a name means (Scheme::parse): an alias of standard ({aliases}), else the scheme of\n\
         -- that name, ASCII letters compared without case; 22023 otherwise.\n\
         CREATE FUNCTION webhook_dedup._scheme_parse(name text) RETURNS text\n\
         LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE\nAS $$\nDECLARE\n  folded text := \
         pg_catalog.translate(name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');\n  found text;\nBEGIN\n  \
         IF folded OPERATOR(pg_catalog.=) ANY (ARRAY[{aliases}]) THEN\n    RETURN 'standard';\n  END IF;\n  \
         SELECT s.name INTO found FROM webhook_dedup._schemes() AS s WHERE s.name OPERATOR(pg_catalog.=) folded;\n  \
         IF found IS NULL THEN\n    RAISE EXCEPTION 'unknown webhook signature scheme \"%\"', name\n      \
         USING ERRCODE = 'invalid_parameter_value', HINT = {hint};\n  END IF;\n  RETURN found;\nEND\n$$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._scheme_parse(text) FROM PUBLIC;\n\n",
        aliases = aliases.join(", "),
        hint = literal(&hint),
    ));
    // str::trim's characters: Unicode White_Space
    let spaces: String = (0..=0x10FFFFu32).filter_map(char::from_u32).filter(|c| c.is_whitespace()).collect();
    let escaped: String = spaces.chars().map(|c| format!("\\{:04X}", c as u32)).collect();
    sql.push_str(&format!(
        "-- What Rust's str::trim trims (char::is_whitespace, Unicode White_Space), as a text of those\n\
         -- characters for pg_catalog.btrim.\n\
         CREATE FUNCTION webhook_dedup._whitespace() RETURNS text\nLANGUAGE sql IMMUTABLE PARALLEL SAFE\n\
         RETURN U&'{escaped}';\nREVOKE ALL ON FUNCTION webhook_dedup._whitespace() FROM PUBLIC;\n"
    ));
    sql.push_str(&settings_and_claim_rules());
    (PathBuf::from(FROM), sql)
}

/// The settings a call reads (webhook_dedup_core::settings::ALL) and the
/// claim state machine's constants (webhook_dedup_core::claim): the
/// backoff, the longest lease, the text of an exhausted key's last_error.
fn settings_and_claim_rules() -> String {
    let rows: Vec<String> = settings::ALL
        .iter()
        .map(|s| format!("  ({}, {}, {}, {}, {})", literal(s.name), s.default, s.min, s.max, s.seconds))
        .collect();
    // exhausted_error's text around the attempt (written once, checked)
    let probe = 123_456_789;
    let text = claim::exhausted_error(probe);
    let (before, after) = text.split_once(&probe.to_string()).expect("the attempt is in exhausted_error's text");
    assert!(!after.contains(&probe.to_string()), "the attempt is written once");
    let parked = outbox::parked_error(probe);
    let (parked_before, parked_after) = parked.split_once(&probe.to_string()).expect("the attempt is in parked_error");
    assert!(!parked_after.contains(&probe.to_string()), "the attempt is written once");
    format!(
        "-- The webhook_dedup.* settings a call reads (webhook_dedup_core::settings::ALL): name, default,\n\
         -- bounds, whether the unit is the second (a value may carry a unit, as PostgreSQL's GUC_UNIT_S).\n\
         CREATE FUNCTION webhook_dedup._setting_rules()\n  RETURNS TABLE (name text, default_value integer, \
         min_value integer, max_value integer, seconds boolean)\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$\nVALUES\n{}\n$$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._setting_rules() FROM PUBLIC;\n\n\
         -- The claim state machine's constants (webhook_dedup_core::claim): BASE_BACKOFF_US, MAX_BACKOFF_US,\n\
         -- MAX_LEASE_US (microseconds), and exhausted_error's text before and after the attempt.\n\
         CREATE FUNCTION webhook_dedup._claim_rules(OUT base_backoff_us bigint, OUT max_backoff_us bigint,\n  \
         OUT max_lease_us bigint, OUT exhausted_before text, OUT exhausted_after text)\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$ SELECT {}::bigint, {}::bigint, {}::bigint, {}, {} $$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._claim_rules() FROM PUBLIC;\n\n\
         -- The outbox's text of an intent parked for reconciliation (webhook_dedup_core::outbox::parked_error),\n\
         -- before and after the attempt.\n\
         CREATE FUNCTION webhook_dedup._outbox_rules(OUT parked_before text, OUT parked_after text)\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$ SELECT {}, {} $$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._outbox_rules() FROM PUBLIC;\n",
        rows.join(",\n"),
        claim::BASE_BACKOFF_US,
        claim::MAX_BACKOFF_US,
        claim::MAX_LEASE_US,
        literal(before),
        literal(after),
        literal(parked_before),
        literal(parked_after)
    )
}

/// `text` as a literal, or NULL.
fn nullable(text: Option<String>) -> String {
    text.map_or("NULL".to_string(), |t| literal(&t))
}

/// An interval of `days` days and `micros` microseconds, as pgrx's
/// `Interval::new(0, days, micros)` makes it (the native rows' intervals).
fn interval(days: i64, micros: i64) -> String {
    format!("pg_catalog.make_interval(days => {days}, secs => {}.{:06})", micros / 1_000_000, micros % 1_000_000)
}

/// The body of `provider_profiles()`: one row per built-in profile, the
/// columns as src/api/providers.rs builds them from the same profiles.
fn provider_profiles() -> Body {
    let rows: Vec<String> = PROFILES
        .iter()
        .map(|p| {
            let time =
                p.event_time.map(|(location, format)| format!("{} ({})", location.describe(), format.describe()));
            let horizon = p.retry_horizon_s.map(|s| interval(s / 86_400, (s % 86_400) * 1_000_000));
            let millis = |ms: i64| interval(0, ms * 1_000);
            format!(
                "  ({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {})",
                literal(p.scheme.name()),
                nullable(p.event_id.map(|l| l.describe())),
                nullable(p.event_type.map(|l| l.describe())),
                nullable(time),
                horizon.unwrap_or_else(|| "NULL::interval".into()),
                p.response_deadline_ms.map(millis).unwrap_or_else(|| "NULL::interval".into()),
                millis(default_wait_ms(Some(p))),
                literal(&p.retries_4xx.describe()),
                literal(p.disable_rule),
                nullable(p.stop_signal.map(|s| s.describe())),
                literal(&p.fingerprint.describe()),
                p.replay_guard,
                nullable(p.handshake.map(str::to_string)),
                literal(p.notes),
                literal(p.sources),
            )
        })
        .collect();
    generated(format!("VALUES\n{}\n", rows.join(",\n")))
}

/// Every generated body, by function name.
pub fn bodies() -> BTreeMap<String, Body> {
    BTreeMap::from([
        ("downstream_key_limits_rows".to_string(), downstream_key_limits_rows()),
        ("provider_profiles".to_string(), provider_profiles()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_doubles_its_quotes() {
        assert_eq!(literal("it's"), "'it''s'");
    }

    #[test]
    fn the_helpers_list_every_scheme_and_the_whitespace() {
        let (_, sql) = helpers();
        // a row per scheme
        let schemes = &sql[sql.find("_schemes()").unwrap()..];
        let schemes = &schemes[..schemes.find("$$;").unwrap()];
        assert_eq!(schemes.matches("\n  ('").count(), Scheme::ALL.len());
        // an answer per outcome, mode and scheme or none
        let answers = &sql[sql.find("_answers()").unwrap()..];
        let answers = &answers[..answers.find("$$;").unwrap()];
        assert_eq!(answers.matches("\n  ('").count(), Kind::all().count() * 2 * (Scheme::ALL.len() + 1));
        assert!(answers.contains("  ('in_progress', 'claim', NULL, 503, '{\"Content-Type\":\"application/json\"}'::jsonb, 'status', NULL, true, NULL)"), "{answers}");
        assert!(sql.contains("  ('github', NULL, false, true, 'bytes')"));
        assert!(sql.contains("  ('stripe', 300, false, true, 'bytes')"));
        assert!(sql.contains("ARRAY['svix', 'clerk', 'resend']"));
        assert!(sql.contains("(svix, clerk and resend are aliases of standard)."));
        assert!(sql.contains("RETURN U&'\\0009\\000A"), "{sql}");
        assert!(sql.contains("  ('stripe', 'stripe-signature', ',', 't', 'v1', '.', 'hex')"), "{sql}");
        assert!(sql.contains("  ('paddle', 'paddle-signature', ';', 'ts', 'h1', ':', 'hex')"), "{sql}");
        assert!(
            sql.contains("SELECT 1024, 64, 1000, 255, ARRAY['unix_seconds', 'unix_milliseconds', 'rfc3339']"),
            "{sql}"
        );
        assert!(sql.contains("\\3000'"));
    }

    #[test]
    fn every_preset_is_a_row() {
        let b = downstream_key_limits_rows();
        assert_eq!(b.text.matches("\n  (").count(), DOWNSTREAMS.len());
        assert!(b.text.contains("('stripe', 'header Idempotency-Key', 255, "));
        assert!(b.text.contains("('square_payments', 'body field idempotency_key (CreatePayment)', 45, "));
    }
}
