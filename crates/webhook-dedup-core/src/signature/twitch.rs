//! Twitch EventSub (webhook transport):
//! `Twitch-Eventsub-Message-Signature: sha256=<hex>` where the hex is
//! HMAC-SHA256, under the subscription's secret (UTF-8, the 10 to 100
//! ASCII characters given when subscribing), of
//! `{Twitch-Eventsub-Message-Id}{Twitch-Eventsub-Message-Timestamp}{raw body}`
//! with no separators; the timestamp is RFC 3339 with nanoseconds
//! (`2019-11-16T10:11:12.634234626Z`) and is signed as sent.
//!
//! Source: Twitch Developers, "Handling webhook events", sections
//! "Verifying the event message" and "List of request headers",
//! <https://dev.twitch.tv/docs/eventsub/handling-webhook-events/>, and
//! "EventSub", sections "Handling duplicate events" and "Guarding against
//! replay attacks", <https://dev.twitch.tv/docs/eventsub/>: a resent message
//! keeps its message id; "make sure the value in the timestamp field isn't
//! older than 10 minutes". The window is 600 s, symmetric and inclusive
//! like every window here (Twitch's own rule only checks age), compared to
//! the nanosecond. `sha256` is the only algorithm Twitch uses; another
//! `<algorithm>=` is `unsupported_version`.
//!
//! Every message type is signed alike: `notification`,
//! `webhook_callback_verification` (whose `challenge` the receiver answers
//! as the plain-text body of a 200) and `revocation`; the type is in
//! `Twitch-Eventsub-Message-Type`.

use super::scheme::{headers, mac_keys, needs_msg_id, Check, SchemeRules};
use super::{ct, no_candidates, single, tagged, Delivery, Reason, Verdict};
use super::{Key, SignRequest, Signed};
use crate::error::Error;

/// The signature header, lower-cased.
pub const HEADER: &str = "twitch-eventsub-message-signature";
/// The message id header, lower-cased (signed; the same on a resend).
pub const ID_HEADER: &str = "twitch-eventsub-message-id";
/// The signed timestamp header (RFC 3339), lower-cased.
pub const TIMESTAMP_HEADER: &str = "twitch-eventsub-message-timestamp";
/// Twitch's replay rule ("older than 10 minutes"), seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 600;
const TAG: &str = "sha256=";

/// Parse an RFC 3339 timestamp into Unix nanoseconds; `None` when it is not
/// one (a Unix number, a date without a time or an offset, ...).
pub fn parse_timestamp(text: &str) -> Option<i128> {
    let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos())
}

/// A Unix time in microseconds as Twitch writes its timestamps: RFC 3339 in
/// UTC with nine fractional digits.
pub fn timestamp(unix_us: i64) -> String {
    let secs = unix_us.div_euclid(1_000_000);
    let micros = unix_us.rem_euclid(1_000_000);
    let (y, m, d) = crate::calendar::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z", s / 3_600, (s % 3_600) / 60, s % 60, micros * 1_000)
}

fn mac(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> [u8; 32] {
    ct::hmac_sha256(key, &[id.as_bytes(), timestamp.as_bytes(), body])
}

/// Verify a Twitch EventSub message against every key, within
/// `tolerance_us` of `now_us` (microseconds; Unix time).
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    let check = || -> Result<Verdict, Verdict> {
        let id = single(delivery.headers, ID_HEADER)?.trim();
        let ts_text = single(delivery.headers, TIMESTAMP_HEADER)?.trim();
        let ts_ns = parse_timestamp(ts_text).ok_or(Verdict::rejected(Reason::MalformedHeader))?;
        let signed_at = Some(super::unix_seconds_of_ns(ts_ns));
        let value = super::signature_header(delivery.headers, HEADER, signed_at)?;
        let (candidates, other_tag) = tagged(&[value], TAG, |hex| ct::decode_hex(hex, 32));
        if candidates.is_empty() {
            return Err(no_candidates(other_tag, signed_at));
        }
        let matched = ct::first_match(keys, &candidates, |key| mac(key, id, ts_text, delivery.body).to_vec());
        Ok(Verdict::timestamped_ns(matched, ts_ns, now_us, tolerance_us))
    };
    check().unwrap_or_else(|rejected| rejected)
}

