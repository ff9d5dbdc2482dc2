//! Whether the extension runs distributed on Citus (`webhook_dedup.distribute()`,
//! docs/distributed.md), and where a distributed table's work belongs.
//!
//! Distributed, the per-source tables are sharded by `source`: a statement
//! that names one source is routed to the one shard that holds it, and may
//! lock rows there (`FOR UPDATE`), while Citus refuses a locking read
//! across shards. The queue and maintenance therefore work source by
//! source when [`crate::citus::keys_distributed`]: they find the sources with work due
//! (a read without locks, which Citus runs on every shard), then run their
//! usual statement restricted to each source. Maintenance does so on every
//! node for the sources whose shards are on that node ([`local_sources`]).

use crate::spi::{arg, Conn, Snap, Statement};
use pgrx::pg_sys::TEXTOID;

static LOCAL_SOURCE: Statement =
    Statement::returning(crate::sql_statement!("citus_local_source.sql"), &[TEXTOID], &["local"]);

/// Whether this node is the coordinator of a distributed install (Citus
/// group 0): the node that holds no shard and where the cluster-wide
/// checks of maintenance (the retention check) run once.
pub fn is_coordinator() -> bool {
    crate::spi::select_one::<bool>("whether this is the Citus coordinator", "SELECT pg_catalog.citus_is_coordinator()")
        .unwrap_or(false)
}

/// The sources (of `rows`, a column `source` first) whose keys are in a
/// shard on this node: each node's maintenance does its own
/// (`citus_local_source.sql`), and the statements it runs for them execute
/// locally.
pub fn local_sources(conn: &Conn<'_>, rows: &crate::spi::Rows<'_>) -> Vec<String> {
    (0..rows.len())
        .filter_map(|i| rows.get::<String>(i, 1))
        .filter(|source| conn.execute(&LOCAL_SOURCE, &[arg(source.as_str())], Snap::Statement).get(0, 1) == Some(true))
        .collect()
}
