//! The SQL surface: thin `#[pg_extern]` wrappers over the pure modules.
//! Every function lives in schema `webhook_dedup`, where no role but the
//! extension's owner can create objects: the receiver-facing `webhook_*`
//! functions (`#[pg_extern(schema = "webhook_dedup")]`) as well as the
//! maintenance and operator functions (`#[pg_schema] mod webhook_dedup`).
//! Callers name them schema-qualified (docs/security.md, "Where the
//! functions live").

pub mod answer;
pub mod archive;
mod args;
pub mod claim;
pub mod key;
pub mod maintenance;
pub mod ordering;
pub mod outbox;
pub mod pause;
pub mod providers;
pub mod queue;
pub mod receive;
pub mod reconcile;
pub mod redrive;
pub mod routing;
mod rows;
pub mod secrets;
pub mod sources;
pub mod transitions;
pub mod trigger;
pub mod verify;
