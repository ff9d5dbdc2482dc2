//! What the payload archive keeps of a delivery (docs/operations.md, "The
//! payload archive"): a source with `keep_payload` archives the raw body
//! and headers of each key's first delivery and of each conflicting
//! delivery, in the caller's transaction (a claim rolled back archives
//! nothing). Duplicates, replays and refused deliveries are not archived.

use crate::spi::Conn;
use crate::store::archive::{self as store, Archived};
use crate::store::sources;

/// Archive `a` when its source keeps payloads (`keep_payload`, read from
/// the cached settings: no statement for a source that does not). Nothing
/// on a distributed install (the archive is single-server).
pub fn keep(conn: &Conn<'_>, a: &Archived<'_>) {
    if sources::settings(conn, a.key.source).keep_payload && !crate::citus::keys_distributed() {
        store::insert(conn, a);
    }
}
