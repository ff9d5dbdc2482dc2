-- webhook_dedup 0.3.0 -> 0.4.0: the defects found by using and attacking
-- 0.3.0. Tested by tests/upgrade/test_upgrade_from_0_3_0.py (a 0.3.0
-- install filled and updated: every row kept, the schema a fresh
-- install's, object for object).
\echo Use "ALTER EXTENSION webhook_dedup UPDATE TO '0.4.0'" to load this file. \quit

-- webhook_dedup.sources.source in collation "C", as every other table's
-- source: in the database's collation, the per-row retention look-ups of
-- maintenance (history_prune.sql, outbox_prune.sql) could not use the
-- primary key and read every source for every candidate row, so a pass
-- grew with the square of the number of sources (64 s at 4,000 sources
-- with one short retention).
-- Equality is bytewise in both collations (deterministic): the primary key
-- keeps exactly the same rows; its index is rebuilt. The two views that
-- read the column stand in without it while it changes, then are replaced
-- in place (CREATE OR REPLACE keeps their grants); retention_warnings'
-- source keeps the database's collation (src/sql/views.sql).
CREATE OR REPLACE VIEW webhook_dedup.key_states AS
SELECT NULL::text COLLATE "C" AS source, NULL::text AS state, NULL::bigint AS keys,
       NULL::interval AS oldest_pending_age, NULL::interval AS oldest_lease_age, NULL::bigint AS expired_leases,
       NULL::bigint AS paused_keys, NULL::timestamptz AS paused_at
 WHERE false;
CREATE OR REPLACE VIEW webhook_dedup.retention_warnings AS
SELECT NULL::text AS source, NULL::text AS provider, NULL::interval AS retention, NULL::interval AS retry_horizon,
       NULL::text AS message
 WHERE false;
ALTER TABLE webhook_dedup.sources ALTER COLUMN source TYPE text COLLATE "C";
-- On a distributed install sources is a reference table: its placement on
-- every node changes too (DDL inside an extension script is not
-- propagated by Citus). Updating a distributed install is not tested yet
-- (docs/distributed.md).
DO $$
DECLARE
  reference boolean := false;
  failed text;
BEGIN
  IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p'
            ' WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''webhook_dedup.sources''::pg_catalog.regclass)'
      INTO reference;
  END IF;
  -- (from the coordinator only: run_command_on_placements reaches every
  -- node's placement from there)
  IF reference THEN
    EXECUTE 'SELECT pg_catalog.citus_is_coordinator()' INTO reference;
  END IF;
  IF reference THEN
    EXECUTE 'SELECT pg_catalog.string_agg(r.nodename || '':'' || r.nodeport || '': '' || r.result, ''; '')'
            '  FROM pg_catalog.run_command_on_placements(''webhook_dedup.sources'','
            '       ''ALTER TABLE %s ALTER COLUMN source TYPE text COLLATE "C"'') AS r WHERE NOT r.success'
      INTO failed;
    IF failed IS NOT NULL THEN
      RAISE EXCEPTION 'webhook_dedup: changing the collation of webhook_dedup.sources on the nodes failed: %', failed
        USING ERRCODE = '55000';
    END IF;
  END IF;
END
$$;

CREATE OR REPLACE VIEW webhook_dedup.retention_warnings AS
WITH used AS (
  SELECT s.source COLLATE "default" AS source FROM webhook_dedup.sources AS s
  UNION
  -- sources named after a provider that have keys made by webhook_key or
  -- webhook_receive, or counted deliveries
  SELECT p.scheme FROM webhook_dedup.providers AS p
   WHERE webhook_dedup.source_has_history(p.scheme)
), checked AS (
  SELECT u.source,
         COALESCE(s.provider, u.source) AS provider,
         p.scheme IS NOT NULL AS known,
         COALESCE(s.retention, webhook_dedup.default_retention()) AS retention,
         p.retry_horizon
    FROM used AS u
    LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) u.source
    LEFT JOIN webhook_dedup.providers AS p ON p.scheme OPERATOR(pg_catalog.=) COALESCE(s.provider, u.source)
)
SELECT c.source, c.provider, c.retention, c.retry_horizon,
       CASE WHEN c.known
            THEN pg_catalog.format('source %s keeps keys for %s after their last activity, less than the %s retry horizon of %s: a retry that comes later is processed again (raise webhook_dedup.sources.retention or webhook_dedup.retention)',
                                   c.source, c.retention, c.provider, c.retry_horizon)
            ELSE pg_catalog.format('source %s names provider %s, which has no profile in webhook_dedup.providers: its retention cannot be checked',
                                   c.source, c.provider)
       END AS message
  FROM checked AS c
 WHERE (c.known AND c.retry_horizon IS NOT NULL AND c.retention OPERATOR(pg_catalog.<) c.retry_horizon)
    OR (NOT c.known AND c.provider IS DISTINCT FROM c.source);

CREATE OR REPLACE VIEW webhook_dedup.key_states AS
WITH open AS (
  SELECT k.source, k.state, pg_catalog.count(*) AS keys,
         pg_catalog.min(k.due_at) FILTER (WHERE k.due_at OPERATOR(pg_catalog.<) 'infinity'::pg_catalog.timestamptz)
           AS oldest_due_at,
         pg_catalog.count(*) FILTER (WHERE k.due_at OPERATOR(pg_catalog.=) 'infinity'::pg_catalog.timestamptz)
           AS paused_keys,
         pg_catalog.min(k.leased_at) AS oldest_leased_at,
         pg_catalog.count(*) FILTER (WHERE k.lease_expires_at OPERATOR(pg_catalog.<) pg_catalog.now()) AS expired
    FROM webhook_dedup.keys AS k
   WHERE k.state OPERATOR(pg_catalog.<>) 'completed'
   GROUP BY k.source, k.state
)
SELECT o.source, o.state, o.keys,
       CASE WHEN o.state OPERATOR(pg_catalog.=) 'pending'
            THEN pg_catalog.now() OPERATOR(pg_catalog.-) o.oldest_due_at END AS oldest_pending_age,
       CASE WHEN o.state OPERATOR(pg_catalog.=) 'processing'
            THEN pg_catalog.now() OPERATOR(pg_catalog.-) o.oldest_leased_at END AS oldest_lease_age,
       CASE WHEN o.state OPERATOR(pg_catalog.=) 'processing' THEN o.expired END AS expired_leases,
       o.paused_keys, s.paused_at
  FROM open AS o
  LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) o.source;

