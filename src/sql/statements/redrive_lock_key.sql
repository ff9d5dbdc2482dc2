-- A key a redrive is about to move, locked (a key a claim, its holder or a
-- worker holds right now is skipped: the next pass tries again; no row
-- here with redrive_key_exists.sql saying it exists). $1 source, $2
-- idem_key, $3 the conflict's seen_at for a conflict (else NULL).
-- Returns state; first_seen_at; queued: the queue has its payload;
-- redacted: redact erased it (read from the row locked, the newest: a
-- redacted key is never moved, whatever an older snapshot says of its
-- payload); done: for a conflict, the key has that delivery's content
-- already (a run processed it).
SELECT k.state, k.first_seen_at,
       EXISTS (SELECT FROM webhook_dedup.payloads AS p
                WHERE p.idem_key OPERATOR(pg_catalog.=) $2 AND p.source OPERATOR(pg_catalog.=) $1) AS queued,
       k.redacted_at IS NOT NULL AS redacted,
       $3::pg_catalog.timestamptz IS NOT NULL
         AND k.fingerprint IS NOT DISTINCT FROM
             (SELECT c.fingerprint FROM webhook_dedup.conflict_log AS c
               WHERE c.idem_key OPERATOR(pg_catalog.=) $2 AND c.source OPERATOR(pg_catalog.=) $1
                 AND c.seen_at OPERATOR(pg_catalog.=) $3
               LIMIT 1) AS done
  FROM webhook_dedup.keys AS k
 WHERE k.idem_key OPERATOR(pg_catalog.=) $2 AND k.source OPERATOR(pg_catalog.=) $1
   FOR NO KEY UPDATE SKIP LOCKED
