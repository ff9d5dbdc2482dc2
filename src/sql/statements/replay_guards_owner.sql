-- What the replay guard decides on about the key a body belongs to: its
-- state, result and fingerprint, and whether it holds a payload (then
-- webhook_next retries it when it fails). $1 source, $2 idem_key.
SELECT k.state, k.result, k.fingerprint,
       EXISTS (SELECT FROM webhook_dedup.payloads AS p
                WHERE p.idem_key OPERATOR(pg_catalog.=) k.idem_key
                  AND p.source OPERATOR(pg_catalog.=) k.source) AS queued
  FROM webhook_dedup.keys AS k
 WHERE k.idem_key OPERATOR(pg_catalog.=) $2 AND k.source OPERATOR(pg_catalog.=) $1
