-- Persist-then-process (src/engine/queue.rs, src/store/queue.rs): the
-- helpers of editions/sql/queue.sql. Internal: the owner's alone.

-- One enqueue (engine queue.rs, enqueue): the body of webhook_enqueue, of
-- webhook_receive's enqueue mode and of reconcile. A new key is stored
-- pending with its payload (queue_enqueue.sql); a known one is a duplicate,
-- or a conflict when its fingerprint differs (recorded, via 'enqueue'). A
-- recent duplicate is answered from the latest committed row without a
-- write (as _claim does). `raw`: the SHA-256 of the raw bytes when the
-- source's fingerprint rule covers less; `event_id`, `origin_headers`:
-- what the archive keeps of a webhook_receive delivery; `reconciled`: a
-- reconciliation job's enqueue (counted as reconciled, not as a delivery).
-- `confirm_guard`: a call that answers a recent duplicate from reads alone
-- or not at all (engine queue.rs, read_answer), and only when the replay
-- guard of that body hash names this key; else NULL, nothing written or
-- counted. Returns accepted, duplicate or conflict.
CREATE FUNCTION webhook_dedup._enqueue(source text, idem_key text, payload bytea, fingerprint bytea, raw bytea,
                                       event_type text, headers jsonb, from_receive boolean, event_id text,
                                       origin_headers jsonb, reconciled boolean, confirm_guard bytea DEFAULT NULL)
  RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  now pg_catalog.timestamptz := pg_catalog.clock_timestamp();
  interval_us bigint := webhook_dedup._duplicate_read_interval_us();
  k webhook_dedup.keys;
  known boolean := false;
  was_inserted boolean;
  given pg_catalog.bytea;
  outcome pg_catalog.text;
  counter pg_catalog.text;
  label pg_catalog.text;
BEGIN
  IF interval_us IS NOT NULL THEN
    SELECT * INTO k FROM webhook_dedup.keys AS r
     WHERE r.idem_key OPERATOR(pg_catalog.=) _enqueue.idem_key AND r.source OPERATOR(pg_catalog.=) _enqueue.source;
    IF FOUND THEN
      given := CASE WHEN raw IS NOT NULL AND k.fingerprint OPERATOR(pg_catalog.=) raw THEN k.fingerprint ELSE fingerprint END;
      -- claim.rs, decide_enqueue then records_touch
      known := k.fingerprint IS NOT NULL AND k.fingerprint OPERATOR(pg_catalog.=) given
               AND webhook_dedup._answers_read('duplicate', 'touch', false, k.last_seen_at, now, interval_us,
                                               (webhook_dedup._claim_settings(source)).retention_us);
    END IF;
  END IF;
  IF confirm_guard IS NOT NULL
     AND NOT (known AND EXISTS (SELECT FROM webhook_dedup._s_replay_guards_peek(source, confirm_guard) AS g(idem_key pg_catalog.text)
                                 WHERE g.idem_key OPERATOR(pg_catalog.=) _enqueue.idem_key)) THEN
    RETURN NULL;
  END IF;
  IF NOT known THEN
    SELECT u.inserted, u.source, u.idem_key, u.state, u.attempt, u.claim_token, u.lease_expires_at, u.next_attempt_at,
           u.fingerprint, u.event_type, u.result, u.last_step, u.first_seen_at, u.due_at
      INTO was_inserted, k.source, k.idem_key, k.state, k.attempt, k.claim_token, k.lease_expires_at,
           k.next_attempt_at, k.fingerprint, k.event_type, k.result, k.last_step, k.first_seen_at, k.due_at
      FROM webhook_dedup._s_queue_enqueue(source, idem_key, now, payload, fingerprint, event_type, headers,
                                          CASE WHEN reconciled THEN now END)
        AS u(inserted boolean, source pg_catalog.text, idem_key pg_catalog.text, state pg_catalog.text, attempt integer, claim_token pg_catalog.uuid,
             lease_expires_at pg_catalog.timestamptz, next_attempt_at pg_catalog.timestamptz, fingerprint pg_catalog.bytea, event_type pg_catalog.text,
             result pg_catalog.jsonb, last_step pg_catalog.text, first_seen_at pg_catalog.timestamptz, due_at pg_catalog.timestamptz);
  END IF;
  IF NOT known AND was_inserted THEN
    outcome := 'accepted';
    counter := CASE WHEN reconciled THEN 'reconciled' ELSE 'enqueued' END;
    label := event_type;
  ELSE
    given := CASE WHEN raw IS NOT NULL AND k.fingerprint OPERATOR(pg_catalog.=) raw THEN k.fingerprint ELSE fingerprint END;
    label := k.event_type;
    IF k.fingerprint IS NOT NULL AND k.fingerprint OPERATOR(pg_catalog.<>) given THEN
      outcome := 'conflict';
      counter := 'conflicts';
      PERFORM webhook_dedup._s_claim_conflict(source, idem_key, now, k.fingerprint, fingerprint, 'enqueue');
    ELSE
      outcome := 'duplicate';
      counter := CASE WHEN k.state OPERATOR(pg_catalog.=) 'completed' THEN 'duplicates_of_completed'
                      ELSE 'duplicates_in_progress' END;
    END IF;
  END IF;
  IF outcome OPERATOR(pg_catalog.<>) 'duplicate' THEN
    PERFORM webhook_dedup._archive_keep(source, idem_key, now, CASE WHEN from_receive THEN event_id END, event_type,
                                        outcome OPERATOR(pg_catalog.=) 'conflict', payload,
                                        CASE WHEN from_receive THEN origin_headers ELSE headers END);
  END IF;
  PERFORM webhook_dedup._count(source, label, counter, NOT reconciled);
  RETURN outcome;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._enqueue(text, text, bytea, bytea, bytea, text, jsonb, boolean, text, jsonb, boolean,
                                              bytea) FROM PUBLIC;

