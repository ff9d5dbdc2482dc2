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
//! A receiver asks which node holds a source ([`source_node`],
//! `webhook_dedup.source_node`). These read Citus's metadata, not a table
//! of the extension.

use crate::spi::{arg, Conn, Snap, Statement};
use pgrx::pg_sys::TEXTOID;

static LOCAL_SOURCE: Statement =
    Statement::returning(crate::sql_statement!("citus_local_source.sql"), &[TEXTOID], &["local"]);
static SOURCE_NODE: Statement = Statement::returning(
    crate::sql_statement!("citus_source_node.sql"),
    &[TEXTOID],
    &["node_name", "node_port", "group_id", "shard_id"],
);

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

/// A placement of a source's shard of `webhook_dedup.keys` ([`source_node`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The node's host name and port as Citus knows them (`pg_dist_node`).
    pub node_name: String,
    pub node_port: i32,
    /// The node's Citus group.
    pub group_id: i32,
    /// The shard that holds the source.
    pub shard_id: i64,
}

/// The active primary nodes that hold `source`'s shard of
/// `webhook_dedup.keys`, one per placement, by name and port
/// (`citus_source_node.sql`, Citus's own routing of `source`, read from
/// the metadata of this node). Only on a distributed install: the caller
/// checks [`crate::citus::keys_distributed`] first (elsewhere the Citus
/// functions it calls do not exist).
pub fn source_node(conn: &Conn<'_>, source: &str) -> Vec<Placement> {
    let rows = conn.execute(&SOURCE_NODE, &[arg(source)], Snap::Statement);
    (0..rows.len())
        .map(|i| Placement {
            node_name: rows.get(i, 1).expect("nodename is NOT NULL"),
            node_port: rows.get(i, 2).expect("nodeport is NOT NULL"),
            group_id: rows.get(i, 3).expect("groupid is NOT NULL"),
            shard_id: rows.get(i, 4).expect("a shard id"),
        })
        .collect()
}
