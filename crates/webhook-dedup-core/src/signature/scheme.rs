//! The signature schemes: the one list that registers each (`schemes!`
//! below, one line per scheme), and the trait each scheme's module
//! implements ([`SchemeRules`]). Every property of a scheme the verifier,
//! the signer, the replay guard and the SQL surface ask about is answered
//! from its module through this trait, so a new scheme is a file of its own
//! and one line here.

use super::{Coverage, Delivery, HmacSpec, Key, SignRequest, Signed, Verdict};
use crate::error::Error;

/// What verification hands a scheme besides the delivery and its keys.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The replay window, microseconds (the scheme's default when the
    /// caller gave none; 0 for a scheme that signs no time).
    pub tolerance_us: i64,
    /// The verifier's clock, Unix microseconds.
    pub now_us: i64,
    /// The generic scheme's header description (scheme `hmac` only).
    pub hmac: Option<&'a HmacSpec>,
}

/// One scheme's rules, implemented by a unit struct in its module and
/// registered in `schemes!`.
pub(crate) trait SchemeRules {
    /// Its name in SQL (`webhook_verify('github', ...)`), lower-case.
    const NAME: &'static str;
    /// The replay window the provider documents, seconds; `None` for a
    /// scheme that signs no time. The source is in the module's doc.
    const DEFAULT_TOLERANCE_S: Option<i64> = None;
    /// It signs the request URL, which verification then requires (and
    /// refuses for every other scheme).
    const SIGNS_URL: bool = false;
    /// What its signature covers of the body.
    const COVERAGE: Coverage = Coverage::Bytes;
    /// The headers carrying an event id its signature covers (lower-case).
    const SIGNED_ID_HEADERS: &'static [&'static str] = &[];
    /// `webhook_sign` can sign it: false for a scheme signed with the
    /// provider's private key, whose secrets are public keys.
    const SIGNABLE: bool = true;

    /// The key of one configured secret; `Err` carries the problem, for a
    /// 22023 that never echoes the secret. Default: the secret's UTF-8
    /// bytes as an HMAC key.
    fn key(secret: &str) -> Result<Key, &'static str> {
        Ok(Key::Mac(secret.as_bytes().to_vec()))
    }

    /// The verdict on a delivery under `keys` (each made by [`Self::key`]);
    /// `Err` for a misconfiguration (22023: a URL or method it needs).
    fn verify(delivery: Delivery<'_>, keys: &[Key], check: &Check<'_>) -> Result<Verdict, Error>;

    /// The headers (or body member) its provider would send for `body`
    /// under `key` (an HMAC key). Only called when [`Self::SIGNABLE`].
    fn sign(body: &[u8], key: &[u8], request: &SignRequest<'_>) -> Result<Signed, Error>;

    /// For [`Coverage::Content`]: the signed text in one canonical form.
    fn signed_content(_body: &[u8], _url: Option<&str>) -> Option<Vec<u8>> {
        None
    }

    /// For [`Coverage::Nothing`]: the signed token that identifies the
    /// signature, read from a delivery that verified.
    fn signed_token(_body: &[u8]) -> Option<String> {
        None
    }
}

/// The HMAC keys of a scheme whose every key is one (the default
/// [`SchemeRules::key`]).
pub(crate) fn mac_keys(keys: &[Key]) -> Vec<Vec<u8>> {
    keys.iter().map(|k| k.mac().expect("an HMAC scheme's keys are HMAC keys").to_vec()).collect()
}

/// The request URL of a scheme that signs it, or the 22023 for its absence.
pub(crate) fn needs_url<'a>(name: &str, delivery: &Delivery<'a>) -> Result<&'a str, Error> {
    delivery.url.ok_or_else(|| Error::invalid(format!("scheme {name} needs the request url (argument url)")))
}

/// A signer's header pairs as [`Signed::Headers`].
pub(crate) fn headers(pairs: Vec<(&'static str, String)>) -> Result<Signed, Error> {
    Ok(Signed::Headers(pairs.into_iter().map(|(name, value)| (name.to_string(), value)).collect()))
}

/// The message id a signer needs (Standard Webhooks, Twitch), or 22004.
pub(crate) fn needs_msg_id<'a>(request: &SignRequest<'a>) -> Result<&'a str, Error> {
    request.msg_id.ok_or(Error::NullValue { what: "msg_id (for schemes standard and twitch)" })
}

/// The signing URL (Twilio, Square, HubSpot), or 22004.
pub(crate) fn needs_sign_url<'a>(request: &SignRequest<'a>) -> Result<&'a str, Error> {
    request.url.ok_or(Error::NullValue { what: "url (for schemes twilio, square and hubspot)" })
}

