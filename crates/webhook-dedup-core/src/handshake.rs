//! Provider handshakes and control messages: requests a receiver must
//! answer with a specific body instead of processing them as events.
//! `webhook_receive` recognises them after the signature verified, stores
//! nothing and returns `outcome = 'handshake'` with the JSON body to answer
//! (HTTP 200) in `response`. Pure Rust.
//!
//! - **Slack `url_verification`** (Events API): the body
//!   `{"token": ..., "challenge": "<c>", "type": "url_verification"}`
//!   is answered `{"challenge": "<c>"}`. Slack signs it like every
//!   request. Source: <https://api.slack.com/events/url_verification>.
//! - **Zoom `endpoint.url_validation`**: the body
//!   `{"payload": {"plainToken": "<t>"}, "event_ts": ..., "event": "endpoint.url_validation"}`
//!   is answered `{"plainToken": "<t>", "encryptedToken": "<hex HMAC-SHA256 of t>"}`
//!   under the secret token; Zoom signs the request like every event.
//!   Source: <https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint>.
//! - **X (Twitter) CRC**: `GET <url>?crc_token=<t>`, unsigned and without a
//!   body, is answered `{"response_token": "sha256=<base64 HMAC-SHA256 of t>"}`
//!   under the consumer secret. It cannot be verified first (X signs it
//!   not); the answer proves that the receiver holds the secret, and
//!   [`crate::signature::twitter`] keeps it from being a signing oracle.
//!   Source: <https://docs.x.com/x-api/webhooks/quickstart>.
//! - **Discord interactions `PING`**: when the Interactions Endpoint URL is
//!   saved, and in Discord's routine checks, Discord POSTs an interaction of
//!   `"type": 1` (PING), signed like every interaction; it is answered
//!   `{"type": 1}` (PONG). Discord's webhook events (a separate endpoint,
//!   signed the same way) use `"type": 1` for an event, with an `event`
//!   member: such a body is no PING. Source:
//!   <https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-acknowledging-ping-requests>.
//!
//! An answer that would be unsafe (a Zoom `plainToken` or an X `crc_token`
//! that could be a signed message, see `src/signature/zoom.rs` and
//! `twitter.rs`) is refused: [`Answer::Refused`].

use crate::profile::Body;
use crate::signature::{query_parameter, twitter, zoom, Scheme};
use serde_json::{json, Value};

/// What `webhook_receive` does with a request that is a handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Answer with this JSON body (HTTP 200).
    Respond(Value),
    /// A handshake whose answer would be unsafe: answer nothing (the reason
    /// never echoes the secret).
    Refused(&'static str),
}

/// The answer to a verified `body` if it is `scheme`'s handshake; `key` is
/// the key bytes of the secret it verified with.
pub fn answer(scheme: Scheme, body: &Body<'_>, key: &[u8]) -> Option<Answer> {
    match scheme {
        Scheme::Slack => slack(body.json()?).map(Answer::Respond),
        Scheme::Zoom => zoom_url_validation(body.json()?, key),
        Scheme::Discord => discord_ping(body.json()?).map(Answer::Respond),
        _ => None,
    }
}

/// X's CRC, if the request is one: `scheme` twitter, no body, and a
/// `crc_token` query parameter in `url`. Checked before verification: the
/// CRC carries no signature. `key` is the consumer secret's bytes.
pub fn unsigned(scheme: Scheme, body: &[u8], url: Option<&str>, key: &[u8]) -> Option<Answer> {
    if scheme != Scheme::Twitter || !body.is_empty() {
        return None;
    }
    let token = query_parameter(url?, "crc_token")?;
    Some(match twitter::crc_response_token(key, &token) {
        Ok(response_token) => Answer::Respond(json!({ "response_token": response_token })),
        Err(reason) => Answer::Refused(reason),
    })
}

/// Zoom's `endpoint.url_validation`: the token and its HMAC.
fn zoom_url_validation(body: &Value, key: &[u8]) -> Option<Answer> {
    if body.get("event")?.as_str()? != zoom::URL_VALIDATION_EVENT {
        return None;
    }
    let plain = body.get("payload")?.get("plainToken")?.as_str()?;
    Some(match zoom::encrypted_token(key, plain) {
        Ok(encrypted) => Answer::Respond(json!({ "plainToken": plain, "encryptedToken": encrypted })),
        Err(reason) => Answer::Refused(reason),
    })
}

/// The interaction type of Discord's PING, and of its answer (PONG).
const DISCORD_PING: u64 = 1;

/// Discord's PING: an object whose `type` is the integer 1 and that is no
/// webhook event (those carry an `event` member). The answer carries
/// nothing from the request.
fn discord_ping(body: &Value) -> Option<Value> {
    let object = body.as_object()?;
    if object.get("type")?.as_u64()? != DISCORD_PING || object.contains_key("event") {
        return None;
    }
    Some(json!({ "type": DISCORD_PING }))
}

