//! Public-key signatures: Ed25519 (Standard Webhooks `v1a`, Discord) and
//! ECDSA P-256 with SHA-256 (SendGrid). The keys are public keys, so they
//! are configuration, not secrets; a key that cannot be one is a 22023 like
//! any unusable secret ([`super::keys`]).
//!
//! No MAC is compared here: a signature verifies or it does not, and its
//! bytes are not secret. What the policy asks of these schemes instead:
//!
//! - **Ed25519 is verified strictly**, exactly as ed25519-dalek's
//!   `VerifyingKey::verify_strict` does (RFC 8032 section 5.1.7 with its
//!   malleability checks): `s` must be canonical (below the group order),
//!   `R` must be a canonical point encoding that is not of small order, and
//!   so must the public key (a weak, small-order key is refused when it is
//!   configured, since with one a forger succeeds one time in eight). The
//!   message is hashed through ed25519-dalek's streaming verifier (feature
//!   `hazmat`), in slices with interrupt checks, as every hash of a body
//!   is; `verify_strict` itself takes the message in one piece and is used
//!   by the tests as the reference this must agree with.
//! - **ECDSA signatures are DER, strictly**: the `der` crate refuses
//!   non-minimal lengths and integers, trailing bytes and negative numbers,
//!   and the signature must re-encode to exactly the bytes presented;
//!   `r` and `s` must lie in `1..n`. High `s` values are accepted: SendGrid
//!   does not normalise `s` (the signature of its own libraries' published
//!   test vector has a high `s`), so requiring low `s` would refuse about
//!   half of its genuine deliveries, and a second valid encoding of a
//!   signature lets nobody sign anything new (deduplication never keys on
//!   signature bytes).

use super::{ct, single, timestamp_header, Delivery, Key, Reason, Verdict};
use ed25519_dalek::{Signature as Ed25519Signature, VerifyingKey as Ed25519Key};
use p256::ecdsa::signature::hazmat::PrehashVerifier;
pub(crate) use p256::ecdsa::{Signature as P256Signature, VerifyingKey as P256Key};

/// Length of an Ed25519 public key and of a SHA-256 digest, in bytes.
pub const ED25519_KEY_LEN: usize = 32;
/// Length of an Ed25519 signature, in bytes.
pub const ED25519_SIGNATURE_LEN: usize = 64;
/// The longest DER encoding of a P-256 ECDSA signature: a SEQUENCE of two
/// INTEGERs of at most 33 bytes each.
pub const P256_DER_MAX_LEN: usize = 72;

/// An Ed25519 public key from its 32 bytes: a canonical encoding of a point
/// that is not of small order. `Err` says what is wrong, never the key.
pub(crate) fn ed25519_key(bytes: &[u8]) -> Result<Ed25519Key, &'static str> {
    let bytes: &[u8; ED25519_KEY_LEN] =
        bytes.try_into().map_err(|_| "is not an Ed25519 public key (it must decode to 32 bytes)")?;
    let key = Ed25519Key::from_bytes(bytes).map_err(|_| "is not an Ed25519 public key (not a curve point)")?;
    if key.is_weak() {
        return Err("is a weak Ed25519 public key (a point of small order, which would verify forgeries)");
    }
    // A non-canonical encoding (a y of p or more) decompresses too; it is
    // not the key anyone was given, and the signer hashes the canonical one.
    if key.to_edwards().compress().as_bytes() != bytes {
        return Err("is not a canonical Ed25519 public key encoding");
    }
    Ok(key)
}

/// Whether `signature` (64 bytes) is a valid Ed25519 signature of the
/// concatenation of `parts` under `key`, under `verify_strict`'s rules (see
/// the module doc). `key` was checked by [`ed25519_key`].
pub(crate) fn ed25519_verify(key: &Ed25519Key, signature: &[u8], parts: &[&[u8]]) -> bool {
    let Ok(signature) = <&[u8; ED25519_SIGNATURE_LEN]>::try_from(signature) else {
        return false;
    };
    let signature = Ed25519Signature::from_bytes(signature);
    // R must decompress and must not be of small order (verify_strict's
    // checks on R; the key's were made when it was configured).
    let r = curve25519_dalek::edwards::CompressedEdwardsY(*signature.r_bytes());
    match r.decompress() {
        Some(point) if !point.is_small_order() => {}
        _ => return false,
    }
    // Refuses an s that is not canonical before any hashing.
    let Ok(mut verifier) = key.verify_stream(&signature) else {
        return false;
    };
    ct::feed(parts, |slice| verifier.update(slice));
    verifier.finalize_and_verify().is_ok()
}

