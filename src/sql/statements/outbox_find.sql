-- The intent of an operation of a key, if any (after webhook_outbox_put
-- found one there). $1 source, $2 idem_key, $3 operation. Returns its id.
SELECT o.id FROM webhook_dedup.outbox AS o
 WHERE o.source OPERATOR(pg_catalog.=) $1 AND o.idem_key OPERATOR(pg_catalog.=) $2
   AND o.operation OPERATOR(pg_catalog.=) $3
