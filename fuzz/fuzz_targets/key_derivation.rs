//! Idempotency key derivation (`webhook_key`, `webhook_body_key`) on any
//! parts: no input panics; a derived key is at most 255 characters, the same
//! every time, and accepted by the bound it must meet; an error is 22023;
//! escaping tells distinct parts apart.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use webhook_dedup_core::key::{body_hash_field, check_bounded, derive, escape_part, Parts, MAX_KEY_CHARS};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    source: &'a str,
    event_id: &'a str,
    environment: Option<&'a str>,
    account: Option<&'a str>,
    operation: Option<&'a str>,
    body: Option<&'a [u8]>,
    other: &'a str,
}

fuzz_target!(|input: Input<'_>| {
    let hash;
    let (event_id, body_hash) = match input.body {
        Some(body) => {
            hash = body_hash_field(body);
            assert_eq!(hash.len(), 2 + 64);
            (hash.as_str(), true)
        }
        None => (input.event_id, false),
    };
    let parts = Parts {
        source: input.source,
        event_id,
        environment: input.environment,
        account: input.account,
        operation: input.operation,
        body_hash,
    };
    match derive(&parts) {
        Ok(key) => {
            assert!(key.chars().count() <= MAX_KEY_CHARS, "{key}");
            assert_eq!(derive(&parts).as_ref(), Ok(&key), "deterministic");
            check_bounded("idem_key", &key).expect("a derived key is a valid key");
        }
        Err(error) => assert_eq!(error.sqlstate(), "22023", "{error}"),
    }
    if input.event_id != input.other {
        assert_ne!(escape_part(input.event_id), escape_part(input.other), "escaping is injective");
    }
});
