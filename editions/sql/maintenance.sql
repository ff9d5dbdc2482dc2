-- Maintenance without a background worker (src/api/maintenance.rs,
-- src/maintenance/): run_maintenance runs one pass, the steps in the
-- native edition's order, each in a subtransaction of its own with
-- search_path pinned and the pass's lock_timeout (a step that fails is
-- rolled back, warned about and listed in errors; the others still run).
-- Schedule it with pg_cron (docs/sql-edition.md). default_retention.

--@ webhook_dedup.run_maintenance
DECLARE
  started pg_catalog.timestamptz;
  batch bigint;
  default_us bigint;
  shortest_us bigint;
  step_timeout pg_catalog.text;
  saved_path pg_catalog.text;
  saved_timeout pg_catalog.text;
  r record;
  n bigint;
  messages pg_catalog.text[];
  message pg_catalog.text;
  last pg_catalog.text;
  step pg_catalog.text;
BEGIN
  ran := false;
  leases_expired := 0;
  dead_lettered := 0;
  keys_pruned := 0;
  keys_kept := 0;
  history_pruned := 0;
  metrics_flushed := 0;
  retention_warnings := 0;
  more := false;
  errors := '{}';
  intents_expired := 0;
  intents_pruned := 0;
  payloads_pruned := 0;
  partitions_created := 0;
  partitions_dropped := 0;
  keys_redriven := 0;
  IF pg_catalog.pg_is_in_recovery() THEN
    RAISE NOTICE 'webhook_dedup: no maintenance on a standby; it runs on the primary';
    RETURN NEXT;
    RETURN;
  END IF;
  -- two passes never overlap (the native edition's lock tag cannot be
  -- spelled in SQL: this one, for this edition)
  IF NOT pg_catalog.pg_try_advisory_xact_lock(22341, 1) THEN
    RETURN NEXT;
    RETURN;
  END IF;
  ran := true;
  started := pg_catalog.clock_timestamp();
  -- maintenance/mod.rs, lock_timeout_ms: 500 ms, or half deadlock_timeout
  SELECT GREATEST(LEAST(500, s.setting::integer OPERATOR(pg_catalog./) 2), 1)::pg_catalog.text OPERATOR(pg_catalog.||) 'ms'
    INTO step_timeout FROM pg_catalog.pg_settings AS s WHERE s.name OPERATOR(pg_catalog.=) 'deadlock_timeout';
  saved_path := pg_catalog.current_setting('search_path');
  saved_timeout := pg_catalog.current_setting('lock_timeout');
  batch := webhook_dedup._setting('webhook_dedup.batch_size');
  default_us := webhook_dedup._setting('webhook_dedup.retention')::bigint OPERATOR(pg_catalog.*) 1000000;
  shortest_us := default_us;
  BEGIN
    SELECT LEAST(webhook_dedup._duration_us(pg_catalog.min(s.retention), 'webhook_dedup.sources.retention'), default_us)
      INTO n FROM webhook_dedup.sources AS s WHERE s.retention IS NOT NULL;
    shortest_us := COALESCE(n, default_us);
  EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'webhook_dedup: maintenance step "%" failed, the next pass retries it: % (%)', 'reading retention', SQLERRM, SQLSTATE;
    errors := errors OPERATOR(pg_catalog.||) pg_catalog.format('%s: %s (%s)', 'reading retention', SQLERRM, SQLSTATE);
  END;

  -- the steps in the native edition's order (maintenance/mod.rs, attempt):
  -- each in a subtransaction of its own with search_path pinned and the
  -- pass's lock_timeout; one that fails is rolled back (its settings with
  -- it), warned about and listed in errors, and the next still runs
  FOREACH step IN ARRAY ARRAY['sweeping expired leases', 'deleting keys past retention', 'pruning history',
                              'flushing metrics', 'checking retention', 'sweeping and pruning the outbox',
                              'moving redriven keys', 'keeping the payload archive'] LOOP
    BEGIN
      PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('lock_timeout', step_timeout, true);
      -- 1. expired leases
      IF step OPERATOR(pg_catalog.=) 'sweeping expired leases' THEN
        r := webhook_dedup._m_sweep(started, batch);
        leases_expired := r.leases_expired;
        dead_lettered := r.dead_lettered;
        more := more OR r.more;
      -- 2. keys past retention
      ELSIF step OPERATOR(pg_catalog.=) 'deleting keys past retention' THEN
        SELECT * INTO r FROM webhook_dedup._s_expiry_expire_keys(started, webhook_dedup._us_time_interval(default_us), batch)
          AS e(looked_at bigint, deleted bigint, kept bigint);
        keys_pruned := keys_pruned OPERATOR(pg_catalog.+) r.deleted;
        keys_kept := keys_kept OPERATOR(pg_catalog.+) r.kept;
        more := more OR r.looked_at OPERATOR(pg_catalog.>=) batch;
      -- 3. history
      ELSIF step OPERATOR(pg_catalog.=) 'pruning history' THEN
        FOR n IN SELECT pg_catalog.unnest(ARRAY[h.watermarks, h.conflicts, h.counts, h.guards, h.tokens])
                   FROM webhook_dedup._s_history_prune(started, webhook_dedup._us_time_interval(default_us), batch,
                                                        webhook_dedup._us_time_interval(shortest_us))
                     AS h(watermarks bigint, conflicts bigint, counts bigint, guards bigint, tokens bigint)
                 UNION ALL
                 SELECT m.runs FROM webhook_dedup._s_maintenance_runs_prune(started, webhook_dedup._us_time_interval(default_us), batch)
                   AS m(runs bigint) LOOP
          history_pruned := history_pruned OPERATOR(pg_catalog.+) n;
          more := more OR n OPERATOR(pg_catalog.>=) batch;
        END LOOP;
      -- 4. the counts
      ELSIF step OPERATOR(pg_catalog.=) 'flushing metrics' THEN
        PERFORM webhook_dedup._write_counts();
        metrics_flushed := webhook_dedup._flush_counts();
      -- 5. retention shorter than a provider's retry horizon: warned once an
      -- hour per session while unchanged (maintenance/retention.rs, warnings)
      ELSIF step OPERATOR(pg_catalog.=) 'checking retention' THEN
        SELECT COALESCE(pg_catalog.array_agg(w.message ORDER BY w.source), '{}') INTO messages
          FROM webhook_dedup.retention_warnings AS w WHERE w.message IS NOT NULL;
        retention_warnings := pg_catalog.cardinality(messages);
        IF retention_warnings OPERATOR(pg_catalog.>) 0 THEN
          last := pg_catalog.current_setting('webhook_dedup.last_retention_warning', true);
          FOREACH message IN ARRAY messages LOOP
            IF last IS NOT NULL AND pg_catalog.split_part(last, ' ', 1) OPERATOR(pg_catalog.=) retention_warnings::pg_catalog.text
               AND EXTRACT(epoch FROM started) OPERATOR(pg_catalog.-) pg_catalog.split_part(last, ' ', 2)::numeric
                   OPERATOR(pg_catalog.<) 3600 THEN
              RAISE NOTICE 'webhook_dedup: %', message;
            ELSE
              RAISE WARNING 'webhook_dedup: %', message;
            END IF;
          END LOOP;
          IF last IS NULL OR pg_catalog.split_part(last, ' ', 1) OPERATOR(pg_catalog.<>) retention_warnings::pg_catalog.text
             OR EXTRACT(epoch FROM started) OPERATOR(pg_catalog.-) pg_catalog.split_part(last, ' ', 2)::numeric
                OPERATOR(pg_catalog.>=) 3600 THEN
            PERFORM pg_catalog.set_config('webhook_dedup.last_retention_warning',
                                          retention_warnings::pg_catalog.text OPERATOR(pg_catalog.||) ' '
                                          OPERATOR(pg_catalog.||) EXTRACT(epoch FROM started)::pg_catalog.text, false);
          END IF;
        END IF;
      -- 6. the outbox
      ELSIF step OPERATOR(pg_catalog.=) 'sweeping and pruning the outbox' THEN
        r := webhook_dedup._m_outbox(started, batch, webhook_dedup._us_time_interval(default_us),
                                     webhook_dedup._us_time_interval(shortest_us));
        intents_expired := r.intents_expired;
        intents_pruned := r.intents_pruned;
        more := more OR r.more;
      -- 7. bulk redrives
      ELSIF step OPERATOR(pg_catalog.=) 'moving redriven keys' THEN
        r := webhook_dedup._m_redrive(started, batch, webhook_dedup._us_interval(default_us));
        keys_redriven := r.keys_redriven;
        history_pruned := history_pruned OPERATOR(pg_catalog.+) r.history_pruned;
        more := more OR r.more;
      -- 8. the payload archive
      ELSIF step OPERATOR(pg_catalog.=) 'keeping the payload archive' THEN
        r := webhook_dedup._m_archive(started, batch, webhook_dedup._us_interval(default_us));
        payloads_pruned := r.payloads_pruned;
        partitions_created := r.partitions_created;
        partitions_dropped := r.partitions_dropped;
        more := more OR r.more;
      END IF;
      PERFORM pg_catalog.set_config('search_path', saved_path, true), pg_catalog.set_config('lock_timeout', saved_timeout, true);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'webhook_dedup: maintenance step "%" failed, the next pass retries it: % (%)', step, SQLERRM, SQLSTATE;
      errors := errors OPERATOR(pg_catalog.||) pg_catalog.format('%s: %s (%s)', step, SQLERRM, SQLSTATE);
    END;
  END LOOP;
  -- the pass, kept in webhook_dedup.maintenance_runs
  PERFORM webhook_dedup._s_maintenance_runs_record(started, pg_catalog.clock_timestamp(), leases_expired, dead_lettered,
                                                   keys_pruned, keys_kept, history_pruned, metrics_flushed,
                                                   retention_warnings, more, errors, intents_expired, intents_pruned,
                                                   payloads_pruned, partitions_created, partitions_dropped, keys_redriven);
  RETURN NEXT;
END

--@ webhook_dedup.default_retention
-- webhook_dedup.retention as an interval of days and the time part
-- (maintenance/retention.rs, interval)
BEGIN
  RETURN webhook_dedup._us_interval(webhook_dedup._setting('webhook_dedup.retention')::bigint
                                    OPERATOR(pg_catalog.*) 1000000);
END
