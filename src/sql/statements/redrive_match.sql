-- webhook_dedup.redrive (src/api/redrive.rs): the keys a bulk redrive
-- matches, oldest first, at most $7 (NULL: all): keys of source $1 in one
-- of the states $2 (never completed ones: the open keys, index keys_open),
-- first seen in [$4, $5) (NULL: no bound), of the event types $6 (NULL:
-- any); and with $3, keys in no such state, settled (completed,
-- dead_lettered, failed), whose latest conflicting delivery in [$4, $5) is
-- archived and is not their content already (to process that delivery). A dry run
-- ($8 true) counts them; a real one records the run (webhook_dedup.redrives,
-- status running, created by $10 at $9) and its keys in order
-- (webhook_dedup.redrive_keys), for maintenance to move.
-- Returns the run's id (NULL for a dry run), how many keys matched, and how
-- many of those have no payload for webhook_next (the move would skip them
-- as no_payload, src/maintenance/redrive.rs: redacted, or neither queued
-- nor archived as first received; a conflict's archived delivery is its
-- payload).
WITH matched AS MATERIALIZED (
  SELECT m.idem_key, m.conflict_at, m.without_payload,
         pg_catalog.row_number() OVER (ORDER BY m.at, m.idem_key) AS n
    FROM (
      SELECT k.idem_key, NULL::pg_catalog.timestamptz AS conflict_at, k.first_seen_at AS at,
             (k.redacted_at IS NOT NULL
              OR NOT (EXISTS (SELECT FROM webhook_dedup.payloads AS q
                               WHERE q.idem_key OPERATOR(pg_catalog.=) k.idem_key
                                 AND q.source OPERATOR(pg_catalog.=) $1)
                      OR EXISTS (SELECT FROM webhook_dedup.archive AS a
                                  WHERE a.source OPERATOR(pg_catalog.=) $1
                                    AND a.received_at OPERATOR(pg_catalog.=) k.first_seen_at
                                    AND a.idem_key OPERATOR(pg_catalog.=) k.idem_key
                                    AND NOT a.conflict))) AS without_payload
        FROM webhook_dedup.keys AS k
       WHERE k.state OPERATOR(pg_catalog.<>) 'completed'
         AND k.source OPERATOR(pg_catalog.=) $1 AND k.state OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])
         AND ($4::pg_catalog.timestamptz IS NULL OR k.first_seen_at OPERATOR(pg_catalog.>=) $4)
         AND ($5::pg_catalog.timestamptz IS NULL OR k.first_seen_at OPERATOR(pg_catalog.<) $5)
         AND ($6::pg_catalog.text[] IS NULL OR k.event_type OPERATOR(pg_catalog.=) ANY ($6))
      UNION ALL
      SELECT c.idem_key, c.seen_at, c.seen_at, k.redacted_at IS NOT NULL
        FROM (SELECT DISTINCT ON (l.idem_key) l.idem_key, l.seen_at, l.fingerprint
                FROM webhook_dedup.conflict_log AS l
               WHERE $3 AND l.source OPERATOR(pg_catalog.=) $1
                 AND ($4::pg_catalog.timestamptz IS NULL OR l.seen_at OPERATOR(pg_catalog.>=) $4)
                 AND ($5::pg_catalog.timestamptz IS NULL OR l.seen_at OPERATOR(pg_catalog.<) $5)
               ORDER BY l.idem_key, l.seen_at DESC) AS c
        JOIN webhook_dedup.keys AS k
          ON k.idem_key OPERATOR(pg_catalog.=) c.idem_key AND k.source OPERATOR(pg_catalog.=) $1
       WHERE NOT (k.state OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]))
         AND k.state OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'dead_lettered', 'failed'])
         AND k.fingerprint IS DISTINCT FROM c.fingerprint
         AND ($6::pg_catalog.text[] IS NULL OR k.event_type OPERATOR(pg_catalog.=) ANY ($6))
         AND EXISTS (SELECT FROM webhook_dedup.archive AS a
                      WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.=) c.seen_at
                        AND a.idem_key OPERATOR(pg_catalog.=) c.idem_key AND a.conflict)
    ) AS m
   ORDER BY m.at, m.idem_key
   LIMIT $7
), run AS (
  INSERT INTO webhook_dedup.redrives
      (source, states, conflicts, since, "until", event_types, max_keys, created_at, created_by, status, matched)
    SELECT $1, $2, $3, $4, $5, $6, $7, $9, $10, 'running', (SELECT pg_catalog.count(*) FROM matched)
     WHERE NOT $8
  RETURNING id
), items AS (
  INSERT INTO webhook_dedup.redrive_keys (run, n, idem_key, conflict_at)
    SELECT run.id, m.n, m.idem_key, m.conflict_at FROM run, matched AS m
)
SELECT (SELECT run.id FROM run) AS run, (SELECT pg_catalog.count(*) FROM matched) AS matched,
       (SELECT pg_catalog.count(*) FROM matched WHERE matched.without_payload) AS without_payload
