-- One maintenance pass without a background worker (src/maintenance/,
-- the steps the native edition's worker schedules; run_maintenance() runs
-- one, from pg_cron or by hand): the helpers of editions/sql/maintenance.sql,
-- one per step, each over the native store's statements. Internal: the
-- owner's alone (each REVOKE below).

-- The counts of `logged` (rows of webhook_dedup._count_log) as the native
-- edition's counter table holds them (core metrics.rs: keys, event):
-- one hourly row per source and event type ('' for none; a type longer
-- than EVENT_TYPE_CHARS characters, or past SOURCE_EVENT_TYPES types of a
-- source in an hour of these rows, as OTHER_EVENT_TYPE, in the order they
-- were first counted) and one row per source and minute (event type ''),
-- each with its counts in Counter::ALL's order (a delivery counted in
-- deliveries too).
CREATE FUNCTION webhook_dedup._aggregate_counts(logged webhook_dedup._count_log[])
  RETURNS TABLE (bucket timestamptz, minute boolean, source text, event_type text, counts bigint[])
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  WITH rules AS (
    SELECT * FROM webhook_dedup._metrics_rules()
  ), taken AS (
    SELECT * FROM pg_catalog.unnest(logged)
  ), labelled AS (
    SELECT t.*, pg_catalog.date_trunc('hour', t.at, 'UTC') AS hour,
           CASE WHEN pg_catalog.char_length(COALESCE(t.event_type, '')) OPERATOR(pg_catalog.>) r.event_type_chars
                THEN r.other_event_type ELSE COALESCE(t.event_type, '') END AS label
      FROM taken AS t, rules AS r
  ), ranked AS (
    SELECT l.hour, l.source, l.label,
           pg_catalog.dense_rank() OVER (PARTITION BY l.hour, l.source ORDER BY l.first_at, l.label) AS rank
      FROM (SELECT x.hour, x.source, x.label, pg_catalog.min(x.at) AS first_at FROM labelled AS x GROUP BY 1, 2, 3) AS l
  ), events AS (
    SELECT l.*, CASE WHEN k.rank OPERATOR(pg_catalog.>) r.source_event_types THEN r.other_event_type ELSE l.label END AS kept
      FROM labelled AS l
      JOIN ranked AS k ON k.hour OPERATOR(pg_catalog.=) l.hour AND k.source OPERATOR(pg_catalog.=) l.source
                      AND k.label OPERATOR(pg_catalog.=) l.label,
           rules AS r
  ), cells AS (
    SELECT e.hour, e.at, e.source, e.kept, e.counter, e.n FROM events AS e
    UNION ALL
    SELECT e.hour, e.at, e.source, e.kept, 'deliveries', e.n FROM events AS e WHERE e.delivery
  ), grouped AS (
    SELECT c.hour AS bucket, false AS minute, c.source, c.kept AS event_type, c.counter, pg_catalog.sum(c.n) AS n
      FROM cells AS c GROUP BY 1, 3, 4, 5
    UNION ALL
    SELECT c.at, true, c.source, '', c.counter, pg_catalog.sum(c.n) FROM cells AS c GROUP BY 1, 3, 5
  )
  SELECT x.bucket, x.minute, x.source, x.event_type,
         ARRAY(SELECT COALESCE((SELECT y.n FROM grouped AS y
                                 WHERE y.bucket OPERATOR(pg_catalog.=) x.bucket AND y.minute OPERATOR(pg_catalog.=) x.minute
                                   AND y.source OPERATOR(pg_catalog.=) x.source
                                   AND y.event_type OPERATOR(pg_catalog.=) x.event_type
                                   AND y.counter OPERATOR(pg_catalog.=) c.name), 0)::bigint
                 FROM rules AS r, pg_catalog.unnest(r.counters) WITH ORDINALITY AS c(name, i) ORDER BY c.i)
    FROM (SELECT DISTINCT g.bucket, g.minute, g.source, g.event_type FROM grouped AS g) AS x
