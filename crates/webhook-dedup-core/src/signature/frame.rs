//! The header shapes several schemes share, each a frame the schemes
//! configure rather than code they repeat:
//! - [`TaggedHeader`]: one header, `<tag><encoded MAC>`, no time (GitHub,
//!   Intercom, Typeform, X, Shopify, Square, the generic `hmac` scheme);
//! - [`TimestampedHeader`]: one header holding a `key=value` list of a
//!   signed Unix time and signatures (Stripe, Paddle, Calendly).
//!
//! A scheme of either shape is a module that fills in the frame's fields
//! (and, for a tagged header, what its MAC covers). The tests below run one
//! table of rejections over every scheme of each frame.

use super::{ct, no_candidates, parse_unix_seconds, signature_header, single, tagged_by, untimed};
use super::{Delivery, Encoding, Reason, Verdict};

/// How a scheme that signs without a timestamp sends its signatures: every
/// value of one header, each `<tag><encoded MAC>` (`tag` may be empty).
/// GitHub, Intercom, Typeform, X, Shopify, Square and the generic `hmac`
/// scheme differ only in these fields and in what their MAC covers.
pub(crate) struct TaggedHeader<'a, D: Fn(&str) -> Option<Vec<u8>>> {
    /// The header, lower-cased.
    pub header: &'a str,
    pub tag: &'a str,
    /// Which values without `tag` name another version ([`super::names_a_tag`]).
    pub other_tag: fn(&str) -> bool,
    /// The encoded MAC to its bytes; `None` for one that is malformed.
    pub decode: D,
}

/// Which values without a tagged scheme's tag name another version of its
/// signature ([`TaggedHeader::other_tag`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherTag {
    /// A value holding `=` ([`super::names_a_tag`]: `sha1=...` where
    /// `sha256=` is expected).
    Named,
    /// None: the scheme's values have no tag (a bare base64 MAC).
    Never,
}

/// A tagged scheme's frame as data: what its module fills in
/// [`TaggedHeader`] with (the header, the tag, which values name another
/// version, how its MAC is written and made). The SQL edition's generator
/// writes these as rows (crates/webhook-dedup-sql-edition/src/data.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaggedFrame {
    /// The header, lower-cased.
    pub header: &'static str,
    pub tag: &'static str,
    pub other: OtherTag,
    pub encoding: Encoding,
    pub algorithm: super::Algorithm,
}

impl TaggedFrame {
    /// The frame, ready to read a delivery's signatures: each decoded to
    /// the MAC's length of the algorithm.
    pub(crate) fn header(&self) -> TaggedHeader<'static, impl Fn(&str) -> Option<Vec<u8>>> {
        let (encoding, len) = (self.encoding, self.algorithm.mac_len());
        TaggedHeader {
            header: self.header,
            tag: self.tag,
            other_tag: match self.other {
                OtherTag::Named => super::names_a_tag,
                OtherTag::Never => |_| false,
            },
            decode: move |text: &str| match encoding {
                Encoding::Hex => ct::decode_hex(text, len),
                Encoding::Base64 => ct::decode_base64(text, Some(len)),
            },
        }
    }
}

impl<D: Fn(&str) -> Option<Vec<u8>>> TaggedHeader<'_, D> {
    /// The decoded signatures of a delivery, or its verdict when it has
    /// none: `missing_header` without the header, else `unsupported_version`
    /// when a value named another version and `malformed_header` when none
    /// did ([`no_candidates`]).
    pub(crate) fn signatures(&self, delivery: &Delivery<'_>) -> Result<Vec<Vec<u8>>, Verdict> {
        let value = signature_header(delivery.headers, self.header, None)?;
        let (candidates, other_tag) = tagged_by(&[value], self.tag, self.other_tag, &self.decode);
        if candidates.is_empty() {
            return Err(no_candidates(other_tag, None));
        }
        Ok(candidates)
    }

    /// The verdict on a delivery: which key's MAC (computed by `mac`)
    /// matches one of its signatures ([`untimed`]).
    pub(crate) fn verify(&self, delivery: &Delivery<'_>, keys: &[Vec<u8>], mac: impl Fn(&[u8]) -> Vec<u8>) -> Verdict {
        match self.signatures(delivery) {
            Ok(candidates) => untimed(keys, &candidates, mac),
            Err(verdict) => verdict,
        }
    }
}

