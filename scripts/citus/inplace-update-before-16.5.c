
/*
 * webhook_dedup's build of Citus 14.0.1 for a PostgreSQL 16 older than 16.5
 * (scripts/lib.sh, citus_build): the PyPI build of 16 is 16.2, whose
 * access/genam.h has no systable_inplace_update_begin/_finish (PostgreSQL
 * commit a07e03f, back-patched in the minor releases of November 2024,
 * 16.5). Citus 14.0.1 calls them unconditionally in UpdateStripeMetadataRow
 * (citusdata/citus#8241, which replaced Citus 13's heap_inplace_update).
 * These two stand-ins are Citus 13.2.2's own code of that function: a scan
 * with a dirty snapshot, then heap_inplace_update. They serve columnar
 * tables only, which webhook_dedup never creates.
 */
static void
systable_inplace_update_begin(Relation relation, Oid indexId, bool indexOK,
							  Snapshot snapshot, int nkeys, const ScanKeyData *key,
							  HeapTuple *oldtupcopy, void **state)
{
	SnapshotData *dirtySnapshot = palloc(sizeof(SnapshotData));
	InitDirtySnapshot(*dirtySnapshot);
	SysScanDesc scan = systable_beginscan(relation, indexId, indexOK, dirtySnapshot,
										  nkeys, (ScanKey) key);
	HeapTuple tuple = systable_getnext(scan);
	*oldtupcopy = HeapTupleIsValid(tuple) ? heap_copytuple(tuple) : NULL;
	*state = scan;
}


static void
systable_inplace_update_finish(void *state, HeapTuple tuple)
{
	SysScanDesc scan = (SysScanDesc) state;
	heap_inplace_update(scan->heap_rel, tuple);
	systable_endscan(scan);
}