-- The record of redactions and making them final (docs/security.md,
-- "Erased data"): redact records what it erased in
-- webhook_dedup.redactions; webhook_dedup.purge_redactions rewrites the
-- relations, so that the erased bytes leave the data files.

CREATE TABLE webhook_dedup.redactions (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source      text        COLLATE "C" NOT NULL,
    redacted_at timestamptz NOT NULL,
    redacted_by text        NOT NULL,
    keys        bigint      NOT NULL,
    deliveries  bigint      NOT NULL,
    xid         xid8        NOT NULL,
    relations   text[]      NOT NULL,
    purged_at   timestamptz,
    purged_by   text,
    keys_purged boolean     NOT NULL DEFAULT false
);
COMMENT ON TABLE webhook_dedup.redactions IS
  'One row per webhook_dedup.redact call that erased something, and whether webhook_dedup.purge_redactions has since rewritten the relations it erased from (purged_at). Until then the erased bodies, headers and results stay in the free space of those relations'' data files (and TOAST) until overwritten. docs/security.md, "Erased data".';
COMMENT ON COLUMN webhook_dedup.redactions.id IS 'Identity.';
COMMENT ON COLUMN webhook_dedup.redactions.source IS 'The source redacted.';
COMMENT ON COLUMN webhook_dedup.redactions.redacted_at IS 'When (database clock).';
COMMENT ON COLUMN webhook_dedup.redactions.redacted_by IS 'The session user who called redact.';
COMMENT ON COLUMN webhook_dedup.redactions.keys IS 'Keys redacted (their result and last_error erased).';
COMMENT ON COLUMN webhook_dedup.redactions.deliveries IS 'Payloads and archived deliveries deleted.';
COMMENT ON COLUMN webhook_dedup.redactions.xid IS 'The redacting transaction: the erased row versions are gone from every snapshot once no transaction at or before it is running (what purge_redactions checks).';
COMMENT ON COLUMN webhook_dedup.redactions.relations IS 'The relations rows were erased from: webhook_dedup.keys (the results'' old versions), webhook_dedup.payloads, archive partitions (webhook_dedup.archive_YYYYMMDD, archive_default).';
COMMENT ON COLUMN webhook_dedup.redactions.purged_at IS 'When purge_redactions rewrote the relations (but webhook_dedup.keys unless keys_purged); NULL: the erased bytes may still be in the data files.';
COMMENT ON COLUMN webhook_dedup.redactions.purged_by IS 'The session user who ran purge_redactions.';
COMMENT ON COLUMN webhook_dedup.redactions.keys_purged IS 'Whether webhook_dedup.keys was rewritten too (purge_redactions(include_keys => true)): only then are the erased results gone from its files.';

CREATE FUNCTION webhook_dedup.purge_redactions(include_keys boolean DEFAULT false)
RETURNS TABLE (relation text, bytes_before bigint, bytes_after bigint)
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
  newest xid8;
  own xid8 := pg_catalog.pg_current_xact_id_if_assigned();
  blockers text;
  defer integer := COALESCE(pg_catalog.current_setting('vacuum_defer_cleanup_age', true)::integer, 0);
  rel pg_catalog.regclass;
  idx pg_catalog.regclass;
  before bigint;
  distributed boolean := false;
  margin integer;
