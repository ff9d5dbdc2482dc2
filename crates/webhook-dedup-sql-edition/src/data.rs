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
use webhook_dedup_core::metrics::{self, Counter};
use webhook_dedup_core::operation_key::DOWNSTREAMS;
use webhook_dedup_core::profile::{
    default_wait_ms, profile, FingerprintRule, Location, Rules, TimeFormat, CANONICAL_TAG, PROFILES, SIGNED_TAG,
};
use webhook_dedup_core::signature::{
    self, calendly, github, intercom, paddle, shopify, square, stripe, twitter, typeform, Coverage, Encoding, HmacSpec,
    OtherTag, Scheme, SignRequest, Signed, TaggedFrame, TimestampedHeader,
};
use webhook_dedup_core::{archive, calendar, claim, outbox, settings};

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
    // the schemes of one tagged header, no time (frame.rs, TaggedFrame)
    let tagged: [(Scheme, &TaggedFrame); 6] = [
        (Scheme::Github, &github::FRAME),
        (Scheme::Shopify, &shopify::FRAME),
        (Scheme::Typeform, &typeform::FRAME),
        (Scheme::Twitter, &twitter::FRAME),
        (Scheme::Intercom, &intercom::FRAME),
        (Scheme::Square, &square::FRAME),
    ];
    let rows: Vec<String> = tagged
        .iter()
        .map(|(scheme, f)| {
            format!(
                "  ({}, {}, {}, {}, {}, {})",
                literal(scheme.name()),
                literal(f.header),
                literal(f.tag),
                literal(match f.other {
                    OtherTag::Named => "tag",
                    OtherTag::Never => "never",
                }),
                literal(match f.encoding {
                    Encoding::Hex => "hex",
                    Encoding::Base64 => "base64",
                }),
                literal(f.algorithm.name())
            )
        })
        .collect();
    sql.push_str(&format!(
        "-- The schemes of one tagged header, no time (webhook_dedup_core::signature::TaggedFrame: each\n\
         -- scheme module's FRAME): the header, the tag before the MAC, which values without it name another\n\
         -- version ('tag': one holding '=', 'never'; the generic scheme's 'always' is its own), how the MAC is\n\
         -- written, its algorithm (the MAC's length follows: 20, 32 or 64 bytes).\n\
         CREATE FUNCTION webhook_dedup._tagged_frames()\n  RETURNS TABLE (scheme text, header text, tag text, other text, \
         encoding text, algorithm text)\nLANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$\nVALUES\n{}\n$$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._tagged_frames() FROM PUBLIC;\n\n",
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
         LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE\nAS $$ BEGIN SELECT {MAX_POINTER_BYTES}, {MAX_FINGERPRINT_POINTERS}, \
         {MAX_ACCEPTED_TYPES}, {MAX_TYPE_CHARS}, ARRAY[{}]\n  INTO max_pointer_bytes, max_fingerprint_pointers, \
         max_accepted_types, max_type_chars, time_formats; END $$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._intake_limits() FROM PUBLIC;\n\n",
        formats.join(", ")
    ));
    // the HTTP answers (answer.rs, reply): every outcome, mode and scheme
    // (or none), with its status, headers, body and whether a Retry-After
    // goes with it; or the error of an outcome that does not happen in a mode
    let schemes: Vec<Option<Scheme>> = std::iter::once(None).chain(Scheme::ALL.iter().copied().map(Some)).collect();
    let mut answers = serde_json::Map::new();
    for kind in Kind::all() {
        for (mode, mode_name) in [(Mode::Claim, "claim"), (Mode::Enqueue, "enqueue")] {
            for scheme in &schemes {
                let profile = scheme.and_then(webhook_dedup_core::profile::profile);
                let key = format!("{}/{mode_name}/{}", kind.name(), scheme.map_or("", |s| s.name()));
                let entry =
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
                            serde_json::json!({
                                "status": reply.status,
                                "headers": headers,
                                "body": body,
                                "error": text,
                                "retry_after": with.headers.len() > reply.headers.len(),
                            })
                        }
                        (Err(e), _) | (_, Err(e)) => serde_json::json!({ "refused": e.to_string() }),
                    };
                answers.insert(key, entry);
            }
        }
    }
    let kinds: Vec<&str> = Kind::all().map(Kind::name).collect();
    sql.push_str(&format!(
        "-- The HTTP answers (webhook_dedup_core::answer::reply, for every outcome, mode and scheme or\n\
         -- none), one JSON object keyed '<outcome>/<mode>/<scheme or nothing>': status, headers, what the body\n\
         -- is (result, status, error with its text, handshake), whether a Retry-After goes with it; or, as\n\
         -- refused, the error of an outcome that does not happen in the mode. One constant, which the\n\
         -- planner folds into the plan of the statement that reads it (a key looked up, not rows scanned).\n\
         -- The outcomes in Kind::all's order: {}.\n\
         CREATE FUNCTION webhook_dedup._answers() RETURNS jsonb\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nRETURN {}::jsonb;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._answers() FROM PUBLIC;\n\n\
         -- The outcomes' names in that order (what an unknown outcome's error lists).\n\
         CREATE FUNCTION webhook_dedup._outcome_names() RETURNS text[]\nLANGUAGE sql IMMUTABLE PARALLEL SAFE\n\
         RETURN ARRAY[{}];\nREVOKE ALL ON FUNCTION webhook_dedup._outcome_names() FROM PUBLIC;\n\n",
        kinds.join(", "),
        literal(&serde_json::Value::Object(answers).to_string()),
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
    sql.push_str(&sign_headers());
    sql.push_str(&intake_rules());
    (PathBuf::from(FROM), sql)
}

/// A location as the SQL edition reads it: the places to try in order,
/// each `header:<lower-case name>` or a JSON pointer
/// ([`Location::Headers`]: the first header sent decides).
fn places(location: Option<Location<'_>>) -> String {
    let list: Vec<String> = match location {
        None => return "NULL::text[]".into(),
        Some(Location::Headers(names)) => names.iter().map(|n| literal(&format!("header:{n}"))).collect(),
        Some(Location::Header(name)) => vec![literal(&format!("header:{name}"))],
        Some(Location::Body(pointer)) => vec![literal(pointer)],
    };
    format!("ARRAY[{}]", list.join(", "))
}

/// `webhook_receive`'s reading of each scheme (profile.rs, `Rules::of`:
/// the profile's, or [`Rules::NONE`] for a scheme without one), the default
/// wait (`default_wait_ms`) and the headers the scheme signs an id in
/// (`Scheme::signed_id_headers`, for `SourceIntake::apply`).
fn intake_rules() -> String {
    let rows: Vec<String> = Scheme::ALL
        .iter()
        .map(|&scheme| {
            let rules = Rules::of(scheme);
            let (fingerprint, pointers) = match rules.fingerprint {
                FingerprintRule::Body => ("body", "NULL::text[]".to_string()),
                FingerprintRule::SignedText => ("signed_text", "NULL::text[]".to_string()),
                FingerprintRule::Pointers(p) => {
                    ("pointers", format!("ARRAY[{}]", p.iter().map(|x| literal(x)).collect::<Vec<_>>().join(", ")))
                }
                FingerprintRule::Configured(_) => unreachable!("a profile's rule is never configured"),
            };
            let signed: Vec<String> = scheme.signed_id_headers().iter().map(|h| literal(h)).collect();
            format!(
                "  ({}, {}, {}, {}, {}, {}, {pointers}, {}, {}, {}, ARRAY[{}]::text[])",
                literal(scheme.name()),
                places(rules.event_id),
                places(rules.event_type),
                places(rules.event_time.map(|(l, _)| l)),
                nullable(rules.event_time.map(|(_, f)| f.name().to_string())),
                literal(fingerprint),
                rules.replay_guard,
                rules.body_key,
                default_wait_ms(profile(scheme)) * 1_000,
                signed.join(", "),
            )
        })
        .collect();
    format!(
        "-- How webhook_receive reads each scheme's deliveries (webhook_dedup_core::profile::Rules::of: the\n\
         -- profile's rules, none for a scheme without a profile): where the event id, type and time are (places\n\
         -- tried in order, 'header:<name>' or a JSON pointer), the time's format, the fingerprint rule (body,\n\
         -- pointers, signed_text) and its pointers, the replay guard, whether deliveries are keyed on the body;\n\
         -- the default wait for a holder in microseconds (default_wait_ms), and the headers whose id the\n\
         -- scheme signs (Scheme::signed_id_headers).\n\
         CREATE FUNCTION webhook_dedup._intake_rules()\n  RETURNS TABLE (scheme text, event_id text[], event_type \
         text[], event_time text[], time_format text,\n    fingerprint text, pointers text[], replay_guard boolean, \
         body_key boolean, default_wait_us bigint, signed_id_headers text[])\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$\nVALUES\n{}\n$$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._intake_rules() FROM PUBLIC;\n\n\
         -- The first byte of a canonical-JSON fingerprint and of a signed text's (profile.rs, CANONICAL_TAG\n\
         -- and SIGNED_TAG): with the SHA-256 after it, 33 bytes that no raw body's 32 can be.\n\
         CREATE FUNCTION webhook_dedup._fingerprint_tags(OUT canonical bytea, OUT signed bytea)\n\
         LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE\nAS $$ BEGIN SELECT '\\x{CANONICAL_TAG:02x}'::bytea, '\\x{SIGNED_TAG:02x}'::bytea\n\
         INTO canonical, signed; END $$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._fingerprint_tags() FROM PUBLIC;\n\n",
        rows.join(",\n")
    )
}

/// The headers each signable scheme's signer sends, by position, as the
/// core's signers spell them (learnt by signing an empty body: the names
/// do not depend on it), for webhook_sign; mailgun signs none (a member
/// of the body).
fn sign_headers() -> String {
    let mut rows = Vec::new();
    for scheme in Scheme::ALL.iter().copied().filter(|s| s.signable()) {
        let hmac = (scheme == Scheme::Hmac).then(|| HmacSpec {
            header: "X-Signature".into(),
            prefix: String::new(),
            algorithm: signature::Algorithm::Sha256,
            encoding: Encoding::Hex,
        });
        let request = SignRequest {
            unix_s: 1,
            unix_us: 1_000_000,
            msg_id: Some("m"),
            url: scheme.signs_url().then_some("https://example.com/"),
            method: Some("POST"),
            hmac,
        };
        match signature::sign(scheme, b"", b"key", &request).expect("a signable scheme signs") {
            Signed::Headers(headers) => {
                for (i, (name, _)) in headers.iter().enumerate() {
                    // the generic scheme's header is the caller's
                    let name = if scheme == Scheme::Hmac { "NULL".to_string() } else { literal(name) };
                    rows.push(format!("  ({}, {}, {name})", literal(scheme.name()), i + 1));
                }
            }
            Signed::Body(_) => rows.push(format!("  ({}, 0, NULL)", literal(scheme.name()))),
        }
    }
    format!(
        "-- The headers each signable scheme's signer sends (webhook_dedup_core::signature::sign), by position,\n\
         -- as the provider spells them; position 0: the scheme signs a member of the body (mailgun), NULL: the\n\
         -- caller's header (hmac).\n\
         CREATE FUNCTION webhook_dedup._sign_headers() RETURNS TABLE (scheme text, n integer, name text)\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$\nVALUES\n{}\n$$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._sign_headers() FROM PUBLIC;\n\n",
        rows.join(",\n")
    )
}

/// The settings a call reads (webhook_dedup_core::settings::ALL) and the
/// claim state machine's constants (webhook_dedup_core::claim): the
/// backoff, the longest lease, the text of an exhausted key's last_error.
fn settings_and_claim_rules() -> String {
    let rows: Vec<String> = settings::ALL
        .iter()
        .map(|s| format!("  ({}, {}, {}, {}, {})", literal(s.name), s.default, s.min, s.max, s.seconds))
        .collect();
    let defaults: Vec<String> = settings::ALL
        .iter()
        .map(|s| format!("WHEN name OPERATOR(pg_catalog.=) {} THEN {}", literal(s.name), s.default))
        .collect();
    // exhausted_error's text around the attempt (written once, checked)
    let probe = 123_456_789;
    let text = claim::exhausted_error(probe);
    let (before, after) = text.split_once(&probe.to_string()).expect("the attempt is in exhausted_error's text");
    assert!(!after.contains(&probe.to_string()), "the attempt is written once");
    let parked = outbox::parked_error(probe);
    let (parked_before, parked_after) = parked.split_once(&probe.to_string()).expect("the attempt is in parked_error");
    assert!(!parked_after.contains(&probe.to_string()), "the attempt is written once");
    // the sweeps' texts: the attempt and the expiry (calendar::utc_literal,
    // written by _utc_literal) around fixed text
    let at = 1_234_567_890_123_456;
    let swept = claim::swept_error(probe, at);
    let (swept_before, rest) = swept.split_once(&probe.to_string()).expect("the attempt is in swept_error");
    let (swept_middle, swept_after) =
        rest.split_once(&calendar::utc_literal(at)).expect("the expiry is in swept_error");
    let lapsed = outbox::lapsed_error(probe);
    let (lapsed_before, lapsed_after) = lapsed.split_once(&probe.to_string()).expect("the attempt is in lapsed_error");
    format!(
        "-- The webhook_dedup.* settings a call reads (webhook_dedup_core::settings::ALL): name, default,\n\
         -- bounds, whether the unit is the second (a value may carry a unit, as PostgreSQL's GUC_UNIT_S).\n\
         CREATE FUNCTION webhook_dedup._setting_rules()\n  RETURNS TABLE (name text, default_value integer, \
         min_value integer, max_value integer, seconds boolean)\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nAS $$\nVALUES\n{}\n$$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._setting_rules() FROM PUBLIC;\n\n\
         -- A setting's default by its name (NULL for no such setting): an SQL expression the planner\n\
         -- inlines into _setting's, so that an unset setting is read without a query.\n\
         CREATE FUNCTION webhook_dedup._setting_default(name text) RETURNS integer\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nRETURN CASE {} END;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._setting_default(text) FROM PUBLIC;\n\n\
         -- The claim state machine's constants (webhook_dedup_core::claim): BASE_BACKOFF_US, MAX_BACKOFF_US,\n\
         -- MAX_LEASE_US (microseconds), and exhausted_error's text before and after the attempt. (The\n\
         -- rules' functions assign their values: an expression each, no query.)\n\
         CREATE FUNCTION webhook_dedup._claim_rules(OUT base_backoff_us bigint, OUT max_backoff_us bigint,\n  \
         OUT max_lease_us bigint, OUT exhausted_before text, OUT exhausted_after text)\n\
         LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE\nAS $$ BEGIN base_backoff_us := {}; max_backoff_us := {}; max_lease_us := {};\n\
         exhausted_before := {}; exhausted_after := {}; END $$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._claim_rules() FROM PUBLIC;\n\n\
         -- The outbox's text of an intent parked for reconciliation (webhook_dedup_core::outbox::parked_error),\n\
         -- before and after the attempt.\n\
         CREATE FUNCTION webhook_dedup._outbox_rules(OUT parked_before text, OUT parked_after text)\n\
         LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE\nAS $$ BEGIN parked_before := {}; parked_after := {}; END $$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._outbox_rules() FROM PUBLIC;\n\n\
         -- The maintenance sweeps' texts (claim::swept_error: before the attempt, between it and the\n\
         -- expiry, after; outbox::lapsed_error: before and after the attempt).\n\
         CREATE FUNCTION webhook_dedup._sweep_texts(OUT swept_before text, OUT swept_middle text,\n  \
         OUT swept_after text, OUT lapsed_before text, OUT lapsed_after text)\n\
         LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE\nAS $$ BEGIN swept_before := {}; swept_middle := {}; swept_after := {};\n\
         lapsed_before := {}; lapsed_after := {}; END $$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._sweep_texts() FROM PUBLIC;\n\n\
         -- The counters (webhook_dedup_core::metrics::Counter::ALL, in its order: the columns of\n\
         -- webhook_dedup.claim_counts), the labels past EVENT_TYPE_CHARS or SOURCE_EVENT_TYPES event types\n\
         -- of a source and hour are counted under (OTHER_EVENT_TYPE, both bounds), and the payload\n\
         -- archive's days made ahead (archive::AHEAD_DAYS).\n\
         CREATE FUNCTION webhook_dedup._metrics_rules(OUT counters text[], OUT other_event_type text,\n  \
         OUT event_type_chars integer, OUT source_event_types integer, OUT archive_ahead_days integer)\n\
         LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE\nAS $$ BEGIN counters := ARRAY[{}]; other_event_type := {}; event_type_chars := {};\n\
         source_event_types := {}; archive_ahead_days := {}; END $$;\n\
         REVOKE ALL ON FUNCTION webhook_dedup._metrics_rules() FROM PUBLIC;\n",
        rows.join(",\n"),
        defaults.join(" "),
        claim::BASE_BACKOFF_US,
        claim::MAX_BACKOFF_US,
        claim::MAX_LEASE_US,
        literal(before),
        literal(after),
        literal(parked_before),
        literal(parked_after),
        literal(swept_before),
        literal(swept_middle),
        literal(swept_after),
        literal(lapsed_before),
        literal(lapsed_after),
        Counter::ALL.iter().map(|c| literal(c.column())).collect::<Vec<_>>().join(", "),
        literal(metrics::OTHER_EVENT_TYPE),
        metrics::EVENT_TYPE_CHARS,
        metrics::SOURCE_EVENT_TYPES,
        archive::AHEAD_DAYS
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
        let answers = &sql[sql.find("_answers() RETURNS jsonb").unwrap()..];
        let answers = &answers[answers.find("RETURN '").unwrap() + "RETURN '".len()..];
        let answers: serde_json::Value = serde_json::from_str(&answers[..answers.find("'::jsonb;").unwrap()]).unwrap();
        assert_eq!(answers.as_object().unwrap().len(), Kind::all().count() * 2 * (Scheme::ALL.len() + 1));
        assert_eq!(
            answers["in_progress/claim/"],
            serde_json::json!({"status": 503, "headers": {"Content-Type": "application/json"}, "body": "status",
                               "error": null, "retry_after": true})
        );
        assert!(answers["ignored/enqueue/github"]["status"].is_number());
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
