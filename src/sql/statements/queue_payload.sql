-- What webhook_next hands a worker along with the lease.
-- $1 source, $2 idem_key, $3 partition_at.
SELECT payload, headers
  FROM webhook_dedup.keys
 WHERE partition_at OPERATOR(pg_catalog.=) $3
   AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
