//! The rules that are data, written as SQL function bodies from the core
//! crate itself (never copied by hand): the SQL edition answers from the
//! same tables as the native one.
//!
//! - `downstream_key_limits_rows`: the presets of `webhook_operation_key`
//!   ([`webhook_dedup_core::operation_key::DOWNSTREAMS`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use webhook_dedup_core::operation_key::DOWNSTREAMS;

use crate::bodies::{Body, Language};

/// `text` as an SQL string literal.
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Where the generated bodies say they come from.
const FROM: &str = "crates/webhook-dedup-sql-edition/src/data.rs";

fn generated(text: String) -> Body {
    Body { language: Language::Sql, text, file: PathBuf::from(FROM), line: 0 }
}

/// The body of `downstream_key_limits_rows()`: one row per preset, in the
/// core's order.
fn downstream_key_limits_rows() -> Body {
    let rows: Vec<String> = DOWNSTREAMS
        .iter()
        .map(|d| {
            format!(
                "  ({}, {}, {}, {}, {})",
                literal(d.name),
                literal(d.carrier),
                d.max_length,
                literal(d.retention),
                literal(d.sources)
            )
        })
        .collect();
    generated(format!("VALUES\n{}\n", rows.join(",\n")))
}

/// Every generated body, by function name.
pub fn bodies() -> BTreeMap<String, Body> {
    BTreeMap::from([("downstream_key_limits_rows".to_string(), downstream_key_limits_rows())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_doubles_its_quotes() {
        assert_eq!(literal("it's"), "'it''s'");
    }

    #[test]
    fn every_preset_is_a_row() {
        let b = downstream_key_limits_rows();
        assert_eq!(b.text.matches("\n  (").count(), DOWNSTREAMS.len());
        assert!(b.text.contains("('stripe', 'header Idempotency-Key', 255, "));
        assert!(b.text.contains("('square_payments', 'body field idempotency_key (CreatePayment)', 45, "));
    }
}