/// A P-256 public key from the DER of its SubjectPublicKeyInfo (RFC 5480:
/// algorithm id-ecPublicKey, curve prime256v1), as SendGrid shows it.
pub(crate) fn p256_key(der: &[u8]) -> Result<P256Key, &'static str> {
    use p256::pkcs8::DecodePublicKey;
    P256Key::from_public_key_der(der)
        .map_err(|_| "is not a P-256 public key (the DER of a SubjectPublicKeyInfo for curve prime256v1)")
}

/// A DER-encoded ECDSA P-256 signature, strictly (see the module doc);
/// `None` when it is not one.
pub(crate) fn p256_signature(der: &[u8]) -> Option<P256Signature> {
    if der.len() > P256_DER_MAX_LEN {
        return None;
    }
    let signature = P256Signature::from_der(der).ok()?;
    (signature.to_der().as_bytes() == der).then_some(signature)
}

/// Whether `signature` is a valid ECDSA P-256 signature with SHA-256 of the
/// concatenation of `parts` under `key` (FIPS 186-5; any `s` in `1..n`).
pub(crate) fn p256_verify(key: &P256Key, signature: &P256Signature, parts: &[&[u8]]) -> bool {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    ct::feed(parts, |slice| hash.update(slice));
    key.verify_prehash(&hash.finalize(), signature).is_ok()
}

/// The frame Discord and SendGrid share: one signature in `header` over
/// `"{timestamp text}{raw body}"` (the timestamp as sent, then the body, no
/// separator), the timestamp (Unix seconds) in `timestamp_header`, verified
/// with every configured key of the scheme's kind, within the replay window.
pub(crate) struct TimestampedSignature<'a, S> {
    /// The signature header, lower-cased.
    pub header: &'a str,
    /// The signed timestamp header, lower-cased.
    pub timestamp_header: &'a str,
    /// The signature header's text (trimmed) to a signature; `None` for a
    /// malformed one (`malformed_header`).
    pub decode: fn(&str) -> Option<S>,
    /// Whether a key made `signature` of the parts; false for a key of
    /// another kind.
    pub verify: fn(&Key, &S, &[&[u8]]) -> bool,
}

impl<S> TimestampedSignature<'_, S> {
    /// The verdict on a delivery: `missing_header` or `malformed_header`
    /// (with the signed time once it is read), else which key verifies it,
    /// judged against the window (`Verdict::timestamped`).
    pub(crate) fn verify_delivery(
        &self,
        delivery: Delivery<'_>,
        keys: &[Key],
        tolerance_us: i64,
        now_us: i64,
    ) -> Verdict {
        self.check(delivery, keys, tolerance_us, now_us).unwrap_or_else(|rejected| rejected)
    }

    fn check(&self, delivery: Delivery<'_>, keys: &[Key], tolerance_us: i64, now_us: i64) -> Result<Verdict, Verdict> {
        let (ts_text, ts) = timestamp_header(delivery.headers, self.timestamp_header)?;
        let with_time = |v: Verdict| Verdict { signed_at: Some(ts), ..v };
        let signature = single(delivery.headers, self.header).map_err(with_time)?;
        let signature = (self.decode)(signature.trim()).ok_or(with_time(Verdict::rejected(Reason::MalformedHeader)))?;
        let signed: [&[u8]; 2] = [ts_text.as_bytes(), delivery.body];
        let matched = keys.iter().position(|key| (self.verify)(key, &signature, &signed));
        Ok(Verdict::timestamped(matched, ts, now_us, tolerance_us))
    }
}

/// Signing for the tests: what the providers do with their private keys.
#[cfg(test)]
pub(crate) mod testing {
    use ed25519_dalek::Signer;

    /// The Ed25519 key pair of a 32-byte seed (RFC 8032's private key).
    pub fn ed25519(seed: [u8; 32]) -> ed25519_dalek::SigningKey {
        ed25519_dalek::SigningKey::from_bytes(&seed)
    }

    /// The Ed25519 signature of the concatenation of `parts`.
    pub fn ed25519_sign(key: &ed25519_dalek::SigningKey, parts: &[&[u8]]) -> [u8; 64] {
        key.sign(&parts.concat()).to_bytes()
    }

    /// A P-256 key pair from `material` (a deterministic scalar: the first
    /// SHA-256 iterate of it that is a valid private key).
    pub fn p256(material: &[u8]) -> p256::ecdsa::SigningKey {
        let mut seed = crate::signature::ct::sha256(material);
        loop {
            if let Ok(key) = p256::ecdsa::SigningKey::from_bytes(&seed.into()) {
                return key;
            }
            seed = crate::signature::ct::sha256(&seed);
        }
    }