$$;
REVOKE ALL ON FUNCTION webhook_dedup._aggregate_counts(webhook_dedup._count_log[]) FROM PUBLIC;

-- Move the counts of webhook_dedup._count_log into
-- webhook_dedup.claim_counts (metrics.rs, flush): each row of
-- _aggregate_counts added to its flushed row (claim_counts_upsert.sql). The
-- log's rows are taken with DELETE: a receiver appending meanwhile waits
-- for nothing. Returns how many rows were written.
CREATE FUNCTION webhook_dedup._flush_counts() RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  r record;
  written bigint := 0;
  taken webhook_dedup._count_log[];
BEGIN
  WITH gone AS (DELETE FROM webhook_dedup._count_log RETURNING *)
  SELECT pg_catalog.array_agg(g) INTO taken FROM gone AS g;
  FOR r IN SELECT * FROM webhook_dedup._aggregate_counts(COALESCE(taken, '{}')) LOOP
    PERFORM webhook_dedup._s_claim_counts_upsert(r.bucket, r.source, r.event_type,
                                                 CASE WHEN r.minute THEN '1 minute' ELSE '1 hour' END, r.counts);
    written := written OPERATOR(pg_catalog.+) 1;
  END LOOP;
  RETURN written;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._flush_counts() FROM PUBLIC;

