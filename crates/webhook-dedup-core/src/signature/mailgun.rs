//! Mailgun webhooks: the signature is in the JSON body,
//! `{"signature": {"timestamp": "<unix>", "token": "<50 characters>",
//! "signature": "<hex>"}, "event-data": {...}}`, where the hex is
//! HMAC-SHA256 of `"{timestamp}{token}"` (no separator) under the HTTP
//! webhook signing key (UTF-8). For a subaccount's domain Mailgun adds
//! `"parent-signature"`, the same MAC under the primary account's key:
//! either signature may match any configured key. Hex decodes
//! case-insensitively; the timestamp is a string of digits (or a JSON
//! integer) whose text is what is signed.
//!
//! Source: Mailgun docs, "Securing Webhooks",
//! <https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks>.
//!
//! **The body is not signed**: the MAC covers the timestamp and the token
//! only, so a signature block proves that Mailgun sent *a* request at that
//! time, not what its `event-data` says. Whoever sees one signed request
//! (a log, a proxy) can attach its signature block to another body until
//! the window closes. Mailgun advises caching each token and refusing it
//! the second time, and checking the timestamp; this verifier does the
//! latter, and `webhook_receive` the former: it binds each token to the
//! bytes it first arrived with and refuses it on other content
//! (`crate::store::signature_tokens`, reject_reason `token_reused`).
//!
//! Replay window: Mailgun says to check that the timestamp "is not too far
//! from the current time" without a number, and warns that its own delays
//! can make the check fail if it is "too aggressive". Since the window is
//! the only thing here that bounds the reuse of a captured signature block,
//! the default is the 300 s of Standard Webhooks and Slack (Symfony's
//! Mailgun webhook parser chose the same); pass a wider `tolerance` if your
//! deliveries arrive later.
//!
//! A duplicated member of the `signature` object is read as serde_json
//! reads it (the last one counts); each must still carry a valid MAC.

use super::scheme::{mac_keys, Check, SchemeRules};
use super::Coverage;
use super::{ct, no_candidates, parse_unix_seconds, Delivery, Reason, Verdict};
use super::{Key, SignRequest, Signed};
use crate::error::Error;
use serde_json::{json, Value};

/// The body member holding the signature block.
pub const SIGNATURE_MEMBER: &str = "signature";
/// The RFC 6901 pointer to the token (what to cache against replays).
pub const TOKEN_POINTER: &str = "/signature/token";
/// None documented: 300 s (see the module doc).
pub const DEFAULT_TOLERANCE_S: i64 = 300;

/// Verify a Mailgun webhook against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    check(delivery, keys, tolerance_us, now_us).unwrap_or_else(|rejected| rejected)
}

fn check(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Result<Verdict, Verdict> {
    let malformed = Verdict::rejected(Reason::MalformedHeader);
    let body: Value = serde_json::from_slice(delivery.body).map_err(|_| malformed)?;
    let block = match body.as_object().ok_or(malformed)?.get(SIGNATURE_MEMBER) {
        None => return Err(Verdict::rejected(Reason::MissingHeader)),
        Some(block) => block.as_object().ok_or(malformed)?,
    };
    let timestamp_text = match block.get("timestamp") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(n)) if n.is_u64() => n.to_string(),
        Some(_) => return Err(malformed),
        None => return Err(Verdict::rejected(Reason::MissingHeader)),
    };
    let timestamp = parse_unix_seconds(&timestamp_text).ok_or(malformed)?;
    let with_time = |v: Verdict| Verdict { signed_at: Some(timestamp), ..v };
    let token = match block.get("token") {
        Some(Value::String(token)) if !token.is_empty() => token,
        Some(_) => return Err(with_time(malformed)),
        None => return Err(with_time(Verdict::rejected(Reason::MissingHeader))),
    };
    let presented: Vec<&Value> = ["signature", "parent-signature"].iter().filter_map(|m| block.get(*m)).collect();
    if presented.is_empty() {
        return Err(with_time(Verdict::rejected(Reason::MissingHeader)));
    }
    let candidates: Vec<Vec<u8>> =
        presented.iter().filter_map(|v| v.as_str()).filter_map(|hex| ct::decode_hex(hex, 32)).collect();
    if candidates.is_empty() {
        return Err(no_candidates(false, Some(timestamp)));
    }
    let matched = ct::first_match(keys, &candidates, |key| mac(key, &timestamp_text, token).to_vec());
    Ok(Verdict::timestamped(matched, timestamp, now_us, tolerance_us))
}

