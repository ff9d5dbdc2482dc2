-- The transactional outbox (src/api/outbox.rs, run by
-- src/engine/outbox.rs): intents written with the business write, taken
-- by senders under a lease, acknowledged, failed, parked or resolved,
-- over the native store's statements. Single-server in both editions.

--@ webhook_dedup.webhook_outbox_put
DECLARE
  key_key pg_catalog.text;
  new_id bigint;
  k record;
BEGIN
  PERFORM webhook_dedup._check_key(source, idem_key);
  IF claim_token IS NULL THEN
    RAISE EXCEPTION 'claim_token must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF operation IS NULL THEN
    RAISE EXCEPTION 'operation must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF target IS NULL THEN
    RAISE EXCEPTION 'target must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF request IS NULL THEN
    RAISE EXCEPTION 'request must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF max_length IS NULL THEN
    RAISE EXCEPTION 'max_length must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF downstream_idempotent IS NULL THEN
    RAISE EXCEPTION 'downstream_idempotent must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  -- core outbox.rs, check_names; then the downstream key (operation_key.rs)
  PERFORM webhook_dedup._check_bounded('operation', operation);
  PERFORM webhook_dedup._check_bounded('target', target);
  key_key := webhook_dedup.webhook_operation_key(source, idem_key, operation, max_length, downstream);
  -- store outbox.rs, put: written while the token holds the key's lease
  SELECT p.id INTO new_id FROM webhook_dedup._s_outbox_put(source, idem_key, claim_token, operation, target, request,
                                                           key_key, downstream_idempotent, pg_catalog.clock_timestamp())
    AS p(id bigint);
  IF new_id IS NOT NULL THEN
    PERFORM webhook_dedup._count(source, NULL, 'intents_written', false);
    RETURN new_id;
  END IF;
  SELECT * INTO k FROM webhook_dedup.keys AS r
   WHERE r.idem_key OPERATOR(pg_catalog.=) webhook_outbox_put.idem_key AND r.source OPERATOR(pg_catalog.=) webhook_outbox_put.source
     FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    PERFORM webhook_dedup._unknown_key(source, idem_key);
  END IF;
  IF k.state OPERATOR(pg_catalog.<>) 'processing' OR (k.claim_token OPERATOR(pg_catalog.=) claim_token) IS NOT TRUE THEN
    PERFORM webhook_dedup._count(source, NULL, 'stale_tokens', false);
    RETURN NULL;
  END IF;
  SELECT f.id INTO new_id FROM webhook_dedup._s_outbox_find(source, idem_key, operation) AS f(id bigint);
  IF new_id IS NOT NULL THEN
    RETURN new_id;
  END IF;
  -- the intent it conflicted with went in between (pruned): the key is
  -- ours and locked now
  SELECT p.id INTO new_id FROM webhook_dedup._s_outbox_put(source, idem_key, claim_token, operation, target, request,
                                                           key_key, downstream_idempotent, pg_catalog.clock_timestamp())
    AS p(id bigint);
  PERFORM webhook_dedup._count(source, NULL, 'intents_written', false);
  RETURN new_id;
END

--@ webhook_dedup.webhook_outbox_next sql
-- SQL, not PL/pgSQL: the argument target and the column target share a
-- name, which PL/pgSQL refuses; the work is _outbox_next's
SELECT * FROM webhook_dedup._outbox_next($1, $2, $3)

--@ webhook_dedup.webhook_outbox_ack
DECLARE
  acked pg_catalog.text;
  intent record;
BEGIN
  IF id IS NULL THEN
    RAISE EXCEPTION 'id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF lease_token IS NULL THEN
    RAISE EXCEPTION 'lease_token must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  SELECT a.source INTO acked FROM webhook_dedup._s_outbox_ack(id, lease_token, response, pg_catalog.clock_timestamp())
    AS a(source pg_catalog.text);
  IF acked IS NOT NULL THEN
    PERFORM webhook_dedup._count(acked, NULL, 'intents_delivered', false);
    RETURN true;
  END IF;
  intent := webhook_dedup._outbox_lock(id);
  PERFORM webhook_dedup._count(intent.source, NULL, 'stale_tokens', false);
  RETURN false;
