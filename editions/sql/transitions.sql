-- The transitions after a claim (src/api/transitions.rs, run by
-- src/engine/transitions.rs): by the lease holder (webhook_fail,
-- webhook_mark_unknown, webhook_checkpoint, webhook_extend_lease) and by an
-- operator (webhook_resolve, webhook_forget), over the native store's
-- statements. A holder's call with a stale token changes nothing and
-- answers NULL or false; an unknown key is P0002.

--@ webhook_dedup.webhook_fail
DECLARE
  retry_after_us bigint;
  k webhook_dedup.keys;
  now pg_catalog.timestamptz;
  max_attempts integer;
  next_attempt_at pg_catalog.timestamptz;
  to_state pg_catalog.text;
BEGIN
  PERFORM webhook_dedup._check_key(source, idem_key);
  IF claim_token IS NULL THEN
    RAISE EXCEPTION 'claim_token must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF retryable IS NULL THEN
    RAISE EXCEPTION 'retryable must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF retry_after IS NOT NULL THEN
    retry_after_us := webhook_dedup._duration_us(retry_after, 'retry_after');
    IF retry_after_us OPERATOR(pg_catalog.<) 0 OR retry_after_us OPERATOR(pg_catalog.>) (webhook_dedup._claim_rules()).max_lease_us THEN
      RAISE EXCEPTION 'retry_after must be between 0 and 365 days' USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END IF;
  k := webhook_dedup._as_holder(source, idem_key, claim_token);
  IF k.source IS NULL THEN
    RETURN NULL;
  END IF;
  now := pg_catalog.clock_timestamp();
  max_attempts := (webhook_dedup._claim_settings(source)).max_attempts;
  -- claim.rs, decide_fail
  IF NOT retryable OR k.attempt OPERATOR(pg_catalog.>=) max_attempts THEN
    to_state := 'dead_lettered';
  ELSE
    to_state := 'failed';
    next_attempt_at := webhook_dedup._plus_us(now, COALESCE(retry_after_us, webhook_dedup._backoff_us(k.attempt)));
  END IF;
  PERFORM webhook_dedup._s_transitions_fail(source, idem_key, now, next_attempt_at, to_state, error);
  PERFORM webhook_dedup._count(source, k.event_type,
                               CASE WHEN to_state OPERATOR(pg_catalog.=) 'failed' THEN 'retries_scheduled' ELSE 'dead_letters' END, false);
  RETURN to_state;
END

--@ webhook_dedup.webhook_mark_unknown
DECLARE
  k webhook_dedup.keys;
BEGIN
  PERFORM webhook_dedup._check_key(source, idem_key);
  IF claim_token IS NULL THEN
    RAISE EXCEPTION 'claim_token must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  k := webhook_dedup._as_holder(source, idem_key, claim_token);
  IF k.source IS NULL THEN
    RETURN false;
  END IF;
  PERFORM webhook_dedup._s_transitions_mark_unknown(source, idem_key, pg_catalog.clock_timestamp(), detail);
  PERFORM webhook_dedup._count(source, k.event_type, 'marked_unknown', false);
  RETURN true;
END

--@ webhook_dedup.webhook_checkpoint
DECLARE
  k webhook_dedup.keys;
BEGIN
  PERFORM webhook_dedup._check_key(source, idem_key);
  IF claim_token IS NULL THEN
    RAISE EXCEPTION 'claim_token must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF step IS NULL THEN
    RAISE EXCEPTION 'step must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF step OPERATOR(pg_catalog.=) '' THEN
    RAISE EXCEPTION 'step must not be empty' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  k := webhook_dedup._as_holder(source, idem_key, claim_token);
  IF k.source IS NULL THEN
    RETURN false;
  END IF;
  PERFORM webhook_dedup._s_transitions_checkpoint(source, idem_key, pg_catalog.clock_timestamp(), step);
  RETURN true;
END

--@ webhook_dedup.webhook_extend_lease
DECLARE
  lease_us bigint;
  k webhook_dedup.keys;
  now pg_catalog.timestamptz;
  until pg_catalog.timestamptz;
BEGIN
  PERFORM webhook_dedup._check_key(source, idem_key);
  IF claim_token IS NULL THEN
    RAISE EXCEPTION 'claim_token must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF lease IS NULL THEN
    RAISE EXCEPTION 'lease must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  lease_us := webhook_dedup._lease_us(lease);
  k := webhook_dedup._as_holder(source, idem_key, claim_token);
  IF k.source IS NULL THEN
    RETURN NULL;
  END IF;
  now := pg_catalog.clock_timestamp();
  until := webhook_dedup._plus_us(now, lease_us);
  PERFORM webhook_dedup._s_transitions_extend_lease(source, idem_key, now, until);
  RETURN until;
END

--@ webhook_dedup.webhook_resolve
DECLARE
  k webhook_dedup.keys;
  now pg_catalog.timestamptz;
BEGIN
  PERFORM webhook_dedup._check_key(source, idem_key);
  IF new_state IS NULL THEN
    RAISE EXCEPTION 'new_state must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF new_state OPERATOR(pg_catalog.<>) ALL (ARRAY['pending', 'processing', 'completed', 'failed', 'unknown_outcome',
                                                  'dead_lettered']) THEN
    RAISE EXCEPTION 'unknown state "%"', new_state USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- claim.rs, check_resolve_target: never to a lease, never to unknown
  IF new_state OPERATOR(pg_catalog.=) ANY (ARRAY['processing', 'unknown_outcome']) THEN
    RAISE EXCEPTION 'new_state must be completed, failed, dead_lettered or pending, not %', new_state
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  k := webhook_dedup._lock_key(source, idem_key);
  now := pg_catalog.clock_timestamp();
  PERFORM webhook_dedup._s_transitions_resolve(
    source, idem_key, now, new_state, result,
    CASE WHEN new_state OPERATOR(pg_catalog.=) ANY (ARRAY['failed', 'pending']) THEN now END,
    CASE WHEN new_state OPERATOR(pg_catalog.=) 'completed'
         THEN webhook_dedup._plus_us(now, (webhook_dedup._claim_settings(source)).retention_us) END);
  PERFORM webhook_dedup._count(source, k.event_type, 'resolved', false);
  IF new_state OPERATOR(pg_catalog.=) 'dead_lettered' AND k.state OPERATOR(pg_catalog.<>) 'dead_lettered' THEN
    PERFORM webhook_dedup._count(source, k.event_type, 'dead_letters', false);
  END IF;
  RETURN k.state;
END

--@ webhook_dedup.webhook_forget
DECLARE
  gone record;
BEGIN
  PERFORM webhook_dedup._check_key(source, idem_key);
  PERFORM 1 FROM webhook_dedup.keys AS r
   WHERE r.idem_key OPERATOR(pg_catalog.=) webhook_forget.idem_key AND r.source OPERATOR(pg_catalog.=) webhook_forget.source
     FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  SELECT * INTO gone FROM webhook_dedup._s_transitions_forget(source, idem_key) AS f(event_type pg_catalog.text, first_seen_at pg_catalog.timestamptz);
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF gone.first_seen_at IS NOT NULL THEN
    PERFORM webhook_dedup._s_archive_forget(source, idem_key, gone.first_seen_at);
  END IF;
  PERFORM webhook_dedup._count(source, gone.event_type, 'forgotten', false);
  RETURN true;
END