/// The signed token of a Mailgun body (`signature.token`), what is bound
/// to the content it first arrived with (`crate::signature::signed_token`);
/// `None` when the body has none (it would not have verified).
pub fn token(body: &[u8]) -> Option<String> {
    let body: Value = serde_json::from_slice(body).ok()?;
    match body.get(SIGNATURE_MEMBER)?.get("token")? {
        Value::String(token) if !token.is_empty() => Some(token.clone()),
        _ => None,
    }
}

/// HMAC-SHA256 of `{timestamp}{token}`.
fn mac(key: &[u8], timestamp: &str, token: &str) -> [u8; 32] {
    ct::hmac_sha256(key, &[timestamp.as_bytes(), token.as_bytes()])
}

/// The `signature` member Mailgun would put in the body for `token` at
/// `t` under `key`, as a JSON object `{"signature": {...}}` to merge into
/// the event's body (the body itself is not signed).
pub fn sign(key: &[u8], token: &str, t: i64) -> Value {
    let timestamp = t.to_string();
    let signature = hex::encode(mac(key, &timestamp, token));
    json!({ SIGNATURE_MEMBER: { "timestamp": timestamp, "token": token, "signature": signature } })
}

/// Scheme `mailgun`'s registration ([`super::scheme`]).
pub struct Mailgun;

impl SchemeRules for Mailgun {
    const NAME: &'static str = "mailgun";
    const DEFAULT_TOLERANCE_S: Option<i64> = Some(DEFAULT_TOLERANCE_S);
    // The MAC is of the timestamp and token only.
    const COVERAGE: Coverage = Coverage::Nothing;

    fn signed_token(body: &[u8]) -> Option<String> {
        token(body)
    }

    fn verify(delivery: Delivery<'_>, keys: &[Key], check: &Check<'_>) -> Result<Verdict, Error> {
        Ok(verify(delivery, &mac_keys(keys), check.tolerance_us, check.now_us))
    }

