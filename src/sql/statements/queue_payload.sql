-- What webhook_next hands a worker along with the lease: the key's payload
-- and headers (none: NULL), and whether redact erased its deliveries (a
-- key without a payload after a redaction is dead-lettered instead: it
-- cannot be processed). $1 source, $2 idem_key.
SELECT p.payload, p.headers, k.redacted_at IS NOT NULL AS redacted
  FROM webhook_dedup.keys AS k
  LEFT JOIN webhook_dedup.payloads AS p
    ON p.idem_key OPERATOR(pg_catalog.=) k.idem_key AND p.source OPERATOR(pg_catalog.=) k.source
 WHERE k.idem_key OPERATOR(pg_catalog.=) $2 AND k.source OPERATOR(pg_catalog.=) $1