BEGIN
  IF include_keys IS NULL THEN
    RAISE EXCEPTION 'webhook_dedup.purge_redactions: include_keys must not be NULL'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p'
            ' WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''webhook_dedup.keys''::pg_catalog.regclass)' INTO distributed;
    IF distributed THEN
      RAISE EXCEPTION 'purging redactions is not available on a distributed (Citus) install of webhook_dedup'
        USING ERRCODE = 'feature_not_supported', HINT = 'redact is not either (docs/distributed.md).';
    END IF;
  END IF;
  -- the redactions whose relations are still to rewrite, locked against a
  -- second purge running at the same time
  SELECT pg_catalog.max(r.xid) INTO newest
    FROM webhook_dedup.redactions AS r
   WHERE r.purged_at IS NULL
      OR (include_keys AND NOT r.keys_purged AND 'webhook_dedup.keys' OPERATOR(pg_catalog.=) ANY (r.relations));
  IF newest IS NULL THEN
    RETURN;
  END IF;
  PERFORM FROM webhook_dedup.redactions AS r
   WHERE r.purged_at IS NULL
      OR (include_keys AND NOT r.keys_purged AND 'webhook_dedup.keys' OPERATOR(pg_catalog.=) ANY (r.relations))
   FOR UPDATE OF r;
  IF own IS NOT NULL AND newest OPERATOR(pg_catalog.>=) own THEN
    RAISE EXCEPTION 'webhook_dedup.purge_redactions: a redaction of this transaction is not committed yet'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'Commit the redaction, then call purge_redactions in a transaction of its own.';
  END IF;
  -- Every snapshot that may still see an erased row version holds a
  -- transaction horizon (xmin) at or before the newest redaction: a
  -- session (this one included: its statement's snapshot), a standby
  -- through hot_standby_feedback (its walsender's xmin), a replication
  -- slot, a prepared transaction; vacuum_defer_cleanup_age (until
  -- PostgreSQL 15) holds the horizon that many transactions further back,
  -- so a horizon less than that many transactions past the redaction
  -- blocks too. pg_stat_activity is read afresh (its snapshot is kept for
  -- the transaction otherwise).
  PERFORM pg_catalog.pg_stat_clear_snapshot();
  margin := pg_catalog.age(pg_catalog.xid(newest)) OPERATOR(pg_catalog.-) defer;
  SELECT pg_catalog.string_agg(b.what, ', ') INTO blockers FROM (
    SELECT pg_catalog.format('%s of %s (pid %s, since %s)',
                             CASE WHEN a.backend_type OPERATOR(pg_catalog.=) 'client backend' THEN 'session'
                                  ELSE a.backend_type END,
                             COALESCE(a.usename::pg_catalog.text, '?'), a.pid,
                             COALESCE(a.xact_start, a.backend_start)) AS what
      FROM pg_catalog.pg_stat_activity AS a
     WHERE (a.backend_xmin IS NOT NULL AND pg_catalog.age(a.backend_xmin) OPERATOR(pg_catalog.>=) margin)
        OR (a.backend_xid IS NOT NULL AND pg_catalog.age(a.backend_xid) OPERATOR(pg_catalog.>=) margin)
    UNION ALL
    SELECT pg_catalog.format('replication slot %s', s.slot_name)
      FROM pg_catalog.pg_replication_slots AS s
     WHERE s.xmin IS NOT NULL AND pg_catalog.age(s.xmin) OPERATOR(pg_catalog.>=) margin
    UNION ALL
    SELECT pg_catalog.format('prepared transaction %s', p.gid)
      FROM pg_catalog.pg_prepared_xacts AS p
     WHERE pg_catalog.age(p.transaction) OPERATOR(pg_catalog.>=) margin
    UNION ALL
    SELECT pg_catalog.format('vacuum_defer_cleanup_age (%s)', defer)
     WHERE margin OPERATOR(pg_catalog.<=) 0
  ) AS b;
  IF blockers IS NOT NULL THEN
    RAISE EXCEPTION 'webhook_dedup.purge_redactions: the erased rows are still visible to snapshots older than the redaction: %', blockers
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'Wait for those transactions to end (or end them), then call purge_redactions again in a new transaction.';
  END IF;

  -- In the order intake locks them (keys, payloads, the archive), so that
  -- a claim that holds one and waits for the next never waits for this
  -- call while it waits for that claim (a deadlock); each rewritten table
  -- stays locked (ACCESS EXCLUSIVE) from its rewrite to the end of the
  -- call. The archive's default partition goes with any day's: the rows a
  -- pass moved out of it into their day's partition left their old
  -- versions there.
  FOR rel IN
    SELECT x.rel FROM (
      SELECT DISTINCT pg_catalog.to_regclass(n.name) AS rel,
             CASE WHEN n.name OPERATOR(pg_catalog.=) 'webhook_dedup.keys' THEN 0
                  WHEN n.name OPERATOR(pg_catalog.=) 'webhook_dedup.payloads' THEN 1 ELSE 2 END AS o
        FROM webhook_dedup.redactions AS r,
             pg_catalog.unnest(r.relations OPERATOR(pg_catalog.||)
                               CASE WHEN pg_catalog.array_to_string(r.relations, ' ') OPERATOR(pg_catalog.~) 'webhook_dedup\.archive_'
                                    THEN ARRAY['webhook_dedup.archive_default'] END) AS n(name)
       WHERE (r.purged_at IS NULL AND n.name OPERATOR(pg_catalog.<>) 'webhook_dedup.keys')
          OR (include_keys AND NOT r.keys_purged AND n.name OPERATOR(pg_catalog.=) 'webhook_dedup.keys')
    ) AS x
     WHERE x.rel IS NOT NULL  -- an archive partition dropped since: its file is gone
     ORDER BY x.o, x.rel::pg_catalog.text
  LOOP
    -- the table's primary key, else its one index (an archive partition's)
    SELECT i.indexrelid INTO idx FROM pg_catalog.pg_index AS i
     WHERE i.indrelid OPERATOR(pg_catalog.=) rel
     ORDER BY i.indisprimary DESC, i.indexrelid LIMIT 1;
    before := pg_catalog.pg_total_relation_size(rel);
    EXECUTE pg_catalog.format('CLUSTER %s USING %I', rel, (SELECT c.relname FROM pg_catalog.pg_class AS c
                                                            WHERE c.oid OPERATOR(pg_catalog.=) idx));
    EXECUTE pg_catalog.format('ALTER TABLE %s SET WITHOUT CLUSTER', rel);
    relation := rel::pg_catalog.text;
    bytes_before := before;
    bytes_after := pg_catalog.pg_total_relation_size(rel);
    RETURN NEXT;
  END LOOP;

  UPDATE webhook_dedup.redactions AS r
     SET purged_at = COALESCE(r.purged_at, pg_catalog.now()),
         purged_by = COALESCE(r.purged_by, SESSION_USER::pg_catalog.text),
         keys_purged = r.keys_purged OR include_keys OR NOT ('webhook_dedup.keys' OPERATOR(pg_catalog.=) ANY (r.relations))
   WHERE r.xid OPERATOR(pg_catalog.<=) newest
     AND (r.purged_at IS NULL OR (include_keys AND NOT r.keys_purged));
END
$fn$;
COMMENT ON FUNCTION webhook_dedup.purge_redactions(boolean) IS
  'webhook_dedup.purge_redactions(include_keys => false) -> rows (relation, bytes_before, bytes_after): makes the redactions of webhook_dedup.redactions not yet purged final on this server: rewrites (CLUSTER) each relation they erased from, so that the erased bodies, headers and results leave its data files (heap and TOAST): webhook_dedup.payloads and the archive partitions, and with include_keys webhook_dedup.keys (the erased results). Each table is locked ACCESS EXCLUSIVE from its rewrite to the end of the call: webhook_next and enqueues wait for payloads, and with include_keys every claim waits for keys (a webhook_receive answers in_progress when its wait runs out); the rewrite takes about the time of reading the table. Records purged_at, purged_by (and keys_purged). Refused (55000, naming them) while a session, a standby''s feedback, a replication slot or a prepared transaction holds a snapshot from before the newest redaction (it could still read the erased rows, and the rewrite would copy them), and in the redaction''s own transaction. What it does not reach: the WAL written before (until its segments are recycled, and archived WAL), base backups taken before, standbys until they replay the rewrite and checkpoint, and the file system''s own copies of freed blocks. Executable by webhook_dedup_operator. Errors: 22004 NULL include_keys; 55000 as above; 0A000 on a distributed install. docs/security.md, "Erased data".';

-- Operators: the record of redactions, what each redrive did per key,
-- the purge.
GRANT SELECT ON webhook_dedup.redrive_keys TO webhook_dedup_operator;
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redactions', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redactions_id_seq', '');
-- Nothing on the new objects but what follows: what the installing role's
-- default privileges gave is revoked, as CREATE EXTENSION revokes it
-- (src/sql/privileges.sql).
DO $$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT DISTINCT c.oid::pg_catalog.regclass AS rel, c.relkind, a.grantee
             FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
            WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY['webhook_dedup.redactions',
                                                          'webhook_dedup.redactions_id_seq']::pg_catalog.regclass[])
              AND a.grantee OPERATOR(pg_catalog.<>) c.relowner LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s',
                              CASE WHEN g.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, g.rel,
                              CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                   ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END);
  END LOOP;
  FOR g IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
            WHERE p.oid OPERATOR(pg_catalog.=) 'webhook_dedup.purge_redactions(boolean)'::pg_catalog.regprocedure
              AND a.grantee OPERATOR(pg_catalog.<>) p.proowner AND a.grantee OPERATOR(pg_catalog.<>) 0 LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION webhook_dedup.purge_redactions(boolean) FROM %I',
                              pg_catalog.pg_get_userbyid(g.grantee));
  END LOOP;