-- When a key in `state` can next be taken (claim.rs, due_at): a pending
-- key at once, a processing key when its lease expires, a failed key at
-- its next attempt; never for the others.
CREATE FUNCTION webhook_dedup._due_at(state text, now timestamptz, lease_expires_at timestamptz,
                                      next_attempt_at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN state OPERATOR(pg_catalog.=) 'pending' THEN now WHEN state OPERATOR(pg_catalog.=) 'processing' THEN lease_expires_at
                  WHEN state OPERATOR(pg_catalog.=) 'failed' THEN COALESCE(next_attempt_at, now) END;
REVOKE ALL ON FUNCTION webhook_dedup._due_at(text, timestamptz, timestamptz, timestamptz) FROM PUBLIC;

-- webhook_next's work (engine queue.rs, next and take_one): due keys taken
-- oldest first and locked, skipping those another worker holds
-- (queue_take.sql); each leased to the caller with its payload and
-- headers (a key whose payload redact erased is dead-lettered instead); a
-- key of a paused source parked (its due_at 'infinity', after confirming
-- the pause on its latest row, sources_paused.sql) and set aside; a key
-- out of attempts dead-lettered; a due_at that disagrees with the state
-- repaired. At most 8 takes. `wanted_source` NULL: any source.
CREATE FUNCTION webhook_dedup._next(wanted_source text, lease interval, batch integer)
  RETURNS TABLE (source text, idem_key text, claim_token uuid, attempt integer, payload bytea, event_type text,
                 last_step text, headers jsonb)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  lease_us bigint;
  now pg_catalog.timestamptz;
  taken integer := 0;
  took integer;
  set_aside integer;
  want integer;
  round integer;
  k record;
  row webhook_dedup.keys;
  settings record;
  paused boolean;
  decision record;
  queued record;
  token pg_catalog.uuid;
  until pg_catalog.timestamptz;
  due pg_catalog.timestamptz;
  counts pg_catalog.text[] := '{}';
  labels pg_catalog.text[] := '{}';
  sources pg_catalog.text[] := '{}';
  i integer;
BEGIN
  IF batch IS NULL THEN
    RAISE EXCEPTION 'batch must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF batch OPERATOR(pg_catalog.<) 1 OR batch OPERATOR(pg_catalog.>) 1000 THEN
    RAISE EXCEPTION 'batch must be between 1 and 1000, not %', batch USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF wanted_source IS NOT NULL THEN
    PERFORM webhook_dedup._check_source(wanted_source);
  END IF;
  IF lease IS NOT NULL THEN
    lease_us := webhook_dedup._lease_us(lease);
  END IF;
  now := pg_catalog.clock_timestamp();
  -- at most 8 takes: keys of a paused source are set aside, and the take
  -- is repeated while it set some aside and more are wanted
  FOR round IN 1 .. 8 LOOP
    want := batch OPERATOR(pg_catalog.-) taken;
    took := 0;
    set_aside := 0;
    FOR k IN SELECT * FROM webhook_dedup._s_queue_take(now, wanted_source, want)
               AS t(source pg_catalog.text, idem_key pg_catalog.text, state pg_catalog.text, attempt integer, claim_token pg_catalog.uuid,
                    lease_expires_at pg_catalog.timestamptz, next_attempt_at pg_catalog.timestamptz, fingerprint pg_catalog.bytea, event_type pg_catalog.text,
                    result pg_catalog.jsonb, last_step pg_catalog.text, first_seen_at pg_catalog.timestamptz, due_at pg_catalog.timestamptz) LOOP
      took := took OPERATOR(pg_catalog.+) 1;
      settings := webhook_dedup._source_settings(k.source);
      IF settings.paused THEN
        SELECT p.paused INTO paused FROM webhook_dedup._s_sources_paused(k.source) AS p(paused boolean);
        IF COALESCE(paused, false) THEN
          IF k.state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'failed']) THEN
            PERFORM webhook_dedup._s_transitions_set_due(k.source, k.idem_key, 'infinity');
          END IF;
          set_aside := set_aside OPERATOR(pg_catalog.+) 1;
          CONTINUE;
        END IF;
      END IF;
      row := NULL;
      row.state := k.state;
      row.attempt := k.attempt;
      row.lease_expires_at := k.lease_expires_at;
      row.next_attempt_at := k.next_attempt_at;
      row.fingerprint := k.fingerprint;
      decision := webhook_dedup._decide(row, NULL, now, (webhook_dedup._claim_settings(k.source)).max_attempts);
      IF decision.write OPERATOR(pg_catalog.=) 'lease' THEN
        SELECT * INTO queued FROM webhook_dedup._s_queue_payload(k.source, k.idem_key)
          AS q(payload pg_catalog.bytea, headers pg_catalog.jsonb, redacted boolean);
        IF queued.payload IS NULL AND COALESCE(queued.redacted, false) THEN
          PERFORM webhook_dedup._s_queue_dead_letter_erased(k.source, k.idem_key);
          sources := sources OPERATOR(pg_catalog.||) k.source;
          labels := labels OPERATOR(pg_catalog.||) k.event_type;
          counts := counts OPERATOR(pg_catalog.||) 'dead_letters'::pg_catalog.text;
          CONTINUE;
        END IF;
        token := pg_catalog.gen_random_uuid();
        until := webhook_dedup._plus_us(now, COALESCE(lease_us, (webhook_dedup._claim_settings(k.source)).lease_us));
        PERFORM webhook_dedup._s_claim_lease(k.source, k.idem_key, now, decision.attempt, token, until, NULL);
        sources := sources OPERATOR(pg_catalog.||) k.source;
        labels := labels OPERATOR(pg_catalog.||) k.event_type;
        counts := counts OPERATOR(pg_catalog.||) 'drained'::pg_catalog.text;
        IF decision.outcome OPERATOR(pg_catalog.=) 'reclaimed' THEN
          sources := sources OPERATOR(pg_catalog.||) k.source;
          labels := labels OPERATOR(pg_catalog.||) k.event_type;
          counts := counts OPERATOR(pg_catalog.||) 'reclaims'::pg_catalog.text;
        END IF;
        taken := taken OPERATOR(pg_catalog.+) 1;
        source := k.source;
        idem_key := k.idem_key;
        claim_token := token;
        attempt := decision.attempt;
        payload := queued.payload;
        event_type := k.event_type;
        last_step := k.last_step;
        headers := queued.headers;
        RETURN NEXT;
      ELSIF decision.write OPERATOR(pg_catalog.=) 'dead_letter' THEN
        PERFORM webhook_dedup._s_transitions_fail(k.source, k.idem_key, now, NULL, 'dead_lettered',
                                                  webhook_dedup._exhausted_error(k.attempt));
        sources := sources OPERATOR(pg_catalog.||) k.source;
        labels := labels OPERATOR(pg_catalog.||) k.event_type;
        counts := counts OPERATOR(pg_catalog.||) 'dead_letters'::pg_catalog.text;
      ELSE
        -- a due_at that disagrees with the state is repaired
        due := webhook_dedup._due_at(k.state, now, k.lease_expires_at, k.next_attempt_at);
        IF NOT COALESCE(due OPERATOR(pg_catalog.=) k.due_at, due IS NULL AND k.due_at IS NULL) THEN
          PERFORM webhook_dedup._s_transitions_set_due(k.source, k.idem_key, due);
        END IF;
      END IF;
    END LOOP;
    EXIT WHEN set_aside OPERATOR(pg_catalog.=) 0 OR took OPERATOR(pg_catalog.<) want OR taken OPERATOR(pg_catalog.>=) batch;
  END LOOP;
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(counts), 0) LOOP
    PERFORM webhook_dedup._count(sources[i], labels[i], counts[i], false);
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._next(text, interval, integer) FROM PUBLIC;
