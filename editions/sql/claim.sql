-- Claim and complete (src/api/claim.rs): webhook_claim, webhook_claim_many,
-- webhook_complete, over _claim (editions/sql/internal/claim.sql) and the
-- native store's statements.

--@ webhook_dedup.webhook_claim
DECLARE
  checked boolean;
  lease_us bigint;
  fingerprint pg_catalog.bytea;
  r record;
  claimed webhook_dedup.claim_result;
BEGIN
  checked := webhook_dedup._check_key(source, idem_key);
  IF lease IS NOT NULL THEN
    lease_us := webhook_dedup._lease_us(lease);
  END IF;
  IF payload IS NOT NULL THEN
    fingerprint := pg_catalog.sha256(payload);
  END IF;
  r := webhook_dedup._claim(source, idem_key, fingerprint, NULL, lease_us, event_type);
  -- the payload archive keeps a new key's first delivery and a conflicting one
  IF payload IS NOT NULL AND (r.inserted OR r.outcome OPERATOR(pg_catalog.=) 'conflict') THEN
    PERFORM webhook_dedup._archive_keep(source, idem_key, r.at, NULL, event_type, NOT r.inserted, payload, NULL);
  END IF;
  claimed := ROW(r.outcome, r.claim_token, r.attempt, r.state, r.result, r.last_step, r.first_seen_at,
                 r.lease_expires_at);
  RETURN claimed;
END

--@ webhook_dedup.webhook_claim_many
DECLARE
  keys pg_catalog.text[];
  k pg_catalog.text;
  lease_us bigint;
  r record;
BEGIN
  IF idem_keys IS NULL THEN
    RAISE EXCEPTION 'idem_keys must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF pg_catalog.array_position(idem_keys, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'every element of idem_keys must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  -- sorted byte for byte, each once: overlapping calls lock in one order
  SELECT COALESCE(pg_catalog.array_agg(DISTINCT e COLLATE "C" ORDER BY e COLLATE "C"), '{}') INTO keys
    FROM pg_catalog.unnest(idem_keys) AS e;
  FOREACH k IN ARRAY keys LOOP
    PERFORM webhook_dedup._check_key(source, k);
  END LOOP;
  IF lease IS NOT NULL THEN
    lease_us := webhook_dedup._lease_us(lease);
  END IF;
  FOREACH k IN ARRAY keys LOOP
    r := webhook_dedup._claim(source, k, NULL, NULL, lease_us, event_type);
    idem_key := k;
    outcome := r.outcome;
    claim_token := r.claim_token;
    attempt := r.attempt;
    state := r.state;
    result := r.result;
    last_step := r.last_step;
    first_seen_at := r.first_seen_at;
    lease_expires_at := r.lease_expires_at;
    RETURN NEXT;
  END LOOP;
END

--@ webhook_dedup.webhook_complete
DECLARE
  checked boolean;
  now pg_catalog.timestamptz;
  label pg_catalog.text;
  k webhook_dedup.keys;
BEGIN
  checked := webhook_dedup._check_key(source, idem_key);
  IF claim_token IS NULL THEN
    RAISE EXCEPTION 'claim_token must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  now := pg_catalog.clock_timestamp();
  SELECT c.event_type INTO label
    FROM webhook_dedup._s_transitions_complete(source, idem_key, now, claim_token, result,
                                               webhook_dedup._plus_us(now, (webhook_dedup._claim_settings(source)).retention_us))
      AS c(event_type pg_catalog.text);
  IF FOUND THEN
    PERFORM webhook_dedup._count(source, label, 'completions', false);
    RETURN true;
  END IF;
  -- a stale token, or no such key (store transitions.rs, unmatched)
  SELECT * INTO k FROM webhook_dedup.keys AS r
   WHERE r.idem_key OPERATOR(pg_catalog.=) webhook_complete.idem_key AND r.source OPERATOR(pg_catalog.=) webhook_complete.source;
  IF NOT FOUND THEN
    PERFORM webhook_dedup._unknown_key(source, idem_key);
  END IF;
  PERFORM webhook_dedup._count(source, k.event_type, 'stale_completions', false);
  RETURN false;
END