END
$$;
GRANT SELECT, DELETE ON webhook_dedup.redactions TO webhook_dedup_operator;
ALTER FUNCTION webhook_dedup.purge_redactions(boolean) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION webhook_dedup.purge_redactions(boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_dedup.purge_redactions(boolean) TO webhook_dedup_operator;

-- A redrive held by a pause says so (status paused), and its keys' outcomes
-- are the operator's to read.

CREATE OR REPLACE VIEW webhook_dedup.redrive_runs AS
SELECT r.id, r.source::text AS source,
       CASE WHEN r.conflicts THEN r.states OPERATOR(pg_catalog.||) 'conflict'::text ELSE r.states END AS states,
       r.since, r."until", r.event_types, r.max_keys,
       -- a running run of a paused source waits for its resume
       CASE WHEN r.status OPERATOR(pg_catalog.=) 'running' AND s.paused_at IS NOT NULL THEN 'paused'::text
            ELSE r.status END AS status,
       r.matched, r.moved, r.skipped,
       r.matched OPERATOR(pg_catalog.-) r.moved OPERATOR(pg_catalog.-) r.skipped AS remaining,
       r.created_at, r.created_by, r.finished_at, r.cancelled_by
  FROM webhook_dedup.redrives AS r
  LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) r.source;
COMMENT ON VIEW webhook_dedup.redrive_runs IS
  'One row per bulk redrive (webhook_dedup.redrive), newest last: id (what cancel_redrive takes), source, states (as named: dead_lettered, failed, unknown_outcome, conflict), since, until, event_types, max_keys, status (running: the maintenance worker moves its keys, batch_size a pass; paused: running, but its source is paused (webhook_dedup.pause), so nothing moves until webhook_dedup.resume; done; cancelled), matched (keys when it started), moved (made due again: webhook_next hands them out with their payload), skipped (changed since they matched, gone, or without a payload: which, per key, in webhook_dedup.redrive_keys.outcome, readable by webhook_dedup_operator), remaining, created_at, created_by, finished_at, cancelled_by. Finished runs are pruned after their source''s retention.';

-- export_deliveries says when the source keeps no payloads.

CREATE OR REPLACE FUNCTION webhook_dedup.export_deliveries(source text, since timestamptz, "until" timestamptz,
                                                event_types text[] DEFAULT NULL, states text[] DEFAULT NULL,
                                                include_conflicts boolean DEFAULT false,
                                                "max" integer DEFAULT 10000)
RETURNS TABLE (received_at timestamptz, idem_key text, event_id text, event_type text, conflict boolean,
               state text, payload bytea, headers jsonb, delivery jsonb)
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
  bad text;
BEGIN
  IF source IS NULL OR since IS NULL OR "until" IS NULL OR include_conflicts IS NULL OR "max" IS NULL THEN
    RAISE EXCEPTION 'webhook_dedup.export_deliveries: source, since, until, include_conflicts and max must not be NULL'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF NOT pg_catalog.isfinite(since) OR NOT pg_catalog.isfinite("until") OR since OPERATOR(pg_catalog.>=) "until" THEN
    RAISE EXCEPTION 'webhook_dedup.export_deliveries: since and until must be finite, since before until'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF "max" OPERATOR(pg_catalog.<) 1 OR "max" OPERATOR(pg_catalog.>) 100000 THEN
    RAISE EXCEPTION 'webhook_dedup.export_deliveries: max must be between 1 and 100000 (page by received_at)'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT x INTO bad FROM pg_catalog.unnest(states) AS x
   WHERE x IS NULL OR x OPERATOR(pg_catalog.<>) ALL (ARRAY['pending', 'processing', 'completed', 'failed',
                                                           'unknown_outcome', 'dead_lettered'])
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'webhook_dedup.export_deliveries: unknown state "%"', bad
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- an export of a source that archives nothing is empty with a word why
  IF NOT COALESCE((SELECT s.keep_payload FROM webhook_dedup.sources AS s
                    WHERE s.source OPERATOR(pg_catalog.=) export_deliveries.source), false) THEN
    RAISE NOTICE 'source "%" keeps no payloads (webhook_dedup.sources.keep_payload is not on)', source
      USING HINT = 'Only deliveries received while keep_payload was on are in the archive; turn it on to keep the next '
                   'ones (docs/operations.md, "The payload archive").';
  END IF;
  RETURN QUERY
    SELECT a.received_at, a.idem_key::text, a.event_id, a.event_type, a.conflict, k.state, a.payload, a.headers,
           pg_catalog.jsonb_build_object(
             'format', 'webhook_dedup.delivery/1',
             'source', a.source::text,
             'scheme', COALESCE(s.provider, a.source::text),
             'idem_key', a.idem_key::text,
             'event_id', a.event_id,
             'event_type', a.event_type,
             'received_at', pg_catalog.to_char(a.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
             'conflict', a.conflict,
             'state', k.state,
             'headers', a.headers,
             'body_base64', pg_catalog.translate(pg_catalog.encode(a.payload, 'base64'), E'\n', ''))
      FROM webhook_dedup.archive AS a
      LEFT JOIN webhook_dedup.keys AS k
        ON k.idem_key OPERATOR(pg_catalog.=) a.idem_key AND k.source OPERATOR(pg_catalog.=) a.source
      LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) a.source
     WHERE a.source OPERATOR(pg_catalog.=) export_deliveries.source
       AND a.received_at OPERATOR(pg_catalog.>=) since AND a.received_at OPERATOR(pg_catalog.<) "until"
       AND (event_types IS NULL OR a.event_type OPERATOR(pg_catalog.=) ANY (event_types))
       AND (states IS NULL OR k.state OPERATOR(pg_catalog.=) ANY (states))
       AND (include_conflicts OR NOT a.conflict)
     ORDER BY a.received_at, a.idem_key
     LIMIT "max";
