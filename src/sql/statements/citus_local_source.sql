-- Whether the keys of source $1 are in a shard on this node (Citus: the
-- placement of the shard $1 hashes to, in this node's group). Distributed,
-- each node's maintenance does the sources of its own shards
-- (src/store/citus.rs).
SELECT EXISTS (
  SELECT FROM pg_catalog.pg_dist_placement AS p
   WHERE p.shardid OPERATOR(pg_catalog.=)
           pg_catalog.get_shard_id_for_distribution_column('webhook_dedup.keys'::pg_catalog.regclass, $1)
     AND p.groupid OPERATOR(pg_catalog.=) (SELECT l.groupid FROM pg_catalog.pg_dist_local_group AS l)
) AS local