/// The registration of a scheme that signs the body with an HMAC key and no
/// time, whose module has `verify(delivery, keys)` and `sign(body, key)`
/// (GitHub, Shopify, X, Intercom, Typeform).
macro_rules! untimed_mac_scheme {
    ($rules:ident, $name:literal) => {
        #[doc = concat!("Scheme `", $name, "`'s registration ([`super::scheme`]).")]
        pub struct $rules;

        impl $crate::signature::scheme::SchemeRules for $rules {
            const NAME: &'static str = $name;

            fn verify(
                delivery: $crate::signature::Delivery<'_>,
                keys: &[$crate::signature::Key],
                _check: &$crate::signature::Check<'_>,
            ) -> Result<$crate::signature::Verdict, $crate::error::Error> {
                Ok(verify(delivery, &$crate::signature::scheme::mac_keys(keys)))
            }

            fn sign(
                body: &[u8],
                key: &[u8],
                _request: &$crate::signature::SignRequest<'_>,
            ) -> Result<$crate::signature::Signed, $crate::error::Error> {
                $crate::signature::scheme::headers(sign(body, key))
            }
        }
    };
}

/// The registration of a scheme that signs a time (Unix seconds) with an
/// HMAC key, whose module has `DEFAULT_TOLERANCE_S`,
/// `verify(delivery, keys, tolerance_us, now_us)` and `sign(body, key, t)`
/// (Stripe, Slack, Paddle, Zoom, Calendly).
macro_rules! timed_mac_scheme {
    ($rules:ident, $name:literal) => {
        #[doc = concat!("Scheme `", $name, "`'s registration ([`super::scheme`]).")]
        pub struct $rules;

        impl $crate::signature::scheme::SchemeRules for $rules {
            const NAME: &'static str = $name;
            const DEFAULT_TOLERANCE_S: Option<i64> = Some(DEFAULT_TOLERANCE_S);

            fn verify(
                delivery: $crate::signature::Delivery<'_>,
                keys: &[$crate::signature::Key],
                check: &$crate::signature::Check<'_>,
            ) -> Result<$crate::signature::Verdict, $crate::error::Error> {
                Ok(verify(delivery, &$crate::signature::scheme::mac_keys(keys), check.tolerance_us, check.now_us))
            }

            fn sign(
                body: &[u8],
                key: &[u8],
                request: &$crate::signature::SignRequest<'_>,
            ) -> Result<$crate::signature::Signed, $crate::error::Error> {
                $crate::signature::scheme::headers(sign(body, key, request.unix_s))
            }
        }
    };
}

/// The registration of a scheme signed with the provider's private key and
/// a time, whose secrets are public keys: its module has
/// `DEFAULT_TOLERANCE_S`, `key(secret)` and `verify(delivery, keys,
/// tolerance_us, now_us)`, and `webhook_sign` cannot sign it (Discord,
/// SendGrid).
macro_rules! public_key_scheme {
    ($rules:ident, $name:literal) => {
        #[doc = concat!("Scheme `", $name, "`'s registration ([`super::scheme`]).")]
        pub struct $rules;

        impl $crate::signature::scheme::SchemeRules for $rules {
            const NAME: &'static str = $name;
            const DEFAULT_TOLERANCE_S: Option<i64> = Some(DEFAULT_TOLERANCE_S);
            const SIGNABLE: bool = false;

            fn key(secret: &str) -> Result<$crate::signature::Key, &'static str> {
                key(secret)
            }

            fn verify(
                delivery: $crate::signature::Delivery<'_>,
                keys: &[$crate::signature::Key],
                check: &$crate::signature::Check<'_>,
            ) -> Result<$crate::signature::Verdict, $crate::error::Error> {
                Ok(verify(delivery, keys, check.tolerance_us, check.now_us))
            }

            fn sign(
                _body: &[u8],
                _key: &[u8],
                _request: &$crate::signature::SignRequest<'_>,
            ) -> Result<$crate::signature::Signed, $crate::error::Error> {
                unreachable!("not signable: its secrets are public keys")
            }
        }
    };
}

