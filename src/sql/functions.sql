-- webhook_dedup: the functions written in PL/pgSQL (the others are Rust,
-- #[pg_extern] in src/api/). Their privileges are in privileges.sql, their
-- comments in comments.sql. The hand-written files run after the generated
-- functions they name (src/lib.rs, `requires`), comments.sql last of all.

-- The live counters of every node of a distributed install (each node
-- counts the calls it ran, in its own shared memory; docs/distributed.md),
-- else of this server: metrics_live() run on each node through Citus's
-- run_command_on_all_nodes. SECURITY DEFINER: Citus connects to the nodes
-- as the current user, and the command is fixed.
CREATE FUNCTION webhook_dedup.metrics_live_cluster()
RETURNS TABLE (bucket timestamptz, minute boolean, source text, event_type text, counts bigint[])
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  node record;
  distributed boolean := false;
BEGIN
  -- (each statement is parsed when it runs: Citus's catalog is read only
  -- where it exists)
  IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    distributed := EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p
                            WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'webhook_dedup.claim_counts'::pg_catalog.regclass);
  END IF;
  IF NOT distributed THEN
    RETURN QUERY SELECT l.bucket, l.minute, l.source, l.event_type, l.counts FROM webhook_dedup.metrics_live() AS l;
    RETURN;
  END IF;
  FOR node IN SELECT r.nodeid, r.success, r.result FROM pg_catalog.run_command_on_all_nodes(
      'SELECT COALESCE(pg_catalog.json_agg(l), ''[]'') FROM webhook_dedup.metrics_live() AS l') AS r
  LOOP
    IF NOT node.success THEN
      RAISE WARNING 'webhook_dedup: the live counters of Citus node % could not be read (the flushed ones are in webhook_dedup.claim_counts): %',
        node.nodeid, node.result;
      CONTINUE;
    END IF;
    RETURN QUERY SELECT l.bucket, l.minute, l.source, l.event_type, l.counts
      FROM pg_catalog.json_to_recordset(node.result::pg_catalog.json)
           AS l(bucket timestamptz, minute boolean, source text, event_type text, counts bigint[]);
  END LOOP;
END
$fn$;

-- Whether a source has keys made by webhook_key or webhook_receive (they
-- start with '<source>:': one range probe of the primary key (idem_key,
-- source)) or counted deliveries (the primary key of claim_counts leads
-- with source). A function rather than a subquery of the view: each probe
-- names one source, so on a distributed install (docs/distributed.md)
-- Citus routes it to that source's shard, where a correlated subquery over
-- the distributed keys could not be planned. SECURITY DEFINER: the view's
-- readers may not read the keys; this says only whether there are any.
CREATE FUNCTION webhook_dedup.source_has_history(source text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- PL/pgSQL: Citus plans its parameters, not an SQL function's
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  RETURN EXISTS (SELECT FROM webhook_dedup.keys AS k
                  WHERE k.idem_key OPERATOR(pg_catalog.>=) ($1 OPERATOR(pg_catalog.||) ':')
                    AND k.idem_key OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.||) ';')
                    AND k.source OPERATOR(pg_catalog.=) $1)
      OR EXISTS (SELECT FROM webhook_dedup.claim_counts AS c WHERE c.source OPERATOR(pg_catalog.=) $1);
END
$fn$;

