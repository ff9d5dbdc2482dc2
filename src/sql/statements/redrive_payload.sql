-- The payload webhook_next hands over for a redriven key, from the
-- archive: the delivery that arrived at $3 ($4: a conflicting one, else the
-- key's first), copied into webhook_dedup.payloads (replacing what is
-- there: a conflict's content is what the key is processed with now).
-- $1 source, $2 idem_key. Returns whether one was copied.
WITH copied AS (
  INSERT INTO webhook_dedup.payloads AS p (source, idem_key, payload, headers)
    SELECT $1, $2, a.payload, a.headers
      FROM webhook_dedup.archive AS a
     WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.=) $3
       AND a.idem_key OPERATOR(pg_catalog.=) $2 AND a.conflict OPERATOR(pg_catalog.=) $4
     LIMIT 1
    ON CONFLICT (idem_key, source) DO UPDATE SET payload = EXCLUDED.payload, headers = EXCLUDED.headers
  RETURNING 1
)
SELECT EXISTS (SELECT FROM copied) AS copied
