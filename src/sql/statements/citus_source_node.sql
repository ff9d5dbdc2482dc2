-- The node that holds source $1's shard of webhook_dedup.keys (Citus:
-- Citus's own routing of $1, get_shard_id_for_distribution_column, and the
-- shard's placements on active primary nodes), from the metadata of the
-- node it runs on. webhook_dedup.source_node() (src/api/routing.rs).
SELECT n.nodename::pg_catalog.text AS node_name, n.nodeport AS node_port, n.groupid AS group_id,
       r.shardid AS shard_id
  FROM (SELECT pg_catalog.get_shard_id_for_distribution_column('webhook_dedup.keys'::pg_catalog.regclass, $1)
                 AS shardid) AS r
  JOIN pg_catalog.pg_dist_placement AS p ON p.shardid OPERATOR(pg_catalog.=) r.shardid
  JOIN pg_catalog.pg_dist_node AS n ON n.groupid OPERATOR(pg_catalog.=) p.groupid
 WHERE n.noderole OPERATOR(pg_catalog.=) 'primary' AND n.isactive
 ORDER BY n.nodename, n.nodeport