    /// The DER of the SubjectPublicKeyInfo of a P-256 key, base64: how
    /// SendGrid shows its verification key (RFC 5480: id-ecPublicKey,
    /// prime256v1, then the uncompressed SEC1 point).
    pub fn p256_public_base64(key: &p256::ecdsa::SigningKey) -> String {
        const SPKI_PREFIX: &str = "3059301306072a8648ce3d020106082a8648ce3d030107034200";
        let point = key.verifying_key().to_encoded_point(false);
        let der = [hex::decode(SPKI_PREFIX).unwrap().as_slice(), point.as_bytes()].concat();
        crate::signature::ct::encode_base64(&der)
    }

    /// The DER of the ECDSA P-256 SHA-256 signature (RFC 6979, so
    /// deterministic) of the concatenation of `parts`.
    pub fn p256_sign(key: &p256::ecdsa::SigningKey, parts: &[&[u8]]) -> Vec<u8> {
        let signature: p256::ecdsa::Signature = key.sign(&parts.concat());
        signature.to_der().as_bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use proptest::prelude::*;

    /// RFC 8032, section 7.1, TEST 2: the one-byte message 0x72.
    #[test]
    fn rfc_8032_test_2() {
        let public = hex::decode("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c").unwrap();
        let signature = hex::decode(
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da\
             085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
        )
        .unwrap();
        let key = ed25519_key(&public).unwrap();
        assert!(ed25519_verify(&key, &signature, &[b"\x72"]));
        assert!(ed25519_verify(&key, &signature, &[b"", b"\x72", b""]), "split anywhere");
        assert!(!ed25519_verify(&key, &signature, &[b"\x73"]));
        assert!(!ed25519_verify(&key, &signature[..63], &[b"\x72"]), "truncated");
    }

    #[test]
    fn weak_and_malformed_ed25519_keys_are_refused() {
        // The identity point (small order) and a non-point.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert!(ed25519_key(&identity).unwrap_err().contains("weak"));
        assert!(ed25519_key(&[0u8; 31]).is_err());
        let not_a_point = (2u8..=255)
            .map(|y| {
                let mut bytes = [0u8; 32];
                bytes[0] = y;
                bytes
            })
            .find(|bytes| Ed25519Key::from_bytes(bytes).is_err())
            .unwrap();
        assert!(ed25519_key(&not_a_point).unwrap_err().contains("not a curve point"));
        // A y of p or more reduces to a y below 19: each that is a point of
        // large order is refused as a non-canonical encoding.
        let mut refused = 0;
        for small_y in 2u8..19 {
            let mut bytes = [0xffu8; 32];
            bytes[0] = 0xed + small_y; // p + small_y, little-endian
            bytes[31] = 0x7f;
            if Ed25519Key::from_bytes(&bytes).is_ok_and(|k| !k.is_weak()) {
                assert!(ed25519_key(&bytes).unwrap_err().contains("canonical"), "y = p + {small_y}");
                refused += 1;
            }
        }
        assert!(refused > 0, "some y below 19 is a point of large order");
        let good = ed25519([7; 32]).verifying_key();
        assert_eq!(ed25519_key(good.as_bytes()), Ok(good));
    }

    /// A signature whose R is of small order never verifies, even where
    /// the plain (cofactorless, non-strict) equation would hold.
    #[test]
    fn small_order_r_is_refused() {
        let key = ed25519([9; 32]).verifying_key();
        let mut signature = [0u8; 64];
        signature[0] = 1; // R = identity, s = 0
        assert!(!ed25519_verify(&key, &signature, &[b"m"]));
        assert!(key.verify_strict(b"m", &Ed25519Signature::from_bytes(&signature)).is_err());
    }

    #[test]
    fn non_canonical_s_is_refused() {
        let signer = ed25519([3; 32]);
        let mut signature = ed25519_sign(&signer, &[b"m"]);
        assert!(ed25519_verify(&signer.verifying_key(), &signature, &[b"m"]));
        // s + L: the same s modulo the group order, not canonical.
        const L: [u8; 32] = [
            0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ];
        let mut carry = 0u16;
        for i in 0..32 {
            let sum = u16::from(signature[32 + i]) + u16::from(L[i]) + carry;
            signature[32 + i] = sum as u8;
            carry = sum >> 8;
        }
        assert!(!ed25519_verify(&signer.verifying_key(), &signature, &[b"m"]));
    }

    proptest! {
        // Three Ed25519 verifications a case, slow in an unoptimised build.
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The streaming verifier agrees with `verify_strict` on genuine
        /// signatures, on any changed byte of one, and on arbitrary bytes.
        #[test]
        fn streaming_verification_agrees_with_verify_strict(
            seed in any::<[u8; 32]>(),
            message in proptest::collection::vec(any::<u8>(), 0..200),
            split in any::<usize>(),
            index in 0usize..64,
            mask in 0u8..=255,
            garbage in any::<[u8; 32]>(),
        ) {
            let signer = ed25519(seed);
            let key = signer.verifying_key();
            let mut signature = ed25519_sign(&signer, &[&message]);
            signature[index] ^= mask;
            let at = split % (message.len() + 1);
            let strict = key.verify_strict(&message, &Ed25519Signature::from_bytes(&signature)).is_ok();
            prop_assert_eq!(ed25519_verify(&key, &signature, &[&message[..at], &message[at..]]), strict);
            prop_assert_eq!(strict, mask == 0);
            let mut arbitrary = signature;
            arbitrary[..32].copy_from_slice(&garbage);
            let strict = key.verify_strict(&message, &Ed25519Signature::from_bytes(&arbitrary)).is_ok();
            prop_assert_eq!(ed25519_verify(&key, &arbitrary, &[&message]), strict);
        }
    }

    /// SendGrid's published vector (sendgrid-python's test, see
    /// `sendgrid.rs`) has a high `s`: accepted, as SendGrid's libraries do.
    #[test]
    fn p256_high_s_is_accepted_and_der_is_strict() {
        let signer = p256(b"strict-der");
        let key = *signer.verifying_key();
        let der = p256_sign(&signer, &[b"message"]);
        let signature = p256_signature(&der).unwrap();
        assert!(p256_verify(&key, &signature, &[b"mess", b"age"]));
        assert!(!p256_verify(&key, &signature, &[b"massage"]));
        // The other s of the pair (n - s) verifies too.
        let flipped = match signature.normalize_s() {
            Some(low) => low,
            None => {
                let (r, s) = signature.split_scalars();
                P256Signature::from_scalars(r, -*s).unwrap()
            }
        };
        assert_ne!(flipped, signature);
        assert!(p256_verify(&key, &flipped, &[b"message"]));
        // Not DER: trailing byte, long-form length, a padded integer, raw r||s.
        let mut trailing = der.clone();
        trailing.push(0);
        assert!(p256_signature(&trailing).is_none());
        let mut long_form = vec![0x30, 0x81, der[1]];
        long_form.extend_from_slice(&der[2..]);
        assert!(p256_signature(&long_form).is_none());
        let (r, s) = (signature.r().to_bytes(), signature.s().to_bytes());
        let (r_min, s_min) = (minimal(&r), minimal(&s));
        assert_eq!(der_of(&r_min, &s_min), der, "the builder makes the crate's encoding");
        assert!(p256_signature(&der_of(&[&[0, 0][..], &r_min].concat(), &s_min)).is_none(), "padded integer");
        let mut negative: Vec<u8> = r.iter().skip_while(|b| **b == 0).copied().collect();
        negative[0] |= 0x80;
        assert!(p256_signature(&der_of(&negative, &s_min)).is_none(), "negative integer");
        assert!(p256_signature(&der_of(&[0], &s_min)).is_none(), "r = 0");
        assert!(p256_signature(&[r.as_slice(), s.as_slice()].concat()).is_none(), "raw r || s");
        assert!(p256_signature(&[]).is_none());
        assert!(p256_signature(&[0x30; 100]).is_none());
    }

    /// The DER of a SEQUENCE of two INTEGERs with these contents, as given.
    fn der_of(r: &[u8], s: &[u8]) -> Vec<u8> {
        let mut body = vec![0x02, r.len() as u8];
        body.extend_from_slice(r);
        body.extend([0x02, s.len() as u8]);
        body.extend_from_slice(s);
        [vec![0x30, body.len() as u8], body].concat()
    }

    /// The minimal DER INTEGER contents of an unsigned big-endian number.
    fn minimal(v: &[u8]) -> Vec<u8> {
        let v: Vec<u8> = v.iter().skip_while(|b| **b == 0).copied().collect();
        if v.first().is_none_or(|b| *b >= 0x80) {
            [vec![0], v].concat()
        } else {
            v
        }
    }

    #[test]
    fn p256_keys_must_be_spki_der_of_the_curve() {
        let signer = p256(b"k");
        let der = ct::decode_base64(&p256_public_base64(&signer), None).unwrap();
        assert_eq!(p256_key(&der).unwrap(), *signer.verifying_key());
        assert!(p256_key(&der[..der.len() - 1]).is_err());
        assert!(p256_key(&[der.as_slice(), &[0]].concat()).is_err(), "trailing byte");
        // The bare SEC1 point is not a SubjectPublicKeyInfo.
        assert!(p256_key(&der[der.len() - 65..]).is_err());
        // An Ed25519 SubjectPublicKeyInfo (RFC 8410) is another algorithm.
        let ed = hex::decode("302a300506032b6570032100").unwrap();
        assert!(p256_key(&[ed.as_slice(), &[1; 32]].concat()).is_err());
    }
}