/// Declares [`Scheme`]: each line registers a scheme, `Variant =>
/// module::Rules`, where the module implements [`SchemeRules`] for `Rules`;
/// the order is [`Scheme::ALL`]'s, the order of the documentation's lists.
macro_rules! schemes {
    ($($(#[$doc:meta])* $variant:ident => $module:ident :: $rules:ident,)+) => {
        /// A provider's signing scheme.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Scheme {
            $($(#[$doc])* $variant,)+
        }

        impl Scheme {
            /// Every scheme, in registration order.
            pub const ALL: [Scheme; [$(stringify!($variant)),+].len()] = [$(Scheme::$variant),+];

            /// Its name in SQL, lower-case.
            pub fn name(self) -> &'static str {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::NAME,)+ }
            }

            /// The replay window the provider documents, in seconds, for
            /// schemes that sign a timestamp (the source is in each scheme's
            /// module: Zoom, Discord, SendGrid and Mailgun document no
            /// number and get the 300 s of Slack and Standard Webhooks;
            /// Calendly's 180 s come from its example code).
            pub fn default_tolerance_s(self) -> Option<i64> {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::DEFAULT_TOLERANCE_S,)+ }
            }

            /// Whether the scheme signs the request URL, so that `url` is
            /// required (and refused for every other scheme).
            pub fn signs_url(self) -> bool {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::SIGNS_URL,)+ }
            }

            /// What the scheme's signature covers of the body
            /// (docs/signatures.md, "What each signature covers", gives each
            /// provider's rule and source).
            pub fn coverage(self) -> Coverage {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::COVERAGE,)+ }
            }

            /// The headers carrying an event id whose value the scheme's
            /// signature covers (lower-case names): Standard Webhooks signs
            /// `webhook-id` (`svix-id` in Svix's spelling), Twitch its
            /// message id. An id read from any other header is unsigned
            /// (docs/signatures.md, "What each signature covers").
            pub fn signed_id_headers(self) -> &'static [&'static str] {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::SIGNED_ID_HEADERS,)+ }
            }

            /// Whether `webhook_sign` can sign the scheme.
            pub fn signable(self) -> bool {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::SIGNABLE,)+ }
            }

            /// The key of one configured secret ([`SchemeRules::key`]).
            pub(crate) fn key(self, secret: &str) -> Result<Key, &'static str> {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::key(secret),)+ }
            }

            pub(crate) fn verify_with(self, delivery: Delivery<'_>, keys: &[Key], check: &Check<'_>) -> Result<Verdict, Error> {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::verify(delivery, keys, check),)+ }
            }

            pub(crate) fn sign_with(self, body: &[u8], key: &[u8], request: &SignRequest<'_>) -> Result<Signed, Error> {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::sign(body, key, request),)+ }
            }

            pub(crate) fn content(self, body: &[u8], url: Option<&str>) -> Option<Vec<u8>> {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::signed_content(body, url),)+ }
            }

            pub(crate) fn token(self, body: &[u8]) -> Option<String> {
                match self { $(Scheme::$variant => <super::$module::$rules as SchemeRules>::signed_token(body),)+ }
            }
        }
    };
}

schemes! {
    /// GitHub: `X-Hub-Signature-256`, see [`super::github`].
    Github => github::Github,
    /// Stripe: `Stripe-Signature`, see [`super::stripe`].
    Stripe => stripe::Stripe,
    /// Shopify: `X-Shopify-Hmac-Sha256`, see [`super::shopify`].
    Shopify => shopify::Shopify,
    /// Slack: `X-Slack-Signature` and `X-Slack-Request-Timestamp`, see [`super::slack`].
    Slack => slack::Slack,
    /// Standard Webhooks (and Svix): `webhook-*` headers, see [`super::standard`].
    Standard => standard::Standard,
    /// Paddle Billing: `Paddle-Signature`, see [`super::paddle`].
    Paddle => paddle::Paddle,
    /// Twilio: `X-Twilio-Signature` over the URL, see [`super::twilio`].
    Twilio => twilio::Twilio,
    /// Zoom: `x-zm-signature` and `x-zm-request-timestamp`, see [`super::zoom`].
    Zoom => zoom::Zoom,
    /// X (Twitter): `x-twitter-webhooks-signature`, see [`super::twitter`].
    Twitter => twitter::Twitter,
    /// Square: `x-square-hmacsha256-signature` over the notification URL, see [`super::square`].
    Square => square::Square,
    /// HubSpot (signature v3): `X-HubSpot-Signature-v3` over method, URI,
    /// body and `X-HubSpot-Request-Timestamp`, see [`super::hubspot`].
    Hubspot => hubspot::Hubspot,
    /// Twitch EventSub: `Twitch-Eventsub-Message-Signature`, see [`super::twitch`].
    Twitch => twitch::Twitch,
    /// Intercom: `X-Hub-Signature` (HMAC-SHA1), see [`super::intercom`].
    Intercom => intercom::Intercom,
    /// Typeform: `Typeform-Signature`, see [`super::typeform`].
    Typeform => typeform::Typeform,
    /// Calendly: `Calendly-Webhook-Signature`, see [`super::calendly`].
    Calendly => calendly::Calendly,
    /// Discord interactions: Ed25519 in `X-Signature-Ed25519`, see [`super::discord`].
    Discord => discord::Discord,
    /// SendGrid signed Event Webhook: ECDSA P-256, see [`super::sendgrid`].
    Sendgrid => sendgrid::Sendgrid,
    /// Mailgun: the signature is in the body, see [`super::mailgun`].
    Mailgun => mailgun::Mailgun,
    /// Linear: `Linear-Signature`, time in the body, see [`super::linear`].
    Linear => linear::Linear,
    /// A caller-described HMAC header, see [`super::generic`].
    Hmac => generic::Generic,
}