END
$fn$;
-- (CREATE OR REPLACE resets what privileges.sql set on it: as every
-- function of a role, it runs as the owner with search_path pinned)
ALTER FUNCTION webhook_dedup.export_deliveries(text, timestamptz, timestamptz, text[], text[], boolean, integer)
  SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION webhook_dedup.export_deliveries(text, timestamptz, timestamptz, text[], text[], boolean, integer) IS
  'webhook_dedup.export_deliveries(source, since, until, event_types => NULL, states => NULL, include_conflicts => false, max => 10000) -> rows (received_at, idem_key, event_id, event_type, conflict, state, payload, headers, delivery): the source''s archived deliveries (webhook_dedup.archive) that arrived in [since, until), oldest first, at most max (1 to 100000: page by received_at): each key''s first delivery, and the conflicting ones with include_conflicts; filtered by event type and by the key''s state now (NULL state: the key is gone). payload is the raw body, byte for byte; delivery is the same as one JSON document in the stable format webhook_dedup.delivery/1: format, source, scheme (the source''s provider, else its name), idem_key, event_id (NULL when not read by webhook_receive), event_type, received_at (RFC 3339, UTC, microseconds), conflict, state, headers (as given), body_base64 (the raw body, RFC 4648 base64). One line of JSON Lines each: psql -At -c "SELECT delivery FROM webhook_dedup.export_deliveries(...)" > deliveries.jsonl, replayed into staging by examples/replay/resend.py. A NOTICE says when the source keeps no payloads (only deliveries received while keep_payload was on are archived). Executable by webhook_dedup_operator (readers never see payloads). Errors: 22004 a NULL argument but the filters; 22023 since not before until, an infinite time, max outside 1..100000, an unknown state. docs/operations.md, "Replaying into staging".';

-- The comments of what changed: repeated headers (item 6), the bounded
-- wait's lock waits (item 4), the redaction's record and purge (item 3),
-- the redrive's notices (item 7).

COMMENT ON TYPE webhook_dedup.receive_result IS
  'The row webhook_receive returns: verified, reject_reason (why not, or missing_event_id, or repeated_header: the event id, type or time header sent more than once, or refused_handshake: a handshake answer that could sign a forged delivery), idem_key, outcome (as webhook_claim, or accepted/duplicate/conflict, or in_progress when the wait ran out, when enqueued; handshake; ignored), claim_token, attempt, result, event_type, event_time, last_step, response (the JSON body to answer with: the stored result of a duplicate, the handshake''s answer, {"status": outcome} or {"error": ...}; NULL for claimed and reclaimed, whose body is the caller''s own result once its work committed), secret_index (which secret verified: its position in secrets, 1-based as in webhook_verify_detail, or with secrets NULL the id of the webhook_dedup.source_secrets key), http_status and http_headers (the HTTP status and the headers, a JSON object of names and string values, to answer with: webhook_dedup.http_answer, docs/providers.md).';

COMMENT ON COLUMN webhook_dedup.claim_counts.missing_event_ids IS 'webhook_receive deliveries that verified but carried no event id, or sent the header it is read from (or the type''s or time''s) more than once (answered missing_event_id or repeated_header, nothing claimed).';

COMMENT ON FUNCTION webhook_dedup.redact(text, text, timestamptz, text) IS
  'webhook_dedup.redact(source, idem_key => NULL, before => NULL, account => NULL) -> (keys bigint, deliveries bigint): erases what deliveries of source carried, for exactly one scope: one key (idem_key; its archived deliveries even when the key is gone), the keys first seen before a time (before; and every delivery of the source archived before it), or the keys derived with one account (account: the third field of a webhook_key with account; a key whose account field was cut by the 255-character bound is not found), and the archived deliveries of that key, time or account whose key is gone. Each key keeps its state, fingerprint and times (a tombstone: later deliveries are still answered duplicate or conflict, never processed again); its result becomes NULL, redacted_at and redacted_by (the session user) are set (webhook_dedup.key_history); its payload for the workers (webhook_dedup.payloads) and its archived bodies and headers (webhook_dedup.archive) are deleted. A key waiting for a worker (pending, or failed with its payload queued) cannot be processed without it: it becomes dead_lettered, last_error payload erased by webhook_dedup.redact (else last_error becomes NULL). keys: keys redacted; deliveries: payloads and archived deliveries erased. Recorded in webhook_dedup.redactions when anything was erased (who, when, how many, the relations erased from). The erased bytes stay in the free space of those relations'' data files (heap and TOAST) until overwritten: webhook_dedup.purge_redactions rewrites them (docs/security.md, "Erased data"). before and account scan the keys table (its primary key leads with idem_key) and the source''s archived deliveries. Executable by webhook_dedup_operator. Errors: 22004 NULL source; 22023 a bad source or key, not exactly one scope, an empty account, an infinite before; 0A000 on a distributed install. docs/operations.md, "Erasing payloads".';

