//! The pure core of webhook_dedup: everything the extension decides that
//! needs no database. No pgrx and no PostgreSQL here (the lint layer of the
//! test command fails if this crate ever depends on pgrx:
//! `scripts/check-core.sh`), so every rule is tested with plain
//! `cargo test -p webhook-dedup-core` and can serve a Rust program outside
//! Postgres (a receiver, a fuzzer, a command-line verifier).
//!
//! | module | concern |
//! | --- | --- |
//! | [`signature`] | provider signature schemes, constant-time core, the header map |
//! | [`key`] | scoped, bounded idempotency keys |
//! | [`claim`] | the claim state machine: decisions and argument rules |
//! | [`outbox`] | the outbox intents' decisions, on the key state machine |
//! | [`operation_key`] | downstream idempotency keys derived from the inbound event |
//! | [`calendar`] | timestamps: the epoch, buckets, UTC literals |
//! | [`profile`] | where each provider puts event id, type and time, how it takes answers |
//! | [`intake`] | the intake rules of `webhook_receive`: replay guard, event time, body pointers |
//! | [`handshake`] | endpoint verification handshakes (challenge and response) |
//! | [`archive`] | the payload archive's day partitions and retention |
//! | [`answer`] | the HTTP answer to a delivery, from its outcome and provider |
//! | [`metrics`] | the claim counters' table: entries, shares, overflow, take and copy |
//! | [`error`] | one error type with its SQLSTATE codes |
//!
//! The host (the extension) supplies one thing: an interrupt check that
//! long loops over a caller's input call ([`signature::ct::on_interrupt_check`]).
//! The extension maps [`error::Error`] to `ereport` (`src/error.rs`).

pub mod answer;
pub mod archive;
pub mod calendar;
pub mod claim;
pub mod error;
pub mod handshake;
pub mod intake;
pub mod key;
pub mod metrics;
pub mod operation_key;
pub mod outbox;
pub mod profile;
pub mod settings;
pub mod signature;
