-- webhook_dedup.redact (src/api/archive.rs), for one scope of source $1:
-- the key $2, the keys first seen before $3, or the keys derived with the
-- account whose escaped field is $4 (the third of the five fields,
-- source:environment:account:event_id:operation, as crates/webhook-dedup-core/src/key.rs escapes
-- it); the other two are NULL. Planned for each call's arguments
-- (Statement::custom_plan): a key is a primary-key probe, the others scan
-- the source's keys.
-- Each key keeps its state, fingerprint and times (a tombstone: duplicates
-- and conflicts are still answered from it); its result goes, who ($6) and
-- when ($5) are recorded; a key waiting for a worker whose queued payload
-- goes cannot be processed any more: dead-lettered, not handed out empty.
-- Its payload for the workers and its archived deliveries are deleted:
-- the first at the key's first_seen_at, each conflicting one at its
-- conflict_log.seen_at (each partition's index (source, received_at), one
-- day's partition each). A key already redacted with nothing left to erase
-- (no result, no error of its own, no queued payload) is left as it is and
-- not counted: its first redaction's who and when stay.
-- Deliveries whose key is gone (past retention, until their day's
-- partition is dropped; or an earlier key of the same id, gone before this
-- one was made) are found by a scan of the source's archive: by key (the
-- deliveries before the key's first), by time, by account.
-- A redaction that erased something is recorded in webhook_dedup.redactions
-- (who, when, its transaction, the relations it erased from), for
-- webhook_dedup.purge_redactions.
-- Returns keys (redacted) and deliveries (payloads and archived rows erased).
WITH red AS (
  UPDATE webhook_dedup.keys AS k
     SET result = NULL, redacted_at = $5, redacted_by = $6,
         (state, due_at, next_attempt_at, last_error) =
           (SELECT CASE WHEN w.waiting THEN 'dead_lettered' ELSE k.state END,
                   CASE WHEN w.waiting THEN NULL ELSE k.due_at END,
                   CASE WHEN w.waiting THEN NULL ELSE k.next_attempt_at END,
                   CASE WHEN w.waiting OR k.last_error OPERATOR(pg_catalog.=) 'payload erased by webhook_dedup.redact'
                        THEN 'payload erased by webhook_dedup.redact' END
              FROM (SELECT k.state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'failed'])
                           AND EXISTS (SELECT FROM webhook_dedup.payloads AS q
                                        WHERE q.idem_key OPERATOR(pg_catalog.=) k.idem_key
                                          AND q.source OPERATOR(pg_catalog.=) k.source) AS waiting) AS w)
   WHERE k.source OPERATOR(pg_catalog.=) $1
     AND ($2::pg_catalog.text IS NULL OR k.idem_key OPERATOR(pg_catalog.=) $2)
     AND ($3::pg_catalog.timestamptz IS NULL OR k.first_seen_at OPERATOR(pg_catalog.<) $3)
     AND ($4::pg_catalog.text IS NULL
          OR (pg_catalog.split_part(k.idem_key, ':', 3) OPERATOR(pg_catalog.=) $4
              AND pg_catalog.split_part(k.idem_key, ':', 4) OPERATOR(pg_catalog.<>) ''))
     AND (k.redacted_at IS NULL OR k.result IS NOT NULL
          OR k.last_error OPERATOR(pg_catalog.<>) 'payload erased by webhook_dedup.redact'
          OR EXISTS (SELECT FROM webhook_dedup.payloads AS q
                      WHERE q.idem_key OPERATOR(pg_catalog.=) k.idem_key
                        AND q.source OPERATOR(pg_catalog.=) k.source))
  RETURNING k.idem_key, k.first_seen_at
), pay AS (
  DELETE FROM webhook_dedup.payloads AS p
   USING red
   WHERE p.idem_key OPERATOR(pg_catalog.=) red.idem_key AND p.source OPERATOR(pg_catalog.=) $1
  RETURNING 1
), arrivals AS (
  SELECT red.idem_key, red.first_seen_at AS at FROM red
  UNION
  SELECT c.idem_key, c.seen_at
    FROM red
    JOIN webhook_dedup.conflict_log AS c
      ON c.idem_key OPERATOR(pg_catalog.=) red.idem_key AND c.source OPERATOR(pg_catalog.=) $1
), arc AS (
  DELETE FROM webhook_dedup.archive AS a
   USING arrivals
   WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.=) arrivals.at
     AND a.idem_key OPERATOR(pg_catalog.=) arrivals.idem_key
  RETURNING a.tableoid
), swept AS (
  DELETE FROM webhook_dedup.archive AS a
   WHERE a.source OPERATOR(pg_catalog.=) $1
     AND (($2::pg_catalog.text IS NOT NULL AND a.idem_key OPERATOR(pg_catalog.=) $2
           AND (NOT EXISTS (SELECT FROM red)
                OR a.received_at OPERATOR(pg_catalog.<) (SELECT pg_catalog.min(r.first_seen_at) FROM red AS r)))
          OR ($3::pg_catalog.timestamptz IS NOT NULL AND a.received_at OPERATOR(pg_catalog.<) $3)
          OR ($4::pg_catalog.text IS NOT NULL
              AND pg_catalog.split_part(a.idem_key, ':', 3) OPERATOR(pg_catalog.=) $4
              AND pg_catalog.split_part(a.idem_key, ':', 4) OPERATOR(pg_catalog.<>) ''))
  RETURNING a.tableoid
), counted AS (
  SELECT (SELECT pg_catalog.count(*) FROM red) AS keys,
         (SELECT pg_catalog.count(*) FROM pay) OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM arc)
           OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM swept) AS deliveries
), logged AS (
  INSERT INTO webhook_dedup.redactions (source, redacted_at, redacted_by, keys, deliveries, xid, relations)
    SELECT $1, $5, $6, c.keys, c.deliveries, pg_catalog.pg_current_xact_id(),
           ARRAY(SELECT r.name FROM (SELECT 'webhook_dedup.keys'::pg_catalog.text AS name WHERE c.keys OPERATOR(pg_catalog.>) 0
                                     UNION SELECT 'webhook_dedup.payloads' WHERE EXISTS (SELECT FROM pay)
                                     UNION SELECT x.tableoid::pg_catalog.regclass::pg_catalog.text
                                             FROM (SELECT arc.tableoid FROM arc UNION SELECT swept.tableoid FROM swept) AS x
                                    ) AS r ORDER BY r.name)
      FROM counted AS c
     WHERE c.keys OPERATOR(pg_catalog.>) 0 OR c.deliveries OPERATOR(pg_catalog.>) 0
)
SELECT c.keys, c.deliveries FROM counted AS c