COMMENT ON FUNCTION webhook_dedup.redrive(text, text[], timestamptz, timestamptz, text[], bigint, boolean) IS
  'webhook_dedup.redrive(source, states => ARRAY[''dead_lettered''], since => NULL, until => NULL, event_types => NULL, max => NULL, dry_run => false) -> (run bigint, matched bigint): after a fix, moves keys of source back to due so that the workers (webhook_next) process them again with their payload. states: dead_lettered (the default), failed, unknown_outcome (only when named: its effect may have happened), conflict (keys whose latest conflicting delivery is archived: that delivery is processed and becomes the key''s content). since, until: first seen (a conflict: received) in [since, until); event_types; max: at most this many, oldest first. dry_run: count, change nothing (run NULL). A real run is recorded (webhook_dedup.redrive_runs) and the maintenance worker moves its keys, webhook_dedup.batch_size per pass, skipping a paused source until it is resumed: each key, under its row lock, is skipped when a live delivery or an operator changed it since it matched (so no key is processed twice), when it is gone, or when there is no payload for the workers (claimed, not enqueued, and not archived: keep_payload; or redacted, or past its payload retention); else its payload is put in the queue (from the archive) and it becomes pending, due now, with redriven_at and redrive_run set (key_history); what became of each key is in webhook_dedup.redrive_keys (outcome). NOTICEs say how many matched keys have no payload to redrive (they will be skipped as no_payload) and when the source keeps no payloads (keep_payload). Executable by webhook_dedup_operator. Errors: 22004 NULL source, states, a state or dry_run; 22023 a bad source, no state or another one, since not before until, an infinite time, max below 1; 0A000 on a distributed install. docs/operations.md, "Redriving after a fix".';

COMMENT ON FUNCTION webhook_dedup.http_answer(text, text, jsonb, interval, text) IS
  'webhook_dedup.http_answer(outcome, scheme => NULL, result => NULL, retry_after => NULL, mode => ''claim'') -> one row (http_status integer, http_headers jsonb, response jsonb): the HTTP answer webhook_receive returns with its rows, for an outcome named by the caller: any outcome of webhook_claim, webhook_receive or webhook_enqueue; rejected (a signature that did not verify: 401), missing_event_id, repeated_header (a header the event id, type or time is read from, sent more than once) and refused_handshake (400, or the provider''s stop signal: Mailgun 406, Slack X-Slack-No-Retry: 1, Svix webhook-delivery: abort-message); completed (webhook_complete returned true: 200 with result); lease_lost (webhook_complete or webhook_checkpoint returned false: 503); error (the database could not be asked: 500). Success is always 200 (Mailgun, Paddle, Linear, X and Intercom count only 200); duplicate, conflict, unknown_outcome and dead_lettered are 200 (a 409 or 422 makes some providers drop the event and counts toward disabling the endpoint at others); in_progress, retry_later and lease_lost are 503 with Retry-After (retry_after rounded up to whole seconds, at least 1; none when NULL). http_headers always has Content-Type: application/json; response is result (duplicate, completed, handshake) or {"status": outcome}, {"error": ...}, NULL for claimed and reclaimed. The rules and their sources: docs/providers.md. Changes nothing; every role may call it. Errors: 22004 NULL outcome or mode; 22023 an unknown outcome, scheme or mode, an outcome the mode never ends in, a negative retry_after or one with months.';

COMMENT ON FUNCTION webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean, interval, timestamptz, text, text, text, text, text, text, interval) IS
  'webhook_dedup.webhook_receive(scheme, payload, headers, secrets => NULL, source => NULL, environment => NULL, account => NULL, operation => NULL, mode => ''claim'', lease => NULL, body_key_fallback => false, tolerance => NULL, at => now(), url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL, method => NULL, wait => NULL) -> one row (verified, reject_reason, idem_key, outcome, claim_token, attempt, result, event_type, event_time, last_step, response, secret_index, http_status, http_headers). Answer the provider with http_status, http_headers and response, for every outcome (webhook_dedup.http_answer: 200 for duplicates, conflicts and parked keys, 503 with Retry-After for in_progress and retry_later, 401 for a bad signature, 400 for what no retry can fix; for claimed and reclaimed, http_status and http_headers once the work committed, with your own result as the body). (1) Verifies with secrets, or with secrets NULL with the source''s keys in webhook_dedup.source_secrets valid at at (secret_index: the position of the secret that verified, or the key''s id), and writes nothing for a delivery that fails (verified false, reject_reason as webhook_verify_detail); stored keys verify only the scheme add_secret accepted them for. A scheme whose signature covers nothing of the body (mailgun) binds its signed token to the bytes it first arrived with (webhook_dedup.signature_tokens): the token on other bytes is refused (verified false, reject_reason token_reused), nothing else written. (2) Answers a provider handshake: outcome handshake, response = the JSON body to answer, nothing stored (slack url_verification, zoom endpoint.url_validation and the discord PING once verified; the unsigned twitter CRC, payload empty and the request URL in url, before verification with verified false); an answer that could sign a forged delivery is refused (reject_reason refused_handshake). (3) Reads the event id, type and time by the scheme''s profile (webhook_dedup.providers) with the source''s settings in its place (webhook_dedup.sources; source defaults to the scheme); an event type the source does not accept (accept_event_types) is outcome ignored, nothing stored. (4) A delivery without an event id gets reject_reason missing_event_id unless body_key_fallback; one whose event id, type or time header was sent more than once gets reject_reason repeated_header (400, nothing written: which value is the provider''s cannot be told; docs/signatures.md, "Repeated headers") (zoom and twitter, which send no id, are keyed on the body). url: Twilio, Square and HubSpot sign it, X''s CRC carries its token; ignored for a signed twitter delivery; method: HubSpot signs it. (5) With the source''s replay guard on (by default for github, shopify, linear and twilio, and for a source whose event_id_from is a header its scheme does not sign), a signed body (twilio: its canonical signed text) already received under another event id is answered from that key (duplicate, in_progress, unknown_outcome or dead_lettered; idem_key names it) and nothing is processed (webhook_dedup.replay_guards). (6) Claims (mode claim: outcome as webhook_claim) or stores for webhook_next (mode enqueue: accepted, duplicate, conflict; in_progress as below), with the fingerprint of the source''s rule (fingerprint_pointers, else the profile''s: the raw body; for stripe the RFC 8785 canonical JSON of /type and /data, so that a retry Stripe re-rendered is no conflict; for twilio the signed URL and form parameters sorted by name). (7) In mode claim, before it writes anything, a delivery whose key another worker holds with a live lease (a claim would answer in_progress) waits for that holder, at most wait (NULL: the provider''s default_wait in webhook_dedup.providers; 0 turns it off): holding no lock, woken when the holder''s transaction commits a change of the key (else every 500 ms at most, 100 ms without the library preloaded, and at the lease''s expiry), it then claims as usual, so a holder that completed in time makes the answer a duplicate''s 200 with the stored result, an expired lease a reclaim; a cancel or statement_timeout ends it at once. (8) The whole call is bounded by wait, in both modes: every lock wait after verification (a holder whose open transaction changed the key, a first claim not yet committed) ends by then, what the call wrote is rolled back, and it answers in_progress (503, Retry-After: the holder''s remaining lease, else the source''s lease); a session''s own lock_timeout that ends sooner raises 55P03 as before. Errors as webhook_verify and webhook_claim; 22023 another mode, a wait outside 0 to 60 seconds, a webhook_dedup.sources row whose intake settings do not check, or a stored key that cannot be a key of the scheme (named by id, never echoed); 55000 secrets NULL and no key of the source for the scheme valid at at; 25006 on a standby or in a read-only transaction, once it would write.';

