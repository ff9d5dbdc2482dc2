//! `#[pg_test]`s: the SQL functions in one session, one file per concern,
//! named by it (the SQL surface they test is `src/api/`). Each test runs in
//! a transaction that is rolled back. Races, commit visibility and the
//! receivers are tested against a real cluster in `tests/`. Compiled only
//! with the `pg_test` feature (`cargo pgrx test` sets it), so plain
//! `cargo test` runs the pure unit tests alone. Run them one at a time
//! (`RUST_TEST_THREADS=1`, as `scripts/test.sh` does, which selects them
//! with the filter `tests::pg_`): the maintenance tests take the
//! maintenance lock and delete keys of the shared keys table, which tests in
//! other backends would contend for.
//!
//! Each file wraps its tests in `#[pgrx::pg_schema] mod tests`: the test
//! functions are created in the schema `tests`, where `#[pg_test]` calls
//! them.

mod answer;
mod archive;
mod claim;
mod docs;
mod intake;
mod intake_rules;
mod maintenance;
mod ordering;
mod outbox;
mod pause;
mod redrive;
mod routing;
mod secrets;
mod security;
mod state_machine;
pub(crate) mod support;
mod verify;
mod views;
