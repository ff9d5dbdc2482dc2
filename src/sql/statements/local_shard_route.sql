-- Where source $1's rows are, for the local-shard fast path
-- (src/store/local_shard.rs; docs/distributed.md, "The local-shard fast
-- path"): the shard of webhook_dedup.keys that $1 hashes to (Citus's own
-- routing, get_shard_id_for_distribution_column), and that shard's relation
-- when a write to it may be made here: the table is hash-distributed
-- (partmethod 'h', not a reference table), not replicated by statement
-- (repmodel 's': one placement per shard, PostgreSQL streaming replication
-- for high availability), and the shard's one placement is in this node's
-- group. Then the relation of $1's shard of webhook_dedup.replay_guards
-- when that table is in the keys' co-location group (Citus places
-- co-located shards of one hash range on one node, and one metadata lock
-- covers them, resource_lock.c SetLocktagForShardDistributionMetadata).
-- NULL otherwise: the calls go through SQL, which Citus routes.
WITH r AS (
  SELECT pg_catalog.get_shard_id_for_distribution_column('webhook_dedup.keys'::pg_catalog.regclass, $1) AS shardid
), here AS (
  SELECT t.colocationid,
         t.partmethod OPERATOR(pg_catalog.=) 'h'::pg_catalog."char"
         AND t.repmodel OPERATOR(pg_catalog.=) 's'::pg_catalog."char"
         AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_dist_placement AS p
               WHERE p.shardid OPERATOR(pg_catalog.=) r.shardid) OPERATOR(pg_catalog.=) 1
         AND EXISTS (SELECT FROM pg_catalog.pg_dist_placement AS p
                      WHERE p.shardid OPERATOR(pg_catalog.=) r.shardid
                        AND p.groupid OPERATOR(pg_catalog.=)
                              (SELECT l.groupid FROM pg_catalog.pg_dist_local_group AS l)) AS local
    FROM r, pg_catalog.pg_dist_partition AS t
   WHERE t.logicalrelid OPERATOR(pg_catalog.=) 'webhook_dedup.keys'::pg_catalog.regclass
)
SELECT r.shardid AS shard_id,
       CASE WHEN here.local
            THEN pg_catalog.to_regclass(pg_catalog.shard_name('webhook_dedup.keys'::pg_catalog.regclass, r.shardid))
       END::pg_catalog.oid AS shard,
       CASE WHEN here.local
             AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS g
                          WHERE g.logicalrelid OPERATOR(pg_catalog.=) 'webhook_dedup.replay_guards'::pg_catalog.regclass
                            AND g.colocationid OPERATOR(pg_catalog.=) here.colocationid)
            THEN pg_catalog.to_regclass(pg_catalog.shard_name('webhook_dedup.replay_guards'::pg_catalog.regclass,
                   pg_catalog.get_shard_id_for_distribution_column('webhook_dedup.replay_guards'::pg_catalog.regclass,
                                                                   $1)))
       END::pg_catalog.oid AS replay_guards
  FROM r, here