-- pause and resume work on a distributed install too (issue 44): their
-- comments no longer say 0A000.
COMMENT ON FUNCTION webhook_dedup.pause(text, text) IS
  'webhook_dedup.pause(source, reason => NULL) -> bigint: pauses the source while a system its '
  'processing needs is down. Intake goes on (webhook_claim, webhook_receive and webhook_enqueue '
  'answer and store as before: claims are not refused); webhook_next takes none of its keys: its '
  'pending and failed keys are parked (due_at infinity; the count returned), and a key that '
  'becomes due later is parked by the webhook_next that meets it. Keys in flight keep their lease. '
  'Recorded in webhook_dedup.sources (paused_at, paused_by: the session user, pause_reason; a row '
  'is made for a source without one); pausing a paused source keeps its first pause and takes the '
  'new reason. key_states shows the paused backlog. Executable by webhook_dedup_operator. Errors: '
  '22004 NULL source; 22023 an empty source or one over 255 characters. Distributed on Citus, the '
  'same (sources is a reference table: the pause reaches every node). docs/operations.md, '
  '"Pausing a source".';
COMMENT ON FUNCTION webhook_dedup.resume(text) IS
  'webhook_dedup.resume(source) -> bigint: ends a pause (webhook_dedup.pause): clears paused_at, '
  'paused_by and pause_reason, and makes the parked keys due as before it (a failed key at its '
  'retry time, a pending key at its first delivery, so the oldest is taken first); returns how '
  'many. Unparks keys left parked even when the source is not paused (its row was deleted during a '
  'pause). Waits for a webhook_next that is parking a key of the source, so none stays parked. '
  'Executable by webhook_dedup_operator. Errors: 22004 NULL source; 22023 an empty source or one '
  'over 255 characters. Distributed on Citus, the same.';