-- The payload archive's export (docs/operations.md "Replaying into
-- staging"): a source's archived deliveries in a documented, stable
-- format, for audit and for replaying real events into staging
-- (examples/replay/resend.py). Runs as the extension's owner (the archive
-- is the owner's alone); executable by webhook_dedup_operator (privileges.sql).
CREATE FUNCTION webhook_dedup.export_deliveries(source text, since timestamptz, "until" timestamptz,
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

-- Making redactions final on the primary (docs/security.md "Erased data"):
-- redact deletes and updates rows, and PostgreSQL leaves the old row
-- versions' bytes in the pages (heap and TOAST) until the space is reused;
-- VACUUM marks the space free without wiping it. This rewrites each
-- relation a pending redaction erased from (CLUSTER: a new file with the
-- live rows only; the old file is truncated when the transaction commits
-- and removed at the next checkpoint), which is only safe once no snapshot
-- can still see the erased versions: else CLUSTER copies them (recently
-- dead) into the new file.
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

CREATE FUNCTION webhook_dedup.duplicate_rate_alerts(threshold double precision DEFAULT 0.02,
                                                    "window" interval DEFAULT '1 hour')
RETURNS TABLE (source text, alert text, deliveries bigint, duplicates bigint, duplicate_ratio double precision,
               previous_duplicates bigint, reconciled bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'  -- buckets are UTC-aligned; so are the windows
AS $fn$
DECLARE
  width interval;
  unit text;
BEGIN
  IF threshold IS NULL OR "window" IS NULL THEN
    RAISE EXCEPTION 'webhook_dedup.duplicate_rate_alerts: threshold and window must not be NULL'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF threshold < 0 OR threshold > 1 THEN  -- NaN sorts above 1 in PostgreSQL
    RAISE EXCEPTION 'webhook_dedup.duplicate_rate_alerts: threshold must be between 0 and 1, not %', threshold
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF "window" < interval '1 minute' OR "window" > interval '366 days' THEN
    RAISE EXCEPTION 'webhook_dedup.duplicate_rate_alerts: window must be between 1 minute and 366 days, not %', "window"
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Windows up to an hour use the per-minute counts (kept two hours, so
  -- the previous window is there too); longer ones the hourly counts.
  IF "window" <= interval '1 hour' THEN
    width := interval '1 minute'; unit := 'minute';
  ELSE
    width := interval '1 hour'; unit := 'hour';
  END IF;
  RETURN QUERY
  WITH b AS (
    SELECT m.source, m.bucket, m.deliveries, m.duplicates, m.reconciled
      FROM webhook_dedup.metrics_buckets AS m
     WHERE m.bucket_width = width
       AND m.bucket >= date_trunc(unit, now() - 2 * "window")
  ), w AS (
    SELECT b.source,
           coalesce(sum(b.deliveries) FILTER (WHERE b.bucket >= date_trunc(unit, now() - "window")), 0)::bigint AS d,
           coalesce(sum(b.duplicates) FILTER (WHERE b.bucket >= date_trunc(unit, now() - "window")), 0)::bigint AS dup,
           coalesce(sum(b.duplicates) FILTER (WHERE b.bucket < date_trunc(unit, now() - "window")), 0)::bigint AS prev,
           coalesce(sum(b.reconciled) FILTER (WHERE b.bucket >= date_trunc(unit, now() - "window")), 0)::bigint AS rec
      FROM b GROUP BY b.source
  )
  SELECT w.source,
         CASE WHEN w.dup = 0 THEN 'duplicates_stopped' ELSE 'ratio_above_threshold' END,
         w.d, w.dup,
         CASE WHEN w.d > 0 THEN w.dup::double precision / w.d END,
         w.prev, w.rec
    FROM w
   WHERE (w.d > 0 AND w.dup::double precision / w.d > threshold)
      OR (w.dup = 0 AND w.prev > 0)
  UNION ALL
  -- a leaky endpoint: events the provider sent that a reconciliation job
  -- had to enqueue (webhook_dedup.reconcile), against all it sent
  SELECT w.source, 'reconciled_above_threshold', w.d, w.dup,
         CASE WHEN w.d > 0 THEN w.dup::double precision / w.d END,
         w.prev, w.rec
    FROM w
   WHERE w.rec > 0 AND w.rec::double precision / (w.d + w.rec) > threshold
   ORDER BY 1, 2;
END
$fn$;

-- Opting in to dumps of the verification keys (they are left out by
-- default, docs/operations.md "Backups"). pg_extension_config_dump works
-- only inside an extension script, so this edits the registration it
-- writes (pg_extension.extconfig and extcondition, parallel arrays).
CREATE FUNCTION webhook_dedup.dump_secrets(include boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  rel pg_catalog.oid := 'webhook_dedup.source_secrets'::pg_catalog.regclass;
  seq pg_catalog.oid := 'webhook_dedup.source_secrets_id_seq'::pg_catalog.regclass;
  ext pg_catalog.oid;
  config pg_catalog.oid[];
  conditions text[];
BEGIN
  IF include IS NULL THEN
    RAISE EXCEPTION 'include must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  SELECT e.oid INTO ext FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'webhook_dedup';
  -- every entry but the keys' table and sequence, in order
  SELECT COALESCE(pg_catalog.array_agg(c.oid ORDER BY c.n), '{}'), COALESCE(pg_catalog.array_agg(c.cond ORDER BY c.n), '{}')
    INTO config, conditions
    FROM pg_catalog.pg_extension AS e,
         LATERAL ROWS FROM (pg_catalog.unnest(e.extconfig), pg_catalog.unnest(e.extcondition))
           WITH ORDINALITY AS c(oid, cond, n)
   WHERE e.oid OPERATOR(pg_catalog.=) ext AND c.oid OPERATOR(pg_catalog.<>) ALL (ARRAY[rel, seq]);
  IF include THEN
    config := config OPERATOR(pg_catalog.||) ARRAY[rel, seq];
    conditions := conditions OPERATOR(pg_catalog.||) ARRAY['', ''];
  END IF;
  UPDATE pg_catalog.pg_extension AS e
     SET extconfig = CASE WHEN pg_catalog.cardinality(config) OPERATOR(pg_catalog.=) 0 THEN NULL ELSE config END,
         extcondition = CASE WHEN pg_catalog.cardinality(conditions) OPERATOR(pg_catalog.=) 0 THEN NULL ELSE conditions END
   WHERE e.oid OPERATOR(pg_catalog.=) ext;
  RETURN include;
END
$$;