/// Slack's `url_verification`: echo the challenge.
fn slack(body: &Value) -> Option<Value> {
    if body.get("type")?.as_str()? != "url_verification" {
        return None;
    }
    let challenge = body.get("challenge")?.as_str()?;
    Some(json!({ "challenge": challenge }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slack's documented example request and answer
    /// (<https://api.slack.com/events/url_verification>).
    #[test]
    fn slack_url_verification_echoes_the_challenge() {
        let body = br#"{
    "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
    "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
    "type": "url_verification"
}"#;
        let Some(Answer::Respond(got)) = answer(Scheme::Slack, &Body::new(body), b"secret") else { panic!() };
        assert_eq!(got.to_string(), r#"{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}"#);
    }

    /// Zoom's documented request (plainToken `qgg8vlvZRS6UYooatFL8Aw`,
    /// <https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint>)
    /// under the secret `secretValueTest`:
    /// `printf '%s' qgg8vlvZRS6UYooatFL8Aw | openssl dgst -sha256 -hmac secretValueTest`.
    #[test]
    fn zoom_url_validation_answers_the_token_and_its_hmac() {
        let body = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
        let got = answer(Scheme::Zoom, &Body::new(body), b"secretValueTest");
        assert_eq!(
            got,
            Some(Answer::Respond(json!({
                "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
                "encryptedToken": "70c1f2e2e6ca2d39297490d1f9142c7d701415ea8e6151f6562a08fa657a40ff"
            })))
        );
        let oracle = br#"{"payload":{"plainToken":"v0:1:{}"},"event":"endpoint.url_validation"}"#;
        assert!(matches!(answer(Scheme::Zoom, &Body::new(oracle), b"k"), Some(Answer::Refused(_))));
        let event = br#"{"event":"meeting.started","payload":{"plainToken":"x"}}"#;
        assert_eq!(answer(Scheme::Zoom, &Body::new(event), b"k"), None);
    }

    /// The CRC example of Twitter's developer relations (consumer secret
    /// and crc_token), as `src/signature/twitter.rs` tests it.
    #[test]
    fn twitter_crc_answers_the_response_token() {
        let url = "https://example.com/webhooks/x?crc_token=9b4507b3-9040-4669-9ca3-6b94edb50553&nonce=1";
        let got = unsigned(Scheme::Twitter, b"", Some(url), b"z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu");
        assert_eq!(
            got,
            Some(Answer::Respond(json!({"response_token": "sha256=Cytd4Sq+NvEcV3MMrXxWJGJx5A+y/lXzzU2Maartkx8="})))
        );
        let forged = "https://example.com/x?crc_token=%7B%22a%22%3A1%7D"; // {"a":1}
        assert!(matches!(unsigned(Scheme::Twitter, b"", Some(forged), b"k"), Some(Answer::Refused(_))));
        assert_eq!(unsigned(Scheme::Twitter, b"{}", Some(url), b"k"), None, "a POST is an event");
        assert_eq!(unsigned(Scheme::Twitter, b"", Some("https://example.com/x"), b"k"), None);
        assert_eq!(unsigned(Scheme::Github, b"", Some(url), b"k"), None);
    }

    /// The PING body of discord-interactions-js's tests
    /// (`src/__tests__/utils/SharedTestUtils.ts`) is answered PONG; commands,
    /// components and Discord's webhook events are not.
    #[test]
    fn discord_ping_is_answered_pong() {
        let ping =
            br#"{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}"#;
        assert_eq!(answer(Scheme::Discord, &Body::new(ping), b""), Some(Answer::Respond(json!({"type": 1}))));
        let command =
            br#"{"id":"787053080478613556","token":"t","type":2,"version":1,"data":{"id":"1","name":"test"}}"#;
        assert_eq!(answer(Scheme::Discord, &Body::new(command), b""), None);
        let event = br#"{"version":1,"application_id":"1","type":1,"event":{"type":"APPLICATION_AUTHORIZED","timestamp":"2024-10-18T14:42:53.064834"}}"#;
        assert_eq!(answer(Scheme::Discord, &Body::new(event), b""), None, "a webhook event, not a PING");
        for other in [&br#"{"type":"1"}"#[..], br#"{"type":1.5}"#, br#"[{"type":1}]"#, b"1", b"not json"] {
            assert_eq!(answer(Scheme::Discord, &Body::new(other), b""), None, "{}", String::from_utf8_lossy(other));
        }
        assert_eq!(answer(Scheme::Slack, &Body::new(ping), b"s"), None);
    }

    #[test]
    fn events_and_other_schemes_are_no_handshake() {
        let event = br#"{"type":"event_callback","challenge":"x","event_id":"Ev1"}"#;
        assert_eq!(answer(Scheme::Slack, &Body::new(event), b"s"), None);
        let no_challenge = br#"{"type":"url_verification","challenge":7}"#;
        assert_eq!(answer(Scheme::Slack, &Body::new(no_challenge), b"s"), None);
        let slack_shaped = br#"{"type":"url_verification","challenge":"c"}"#;
        assert_eq!(answer(Scheme::Github, &Body::new(slack_shaped), b"s"), None);
        assert_eq!(answer(Scheme::Slack, &Body::new(b"not json"), b"s"), None);
    }
}
