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

use crate::profile::Body;
use crate::signature::Scheme;
use serde_json::{json, Value};

/// The answer to `body` if it is `scheme`'s handshake; `secret` is the
/// secret the delivery verified with (some answers are keyed with it).
pub fn answer(scheme: Scheme, body: &Body<'_>, _secret: &str) -> Option<Value> {
    match scheme {
        Scheme::Slack => slack(body.json()?),
        _ => None,
    }
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
        let got = answer(Scheme::Slack, &Body::new(body), "secret").unwrap();
        assert_eq!(got.to_string(), r#"{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}"#);
    }

    #[test]
    fn events_and_other_schemes_are_no_handshake() {
        let event = br#"{"type":"event_callback","challenge":"x","event_id":"Ev1"}"#;
        assert_eq!(answer(Scheme::Slack, &Body::new(event), "s"), None);
        let no_challenge = br#"{"type":"url_verification","challenge":7}"#;
        assert_eq!(answer(Scheme::Slack, &Body::new(no_challenge), "s"), None);
        let slack_shaped = br#"{"type":"url_verification","challenge":"c"}"#;
        assert_eq!(answer(Scheme::Github, &Body::new(slack_shaped), "s"), None);
        assert_eq!(answer(Scheme::Slack, &Body::new(b"not json"), "s"), None);
    }
}
