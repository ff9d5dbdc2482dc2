//! The constant-time core shared by every scheme: HMAC over a sequence of
//! byte slices, comparison of decoded signatures, and the strict decoders
//! that turn a presented signature into bytes.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::{Sha256, Sha512};
use std::sync::OnceLock;
use subtle::ConstantTimeEq;

/// The hash functions a scheme may use with HMAC (RFC 2104).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// HMAC-SHA1: Twilio only, and the generic scheme for old senders.
    Sha1,
    Sha256,
    Sha512,
}

impl Algorithm {
    pub const ALL: [Algorithm; 3] = [Algorithm::Sha1, Algorithm::Sha256, Algorithm::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    /// Length of the MAC in bytes.
    pub fn mac_len(self) -> usize {
        match self {
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 => 32,
            Algorithm::Sha512 => 64,
        }
    }

    pub fn parse(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name().eq_ignore_ascii_case(name))
    }
}

/// Input hashed between two interrupt checks: 1 MiB, about a millisecond.
const SLICE: usize = 1 << 20;

/// The host's interrupt check, set once by the extension at load time
/// ([`on_interrupt_check`]); unset in plain unit tests.
static INTERRUPT_CHECK: OnceLock<fn()> = OnceLock::new();

/// Install the host's interrupt check (PostgreSQL's
/// `CHECK_FOR_INTERRUPTS`, which raises on a cancel, a terminate or a
/// timeout and absorbs barriers). Every loop of this module over input a
/// caller controls calls it, so that no request, however large, holds a
/// backend past `statement_timeout`. A second call is ignored.
pub fn on_interrupt_check(check: fn()) {
    let _ = INTERRUPT_CHECK.set(check);
}

/// Call the host's interrupt check, if one is installed. It may unwind.
pub fn check_interrupts() {
    if let Some(check) = INTERRUPT_CHECK.get() {
        check();
    }
}

fn mac_of<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = <M as Mac>::new_from_slice(key).expect("HMAC accepts keys of any length");
    for part in parts {
        for slice in part.chunks(SLICE) {
            check_interrupts();
            mac.update(slice);
        }
    }
    mac.finalize().into_bytes().to_vec()
}

/// Feed the concatenation of `parts` to `update` in slices of at most
/// 1 MiB, with an interrupt check before each: for hashes computed outside
/// this module (the public-key signatures of [`super::asymmetric`]).
pub(crate) fn feed(parts: &[&[u8]], mut update: impl FnMut(&[u8])) {
    for part in parts {
        for slice in part.chunks(SLICE) {
            check_interrupts();
            update(slice);
        }
    }
}

/// SHA-256 of `bytes` (fingerprints, body keys, Twilio's `bodySHA256`),
/// hashed in slices with interrupt checks between them.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    let mut hash = Sha256::new();
    for slice in bytes.chunks(SLICE) {
        check_interrupts();
        hash.update(slice);
    }
    hash.finalize().into()
}

/// HMAC (RFC 2104) of the concatenation of `parts` under `key`, without
/// copying the parts together.
pub fn hmac(algorithm: Algorithm, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    match algorithm {
        Algorithm::Sha1 => mac_of::<Hmac<Sha1>>(key, parts),
        Algorithm::Sha256 => mac_of::<Hmac<Sha256>>(key, parts),
        Algorithm::Sha512 => mac_of::<Hmac<Sha512>>(key, parts),
    }
}

/// HMAC-SHA256 (the common case) as a fixed array.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    hmac(Algorithm::Sha256, key, parts).try_into().expect("SHA-256 MACs are 32 bytes")
}

/// True when `expected` and `presented` are the same bytes.
///
/// The comparison time depends only on the lengths, which are public (a
/// scheme fixes its signature length). A length mismatch is a mismatch:
/// never a prefix comparison, never a panic (RUSTSEC-2024-0010 was a
/// truncated-signature prefix match).
pub fn equal(expected: &[u8], presented: &[u8]) -> bool {
    expected.len() == presented.len() && bool::from(expected.ct_eq(presented))
}

/// The index of the first key whose MAC (computed by `mac`) equals one of
/// `candidates`. Every key is tried against every candidate with
/// [`equal`]; which secret matched is not secret.
pub fn first_match<K: AsRef<[u8]>>(
    keys: &[K],
    candidates: &[Vec<u8>],
    mac: impl Fn(&[u8]) -> Vec<u8>,
) -> Option<usize> {
    keys.iter().position(|key| {
        let expected = mac(key.as_ref());
        candidates.iter().any(|c| {
            check_interrupts();
            equal(&expected, c)
        })
    })
}

/// Decode a hex signature, case-insensitively. `None` when it is not hex or
/// not exactly `len` bytes long.
pub fn decode_hex(text: &str, len: usize) -> Option<Vec<u8>> {
    let bytes = hex::decode(text).ok()?;
    (bytes.len() == len).then_some(bytes)
}

/// Decode canonical standard base64 (RFC 4648 section 4, padded, no
/// trailing bits, no whitespace). `None` when it is not, or when it does not
/// decode to exactly `len` bytes (or to any length when `len` is `None`).
pub fn decode_base64(text: &str, len: Option<usize>) -> Option<Vec<u8>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
    len.is_none_or(|len| bytes.len() == len).then_some(bytes)
}

/// Standard, padded base64.
pub fn encode_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 section 4.3, test case 2, for SHA-256 and SHA-512, and
    /// RFC 2202 section 3, test case 2, for SHA-1.
    #[test]
    fn rfc_test_vectors() {
        let parts: [&[u8]; 2] = [b"what do ya want ", b"for nothing?"];
        assert_eq!(
            hex::encode(hmac_sha256(b"Jefe", &parts)),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex::encode(hmac(Algorithm::Sha512, b"Jefe", &parts)),
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
        );
        assert_eq!(hex::encode(hmac(Algorithm::Sha1, b"Jefe", &parts)), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
        for a in Algorithm::ALL {
            assert_eq!(hmac(a, b"k", &[b"x"]).len(), a.mac_len());
            assert_eq!(Algorithm::parse(&a.name().to_uppercase()), Some(a));
        }
    }

    #[test]
    fn equal_requires_same_length() {
        assert!(equal(b"abc", b"abc"));
        assert!(!equal(b"abc", b"abd"));
        assert!(!equal(b"abc", b"ab"));
        assert!(!equal(b"ab", b"abc"));
        assert!(!equal(b"", b"a"));
    }

    #[test]
    fn decode_hex_is_case_insensitive_and_length_checked() {
        assert_eq!(decode_hex("0aFf", 2), Some(vec![0x0a, 0xff]));
        assert_eq!(decode_hex("0aFf", 3), None);
        assert_eq!(decode_hex("0aF", 2), None);
        assert_eq!(decode_hex("zz", 1), None);
    }

    #[test]
    fn decode_base64_is_canonical_only() {
        assert_eq!(decode_base64("AAE=", Some(2)), Some(vec![0, 1]));
        assert_eq!(decode_base64("AAE", Some(2)), None, "unpadded");
        assert_eq!(decode_base64("AAF=", Some(2)), None, "non-zero trailing bits");
        assert_eq!(decode_base64(" AAE=", Some(2)), None, "whitespace");
        assert_eq!(decode_base64("AA-_", None), None, "URL-safe alphabet");
        assert_eq!(decode_base64("AAE=", Some(3)), None, "wrong length");
        assert_eq!(decode_base64("", None), Some(vec![]));
    }
}