/// How a scheme that signs a timestamp sends it with its signatures: one
/// header, sent once, whose value is a list of `key=value` elements: the
/// time in Unix seconds under one key, each signature under another, each
/// signature the HMAC-SHA256 of `"{time}{joiner}{raw body}"` (the time
/// exactly as sent) under the secret's bytes. Stripe (`t=<unix>,v1=<hex>`
/// over `t.body`), Paddle (`ts=<unix>;h1=<hex>` over `ts:body`) and Calendly
/// (Stripe's shape) differ only in these fields.
///
/// Parsing ([`Self::parse`]): elements separated by `separator` with
/// optional whitespace; an element without `=` or whose signature does not
/// decode is skipped, one with another key is counted as another version
/// (`unsupported_version` when no signature of the scheme's own key is
/// left); a missing, repeated or malformed time rejects the whole header
/// (`malformed_header`). The window is checked once a signature matched.
#[derive(Debug, Clone, Copy)]
pub struct TimestampedHeader {
    /// The header, lower-cased (what verification looks up).
    pub header: &'static str,
    /// The header's name as the provider spells it (what signing sends).
    pub sent_as: &'static str,
    /// Between the list's elements.
    pub separator: char,
    /// The key of the signed time (`t`, `ts`).
    pub timestamp_key: &'static str,
    /// The key of each signature (`v1`, `h1`).
    pub signature_key: &'static str,
    /// Between the time and the body in the signed text (`.`, `:`).
    pub joiner: &'static str,
    /// How each signature's MAC is written.
    pub encoding: Encoding,
}

/// A `key=value` list carrying a signed timestamp and signatures, as a
/// [`TimestampedHeader`] scheme sends it (Stripe `t=..,v1=..`, Paddle
/// `ts=..;h1=..`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampedList<'a> {
    /// The timestamp exactly as sent (the signed bytes use this text).
    pub timestamp_text: &'a str,
    pub timestamp: i64,
    /// Decoded signatures of the scheme's own key (32 bytes each).
    pub signatures: Vec<Vec<u8>>,
    /// Whether elements with other keys (`v0`, ...) were present.
    pub other_tags: bool,
}

/// The length of an HMAC-SHA256, the MAC every [`TimestampedHeader`]
/// scheme signs with.
const MAC_LEN: usize = 32;

impl TimestampedHeader {
    /// Parse the header's value (the rules are in the type's doc).
    pub(crate) fn parse<'v>(&self, value: &'v str) -> Result<TimestampedList<'v>, Reason> {
        let mut timestamp: Option<(&str, i64)> = None;
        let mut signatures = Vec::new();
        let mut other_tags = false;
        for element in value.split(self.separator) {
            ct::check_interrupts();
            let Some((key, val)) = element.trim().split_once('=') else {
                continue;
            };
            let (key, val) = (key.trim(), val.trim());
            if key == self.timestamp_key {
                if timestamp.is_some() {
                    return Err(Reason::MalformedHeader);
                }
                timestamp = Some((val, parse_unix_seconds(val).ok_or(Reason::MalformedHeader)?));
            } else if key == self.signature_key {
                signatures.extend(self.encoding.decode(val, MAC_LEN));
            } else {
                other_tags = true;
            }
        }
        let (timestamp_text, timestamp) = timestamp.ok_or(Reason::MalformedHeader)?;
        Ok(TimestampedList { timestamp_text, timestamp, signatures, other_tags })
    }

    /// The MAC of `body` signed at `timestamp_text` under `key`.
    fn mac(&self, key: &[u8], timestamp_text: &str, body: &[u8]) -> [u8; MAC_LEN] {
        ct::hmac_sha256(key, &[timestamp_text.as_bytes(), self.joiner.as_bytes(), body])
    }

    /// The verdict on a delivery: some signature must match some key, and
    /// the signed time must be within `tolerance_us` of `now_us`
    /// (microseconds; Unix time).
    pub(crate) fn verify(&self, delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
        let check = || -> Result<Verdict, Verdict> {
            let list = self.parse(single(delivery.headers, self.header)?).map_err(Verdict::rejected)?;
            if list.signatures.is_empty() {
                return Err(no_candidates(list.other_tags, Some(list.timestamp)));
            }
            let matched = ct::first_match(keys, &list.signatures, |key| {
                self.mac(key, list.timestamp_text, delivery.body).to_vec()
            });
            Ok(Verdict::timestamped(matched, list.timestamp, now_us, tolerance_us))
        };
        check().unwrap_or_else(|rejected| rejected)
    }

    /// The header the provider would send for `body` under `secret` at `t`:
    /// the time, then one signature.
    pub(crate) fn sign(&self, body: &[u8], secret: &[u8], t: i64) -> Vec<(&'static str, String)> {
        let t = t.to_string();
        let signature = self.encoding.encode(&self.mac(secret, &t, body));
        let (time, sig, sep) = (self.timestamp_key, self.signature_key, self.separator);
        vec![(self.sent_as, format!("{time}={t}{sep}{sig}={signature}"))]
    }
}

