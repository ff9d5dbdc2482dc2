-- What webhook_next hands a worker along with the lease.
-- $1 source, $2 idem_key.
SELECT p.payload, p.headers
  FROM webhook_dedup.payloads AS p
 WHERE p.idem_key OPERATOR(pg_catalog.=) $2 AND p.source OPERATOR(pg_catalog.=) $1
