//! The constant-time core shared by every scheme: HMAC over a sequence of
//! byte slices, and comparison of decoded signatures.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// HMAC-SHA256 (RFC 2104 / FIPS 198-1) of the concatenation of `parts`
/// under `key`, without copying the parts together.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
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

/// Decode a hex signature, case-insensitively. `None` when it is not hex or
/// not exactly `len` bytes long.
pub fn decode_hex(text: &str, len: usize) -> Option<Vec<u8>> {
    let bytes = hex::decode(text).ok()?;
    (bytes.len() == len).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 section 4.3, test case 2.
    #[test]
    fn rfc4231_case_2() {
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
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
}