    fn sign(_body: &[u8], key: &[u8], request: &SignRequest<'_>) -> Result<Signed, Error> {
        let token = request.msg_id.ok_or(Error::NullValue { what: "msg_id (the token, for scheme mailgun)" })?;
        Ok(Signed::Body(sign(key, token, request.unix_s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    /// Mailgun's own vector, mailgun-php `tests/Api/WebhookTest.php`
    /// (`testVerifyWebhookGood`),
    /// <https://github.com/mailgun/mailgun-php/blob/master/tests/Api/WebhookTest.php>:
    /// ```sh
    /// printf '%s' '14036452205egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6' \
    ///   | openssl dgst -sha256 -hmac 'key-3ax6xnjp29jd6fds4gc373sgvjxteol0'
    /// # 9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33
    /// ```
    pub(crate) const KEY: &str = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0";
    pub(crate) const TOKEN: &str = "5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6";
    pub(crate) const SIGNATURE: &str = "9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33";
    const T: i64 = 1_403_645_220;

    fn body(timestamp: &str, token: &str, signature: &str) -> Vec<u8> {
        format!(
            r#"{{"signature":{{"timestamp":{timestamp},"token":"{token}","signature":"{signature}"}},"event-data":{{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered","timestamp":1403645220.908181}}}}"#
        )
        .into_bytes()
    }

    fn check(body: &[u8], keys: &[&str], now: i64) -> Verdict {
        let headers = Headers::default();
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &keys,
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
    }

    #[test]
    fn the_published_vector_verifies() {
        let good = body("\"1403645220\"", TOKEN, SIGNATURE);
        let v = check(&good, &[KEY], T + 5);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(0), Some(T)));
        assert_eq!(sign(KEY.as_bytes(), TOKEN, T)["signature"]["signature"], SIGNATURE);
        // testVerifyWebhookBad: another token under the same signature.
        let bad = body("\"1403645220\"", "owyldpe6nxhmrn78epljl6bj0orrki1u3d2v5e6cnlmmuox8jr", SIGNATURE);
        assert_eq!(check(&bad, &[KEY], T).reason, Reason::NoMatchingSignature);
        // The timestamp as a JSON integer signs the same text.
        assert!(check(&body("1403645220", TOKEN, SIGNATURE), &[KEY], T).valid());
        assert!(check(&body("\"1403645220\"", TOKEN, &SIGNATURE.to_uppercase()), &[KEY], T).valid(), "any case");
    }

    /// The event data is not signed (module doc): a changed event still
    /// verifies, which is why the window matters.
    #[test]
    fn the_event_data_is_not_signed() {
        let good = String::from_utf8(body("\"1403645220\"", TOKEN, SIGNATURE)).unwrap();
        let forged = good.replace("delivered", "failed");
        assert!(check(forged.as_bytes(), &[KEY], T).valid());
        assert_eq!(check(forged.as_bytes(), &[KEY], T + 301).reason, Reason::TimestampTooOld);
    }

    #[test]
    fn parent_signatures_and_rotation() {
        let parent_key = "parent-signing-key";
        let parent = hex::encode(mac(parent_key.as_bytes(), "1403645220", TOKEN));
        let with_parent = format!(
            r#"{{"signature":{{"timestamp":"1403645220","token":"{TOKEN}","signature":"{SIGNATURE}","parent-signature":"{parent}"}}}}"#
        );
        let v = check(with_parent.as_bytes(), &["other", parent_key], T);
        assert_eq!((v.reason, v.secret_index), (Reason::Ok, Some(1)));
        assert!(check(with_parent.as_bytes(), &[KEY], T).valid());
        assert_eq!(check(with_parent.as_bytes(), &["other"], T).reason, Reason::NoMatchingSignature);
    }

    #[test]
    fn rejections_have_reasons() {
        let reason = |body: &str| check(body.as_bytes(), &[KEY], T).reason;
        assert_eq!(reason("not json"), Reason::MalformedHeader);
        assert_eq!(reason("[]"), Reason::MalformedHeader);
        assert_eq!(reason(r#"{"event-data":{}}"#), Reason::MissingHeader);
        assert_eq!(reason(r#"{"signature":"x"}"#), Reason::MalformedHeader);
        assert_eq!(
            reason(&format!(r#"{{"signature":{{"token":"{TOKEN}","signature":"{SIGNATURE}"}}}}"#)),
            Reason::MissingHeader
        );
        let sig = |ts: &str, token: &str, signature: &str| {
            reason(&format!(r#"{{"signature":{{"timestamp":{ts},"token":{token},"signature":{signature}}}}}"#))
        };
        let (ts, token, signature) = ("\"1403645220\"", format!("\"{TOKEN}\""), format!("\"{SIGNATURE}\""));
        assert_eq!(sig(ts, &token, &signature), Reason::Ok);
        assert_eq!(sig("\"14036452200000\"", &token, &signature), Reason::MalformedHeader, "milliseconds");
        assert_eq!(sig("1403645220.5", &token, &signature), Reason::MalformedHeader);
        assert_eq!(sig("\"-1\"", &token, &signature), Reason::MalformedHeader);
        assert_eq!(sig(ts, "\"\"", &signature), Reason::MalformedHeader);
        assert_eq!(sig(ts, "7", &signature), Reason::MalformedHeader);
        assert_eq!(sig(ts, &token, "\"abc\""), Reason::MalformedHeader);
        assert_eq!(sig(ts, &token, "null"), Reason::MalformedHeader);
        assert_eq!(sig(ts, &token, &format!("\"{}\"", &SIGNATURE[..62])), Reason::MalformedHeader);
        assert_eq!(sig("\"1403645221\"", &token, &signature), Reason::NoMatchingSignature, "the time is signed");
        let late = check(&body("\"1403645220\"", TOKEN, SIGNATURE), &[KEY], T + 301);
        assert_eq!((late.reason, late.signed_at), (Reason::TimestampTooOld, Some(T)));
        assert_eq!(check(&body("\"1403645220\"", TOKEN, SIGNATURE), &[KEY], T - 301).reason, Reason::TimestampTooNew);
    }

    #[test]
    fn sign_then_verify() {
        let block = sign(b"k", "tok", 1_700_000_000);
        let mut event = json!({"event-data": {"id": "e1", "event": "opened"}});
        event.as_object_mut().unwrap().extend(block.as_object().unwrap().clone());
        let bytes = serde_json::to_vec(&event).unwrap();
        assert!(check(&bytes, &["k"], 1_700_000_000).valid());
        assert_eq!(check(&bytes, &["K"], 1_700_000_000).reason, Reason::NoMatchingSignature);
    }
}
