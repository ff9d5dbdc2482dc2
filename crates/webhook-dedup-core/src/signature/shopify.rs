//! Shopify: `X-Shopify-Hmac-Sha256: <base64>` where the base64 is
//! HMAC-SHA256 of the raw request body under the app's client secret
//! (UTF-8).
//!
//! Source: Shopify Dev Docs, "Deliver webhooks through HTTPS", step
//! "Verify the webhook",
//! <https://shopify.dev/docs/apps/build/webhooks/subscribe/https>. Shopify
//! sends the canonical padded encoding, so only that is accepted; after a
//! client-secret rotation Shopify may sign with the old secret for a while,
//! so configure both. No timestamp is signed.

use super::{ct, Algorithm, Delivery, Encoding, OtherTag, TaggedFrame, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-shopify-hmac-sha256";
/// The bare base64 MAC (no tag, so no other version to name).
pub const FRAME: TaggedFrame = TaggedFrame {
    header: HEADER,
    tag: "",
    other: OtherTag::Never,
    encoding: Encoding::Base64,
    algorithm: Algorithm::Sha256,
};

/// Verify a Shopify delivery against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>]) -> Verdict {
    FRAME.header().verify(&delivery, keys, |key| ct::hmac_sha256(key, &[delivery.body]).to_vec())
}

/// The headers Shopify would send for `body` under `secret`.
pub fn sign(body: &[u8], secret: &[u8]) -> Vec<(&'static str, String)> {
    vec![("X-Shopify-Hmac-Sha256", ct::encode_base64(&ct::hmac_sha256(secret, &[body])))]
}

untimed_mac_scheme!(Shopify, "shopify");

// Tested by the tagged header's table of cases (`frame.rs`, over every
// scheme of the frame) and by the shared vectors (`vectors.rs`).
