-- The transactional outbox (src/engine/outbox.rs, src/store/outbox.rs,
-- crates/webhook-dedup-core/src/outbox.rs): the helpers of
-- editions/sql/outbox.sql. Internal: the owner's alone.

-- An intent, locked (outbox_lock.sql), or P0002.
CREATE FUNCTION webhook_dedup._outbox_lock(id bigint) RETURNS record
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  intent record;
BEGIN
  SELECT * INTO intent FROM webhook_dedup._s_outbox_lock(id)
    AS o(id bigint, source pg_catalog.text, idem_key pg_catalog.text, operation pg_catalog.text, target pg_catalog.text, request pg_catalog.jsonb, downstream_key pg_catalog.text,
         downstream_idempotent boolean, state pg_catalog.text, attempt integer, lease_token pg_catalog.uuid, lease_expires_at pg_catalog.timestamptz,
         next_attempt_at pg_catalog.timestamptz, due_at pg_catalog.timestamptz);
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no outbox intent with id %', id USING ERRCODE = 'no_data_found';
  END IF;
  RETURN intent;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._outbox_lock(bigint) FROM PUBLIC;

-- webhook_outbox_next's work (engine outbox.rs, next; core outbox.rs,
-- take): due intents taken oldest first and locked, skipping those
-- another sender holds; each leased to the caller, or, when its lease
-- lapsed, retried only where the downstream deduplicates
-- (downstream_idempotent), else parked as unknown_outcome for
-- reconciliation; out of attempts, dead-lettered. `wanted_target` NULL:
-- any target.
CREATE FUNCTION webhook_dedup._outbox_next(wanted_target text, lease interval, batch integer)
  RETURNS TABLE (id bigint, lease_token uuid, downstream_key text, target text, operation text, request jsonb,
                 attempt integer, lease_expires_at timestamptz, source text, idem_key text,
                 downstream_idempotent boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  lease_us bigint;
  now pg_catalog.timestamptz;
  o record;
  settings record;
  row webhook_dedup.keys;
  decision record;
  lapsed boolean;
  token pg_catalog.uuid;
  until pg_catalog.timestamptz;
  counts pg_catalog.text[] := '{}';
  sources pg_catalog.text[] := '{}';
  i integer;
  taken refcursor;
BEGIN
  IF batch IS NULL THEN
    RAISE EXCEPTION 'batch must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF batch OPERATOR(pg_catalog.<) 1 OR batch OPERATOR(pg_catalog.>) 1000 THEN
    RAISE EXCEPTION 'batch must be between 1 and 1000, not %', batch USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF wanted_target IS NOT NULL THEN
    PERFORM webhook_dedup._check_bounded('target', wanted_target);
  END IF;
  IF lease IS NOT NULL THEN
    lease_us := webhook_dedup._lease_us(lease);
  END IF;
  now := pg_catalog.clock_timestamp();
  -- one take or the other (each locks what it returns)
  IF wanted_target IS NULL THEN
    OPEN taken FOR SELECT * FROM webhook_dedup._s_outbox_take(now, batch)
      AS t(id bigint, source pg_catalog.text, idem_key pg_catalog.text, operation pg_catalog.text, target pg_catalog.text, request pg_catalog.jsonb,
           downstream_key pg_catalog.text, downstream_idempotent boolean, state pg_catalog.text, attempt integer, lease_token pg_catalog.uuid,
           lease_expires_at pg_catalog.timestamptz, next_attempt_at pg_catalog.timestamptz, due_at pg_catalog.timestamptz);
  ELSE
    OPEN taken FOR SELECT * FROM webhook_dedup._s_outbox_take_of_target(now, wanted_target, batch)
      AS t(id bigint, source pg_catalog.text, idem_key pg_catalog.text, operation pg_catalog.text, target pg_catalog.text, request pg_catalog.jsonb,
           downstream_key pg_catalog.text, downstream_idempotent boolean, state pg_catalog.text, attempt integer, lease_token pg_catalog.uuid,
           lease_expires_at pg_catalog.timestamptz, next_attempt_at pg_catalog.timestamptz, due_at pg_catalog.timestamptz);
  END IF;
  LOOP
    FETCH taken INTO o;
    EXIT WHEN NOT FOUND;
    settings := webhook_dedup._claim_settings(o.source);
    lapsed := o.state OPERATOR(pg_catalog.=) 'processing';
    row := NULL;
    row.state := o.state;
    row.attempt := o.attempt;
    row.lease_expires_at := o.lease_expires_at;
    row.next_attempt_at := o.next_attempt_at;
    decision := webhook_dedup._decide(row, NULL, now, settings.max_attempts);
    IF decision.write OPERATOR(pg_catalog.=) ANY (ARRAY['lease', 'dead_letter']) AND lapsed
       AND NOT o.downstream_idempotent THEN
      -- core outbox.rs, take: Park
      PERFORM webhook_dedup._s_outbox_set_state(o.id, now, 'unknown_outcome', NULL,
                                                (SELECT r.parked_before OPERATOR(pg_catalog.||) o.attempt::pg_catalog.text
                                                        OPERATOR(pg_catalog.||) r.parked_after
                                                   FROM webhook_dedup._outbox_rules() AS r));
      sources := sources OPERATOR(pg_catalog.||) ARRAY[o.source, o.source];
      counts := counts OPERATOR(pg_catalog.||) ARRAY['intent_leases_expired', 'intents_unknown'];
    ELSIF decision.write OPERATOR(pg_catalog.=) 'lease' THEN
      token := pg_catalog.gen_random_uuid();
      until := webhook_dedup._plus_us(now, COALESCE(lease_us, settings.lease_us));
      PERFORM webhook_dedup._s_outbox_lease(o.id, decision.attempt, token, until, now);
      IF lapsed THEN
        sources := sources OPERATOR(pg_catalog.||) o.source;
        counts := counts OPERATOR(pg_catalog.||) 'intent_leases_expired'::pg_catalog.text;
      END IF;
      id := o.id;
      lease_token := token;
      downstream_key := o.downstream_key;
      target := o.target;
      operation := o.operation;
      request := o.request;
      attempt := decision.attempt;
      lease_expires_at := until;
      source := o.source;
      idem_key := o.idem_key;
      downstream_idempotent := o.downstream_idempotent;
      RETURN NEXT;
    ELSIF decision.write OPERATOR(pg_catalog.=) 'dead_letter' THEN
      PERFORM webhook_dedup._s_outbox_set_state(o.id, now, 'dead_lettered', NULL, webhook_dedup._exhausted_error(o.attempt));
      IF lapsed THEN
        sources := sources OPERATOR(pg_catalog.||) o.source;
        counts := counts OPERATOR(pg_catalog.||) 'intent_leases_expired'::pg_catalog.text;
      END IF;
      sources := sources OPERATOR(pg_catalog.||) o.source;
      counts := counts OPERATOR(pg_catalog.||) 'intents_dead_lettered'::pg_catalog.text;
    END IF;
  END LOOP;
  CLOSE taken;
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(counts), 0) LOOP
    PERFORM webhook_dedup._count(sources[i], NULL, counts[i], false);
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._outbox_next(text, interval, integer) FROM PUBLIC;

-- The intent when `token` holds its lease (processing and that token);
-- else NULL, the stale token counted (engine outbox.rs, as_sender).
-- P0002 for an unknown intent.
CREATE FUNCTION webhook_dedup._as_sender(id bigint, token uuid) RETURNS record
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  intent record := webhook_dedup._outbox_lock(id);
BEGIN
  IF intent.state OPERATOR(pg_catalog.=) 'processing' AND intent.lease_token OPERATOR(pg_catalog.=) token THEN
    RETURN intent;
  END IF;
  PERFORM webhook_dedup._count(intent.source, NULL, 'stale_tokens', false);
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._as_sender(bigint, uuid) FROM PUBLIC;