/// One table of cases per frame, run over every scheme of the frame through
/// the scheme's registration ([`crate::signature::verify`] and
/// [`crate::signature::sign`], with the scheme's default window): the
/// rejections every scheme of a frame shares live here, each scheme's own
/// vectors and quirks in its module.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Signed;
    use crate::signature::{calendly, paddle, stripe};
    use crate::signature::{secret_key, sign, verify, Algorithm, Config, Headers, HmacSpec, Scheme, SignRequest};
    use Reason::UnsupportedVersion;
    use Reason::{MalformedHeader, MissingHeader, NoMatchingSignature, TimestampTooNew, TimestampTooOld};

    const SECRET: &str = "frame-test-secret";
    const BODY: &[u8] = br#"{"id":"evt_1","type":"test"}"#;
    const OTHER_BODY: &[u8] = br#"{"id":"evt_2","type":"test"}"#;

    /// What one case sends: the values of the scheme's header (none: no
    /// header), under which name, with which body, to a verifier with
    /// which secrets (the good one last) and clock (Unix seconds).
    struct Sent {
        name: Option<&'static str>,
        values: Vec<String>,
        body: &'static [u8],
        secrets: Vec<&'static str>,
        now: i64,
    }

    impl Sent {
        fn values(values: Vec<String>, now: i64) -> Sent {
            Sent { name: None, values, body: BODY, secrets: vec![SECRET], now }
        }
    }

    fn headers(name: &str, sent: &Sent) -> Headers {
        Headers::from_pairs(sent.values.iter().map(|v| (sent.name.unwrap_or(name), v.as_str())))
    }

    // ---- the timestamped header: Stripe, Paddle, Calendly

    const TIMESTAMPED: [(Scheme, TimestampedHeader); 3] =
        [(Scheme::Stripe, stripe::FRAME), (Scheme::Paddle, paddle::FRAME), (Scheme::Calendly, calendly::FRAME)];
    const T: i64 = 1_700_000_000;

    /// One scheme of the frame, signed at [`T`].
    struct Timed {
        frame: TimestampedHeader,
        /// The scheme's default window, seconds.
        tolerance: i64,
        /// The signature of [`BODY`] at [`T`] under [`SECRET`], as sent.
        sig: String,
    }

    impl Timed {
        /// The time element.
        fn t(&self, t: impl std::fmt::Display) -> String {
            format!("{}={t}", self.frame.timestamp_key)
        }
        /// A signature element.
        fn v(&self, signature: &str) -> String {
            format!("{}={signature}", self.frame.signature_key)
        }
        /// The value as signed.
        fn signed(&self) -> String {
            self.list(&[self.t(T), self.v(&self.sig)])
        }
        fn list(&self, elements: &[String]) -> String {
            elements.join(&self.frame.separator.to_string())
        }
        /// One value of these elements, checked at `now`.
        fn of_at(&self, elements: &[String], now: i64) -> Sent {
            Sent::values(vec![self.list(elements)], now)
        }
        /// One value of these elements, checked at [`T`].
        fn of(&self, elements: &[String]) -> Sent {
            self.of_at(elements, T)
        }
        /// The value as signed, checked at `now`.
        fn signed_at(&self, now: i64) -> Sent {
            Sent::values(vec![self.signed()], now)
        }
    }

    /// The cases: what is sent, and the verdict's reason and `signed_at`
    /// (the signed time once it was read; `secret_index` is the secret's
    /// whenever a signature matched).
    type TimedCase = (&'static str, fn(&Timed) -> Sent, Reason, Option<i64>);
    const TIMED_CASES: &[TimedCase] = &[
        ("no header", |_| Sent::values(vec![], T), MissingHeader, None),
        ("the header sent twice", |s| Sent::values(vec![s.signed(), s.signed()], T), MalformedHeader, None),
        ("the header twice, once stale", |s| Sent::values(vec![s.signed(), s.t(1)], T), MalformedHeader, None),
        ("an empty value", |s| s.of(&[]), MalformedHeader, None),
        ("no time", |s| s.of(&[s.v(&s.sig)]), MalformedHeader, None),
        ("the time twice", |s| s.of(&[s.t(1), s.signed()]), MalformedHeader, None),
        ("the time again after", |s| s.of(&[s.signed(), s.t(T)]), MalformedHeader, None),
        ("the time in milliseconds", |s| s.of(&[s.t(T * 1000), s.v(&s.sig)]), MalformedHeader, None),
        ("the time not in digits", |s| s.of(&[s.t("17e8"), s.v(&s.sig)]), MalformedHeader, None),
        ("a signature that is not hex", |s| s.of(&[s.t(T), s.v("zz")]), MalformedHeader, Some(T)),
        ("a truncated signature", |s| s.of(&[s.t(T), s.v(&s.sig[..40])]), MalformedHeader, Some(T)),
        ("another version only (v0)", |s| s.of(&[s.t(T), format!("v0={}", s.sig)]), UnsupportedVersion, Some(T)),
        ("another version only (h2=00)", |s| s.of(&[s.t(T), "h2=00".into()]), UnsupportedVersion, Some(T)),
        ("another body", |s| Sent { body: OTHER_BODY, ..s.signed_at(T) }, NoMatchingSignature, Some(T)),
        ("another secret", |s| Sent { secrets: vec!["wrong"], ..s.signed_at(T) }, NoMatchingSignature, Some(T)),
        ("the time moved (it is signed)", |s| s.of(&[s.t(T + 1), s.v(&s.sig)]), NoMatchingSignature, Some(T + 1)),
        ("one second too old", |s| s.signed_at(T + s.tolerance + 1), TimestampTooOld, Some(T)),
        ("one second too new", |s| s.signed_at(T - s.tolerance - 1), TimestampTooNew, Some(T)),
        // accepted: the window's bounds, the list's leniencies, rotation
        ("as signed", |s| s.signed_at(T), Reason::Ok, Some(T)),
        ("on the old bound", |s| s.signed_at(T + s.tolerance), Reason::Ok, Some(T)),
        ("on the new bound", |s| s.signed_at(T - s.tolerance), Reason::Ok, Some(T)),
        (
            "whitespace around elements",
            |s| s.of(&[format!(" {} ", s.t(T)), format!(" {} ", s.v(&s.sig))]),
            Reason::Ok,
            Some(T),
        ),
        ("upper-case hex", |s| s.of(&[s.t(T), s.v(&s.sig.to_uppercase())]), Reason::Ok, Some(T)),
        ("a stale signature first", |s| s.of(&[s.t(T), s.v(&"00".repeat(32)), s.v(&s.sig)]), Reason::Ok, Some(T)),
        (
            "junk skipped",
            |s| s.of(&[s.t(T), "junk".into(), s.v("zz"), format!("v0={}", s.sig), s.v(&s.sig)]),
            Reason::Ok,
            Some(T),
        ),
        ("a rotated secret", |s| Sent { secrets: vec!["old", SECRET], ..s.signed_at(T) }, Reason::Ok, Some(T)),
    ];

    #[test]
    fn timestamped_header_cases_over_every_scheme() {
        for (scheme, frame) in TIMESTAMPED {
            let tolerance = scheme.default_tolerance_s().expect("a timestamped scheme has a window");
            let Signed::Headers(signed) =
                sign(scheme, BODY, SECRET.as_bytes(), &SignRequest { unix_s: T, ..SignRequest::default() }).unwrap()
            else {
                panic!("{scheme:?} signs headers")
            };
            let [(name, value)] = &signed[..] else { panic!("{scheme:?} sends one header: {signed:?}") };
            assert_eq!((name.as_str(), name.to_ascii_lowercase().as_str()), (frame.sent_as, frame.header));
            let prefix = format!("{}={T}{}{}=", frame.timestamp_key, frame.separator, frame.signature_key);
            let signature =
                value.strip_prefix(&prefix).unwrap_or_else(|| panic!("{scheme:?} signs {value}")).to_string();
            let s = Timed { frame, tolerance, sig: signature };
            assert_eq!(s.signed(), *value);
            for (case, send, reason, signed_at) in TIMED_CASES {
                let sent = send(&s);
                let headers = headers(frame.sent_as, &sent);
                let delivery = Delivery { body: sent.body, headers: &headers, url: None, method: None };
                let config = Config {
                    secrets: sent.secrets.clone(),
                    tolerance_us: None,
                    now_us: sent.now * 1_000_000,
                    hmac: None,
                };
                let matched = matches!(reason, Reason::Ok | Reason::TimestampTooOld | Reason::TimestampTooNew);
                let want = Verdict {
                    reason: *reason,
                    secret_index: matched.then(|| sent.secrets.len() - 1),
                    signed_at: *signed_at,
                };
                assert_eq!(verify(scheme, delivery, &config).unwrap(), want, "{scheme:?}: {case}: {:?}", sent.values);
            }
        }
    }

    // ---- the tagged header: GitHub, Intercom, Typeform, X, Shopify, Square, hmac

    /// One scheme of the frame.
    struct Tagged {
        scheme: Scheme,
        /// Its header, as the provider spells it.
        header: &'static str,
        tag: &'static str,
        encoding: Encoding,
        /// The MAC's length, bytes.
        mac_len: usize,
        /// A value naming another version (for a scheme without a tag, a
        /// value that is simply malformed).
        other_version: &'static str,
        /// A value without the tag and without `=` is malformed, except for
        /// the generic scheme, where it names another version.
        untagged: Reason,
        url: Option<&'static str>,
        hmac: Option<HmacSpec>,
    }

    fn tagged_schemes() -> Vec<Tagged> {
        let tagged = |scheme, header, tag, encoding, other_version| Tagged {
            scheme,
            header,
            tag,
            encoding,
            mac_len: 32,
            other_version,
            untagged: Reason::MalformedHeader,
            url: None,
            hmac: None,
        };
        let spec = HmacSpec {
            header: "X-Signature".into(),
            prefix: "sha256=".into(),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
        };
        vec![
            tagged(Scheme::Github, "X-Hub-Signature-256", "sha256=", Encoding::Hex, "sha1=0123456789abcdef"),
            Tagged { mac_len: 20, ..tagged(Scheme::Intercom, "X-Hub-Signature", "sha1=", Encoding::Hex, "sha256=00") },
            tagged(Scheme::Typeform, "Typeform-Signature", "sha256=", Encoding::Base64, "sha1=AAAA"),
            tagged(Scheme::Twitter, "X-Twitter-Webhooks-Signature", "sha256=", Encoding::Base64, "sha1=AAAA"),
            tagged(Scheme::Shopify, "X-Shopify-Hmac-Sha256", "", Encoding::Base64, "sha1=AAAA"),
            Tagged {
                url: Some("https://example.com/square?x=1"),
                ..tagged(Scheme::Square, "X-Square-HmacSha256-Signature", "", Encoding::Base64, "sha1=AAAA")
            },
            Tagged {
                untagged: Reason::UnsupportedVersion,
                hmac: Some(spec),
                ..tagged(Scheme::Hmac, "X-Signature", "sha256=", Encoding::Hex, "v0=00")
            },
        ]
    }

    /// One scheme of the frame with its signature of [`BODY`] under [`SECRET`].
    struct Signature<'a> {
        scheme: &'a Tagged,
        /// The value as signed.
        good: String,
        /// The MAC's bytes.
        mac: Vec<u8>,
    }

    impl Signature<'_> {
        /// These values of the header.
        fn values(&self, values: &[&str]) -> Option<Sent> {
            Some(Sent::values(values.iter().map(|v| v.to_string()).collect(), 0))
        }
        /// One value.
        fn one(&self, value: &str) -> Option<Sent> {
            self.values(&[value])
        }
        /// One value: the scheme's tag and `encoded`.
        fn tagged(&self, encoded: &str) -> Option<Sent> {
            self.one(&format!("{}{encoded}", self.scheme.tag))
        }
        /// The value as signed, sent as `change` makes it.
        fn good(&self, change: impl FnOnce(Sent) -> Sent) -> Option<Sent> {
            self.one(&self.good).map(change)
        }
        /// The MAC in `encoding`.
        fn mac_in(&self, encoding: Encoding) -> String {
            encoding.encode(&self.mac)
        }
        fn base64(&self) -> bool {
            self.scheme.encoding == Encoding::Base64
        }
    }

    /// 32 bytes 0xfb in base64url: `-_v7` repeated, `=`-padded.
    const BASE64URL_FB: &str = "-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_s=";

    fn other(encoding: Encoding) -> Encoding {
        match encoding {
            Encoding::Hex => Encoding::Base64,
            Encoding::Base64 => Encoding::Hex,
        }
    }

    /// The cases: what is sent (`None`: the case does not apply to the
    /// scheme's encoding) and the verdict's reason.
    type TaggedCase = (&'static str, fn(&Signature<'_>) -> Option<Sent>, fn(&Tagged) -> Reason);
    const TAGGED_CASES: &[TaggedCase] = &[
        ("no header", |s| s.values(&[]), |_| MissingHeader),
        ("only another header", |s| s.good(|sent| Sent { name: Some("X-Other-Signature"), ..sent }), |_| MissingHeader),
        ("the header sent twice", |s| s.values(&[&s.good, &s.good]), |_| MalformedHeader),
        (
            "the header twice, once stale",
            |s| s.values(&[&format!("{}AAAA", s.scheme.tag), &s.good]),
            |_| MalformedHeader,
        ),
        ("two signatures joined in one value", |s| s.one(&format!("{}, {}", s.good, s.good)), |_| MalformedHeader),
        ("an empty value", |s| s.one(""), |t| t.untagged),
        ("garbage", |s| s.one("garbage"), |t| t.untagged),
        ("the tag and no MAC", |s| s.tagged("zz!"), |_| MalformedHeader),
        ("a truncated MAC", |s| s.one(&s.good[..s.good.len() - 4]), |_| MalformedHeader),
        (
            "a longer MAC",
            |s| s.tagged(&s.scheme.encoding.encode(&[&s.mac[..], &s.mac[..12]].concat())),
            |_| MalformedHeader,
        ),
        ("the MAC in the other encoding", |s| s.tagged(&s.mac_in(other(s.scheme.encoding))), |_| MalformedHeader),
        ("unpadded base64", |s| s.base64().then(|| s.one(s.good.trim_end_matches('='))).flatten(), |_| MalformedHeader),
        // (bytes whose base64 has both `+` and `/`, in the URL-safe alphabet)
        ("base64url", |s| s.base64().then(|| s.tagged(BASE64URL_FB)).flatten(), |_| MalformedHeader),
        (
            "another version",
            |s| s.one(s.scheme.other_version),
            |t| if t.tag.is_empty() { MalformedHeader } else { UnsupportedVersion },
        ),
        ("another body", |s| s.good(|sent| Sent { body: OTHER_BODY, ..sent }), |_| NoMatchingSignature),
        ("another secret", |s| s.good(|sent| Sent { secrets: vec!["wrong"], ..sent }), |_| NoMatchingSignature),
        // accepted
        ("as signed", |s| s.one(&s.good), |_| Reason::Ok),
        ("whitespace around the value", |s| s.one(&format!(" {} ", s.good)), |_| Reason::Ok),
        (
            "upper-case hex",
            |s| (!s.base64()).then(|| s.tagged(&s.mac_in(Encoding::Hex).to_uppercase())).flatten(),
            |_| Reason::Ok,
        ),
        ("a rotated secret", |s| s.good(|sent| Sent { secrets: vec!["old", SECRET], ..sent }), |_| Reason::Ok),
    ];

    #[test]
    fn tagged_header_cases_over_every_scheme() {
        for t in tagged_schemes() {
            let key = secret_key(t.scheme, SECRET).unwrap();
            let request = SignRequest { url: t.url, hmac: t.hmac.clone(), ..SignRequest::default() };
            let Signed::Headers(signed) = sign(t.scheme, BODY, &key, &request).unwrap() else {
                panic!("{:?} signs headers", t.scheme)
            };
            let [(name, good)] = &signed[..] else { panic!("{:?} sends one header: {signed:?}", t.scheme) };
            assert_eq!(name.to_ascii_lowercase(), t.header.to_ascii_lowercase());
            let encoded = good.strip_prefix(t.tag).unwrap_or_else(|| panic!("{:?} signs {good}", t.scheme));
            let mac = t.encoding.decode(encoded, t.mac_len).expect("the signed MAC decodes");
            let s = Signature { scheme: &t, good: good.clone(), mac };
            for (case, send, reason) in TAGGED_CASES {
                let Some(sent) = send(&s) else { continue };
                let headers = headers(t.header, &sent);
                let delivery = Delivery { body: sent.body, headers: &headers, url: t.url, method: None };
                let config =
                    Config { secrets: sent.secrets.clone(), tolerance_us: None, now_us: 0, hmac: t.hmac.clone() };
                let reason = reason(&t);
                let want = Verdict {
                    reason,
                    secret_index: (reason == Reason::Ok).then(|| sent.secrets.len() - 1),
                    signed_at: None,
                };
                assert_eq!(
                    verify(t.scheme, delivery, &config).unwrap(),
                    want,
                    "{:?}: {case}: {:?}",
                    t.scheme,
                    sent.values
                );
            }
        }
    }
}
