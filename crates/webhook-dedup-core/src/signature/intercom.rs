//! Intercom: `X-Hub-Signature: sha1=<hex>` where the hex (40 characters) is
//! HMAC-SHA1 (RFC 2104) of the raw request body under the app's client
//! secret (UTF-8, from the Developer Hub's Basic information page; the
//! `hub_secret` of a subscription made with the old REST API).
//!
//! Sources: Intercom Developers, "Signed notifications",
//! <https://developers.intercom.com/intercom-api-reference/v1.0/reference/signed-notifications>
//! (its example signature comes without its secret, so it is no vector),
//! and "Webhook models", <https://developers.intercom.com/docs/references/webhooks/webhook-models>.
//! `sha1` is the only algorithm Intercom uses; another `<algorithm>=` is
//! `unsupported_version`. Intercom signs no timestamp, so there is no replay
//! window; the notification id (`id`) is in the signed body.

use super::{ct, Algorithm, Delivery, Encoding, OtherTag, TaggedFrame, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-hub-signature";
const TAG: &str = "sha1=";
/// The scheme's frame ([`super::TaggedFrame`]).
pub const FRAME: TaggedFrame = TaggedFrame {
    header: HEADER,
    tag: TAG,
    other: OtherTag::Named,
    encoding: Encoding::Hex,
    algorithm: Algorithm::Sha1,
};

/// Verify an Intercom notification against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>]) -> Verdict {
    FRAME.header().verify(&delivery, keys, |key| ct::hmac(Algorithm::Sha1, key, &[delivery.body]))
}

/// The headers Intercom would send for `body` under `secret`.
pub fn sign(body: &[u8], secret: &[u8]) -> Vec<(&'static str, String)> {
    vec![("X-Hub-Signature", format!("{TAG}{}", hex::encode(ct::hmac(Algorithm::Sha1, secret, &[body]))))]
}

untimed_mac_scheme!(Intercom, "intercom");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;
    use crate::signature::Reason;

    /// Our vector (Intercom publishes none):
    /// `printf '%s' '{"type":"notification_event",...}' | openssl dgst -sha1 -hmac intercom-client-secret`.
    const SECRET: &[u8] = b"intercom-client-secret";
    const BODY: &[u8] = br#"{"type":"notification_event","id":"notif_ccd8a4d2-3a9b-4c16-b6c2-2a2c5e0f6e11","topic":"ping","data":{"type":"notification_event_data","item":{"type":"ping","message":"something something interzen"}},"created_at":1700000000}"#;
    const SIG: &str = "sha1=21679934bbc5f3f8a85f735b4bba7eda428d4ccc";

    fn check(body: &[u8], values: &[&str], keys: &[&[u8]]) -> Verdict {
        let headers = Headers::from_pairs(values.iter().map(|v| ("X-Hub-Signature", *v)));
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        verify(Delivery { body, headers: &headers, url: None, method: None }, &keys)
    }

    #[test]
    fn own_vector_signs_and_verifies() {
        assert_eq!(sign(BODY, SECRET), vec![("X-Hub-Signature", SIG.to_string())]);
        let v = check(BODY, &[SIG], &[b"old", SECRET]);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(1), None));
        assert!(check(BODY, &[&SIG.to_uppercase().replacen("SHA1=", "sha1=", 1)], &[SECRET]).valid(), "hex any case");
        assert_eq!(check(BODY, &["sha1=00", SIG], &[SECRET]).reason, Reason::MalformedHeader, "sent twice");
    }
}
