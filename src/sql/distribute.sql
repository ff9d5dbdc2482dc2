-- Distributed mode on Citus (docs/distributed.md): webhook_dedup.distribute().
--
-- A source is the unit of distribution: every table that holds per-source
-- state is hash-distributed by its `source` column and co-located with the
-- keys, so one source's keys, payloads, replay guards, watermarks,
-- conflicts and counts live in one shard, and every single-key function
-- (all of them take the source as an argument) runs where that shard is.
-- The per-source settings and keys are reference tables (a copy on every
-- node). Maintenance runs stay per node (webhook_dedup.maintenance_runs is
-- left local).

CREATE FUNCTION webhook_dedup.distribute(shard_count integer DEFAULT NULL)
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
REVOKE ALL ON FUNCTION webhook_dedup.distribute(integer) FROM PUBLIC;
COMMENT ON FUNCTION webhook_dedup.distribute(integer) IS
  'distribute(shard_count => NULL) -> text. Citus only, on the coordinator, as a superuser: makes '
  'webhook_dedup distributed by source. keys, payloads, replay_guards, signature_tokens, '
  'conflict_log (primary key (id, source)), watermarks and claim_counts become hash-distributed '
  'tables co-located on source; sources and source_secrets reference tables; the single-key '
  'functions (webhook_claim, webhook_receive, webhook_complete, webhook_fail, ...) are delegated '
  'by their source argument (webhook_receive''s NULL source by its scheme''s name), so a call '
  'outside a transaction block runs on the node that holds the source in one round trip; '
  'webhook_dedup_reader and pg_monitor may read the columns the views show (Citus checks a view''s '
  'shards with the reader''s rights). Idempotent. shard_count: citus.shard_count for the new '
  'tables (NULL: the setting''s value). Errors: 55000 without Citus, off the coordinator, or when '
  'a node does not preload webhook_dedup; 22023 shard_count outside 1..64000. docs/distributed.md.';
