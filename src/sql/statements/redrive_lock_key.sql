-- A key a redrive is about to move, locked (a key a claim, its holder or a
-- worker holds right now is skipped: the next pass tries again); present
-- tells a locked key (false here, no row) from a deleted one.
-- $1 source, $2 idem_key. Returns state, first_seen_at, and whether it
-- has a payload for the workers.
SELECT k.state, k.first_seen_at,
       EXISTS (SELECT FROM webhook_dedup.payloads AS p
                WHERE p.idem_key OPERATOR(pg_catalog.=) $2 AND p.source OPERATOR(pg_catalog.=) $1) AS queued
  FROM webhook_dedup.keys AS k
 WHERE k.idem_key OPERATOR(pg_catalog.=) $2 AND k.source OPERATOR(pg_catalog.=) $1
   FOR NO KEY UPDATE SKIP LOCKED