END

--@ webhook_dedup.webhook_outbox_fail
DECLARE
  retry_after_us bigint;
  intent record;
  now pg_catalog.timestamptz;
  to_state pg_catalog.text;
  next_attempt_at pg_catalog.timestamptz;
BEGIN
  IF id IS NULL THEN
    RAISE EXCEPTION 'id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF lease_token IS NULL THEN
    RAISE EXCEPTION 'lease_token must not be NULL' USING ERRCODE = 'null_value_not_allowed';
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
  intent := webhook_dedup._as_sender(id, lease_token);
  IF intent IS NULL THEN
    RETURN NULL;
  END IF;
  now := pg_catalog.clock_timestamp();
  IF NOT retryable OR intent.attempt OPERATOR(pg_catalog.>=) (webhook_dedup._claim_settings(intent.source)).max_attempts THEN
    to_state := 'dead_lettered';
  ELSE
    to_state := 'failed';
    next_attempt_at := webhook_dedup._plus_us(now, COALESCE(retry_after_us, webhook_dedup._backoff_us(intent.attempt)));
  END IF;
  PERFORM webhook_dedup._s_outbox_set_state(id, now, to_state, next_attempt_at, error);
  PERFORM webhook_dedup._count(intent.source, NULL,
                               CASE WHEN to_state OPERATOR(pg_catalog.=) 'failed' THEN 'intent_retries' ELSE 'intents_dead_lettered' END, false);
  RETURN to_state;
END

--@ webhook_dedup.webhook_outbox_unknown
DECLARE
  intent record;
BEGIN
  IF id IS NULL THEN
    RAISE EXCEPTION 'id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF lease_token IS NULL THEN
    RAISE EXCEPTION 'lease_token must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  intent := webhook_dedup._as_sender(id, lease_token);
  IF intent IS NULL THEN
    RETURN false;
  END IF;
  PERFORM webhook_dedup._s_outbox_set_state(id, pg_catalog.clock_timestamp(), 'unknown_outcome', NULL, detail);
  PERFORM webhook_dedup._count(intent.source, NULL, 'intents_unknown', false);
  RETURN true;
END

--@ webhook_dedup.webhook_outbox_resolve
DECLARE
  intent record;
  now pg_catalog.timestamptz;
BEGIN
  IF id IS NULL THEN
    RAISE EXCEPTION 'id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF new_state IS NULL THEN
    RAISE EXCEPTION 'new_state must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF new_state OPERATOR(pg_catalog.<>) ALL (ARRAY['pending', 'processing', 'completed', 'failed', 'unknown_outcome',
                                                  'dead_lettered']) THEN
    RAISE EXCEPTION 'unknown state "%"', new_state USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF new_state OPERATOR(pg_catalog.=) ANY (ARRAY['processing', 'unknown_outcome']) THEN
    RAISE EXCEPTION 'new_state must be completed, failed, dead_lettered or pending, not %', new_state
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  intent := webhook_dedup._outbox_lock(id);
  now := pg_catalog.clock_timestamp();
  -- core outbox.rs, attempt_after_resolve: a retry starts the attempts over
  PERFORM webhook_dedup._s_outbox_resolve(id, now, new_state, response,
                                          CASE WHEN new_state OPERATOR(pg_catalog.=) ANY (ARRAY['failed', 'pending']) THEN now END,
                                          CASE WHEN new_state OPERATOR(pg_catalog.=) ANY (ARRAY['failed', 'pending']) THEN 0
                                               ELSE intent.attempt END);
  PERFORM webhook_dedup._count(intent.source, NULL, 'resolved', false);
  IF new_state OPERATOR(pg_catalog.=) 'dead_lettered' AND intent.state OPERATOR(pg_catalog.<>) 'dead_lettered' THEN
    PERFORM webhook_dedup._count(intent.source, NULL, 'intents_dead_lettered', false);
  END IF;
  RETURN intent.state;
END