/// The headers Twitch would send for `body` as message `id`, timestamped
/// `timestamp` (RFC 3339, as [`timestamp`] writes it), under `secret`.
pub fn sign(body: &[u8], secret: &[u8], id: &str, timestamp: &str) -> Vec<(&'static str, String)> {
    vec![
        ("Twitch-Eventsub-Message-Id", id.to_string()),
        ("Twitch-Eventsub-Message-Timestamp", timestamp.to_string()),
        ("Twitch-Eventsub-Message-Signature", format!("{TAG}{}", hex::encode(mac(secret, id, timestamp, body)))),
    ]
}

/// Scheme `twitch`'s registration ([`super::scheme`]).
pub struct Twitch;

impl SchemeRules for Twitch {
    const NAME: &'static str = "twitch";
    const DEFAULT_TOLERANCE_S: Option<i64> = Some(DEFAULT_TOLERANCE_S);
    const SIGNED_ID_HEADERS: &'static [&'static str] = &["twitch-eventsub-message-id"];

    fn verify(delivery: Delivery<'_>, keys: &[Key], check: &Check<'_>) -> Result<Verdict, Error> {
        Ok(verify(delivery, &mac_keys(keys), check.tolerance_us, check.now_us))
    }

    fn sign(body: &[u8], key: &[u8], request: &SignRequest<'_>) -> Result<Signed, Error> {
        headers(sign(body, key, needs_msg_id(request)?, &timestamp(request.unix_us)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    /// Our vector (Twitch publishes none; the message id and timestamp are
    /// those of its docs' examples):
    /// `printf '%s' 'befa7b53-d79d-478f-86b9-120f112b044e2019-11-16T10:11:12.634234626Z{"subscription":...}'
    ///  | openssl dgst -sha256 -hmac s3cRe7s3cRe7`.
    const SECRET: &[u8] = b"s3cRe7s3cRe7";
    const ID: &str = "befa7b53-d79d-478f-86b9-120f112b044e";
    const TS: &str = "2019-11-16T10:11:12.634234626Z";
    const BODY: &[u8] = br#"{"subscription":{"type":"channel.follow","version":"2"},"event":{"user_id":"1234","broadcaster_user_id":"1337"}}"#;
    const SIG: &str = "sha256=041636d2eb89a63f336ea07fb56f53dbaa07b6a3deb4a5188ccfad5272e153a8";
    /// 2019-11-16T10:11:12Z in Unix seconds.
    const T: i64 = 1_573_899_072;
    const NS: i128 = 634_234_626;

    fn check(body: &[u8], headers: &[(&str, &str)], keys: &[&[u8]], now_us: i64) -> Verdict {
        let headers = Headers::from_pairs(headers.iter().copied());
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        let d = Delivery { body, headers: &headers, url: None, method: None };
        verify(d, &keys, DEFAULT_TOLERANCE_S * 1_000_000, now_us)
    }

    fn message(id: &str, ts: &str, sig: &str) -> [(&'static str, String); 3] {
        [
            ("Twitch-Eventsub-Message-Id", id.to_string()),
            ("Twitch-Eventsub-Message-Timestamp", ts.to_string()),
            ("Twitch-Eventsub-Message-Signature", sig.to_string()),
        ]
    }

    fn pairs<'a>(h: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
        h.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }

    #[test]
    fn own_vector_signs_and_verifies() {
        assert_eq!(sign(BODY, SECRET, ID, TS), message(ID, TS, SIG).to_vec());
        let v = check(BODY, &pairs(&message(ID, TS, SIG)), &[b"old", SECRET], T * 1_000_000 + 10_000_000);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(1), Some(T)));
        let upper = SIG.to_uppercase().replacen("SHA256=", "sha256=", 1);
        assert!(check(BODY, &pairs(&message(ID, TS, &upper)), &[SECRET], T * 1_000_000).valid(), "hex any case");
    }

    #[test]
    fn timestamps_round_trip() {
        assert_eq!(parse_timestamp(TS), Some(i128::from(T) * 1_000_000_000 + NS));
        assert_eq!(timestamp(T * 1_000_000 + 634_234), "2019-11-16T10:11:12.634234000Z");
        assert_eq!(
            parse_timestamp(&timestamp(T * 1_000_000 + 634_234)),
            Some(i128::from(T) * 1_000_000_000 + 634_234_000)
        );
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(timestamp(-1), "1969-12-31T23:59:59.999999000Z");
        assert_eq!(parse_timestamp("2019-11-16T12:11:12.5+02:00"), Some(i128::from(T) * 1_000_000_000 + 500_000_000));
        for bad in ["1573899072", "2019-11-16", "2019-11-16T10:11:12", "2019-11-16T10:11Z", "", "yesterday"] {
            assert_eq!(parse_timestamp(bad), None, "{bad:?}");
        }
    }

    /// 600 s either way, to the nanosecond of the signed time.
    #[test]
    fn window_is_symmetric_inclusive_and_exact() {
        let h = message(ID, TS, SIG);
        let signed_us = T * 1_000_000 + 634_234; // 626 ns before the signed time
        let at = |now_us| check(BODY, &pairs(&h), &[SECRET], now_us).reason;
        assert_eq!(at(signed_us + 600_000_000), Reason::Ok);
        assert_eq!(at(signed_us + 600_000_001), Reason::TimestampTooOld, "374 ns past the window");
        assert_eq!(at(signed_us + 1 - 600_000_000), Reason::Ok);
        assert_eq!(at(signed_us - 600_000_000), Reason::TimestampTooNew, "626 ns before the window");
    }

    #[test]
    fn rejections_have_reasons() {
        let now = T * 1_000_000;
        let reason = |body: &[u8], h: &[(&'static str, String)]| check(body, &pairs(h), &[SECRET], now).reason;
        let h = message(ID, TS, SIG);
        assert_eq!(reason(b"{}", &h), Reason::NoMatchingSignature);
        assert_eq!(check(BODY, &pairs(&h), &[b"wrong"], now).reason, Reason::NoMatchingSignature);
        // the id and the timestamp are signed
        assert_eq!(reason(BODY, &message("another-id", TS, SIG)), Reason::NoMatchingSignature);
        assert_eq!(reason(BODY, &message(ID, "2019-11-16T10:11:12.634234627Z", SIG)), Reason::NoMatchingSignature);
        // the same instant written otherwise is other signed bytes
        assert_eq!(reason(BODY, &message(ID, "2019-11-16T10:11:12.634234626+00:00", SIG)), Reason::NoMatchingSignature);
        assert_eq!(reason(BODY, &h[1..]), Reason::MissingHeader, "no id");
        assert_eq!(reason(BODY, &[h[0].clone(), h[2].clone()]), Reason::MissingHeader, "no timestamp");
        assert_eq!(reason(BODY, &h[..2]), Reason::MissingHeader, "no signature");
        assert_eq!(reason(BODY, &message(ID, "1573899072", SIG)), Reason::MalformedHeader, "Unix seconds");
        assert_eq!(reason(BODY, &message(ID, TS, "sha512=00")), Reason::UnsupportedVersion);
        assert_eq!(reason(BODY, &message(ID, TS, "sha256=zz")), Reason::MalformedHeader);
        assert_eq!(reason(BODY, &message(ID, TS, &SIG[..40])), Reason::MalformedHeader);
        let mut twice = h.to_vec();
        twice.push(("twitch-eventsub-message-id", ID.to_string()));
        assert_eq!(reason(BODY, &twice), Reason::MalformedHeader, "the id twice");
    }
}
