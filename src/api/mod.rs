//! The SQL surface: thin `#[pg_extern]` wrappers over the pure modules.
//! Receiver-facing functions are `webhook_*` in the extension's schema;
//! maintenance functions live in schema `webhook_dedup`.

mod args;
pub mod claim;
pub mod key;
pub mod maintenance;
pub mod ordering;
pub mod queue;
pub mod receive;
mod rows;
pub mod secrets;
pub mod sources;
#[cfg(feature = "pg_test")]
mod tests;
#[cfg(feature = "pg_test")]
mod tests_intake;
#[cfg(feature = "pg_test")]
mod tests_intake_rules;
#[cfg(feature = "pg_test")]
mod tests_maintenance;
#[cfg(feature = "pg_test")]
mod tests_ordering;
#[cfg(feature = "pg_test")]
mod tests_secrets;
#[cfg(feature = "pg_test")]
mod tests_security;
#[cfg(feature = "pg_test")]
mod tests_state_machine;
#[cfg(feature = "pg_test")]
mod tests_support;
#[cfg(feature = "pg_test")]
mod tests_views;
pub mod transitions;
pub mod verify;
