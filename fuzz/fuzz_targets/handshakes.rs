//! The provider handshakes `webhook_receive` answers (Slack's URL
//! verification, Zoom's endpoint validation, Discord's PING, X's CRC) on any
//! body, URL and key: no input panics, an answer is a JSON object, and X's
//! CRC answers only an empty body with `sha256=` and a MAC.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use webhook_dedup_core::handshake::{answer, unsigned, Answer};
use webhook_dedup_core::profile::Body;
use webhook_dedup_core::signature::Scheme;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    scheme: u8,
    body: &'a [u8],
    url: Option<&'a str>,
    key: &'a [u8],
}

fuzz_target!(|input: Input<'_>| {
    let scheme = Scheme::ALL[usize::from(input.scheme) % Scheme::ALL.len()];
    if let Some(Answer::Respond(value)) = answer(scheme, &Body::new(input.body), input.key) {
        assert!(value.is_object(), "{value}");
    }
    match unsigned(scheme, input.body, input.url, input.key) {
        Some(Answer::Respond(value)) => {
            assert!(scheme == Scheme::Twitter && input.body.is_empty());
            let token = value["response_token"].as_str().expect("a response token");
            assert!(token.starts_with("sha256="), "{token}");
        }
        Some(Answer::Refused(_)) => assert!(scheme == Scheme::Twitter && input.body.is_empty()),
        None => {}
    }
});