-- On a distributed install the readers read webhook_dedup.redrives too:
-- redrive_runs now joins it with the sources (reference table), and Citus
-- checks what such a query reads with the reader's own rights
-- (citusdata/citus#1683, #6161; src/sql/distribute.sql).
CREATE OR REPLACE FUNCTION webhook_dedup.distribute(shard_count integer DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $distribute$
DECLARE
  t record;
  f record;
  node record;
  done integer := 0;
BEGIN
  IF pg_catalog.to_regproc('pg_catalog.create_distributed_table') IS NULL THEN
    RAISE EXCEPTION 'webhook_dedup.distribute() needs Citus: the extension citus is not installed in this database'
      USING ERRCODE = '55000',
            HINT = 'Install Citus from its packages, add citus first to shared_preload_libraries, CREATE EXTENSION citus and add the workers (docs/distributed.md).';
  END IF;
  IF NOT pg_catalog.citus_is_coordinator() THEN
    RAISE EXCEPTION 'webhook_dedup.distribute() runs on the coordinator' USING ERRCODE = '55000';
  END IF;
  -- Every node preloads the library: its guard keeps a NULL source from
  -- Citus's function delegation, which would crash the server on it
  -- (src/citus_guard.rs), and its worker does that node's maintenance.
  FOR node IN SELECT r.nodeid, r.success, r.result
                FROM pg_catalog.run_command_on_all_nodes('SHOW shared_preload_libraries') AS r LOOP
    IF NOT node.success OR NOT EXISTS (
         SELECT FROM pg_catalog.unnest(pg_catalog.string_to_array(node.result, ',')) AS e(lib)
          WHERE pg_catalog.btrim(e.lib, ' "') OPERATOR(pg_catalog.~) '(^|/)webhook_dedup(\.so)?$') THEN
      RAISE EXCEPTION 'webhook_dedup.distribute() needs webhook_dedup in shared_preload_libraries on every node: Citus node % has %',
        node.nodeid, node.result
        USING ERRCODE = '55000',
              HINT = 'Set shared_preload_libraries = ''citus,webhook_dedup'' on every node, restart it, and try again (docs/distributed.md).';
    END IF;
  END LOOP;
  IF shard_count IS NOT NULL AND (shard_count OPERATOR(pg_catalog.<) 1 OR shard_count OPERATOR(pg_catalog.>) 64000) THEN
    RAISE EXCEPTION 'shard_count must be between 1 and 64000, not %', shard_count USING ERRCODE = '22023';
  END IF;

  -- The statement triggers that empty every backend's caches of the
  -- sources and their keys when they change are kept on the reference
  -- tables, and Citus puts them on every node's copy as well.
  PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
  IF shard_count IS NOT NULL THEN
    PERFORM pg_catalog.set_config('citus.shard_count', shard_count::text, true);
  END IF;

  FOR t IN SELECT x.rel::pg_catalog.regclass AS rel FROM (VALUES
      ('webhook_dedup.sources'), ('webhook_dedup.source_secrets')) AS x(rel)
  LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid OPERATOR(pg_catalog.=) t.rel) THEN
      PERFORM pg_catalog.create_reference_table(t.rel);
      -- the rows were copied to every node; the coordinator's own copy
      -- under the table is no longer read, and would only take space
      PERFORM pg_catalog.truncate_local_data_after_distributing_table(t.rel);
      done := done OPERATOR(pg_catalog.+) 1;
    END IF;
  END LOOP;

  -- A distributed table's unique constraints must hold its distribution
  -- column: the conflict log's identity becomes (id, source).
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p
                  WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'webhook_dedup.conflict_log'::pg_catalog.regclass) THEN
    ALTER TABLE webhook_dedup.conflict_log DROP CONSTRAINT conflict_log_pkey;
    ALTER TABLE webhook_dedup.conflict_log ADD CONSTRAINT conflict_log_pkey PRIMARY KEY (id, source);
  END IF;

  -- One co-location group (every source column is text COLLATE "C"):
  -- a source's rows of every table are in shards on one node, so a
  -- statement that names the source, whichever tables it reads, runs there.
  FOR t IN SELECT x.rel::pg_catalog.regclass AS rel, x.ord, x.colocate_with FROM (VALUES
      ('webhook_dedup.keys', 1, 'none'), ('webhook_dedup.payloads', 2, 'webhook_dedup.keys'),
      ('webhook_dedup.replay_guards', 3, 'webhook_dedup.keys'), ('webhook_dedup.conflict_log', 4, 'webhook_dedup.keys'),
      ('webhook_dedup.watermarks', 5, 'webhook_dedup.keys'),
      ('webhook_dedup.claim_counts', 6, 'webhook_dedup.keys'),
      ('webhook_dedup.signature_tokens', 7, 'webhook_dedup.keys')) AS x(rel, ord, colocate_with)
    ORDER BY x.ord
  LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid OPERATOR(pg_catalog.=) t.rel) THEN
      PERFORM pg_catalog.create_distributed_table(t.rel, 'source', colocate_with => t.colocate_with);
      PERFORM pg_catalog.truncate_local_data_after_distributing_table(t.rel);
      done := done OPERATOR(pg_catalog.+) 1;
    END IF;
  END LOOP;

  -- Readers: the views run with their owner's rights on one server, but
  -- Citus checks the shards it reads on the workers with the reader's own
  -- (citusdata/citus#1683, #6161). So the roles the views are granted to
  -- may read what the views show: the key columns they read (never
  -- claim_token or fingerprint; payloads, headers and secrets stay out of
  -- reach), the conflicts, the counts, the per-source settings and the
  -- bulk redrives (redrive_runs joins them with the sources).
  GRANT SELECT (source, idem_key, state, event_type, attempt, leased_at, lease_expires_at, next_attempt_at, due_at,
                last_step, last_error, deliveries, conflicts, result, first_seen_at, last_seen_at, completed_at,
                redacted_at, redacted_by, redriven_at, redrive_run, reconciled_at)
    ON webhook_dedup.keys TO webhook_dedup_reader, pg_monitor;
  GRANT SELECT ON webhook_dedup.conflict_log, webhook_dedup.claim_counts, webhook_dedup.sources,
                  webhook_dedup.redrives
    TO webhook_dedup_reader, pg_monitor;

  -- Every function of one source's state runs on the node that holds the
  -- source's shard, in one round trip, when it is called outside a
  -- transaction block (Citus delegates such calls; inside one, the call
  -- runs on the coordinator and its statements go to that shard).
  FOR f IN SELECT x.signature::pg_catalog.regprocedure AS fn, x.colocate_with FROM (VALUES
      ('webhook_dedup.webhook_claim(text, text, bytea, interval, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_claim_many(text, text[], interval, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_complete(text, text, uuid, jsonb)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_fail(text, text, uuid, text, boolean, interval)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_mark_unknown(text, text, uuid, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_checkpoint(text, text, uuid, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_extend_lease(text, text, uuid, interval)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_enqueue(text, text, bytea, text, jsonb)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean, interval,'
       ' timestamptz, text, text, text, text, text, text, interval)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_advance(text, text, timestamptz, text, bigint)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_resolve(text, text, text, jsonb)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_forget(text, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.reconcile(text, text, bytea, text, jsonb, text, text, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.unseen(text, text[], text, text, text)', 'webhook_dedup.keys')) AS x(signature, colocate_with)
  LOOP
    PERFORM pg_catalog.create_distributed_function(f.fn, 'source', colocate_with => f.colocate_with);
  END LOOP;
  RETURN pg_catalog.format('webhook_dedup is distributed by source (%s tables converted now)', done);
END
$distribute$;
DO $$
DECLARE
  distributed boolean := false;
BEGIN
  -- (Citus's catalog is named only when it exists: dynamic SQL)
  IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p'
            ' WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''webhook_dedup.keys''::pg_catalog.regclass)'
      INTO distributed;
  END IF;
  IF distributed THEN
    GRANT SELECT ON webhook_dedup.redrives TO webhook_dedup_reader, pg_monitor;
  END IF;
END
$$;
