//! A source's intake settings (`webhook_dedup.sources`: `*_from` places,
//! time formats, fingerprint pointers, accepted event types) and the reading
//! of a delivery by them: no input panics; a parsed pointer is a JSON
//! pointer and a parsed header name is folded; an invalid setting is 22023;
//! reading a delivery by valid settings always gives an answer.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use webhook_dedup_core::intake::{Columns, Place, SourceIntake};
use webhook_dedup_core::profile::{extract, is_json_pointer, parse_time, Body, Rules, TimeFormat};
use webhook_dedup_core::signature::{Headers, Scheme};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    scheme: u8,
    event_id_from: Option<&'a str>,
    event_type_from: Option<&'a str>,
    event_time_from: Option<&'a str>,
    event_time_format: Option<&'a str>,
    fingerprint_pointers: Option<Vec<Option<&'a str>>>,
    replay_guard: Option<bool>,
    accept_event_types: Option<Vec<Option<&'a str>>>,
    event_type: Option<&'a str>,
    headers: Vec<(&'a str, &'a str)>,
    body: &'a [u8],
    time: &'a str,
}

fn owned(list: &Option<Vec<Option<&str>>>) -> Option<Vec<Option<String>>> {
    list.as_ref().map(|l| l.iter().map(|x| x.map(str::to_string)).collect())
}

fuzz_target!(|input: Input<'_>| {
    for text in [input.event_id_from, input.event_type_from, input.event_time_from].into_iter().flatten() {
        match Place::parse(text) {
            Ok(Place::Pointer(pointer)) => assert!(is_json_pointer(&pointer), "{pointer}"),
            Ok(Place::Header(name)) => assert_eq!(name, name.to_ascii_lowercase()),
            Err(_) => {}
        }
    }
    for format in TimeFormat::ALL {
        let _ = parse_time(input.time, format);
    }
    let columns = Columns {
        event_id_from: input.event_id_from.map(str::to_string),
        event_type_from: input.event_type_from.map(str::to_string),
        event_time_from: input.event_time_from.map(str::to_string),
        event_time_format: input.event_time_format.map(str::to_string),
        fingerprint_pointers: owned(&input.fingerprint_pointers),
        replay_guard: input.replay_guard,
        accept_event_types: owned(&input.accept_event_types),
    };
    let intake = match SourceIntake::parse("fuzz", columns) {
        Ok(intake) => intake,
        Err(error) => {
            assert_eq!(error.sqlstate(), "22023", "{error}");
            return;
        }
    };
    let _ = intake.accepts(input.event_type);
    let scheme = Scheme::ALL[usize::from(input.scheme) % Scheme::ALL.len()];
    let rules = intake.apply(Rules::of(scheme), scheme);
    let headers = Headers::from_pairs(input.headers.iter().copied());
    let body = Body::new(input.body);
    let _ = extract(&rules, &headers, &body);
    let _ = rules.fingerprint.fingerprint(&body);
});
