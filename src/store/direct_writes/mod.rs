//! Claims and completions without an SQL plan.
//!
//! A claim and its completion are what a receiver does most, and through
//! SPI each costs more in executor start-up (opening the table and its
//! indexes, building the projections of `INSERT ... ON CONFLICT DO UPDATE
//! ... RETURNING` or `UPDATE ... RETURNING`) than in the work itself. This
//! module does the same work with the executor's own routines and nothing
//! else, in the order the executor uses (PostgreSQL's `nodeModifyTable.c`):
//!
//! - **a new key** ([`Session::insert_claim`]) as `ExecInsert` does for
//!   `ON CONFLICT`: `ExecCheckIndexConstraints` probes the primary key, the
//!   arbiter, waiting for a transaction that is inserting or changing the
//!   same key; if there is none the row is inserted speculatively
//!   (`tuple_insert_speculative` under a `SpeculativeInsertionLockAcquire`
//!   token), then its index entries (`ExecInsertIndexTuples`, which tells of
//!   a conflict that arose in between), then the insertion is confirmed or
//!   killed (`tuple_complete_speculative`); a conflict starts over;
//! - **a known key** as `ExecOnConflictUpdate` and `ExecUpdate` do: the row
//!   the probe found ([`Session::locate`] for a completion) is locked
//!   (`tuple_lock`, waiting for its writers; under READ COMMITTED the
//!   newest version of the row, under REPEATABLE READ a row changed after
//!   the snapshot is 40001, as is one the snapshot cannot see), the caller
//!   decides on what it read, and the new version is written
//!   (`tuple_update`, then `ExecInsertIndexTuples` unless the update was
//!   HOT). A row deleted meanwhile ([`Locked::Gone`]) sends the caller back
//!   to the probe.
//!
//! The arbitration and the row locks are PostgreSQL's own, those of the SQL
//! statements. What the statements would do besides is checked instead, and
//! when any of it applies [`Session::open`] declines and the caller runs the
//! statements (`claim_upsert.sql`, `transitions_complete.sql`):
//!
//! - the table must be exactly the one the extension created: a plain heap
//!   table (not a partition, not a Citus table, whose rows are in shards
//!   that Citus routes to), the same columns and types without type
//!   modifiers, the key columns in collation "C", NOT NULL only
//!   where the extension declares it, no default on the columns a new key
//!   leaves NULL, no CHECK constraint or generated column, no trigger or
//!   rule, every unique index immediate and no exclusion constraint, the
//!   primary key on `(idem_key, source)` and no other unique index that
//!   `ON CONFLICT (idem_key, source)` would infer as an arbiter; checked
//!   once per relation cache generation ([`crate::relcache`]);
//! - the caller must hold all of INSERT, SELECT and UPDATE on it and USAGE
//!   on its schema (a caller with column privileges only goes through SQL,
//!   which checks them), and row-level security must not apply to it;
//!   checked on every call;
//! - the transaction must be able to write (not read-only, not on a
//!   standby, not in parallel mode: the statements raise 25006 and the
//!   like) and not SERIALIZABLE (a completion decides on a row it reads,
//!   and only the executor's scans take the predicate locks that
//!   serializable isolation needs).
//!
//! What the executor does around the write, this module does too: a
//! command counter increment before it takes its command id (as SPI does
//! before each statement, so a row written earlier in the calling
//! statement is visible), `CheckCmdReplicaIdentity` before an update (a
//! publication that publishes updates of a table without a usable replica
//! identity refuses it, 55000), the index-unchanged hint for the indexes
//! whose columns an update leaves as they were (bottom-up deletion), and
//! for a completion the check of the token on the version of the row the
//! statement's snapshot sees before any lock is taken (a stale token takes
//! no lock, as the UPDATE's qualification takes none). Each of these was a
//! difference to the SQL found by review; `tests/cluster/
//! test_direct_writes.py` runs the same calls both ways and compares.
//!
//! `webhook_dedup.direct_writes = off` sends everything through SQL.

use super::claim::Delivery;
use super::{Key, KeyRow};
use crate::claim::State;
use crate::jsonb::Jsonb;
use crate::time::timestamptz;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::{FromDatum, IntoDatum, PgTupleDesc, Uuid};

mod executor;
mod layout;
mod session;
mod values;

use executor::*;
pub use layout::Col;
use layout::*;
pub use session::{Insert, Locked, Looked, Session};
pub use values::Values;
use values::*;
