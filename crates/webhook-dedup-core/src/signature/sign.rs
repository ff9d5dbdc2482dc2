//! Signing as each provider signs (`webhook_sign`): the headers a sender
//! would send for a body, for tests and for senders of the generic scheme.
//! Each scheme signs in its own module ([`super::scheme::SchemeRules::sign`]);
//! this is the one entry point, with the checks every scheme shares.

use super::{HmacSpec, Scheme};
use crate::error::Error;
use serde_json::Value;

/// What signing takes besides the scheme, body and key.
#[derive(Debug, Clone, Default)]
pub struct SignRequest<'a> {
    /// The signing time, Unix seconds (floor): what the schemes that sign
    /// seconds sign.
    pub unix_s: i64,
    /// The signing time, Unix microseconds (saturated at the ends of
    /// `i64`): HubSpot signs milliseconds, Twitch an RFC 3339 time.
    pub unix_us: i64,
    /// The message id (Standard Webhooks, Twitch) or the token (Mailgun).
    pub msg_id: Option<&'a str>,
    /// The request URL (Twilio, Square, HubSpot sign it).
    pub url: Option<&'a str>,
    /// The request method (HubSpot signs it).
    pub method: Option<&'a str>,
    /// The generic scheme's header description (scheme `hmac` only).
    pub hmac: Option<HmacSpec>,
}

/// What a scheme signs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signed {
    /// Headers, names as the provider spells them.
    Headers(Vec<(String, String)>),
    /// A member of the body (Mailgun's `{"signature": {...}}`), which the
    /// provider does not sign.
    Body(Value),
}

/// 22023 for a scheme signed with the provider's private key (Discord,
/// SendGrid: [`Scheme::signable`]): its secrets are public keys. Checked
/// first, before the secret.
pub fn check_signable(scheme: Scheme) -> Result<(), Error> {
    if !scheme.signable() {
        return Err(Error::invalid_with_hint(
            format!("webhook_sign cannot sign scheme {}: it is signed with the provider's private key", scheme.name()),
            "Its secrets are public keys, which verify signatures but cannot make them.",
        ));
    }
    Ok(())
}

/// Sign `body` for `scheme` under `key` (the secret's key bytes,
/// [`super::secret_key`]), as its module's `sign` does. Errors: 22023 `url`
/// for a scheme that does not sign it, HubSpot without a method, `hmac`
/// without its header, a scheme [`check_signable`] refuses; 22004 a required
/// `url` or `msg_id` missing.
pub fn sign(scheme: Scheme, body: &[u8], key: &[u8], request: &SignRequest<'_>) -> Result<Signed, Error> {
    check_signable(scheme)?;
    if request.url.is_some() && !scheme.signs_url() {
        return Err(Error::invalid(format!(
            "url applies only to schemes twilio, square and hubspot, not {}",
            scheme.name()
        )));
    }
    scheme.sign_with(body, key, request)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schemes that sign seconds take the exact floor the caller gave
    /// (`unix_s`), not one derived from the microseconds, which saturate
    /// near the end of PostgreSQL's range (year 294,246 and later).
    #[test]
    fn seconds_schemes_sign_the_given_seconds() {
        let request = SignRequest { unix_s: 9_223_465_939_200, unix_us: i64::MAX, ..SignRequest::default() };
        let Ok(Signed::Headers(headers)) = sign(Scheme::Stripe, b"{}", b"k", &request) else {
            panic!("stripe signs headers");
        };
        assert!(headers[0].1.starts_with("t=9223465939200,v1="), "{headers:?}");
        let Ok(Signed::Body(member)) =
            sign(Scheme::Mailgun, b"{}", b"k", &SignRequest { msg_id: Some("t"), ..request })
        else {
            panic!("mailgun signs a body member");
        };
        assert_eq!(member["signature"]["timestamp"], "9223465939200", "{member}");
    }
}
