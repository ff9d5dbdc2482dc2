//! `webhook_dedup.source_node`: which node holds a source on a distributed
//! install, so that a receiver (or a pooler per node) can send the
//! source's calls there (docs/distributed.md, "Connecting to the node that
//! holds a source").

use crate::error::{required, OrRaise};
use crate::spi;
use crate::store::citus;
use pgrx::prelude::*;

/// The primary node that holds `source`'s shard of `webhook_dedup.keys`:
/// its host name and port as Citus knows them (`pg_dist_node`), its group
/// and the shard's id; one row per placement of a replicated shard. No row
/// when webhook_dedup is not distributed (one server takes every call).
/// Read from the Citus metadata of the node it runs on, which every node
/// has. Errors: 22004 NULL source; 22023 as the claim functions' source
/// (`crate::key::check_source`).
#[pg_extern(stable, parallel_safe, schema = "webhook_dedup")]
#[allow(clippy::type_complexity)] // pgrx needs the column names inline
fn source_node(
    source: Option<&str>,
) -> TableIterator<'static, (name!(node_name, String), name!(node_port, i32), name!(group_id, i32), name!(shard_id, i64))>
{
    let source = required(source, "source");
    crate::key::check_source(source).or_raise();
    if !crate::citus::keys_distributed() {
        return TableIterator::new(Vec::new());
    }
    let placements = spi::connected(|conn| citus::source_node(conn, source));
    TableIterator::new(placements.into_iter().map(|p| (p.node_name, p.node_port, p.group_id, p.shard_id)))
}