-- Step 1 (maintenance/sweep.rs): up to `batch` expired processing leases
-- become failed, due at once, or dead-lettered when their attempt was the
-- last (claim.rs, decide_fail with a retry after 0), last_error saying so.
CREATE FUNCTION webhook_dedup._m_sweep(now timestamptz, batch bigint, OUT leases_expired integer,
                                       OUT dead_lettered integer, OUT more boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  k record;
  texts record := webhook_dedup._sweep_texts();
  seen bigint := 0;
  state pg_catalog.text;
BEGIN
  leases_expired := 0;
  dead_lettered := 0;
  FOR k IN SELECT * FROM webhook_dedup._s_expiry_expired_leases(now, batch)
             AS e(source pg_catalog.text, idem_key pg_catalog.text, state pg_catalog.text, attempt integer, claim_token pg_catalog.uuid,
                  lease_expires_at pg_catalog.timestamptz, next_attempt_at pg_catalog.timestamptz, fingerprint pg_catalog.bytea, event_type pg_catalog.text,
                  result pg_catalog.jsonb, last_step pg_catalog.text, first_seen_at pg_catalog.timestamptz, due_at pg_catalog.timestamptz) LOOP
    seen := seen OPERATOR(pg_catalog.+) 1;
    state := CASE WHEN k.attempt OPERATOR(pg_catalog.>=) (webhook_dedup._claim_settings(k.source)).max_attempts
                  THEN 'dead_lettered' ELSE 'failed' END;
    PERFORM webhook_dedup._s_transitions_fail(k.source, k.idem_key, now, CASE WHEN state OPERATOR(pg_catalog.=) 'failed' THEN now END, state,
                                              texts.swept_before OPERATOR(pg_catalog.||) k.attempt::pg_catalog.text
                                              OPERATOR(pg_catalog.||) texts.swept_middle
                                              OPERATOR(pg_catalog.||) webhook_dedup._utc_literal(k.lease_expires_at)
                                              OPERATOR(pg_catalog.||) texts.swept_after);
    PERFORM webhook_dedup._count(k.source, k.event_type, 'expired_leases', false);
    IF state OPERATOR(pg_catalog.=) 'dead_lettered' THEN
      dead_lettered := dead_lettered OPERATOR(pg_catalog.+) 1;
      PERFORM webhook_dedup._count(k.source, k.event_type, 'dead_letters', false);
    ELSE
      leases_expired := leases_expired OPERATOR(pg_catalog.+) 1;
    END IF;
  END LOOP;
  more := seen OPERATOR(pg_catalog.>=) batch;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._m_sweep(timestamptz, bigint) FROM PUBLIC;

-- A time as calendar.rs's utc_literal writes it: YYYY-MM-DD HH:MM:SS+00
-- (UTC, whole seconds).
CREATE FUNCTION webhook_dedup._utc_literal(at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.to_char(pg_catalog.timezone('UTC', at), 'YYYY-MM-DD HH24:MI:SS') OPERATOR(pg_catalog.||) '+00';
REVOKE ALL ON FUNCTION webhook_dedup._utc_literal(timestamptz) FROM PUBLIC;

-- Step 6 (maintenance/outbox.rs, core outbox.rs lapsed): lapsed sender
-- leases taken back (retried where the downstream deduplicates, else
-- parked as unknown_outcome; out of attempts, dead-lettered), then
-- delivered intents past retention deleted.
CREATE FUNCTION webhook_dedup._m_outbox(now timestamptz, batch bigint, retention interval, shortest interval,
                                        OUT intents_expired integer, OUT intents_pruned bigint, OUT more boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  o record;
  texts record := webhook_dedup._sweep_texts();
  seen bigint := 0;
BEGIN
  intents_expired := 0;
  FOR o IN SELECT * FROM webhook_dedup._s_outbox_lapsed(now, batch)
             AS l(id bigint, source pg_catalog.text, idem_key pg_catalog.text, operation pg_catalog.text, target pg_catalog.text, request pg_catalog.jsonb,
                  downstream_key pg_catalog.text, downstream_idempotent boolean, state pg_catalog.text, attempt integer, lease_token pg_catalog.uuid,
                  lease_expires_at pg_catalog.timestamptz, next_attempt_at pg_catalog.timestamptz, due_at pg_catalog.timestamptz) LOOP
    seen := seen OPERATOR(pg_catalog.+) 1;
    intents_expired := intents_expired OPERATOR(pg_catalog.+) 1;
    PERFORM webhook_dedup._count(o.source, NULL, 'intent_leases_expired', false);
    IF NOT o.downstream_idempotent THEN
      PERFORM webhook_dedup._s_outbox_set_state(o.id, now, 'unknown_outcome', NULL,
                                                (SELECT r.parked_before OPERATOR(pg_catalog.||) o.attempt::pg_catalog.text
                                                        OPERATOR(pg_catalog.||) r.parked_after
                                                   FROM webhook_dedup._outbox_rules() AS r));
      PERFORM webhook_dedup._count(o.source, NULL, 'intents_unknown', false);
    ELSIF o.attempt OPERATOR(pg_catalog.>=) (webhook_dedup._claim_settings(o.source)).max_attempts THEN
      PERFORM webhook_dedup._s_outbox_set_state(o.id, now, 'dead_lettered', NULL, webhook_dedup._exhausted_error(o.attempt));
      PERFORM webhook_dedup._count(o.source, NULL, 'intents_dead_lettered', false);
    ELSE
      PERFORM webhook_dedup._s_outbox_set_state(o.id, now, 'failed', now,
                                                texts.lapsed_before OPERATOR(pg_catalog.||) o.attempt::pg_catalog.text
                                                OPERATOR(pg_catalog.||) texts.lapsed_after);
    END IF;
  END LOOP;
  more := seen OPERATOR(pg_catalog.>=) batch;
  SELECT p.count INTO intents_pruned FROM webhook_dedup._s_outbox_prune(now, retention, batch, shortest) AS p(count bigint);
  more := more OR intents_pruned OPERATOR(pg_catalog.>=) batch;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._m_outbox(timestamptz, bigint, interval, interval) FROM PUBLIC;

-- Step 7 (maintenance/redrive.rs): the keys of running bulk redrives
-- moved back to due, at most `batch` a pass, a paused source's runs left
-- for later; each key's outcome recorded (moved, changed, gone,
-- no_payload); finished runs past retention pruned.
CREATE FUNCTION webhook_dedup._m_redrive(now timestamptz, batch bigint, retention interval,
                                         OUT keys_redriven bigint, OUT history_pruned bigint, OUT more boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  run record;
  item record;
  budget bigint := batch;
  want bigint;
  taken bigint;
  moved bigint;
  skipped bigint;
  paused boolean;
  k record;
  held boolean;
  outcome pg_catalog.text;
  as_matched boolean;
  copied boolean;
BEGIN
  keys_redriven := 0;
  more := false;
  FOR run IN SELECT * FROM webhook_dedup._s_redrive_running() AS r(id bigint, source pg_catalog.text, states pg_catalog.text[], conflicts boolean) LOOP
    IF budget OPERATOR(pg_catalog.<=) 0 THEN
      more := true;
      EXIT;
    END IF;
    SELECT p.paused INTO paused FROM webhook_dedup._s_sources_paused(run.source) AS p(paused boolean);
    CONTINUE WHEN COALESCE(paused, false);
    want := budget;
    taken := 0;
    moved := 0;
    skipped := 0;
    FOR item IN SELECT * FROM webhook_dedup._s_redrive_todo(run.id, want) AS t(n bigint, idem_key pg_catalog.text, conflict_at pg_catalog.timestamptz) LOOP
      taken := taken OPERATOR(pg_catalog.+) 1;
      SELECT * INTO k FROM webhook_dedup._s_redrive_lock_key(run.source, item.idem_key, item.conflict_at)
        AS l(state pg_catalog.text, first_seen_at pg_catalog.timestamptz, queued boolean, redacted boolean, done boolean);
      IF NOT FOUND THEN
        SELECT e.exists INTO held FROM webhook_dedup._s_redrive_key_exists(run.source, item.idem_key) AS e(exists boolean);
        CONTINUE WHEN COALESCE(held, false); -- held by a worker right now: the next pass
        outcome := 'gone';
      ELSE
        as_matched := CASE WHEN item.conflict_at IS NULL THEN k.state OPERATOR(pg_catalog.=) ANY (run.states)
                           ELSE k.state OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'dead_lettered', 'failed'])
                                AND NOT k.done END;
        IF NOT as_matched THEN
          outcome := 'changed';
        ELSIF k.redacted THEN
          outcome := 'no_payload';
        ELSE
          IF item.conflict_at IS NOT NULL THEN
            SELECT c.copied INTO copied FROM webhook_dedup._s_redrive_payload(run.source, item.idem_key, item.conflict_at, true)
              AS c(copied boolean);
          ELSE
            copied := k.queued;
            IF NOT copied THEN
              SELECT c.copied INTO copied FROM webhook_dedup._s_redrive_payload(run.source, item.idem_key, k.first_seen_at, false)
                AS c(copied boolean);
            END IF;
          END IF;
          IF COALESCE(copied, false) THEN
            PERFORM webhook_dedup._s_redrive_move(run.source, item.idem_key, now, run.id, item.conflict_at);
            outcome := 'moved';
          ELSE
            outcome := 'no_payload';
          END IF;
        END IF;
      END IF;
      PERFORM webhook_dedup._s_redrive_outcome(run.id, item.n, outcome);
      IF outcome OPERATOR(pg_catalog.=) 'moved' THEN
        moved := moved OPERATOR(pg_catalog.+) 1;
      ELSE
        skipped := skipped OPERATOR(pg_catalog.+) 1;
      END IF;
    END LOOP;
    budget := budget OPERATOR(pg_catalog.-) taken;
    PERFORM webhook_dedup._s_redrive_progress(run.id, moved, skipped, now);
    keys_redriven := keys_redriven OPERATOR(pg_catalog.+) moved OPERATOR(pg_catalog.+) skipped;
    more := more OR taken OPERATOR(pg_catalog.>=) want;
  END LOOP;
  SELECT p.count INTO history_pruned FROM webhook_dedup._s_redrive_prune(now, retention, batch) AS p(count bigint);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._m_redrive(timestamptz, bigint, interval) FROM PUBLIC;

-- The partition name of a UTC day (core archive.rs, partition_name):
-- archive_YYYYMMDD.
CREATE FUNCTION webhook_dedup._archive_partition(day date) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN 'archive_' OPERATOR(pg_catalog.||) pg_catalog.to_char(day, 'YYYYMMDD');
REVOKE ALL ON FUNCTION webhook_dedup._archive_partition(date) FROM PUBLIC;

-- Step 8 (maintenance/archive.rs, core archive.rs plan; store archive.rs,
-- create_partition and drop_partition): day partitions made for today and
-- AHEAD_DAYS after, and for the days of rows waiting in the default
-- partition (moved into theirs); days wholly past the longest payload
-- retention dropped; the default partition's rows past it deleted; the
-- sources whose payload retention is shorter pruned in batches.
CREATE FUNCTION webhook_dedup._m_archive(now timestamptz, batch bigint, retention interval,
                                         OUT payloads_pruned bigint, OUT partitions_created integer,
                                         OUT partitions_dropped integer, OUT more boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  longest interval;
  longest_us bigint := 0;
  cutoff pg_catalog.timestamptz;
  today pg_catalog.date := pg_catalog.timezone('UTC', now)::pg_catalog.date;
  exist pg_catalog.date[];
  day pg_catalog.date;
  name pg_catalog.text;
  from_text pg_catalog.text;
  to_text pg_catalog.text;
  owner pg_catalog.name;
  g pg_catalog.oid;
  removed bigint;
  s record;
  kept_us bigint;
BEGIN
  payloads_pruned := 0;
  partitions_created := 0;
  partitions_dropped := 0;
  more := false;
  SELECT l.longest INTO longest FROM webhook_dedup._s_archive_longest_retention(retention) AS l(longest interval);
  IF longest IS NOT NULL THEN
    BEGIN
      longest_us := webhook_dedup._duration_us(longest, 'webhook_dedup.sources.payload_retention');
    EXCEPTION WHEN invalid_parameter_value THEN
      longest_us := webhook_dedup._duration_us(retention, 'webhook_dedup.retention');
    END;
  END IF;
  cutoff := webhook_dedup._plus_us(now, OPERATOR(pg_catalog.-) GREATEST(longest_us, 0));
  SELECT COALESCE(pg_catalog.array_agg(pg_catalog.to_date(pg_catalog.substr(p.name, 9), 'YYYYMMDD')), '{}') INTO exist
    FROM webhook_dedup._s_archive_partitions() AS p(name pg_catalog.text)
   WHERE p.name OPERATOR(pg_catalog.~) '^archive_[0-9]{8}$'
     AND webhook_dedup._archive_partition(pg_catalog.to_date(pg_catalog.substr(p.name, 9), 'YYYYMMDD'))
         OPERATOR(pg_catalog.=) p.name;
  -- create: today and the days ahead, and the default partition's days not past
  FOR day IN
    SELECT DISTINCT d FROM (
      SELECT (today OPERATOR(pg_catalog.+) i) AS d
        FROM pg_catalog.generate_series(0, (webhook_dedup._metrics_rules()).archive_ahead_days) AS i
      UNION
      SELECT pg_catalog.timezone('UTC', x.day)::pg_catalog.date FROM webhook_dedup._s_archive_default_days(cutoff) AS x(day pg_catalog.timestamptz)
    ) AS c
     WHERE NOT (pg_catalog.timezone('UTC', (c.d OPERATOR(pg_catalog.+) 1)::timestamp) OPERATOR(pg_catalog.<=) cutoff)
       AND c.d OPERATOR(pg_catalog.<>) ALL (exist)
     ORDER BY d
  LOOP
    name := webhook_dedup._archive_partition(day);
    from_text := webhook_dedup._utc_literal(pg_catalog.timezone('UTC', day::timestamp));
    to_text := webhook_dedup._utc_literal(pg_catalog.timezone('UTC', (day OPERATOR(pg_catalog.+) 1)::timestamp));
    -- as the native edition (store archive.rs, create_partition): the
    -- archive locked for the move and attach, the default partition
    -- emptied of the day's rows, the day attached, owned as the archive
    LOCK TABLE webhook_dedup.archive IN SHARE ROW EXCLUSIVE MODE;
    EXECUTE pg_catalog.format('CREATE TABLE webhook_dedup.%I (LIKE webhook_dedup.archive INCLUDING DEFAULTS'
                              ' INCLUDING STORAGE INCLUDING COMPRESSION)', name);
    LOCK TABLE webhook_dedup.archive_default IN EXCLUSIVE MODE;
    EXECUTE pg_catalog.format('WITH moved AS (DELETE FROM webhook_dedup.archive_default AS d'
                              ' WHERE d.received_at OPERATOR(pg_catalog.>=) %L AND d.received_at OPERATOR(pg_catalog.<) %L'
                              ' RETURNING d.received_at, d.source, d.idem_key, d.event_id, d.event_type, d.conflict,'
                              ' d.payload, d.headers)'
                              ' INSERT INTO webhook_dedup.%I (received_at, source, idem_key, event_id, event_type, conflict,'
                              ' payload, headers) SELECT * FROM moved', from_text, to_text, name);
    EXECUTE pg_catalog.format('CREATE INDEX %I ON webhook_dedup.%I (source, received_at)', name OPERATOR(pg_catalog.||) '_source',
                              name);
    EXECUTE pg_catalog.format('ALTER TABLE webhook_dedup.archive ATTACH PARTITION webhook_dedup.%I FOR VALUES FROM (%L) TO (%L)',
                              name, from_text, to_text);
    SELECT pg_catalog.pg_get_userbyid(c.relowner) INTO owner FROM pg_catalog.pg_class AS c
     WHERE c.oid OPERATOR(pg_catalog.=) 'webhook_dedup.archive'::pg_catalog.regclass;
    EXECUTE pg_catalog.format('ALTER TABLE webhook_dedup.%I OWNER TO %I', name, owner);
    EXECUTE pg_catalog.format('REVOKE ALL ON webhook_dedup.%I FROM PUBLIC', name);
    FOR g IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
              WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.format('webhook_dedup.%I', name)::pg_catalog.regclass
                AND a.grantee OPERATOR(pg_catalog.<>) c.relowner AND a.grantee OPERATOR(pg_catalog.<>) 0 LOOP
      EXECUTE pg_catalog.format('REVOKE ALL ON webhook_dedup.%I FROM %I', name, pg_catalog.pg_get_userbyid(g));
    END LOOP;
    partitions_created := partitions_created OPERATOR(pg_catalog.+) 1;
  END LOOP;
  -- drop: the days wholly past the longest payload retention
  FOREACH day IN ARRAY exist LOOP
    CONTINUE WHEN NOT (pg_catalog.timezone('UTC', (day OPERATOR(pg_catalog.+) 1)::timestamp) OPERATOR(pg_catalog.<=) cutoff);
    EXECUTE pg_catalog.format('DROP TABLE webhook_dedup.%I', webhook_dedup._archive_partition(day));
    partitions_dropped := partitions_dropped OPERATOR(pg_catalog.+) 1;
  END LOOP;
  SELECT e.count INTO removed FROM webhook_dedup._s_archive_default_expire(cutoff, batch) AS e(count bigint);
  payloads_pruned := payloads_pruned OPERATOR(pg_catalog.+) removed;
  more := more OR removed OPERATOR(pg_catalog.>=) batch;
  IF longest IS NOT NULL THEN
    FOR s IN SELECT * FROM webhook_dedup._s_archive_sources_to_prune(retention, longest) AS p(source pg_catalog.text, kept interval) LOOP
      BEGIN
        kept_us := webhook_dedup._duration_us(s.kept, 'webhook_dedup.sources.payload_retention');
      EXCEPTION WHEN invalid_parameter_value THEN
        CONTINUE;
      END;
      SELECT p.count INTO removed FROM webhook_dedup._s_archive_prune_source(s.source, webhook_dedup._plus_us(now, OPERATOR(pg_catalog.-) kept_us), batch)
        AS p(count bigint);
      payloads_pruned := payloads_pruned OPERATOR(pg_catalog.+) removed;
      more := more OR removed OPERATOR(pg_catalog.>=) batch;
    END LOOP;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._m_archive(timestamptz, bigint, interval) FROM PUBLIC;
