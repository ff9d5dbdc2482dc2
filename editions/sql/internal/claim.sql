-- The claim state machine (crates/webhook-dedup-core/src/claim.rs, its
-- decisions; src/engine/claim.rs and src/store/claim.rs, the claim over
-- the store): the helpers of editions/sql/claim.sql and transitions.sql.
-- Internal: the owner's alone (each REVOKE below).

-- A key or source given to the claim functions (key.rs, check_bounded):
-- not empty, at most 255 characters. 22023 naming the argument. Returns
-- true (as _check_source and _check_key do: a caller that assigns the
-- answer evaluates an expression, where PERFORM starts an executor).
CREATE FUNCTION webhook_dedup._check_bounded(what text, value text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
  IF value OPERATOR(pg_catalog.=) '' THEN
    RAISE EXCEPTION '% must not be empty', what USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF pg_catalog.char_length(value) OPERATOR(pg_catalog.>) 255 THEN
    RAISE EXCEPTION '% is % characters long; the limit is 255', what, pg_catalog.char_length(value)
      USING ERRCODE = 'invalid_parameter_value', HINT = 'Derive keys with webhook_dedup.webhook_key(), which bounds them.';
  END IF;
  RETURN true;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._check_bounded(text, text) FROM PUBLIC;

-- The key a call names (src/api/args.rs, key): both parts present (22004),
-- the source checked (_check_source), the key 1 to 255 characters (22023).
CREATE FUNCTION webhook_dedup._check_key(source text, idem_key text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF idem_key IS NULL THEN
    RAISE EXCEPTION 'idem_key must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN webhook_dedup._check_source(source) AND webhook_dedup._check_bounded('idem_key', idem_key);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._check_key(text, text) FROM PUBLIC;

-- A lease given as an interval, in microseconds (args.rs, lease, and
-- claim.rs, check_lease_us): positive, at most 365 days, no months. 22023.
CREATE FUNCTION webhook_dedup._lease_us(lease interval) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  us bigint := webhook_dedup._duration_us(lease, 'lease');
BEGIN
  IF us OPERATOR(pg_catalog.<=) 0 THEN
    RAISE EXCEPTION 'lease must be a positive interval' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF us OPERATOR(pg_catalog.>) (webhook_dedup._claim_rules()).max_lease_us THEN
    RAISE EXCEPTION 'lease must be at most 365 days' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN us;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._lease_us(interval) FROM PUBLIC;

-- A source's claim settings (src/store/sources.rs, SourceSettings) from
-- its row's columns (NULL: not set): its lease (microseconds; `lease`,
-- else webhook_dedup.default_lease), its attempts (`max_attempts`, else
-- webhook_dedup.max_attempts), its retention (microseconds; `retention`,
-- else webhook_dedup.retention). (The IN names differ from the OUT
-- names: PL/pgSQL takes both as one variable.)
CREATE FUNCTION webhook_dedup._claim_settings_of(source_lease interval, source_max_attempts integer,
                                                 source_retention interval, OUT lease_us bigint,
                                                 OUT max_attempts integer, OUT retention_us bigint)
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
  lease_us := COALESCE(webhook_dedup._duration_us(source_lease, 'webhook_dedup.sources.lease'),
                       webhook_dedup._setting('webhook_dedup.default_lease')::bigint OPERATOR(pg_catalog.*) 1000000);
  max_attempts := COALESCE(source_max_attempts, webhook_dedup._setting('webhook_dedup.max_attempts'));
  retention_us := COALESCE(webhook_dedup._duration_us(source_retention, 'webhook_dedup.sources.retention'),
                           webhook_dedup._setting('webhook_dedup.retention')::bigint OPERATOR(pg_catalog.*) 1000000);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._claim_settings_of(interval, integer, interval) FROM PUBLIC;

-- The claim settings of `source` as its row (_source_settings) sets them.
-- (Each step an expression, not a query: PL/pgSQL evaluates one without
-- starting an executor.)
CREATE FUNCTION webhook_dedup._claim_settings(source text, OUT lease_us bigint, OUT max_attempts integer,
                                              OUT retention_us bigint)
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
  s record := webhook_dedup._source_settings(source);
  c record := webhook_dedup._claim_settings_of(s.lease, s.max_attempts, s.retention);
BEGIN
  lease_us := c.lease_us;
  max_attempts := c.max_attempts;
  retention_us := c.retention_us;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._claim_settings(text) FROM PUBLIC;

-- What a claim of a key means (claim.rs, decide), given what is stored
-- (`k`, NULL for an unknown key), the fingerprint to compare (NULL: none
-- given), the database clock and the source's attempts. outcome: claimed,
-- reclaimed, in_progress, duplicate, conflict, retry_later,
-- unknown_outcome, dead_lettered; write: insert, lease (with the new
-- attempt), touch or dead_letter.
CREATE FUNCTION webhook_dedup._decide(k webhook_dedup.keys, given bytea, now timestamptz, max_attempts integer,
                                      OUT outcome text, OUT write text, OUT attempt integer)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
  IF k.state IS NULL THEN
    outcome := 'claimed';
    write := 'insert';
    RETURN;
  END IF;
  IF k.fingerprint IS NOT NULL AND given IS NOT NULL AND k.fingerprint OPERATOR(pg_catalog.<>) given THEN
    outcome := 'conflict';
    write := 'touch';
    RETURN;
  END IF;
  outcome := CASE
    WHEN k.state OPERATOR(pg_catalog.=) 'pending' THEN 'claimed'
    WHEN k.state OPERATOR(pg_catalog.=) 'processing' AND k.lease_expires_at OPERATOR(pg_catalog.<=) now THEN 'reclaimed'
    WHEN k.state OPERATOR(pg_catalog.=) 'processing' THEN 'in_progress'
    WHEN k.state OPERATOR(pg_catalog.=) 'completed' THEN 'duplicate'
    WHEN k.state OPERATOR(pg_catalog.=) 'failed'
         AND (k.next_attempt_at IS NULL OR k.next_attempt_at OPERATOR(pg_catalog.<=) now) THEN 'reclaimed'
    WHEN k.state OPERATOR(pg_catalog.=) 'failed' THEN 'retry_later'
    ELSE k.state END; -- unknown_outcome, dead_lettered
  IF outcome OPERATOR(pg_catalog.=) ANY (ARRAY['claimed', 'reclaimed']) THEN
    IF outcome OPERATOR(pg_catalog.=) 'reclaimed' AND k.state OPERATOR(pg_catalog.=) 'processing'
       AND k.attempt OPERATOR(pg_catalog.>=) max_attempts THEN
      outcome := 'dead_lettered';
      write := 'dead_letter';
      RETURN;
    END IF;
    write := 'lease';
    attempt := k.attempt OPERATOR(pg_catalog.+) 1;
    RETURN;
  END IF;
  write := 'touch';
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._decide(webhook_dedup.keys, bytea, timestamptz, integer) FROM PUBLIC;

-- The `last_error` of a key dead-lettered because it came due again after
-- its last allowed attempt (claim.rs, exhausted_error).
CREATE FUNCTION webhook_dedup._exhausted_error(attempt integer) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (SELECT r.exhausted_before OPERATOR(pg_catalog.||) attempt::pg_catalog.text OPERATOR(pg_catalog.||) r.exhausted_after
          FROM webhook_dedup._claim_rules() AS r);
REVOKE ALL ON FUNCTION webhook_dedup._exhausted_error(integer) FROM PUBLIC;

-- The wait before retrying after failed attempt `attempt` (claim.rs,
-- backoff_us): min(base * 2^(attempt - 1), max), doublings at most 20.
CREATE FUNCTION webhook_dedup._backoff_us(attempt integer) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (SELECT LEAST(r.base_backoff_us::numeric
                                  OPERATOR(pg_catalog.*) pg_catalog.power(2::numeric,
                                    LEAST(GREATEST(attempt, 1) OPERATOR(pg_catalog.-) 1, 20)),
                                r.max_backoff_us)::bigint
          FROM webhook_dedup._claim_rules() AS r);
REVOKE ALL ON FUNCTION webhook_dedup._backoff_us(integer) FROM PUBLIC;

-- Whether a delivery of a known key that the decision answers from the
-- stored state may be answered with a read alone (claim.rs,
-- records_touch, negated; unrecorded_interval): not a conflict, not a
-- fingerprint the key adopts, and within the interval (at most half the
-- retention) of the key's last recorded activity; a clock stepped back is
-- within it. `interval_us` NULL: every delivery is written.
CREATE FUNCTION webhook_dedup._answers_read(outcome text, write text, adopts boolean, last_seen_at timestamptz,
                                            now timestamptz, interval_us bigint, retention_us bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN interval_us IS NOT NULL AND write OPERATOR(pg_catalog.=) 'touch' AND outcome OPERATOR(pg_catalog.<>) 'conflict'
       AND NOT adopts
       AND (EXTRACT(epoch FROM now OPERATOR(pg_catalog.-) last_seen_at) OPERATOR(pg_catalog.*) 1000000)
           OPERATOR(pg_catalog.<) LEAST(interval_us, retention_us OPERATOR(pg_catalog./) 2);
REVOKE ALL ON FUNCTION webhook_dedup._answers_read(text, text, boolean, timestamptz, timestamptz, bigint, bigint) FROM PUBLIC;

-- webhook_dedup.duplicate_record_interval in microseconds when a recent
-- duplicate may be answered with a read alone in this call (engine
-- claim.rs, duplicate_read_interval): not 0, READ COMMITTED, not a
-- read-only transaction (there every claim is refused as a write is).
-- NULL otherwise.
CREATE FUNCTION webhook_dedup._duplicate_read_interval_us() RETURNS bigint
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
  seconds integer := webhook_dedup._setting('webhook_dedup.duplicate_record_interval');
BEGIN
  IF seconds OPERATOR(pg_catalog.=) 0
     OR pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) ALL (ARRAY['read committed',
                                                                                              'read uncommitted'])
     OR pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
    RETURN NULL;
  END IF;
  RETURN seconds::bigint OPERATOR(pg_catalog.*) 1000000;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._duplicate_read_interval_us() FROM PUBLIC;

-- The counter a claim's outcome counts (metrics.rs, Counter::for_outcome).
-- Not STRICT: the planner inlines an SQL function declared STRICT only
-- when its body is strict, and a CASE is not; one it does not inline is
-- parsed and planned again at each statement that calls it (58 us a
-- claim on PostgreSQL 15, docs/benchmarks.md).
CREATE FUNCTION webhook_dedup._outcome_counter(outcome text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN outcome OPERATOR(pg_catalog.=) 'claimed' THEN 'first_claims' WHEN outcome OPERATOR(pg_catalog.=) 'reclaimed' THEN 'reclaims'
                    WHEN outcome OPERATOR(pg_catalog.=) 'in_progress' THEN 'duplicates_in_progress' WHEN outcome OPERATOR(pg_catalog.=) 'duplicate' THEN 'duplicates_of_completed'
                    WHEN outcome OPERATOR(pg_catalog.=) 'conflict' THEN 'conflicts' WHEN outcome OPERATOR(pg_catalog.=) 'retry_later' THEN 'retry_later'
                    WHEN outcome OPERATOR(pg_catalog.=) 'unknown_outcome' THEN 'unknown_outcome' WHEN outcome OPERATOR(pg_catalog.=) 'dead_lettered' THEN 'dead_lettered' END;
REVOKE ALL ON FUNCTION webhook_dedup._outcome_counter(text) FROM PUBLIC;

-- One claim (engine claim.rs, claim_unless_held; store claim.rs, claim):
-- the body of webhook_claim, of each key of webhook_claim_many and of
-- webhook_receive. `fingerprint`: the delivery's content fingerprint;
-- `raw`: the SHA-256 of its raw bytes when the source's rule covers less
-- (engine Content); `lease_us` NULL: the source's lease.
--
-- Under READ COMMITTED a known key whose latest committed row answers the
-- delivery without a write (a recent duplicate: _answers_read) is answered
-- from that row: no lock, no write, no transaction id. Otherwise one
-- upsert (claim_upsert.sql, the native store's statement) stores a new
-- key leased to the caller or locks the known one and counts the delivery
-- on it; the decision (_decide) then leases it (claim_lease.sql), dead-
-- letters it (transitions_fail.sql) or leaves it; a conflicting payload is
-- recorded (claim_conflict.sql). `yield_if_held`: a key found held by
-- another worker's live lease is left alone before its row is locked
-- (webhook_receive waits for it): then outcome NULL. `confirm_guard`: a call
-- that answers from reads alone or not at all (engine claim.rs,
-- read_answer: webhook_receive's recent duplicate under the replay
-- guard), and only when the replay guard of that body hash names this key
-- (replay_guards_peek.sql); else outcome NULL, nothing written or counted.
-- Returns one row (a composite, so that a caller's assignment is an
-- expression, without the executor and the tuplestore of a set): the
-- columns of
-- webhook_claim and retry_at (in_progress: the holder's lease expiry;
-- retry_later: the next attempt's time), at (the clock the claim decided
-- at), inserted (the delivery stored the key). `settings_*`: the source's
-- claim settings when the caller read them already (_claim_settings_of).
CREATE FUNCTION webhook_dedup._claim(source text, idem_key text, fingerprint bytea, raw bytea, lease_us bigint,
                                     event_type text, yield_if_held boolean DEFAULT false,
                                     confirm_guard bytea DEFAULT NULL, settings_lease_us bigint DEFAULT NULL,
                                     settings_max_attempts integer DEFAULT NULL, settings_retention_us bigint DEFAULT NULL,
  OUT outcome text, OUT claim_token uuid, OUT attempt integer, OUT state text, OUT result jsonb, OUT last_step text,
  OUT first_seen_at timestamptz, OUT lease_expires_at timestamptz, OUT retry_at timestamptz, OUT at timestamptz,
  OUT inserted boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  now pg_catalog.timestamptz := pg_catalog.clock_timestamp();
  settings record;
  token pg_catalog.uuid := pg_catalog.gen_random_uuid();
  until pg_catalog.timestamptz;
  interval_us bigint := webhook_dedup._duplicate_read_interval_us();
  k webhook_dedup.keys;
  given pg_catalog.bytea;
  decision record;
  was_inserted boolean;
  read_only boolean;
  label pg_catalog.text;
BEGIN
  IF settings_max_attempts IS NULL THEN
    settings := webhook_dedup._claim_settings(source);
  ELSE
    SELECT settings_lease_us AS lease_us, settings_max_attempts AS max_attempts, settings_retention_us AS retention_us
      INTO settings;
  END IF;
  lease_us := COALESCE(lease_us, settings.lease_us);
  until := webhook_dedup._plus_us(now, lease_us);
  -- a recent duplicate, answered from the latest committed row
  IF interval_us IS NOT NULL OR yield_if_held THEN
    SELECT * INTO k FROM webhook_dedup.keys AS r
     WHERE r.idem_key OPERATOR(pg_catalog.=) _claim.idem_key AND r.source OPERATOR(pg_catalog.=) _claim.source;
    IF FOUND THEN
      given := CASE WHEN raw IS NOT NULL AND k.fingerprint OPERATOR(pg_catalog.=) raw THEN k.fingerprint ELSE fingerprint END;
      decision := webhook_dedup._decide(k, given, now, settings.max_attempts);
      IF yield_if_held AND decision.outcome OPERATOR(pg_catalog.=) 'in_progress' THEN
        RETURN;
      END IF;
      -- (two IFs: the first a simple expression, which PL/pgSQL evaluates
      -- without a plan of its own; the condition as one, a query with a
      -- sublink, was planned again at every call, its custom plan, with
      -- the call's values folded in, being cheaper than the generic one)
      read_only := webhook_dedup._answers_read(decision.outcome, decision.write,
                                               k.fingerprint IS NULL AND fingerprint IS NOT NULL,
                                               k.last_seen_at, now, interval_us, settings.retention_us);
      IF read_only AND confirm_guard IS NOT NULL THEN
        read_only := EXISTS (SELECT FROM webhook_dedup._s_replay_guards_peek(source, confirm_guard) AS g(idem_key pg_catalog.text)
                              WHERE g.idem_key OPERATOR(pg_catalog.=) _claim.idem_key);
      END IF;
      IF read_only THEN
        PERFORM webhook_dedup._count(source, COALESCE(k.event_type, event_type),
                                     webhook_dedup._outcome_counter(decision.outcome), true);
        SELECT decision.outcome, NULL::pg_catalog.uuid, k.attempt, k.state, k.result, k.last_step, k.first_seen_at,
                            k.lease_expires_at,
                            CASE WHEN decision.outcome OPERATOR(pg_catalog.=) 'in_progress' THEN k.lease_expires_at
                                                  WHEN decision.outcome OPERATOR(pg_catalog.=) 'retry_later' THEN k.next_attempt_at END,
                            now, false
          INTO outcome, claim_token, attempt, state, result, last_step, first_seen_at, lease_expires_at, retry_at, at, inserted;
        RETURN;
      END IF;
    ELSIF yield_if_held AND confirm_guard IS NULL THEN
      -- A key another copy is inserting right now is not visible yet: the
      -- primary key makes this insert wait for that transaction, and on a
      -- conflict it neither locks nor writes (the upsert below would lock
      -- the key's row until this transaction ends, and the holder's
      -- completion would wait for it: engine claim.rs, claim_unless_held).
      -- Then the key is read again and left to the caller while held.
      INSERT INTO webhook_dedup.keys AS r (source, idem_key, state, attempt, claim_token, lease_expires_at, due_at,
                                           fingerprint, event_type, first_seen_at, last_seen_at, leased_at)
        VALUES (source, idem_key, 'processing', 1, token, until, until, fingerprint, event_type, now, now, now)
        ON CONFLICT ON CONSTRAINT keys_pkey DO NOTHING;
      was_inserted := FOUND;
      IF NOT was_inserted THEN
        SELECT * INTO k FROM webhook_dedup.keys AS r
         WHERE r.idem_key OPERATOR(pg_catalog.=) _claim.idem_key AND r.source OPERATOR(pg_catalog.=) _claim.source;
      END IF;
      IF NOT was_inserted AND FOUND THEN
        given := CASE WHEN raw IS NOT NULL AND k.fingerprint OPERATOR(pg_catalog.=) raw THEN k.fingerprint ELSE fingerprint END;
        IF (webhook_dedup._decide(k, given, pg_catalog.clock_timestamp(), settings.max_attempts)).outcome
           OPERATOR(pg_catalog.=) 'in_progress' THEN
          RETURN;
        END IF;
      END IF;
    END IF;
  END IF;
  IF confirm_guard IS NOT NULL THEN
    RETURN;
  END IF;
  IF was_inserted IS NOT TRUE THEN
    SELECT u.inserted, u.source, u.idem_key, u.state, u.attempt, u.claim_token, u.lease_expires_at, u.next_attempt_at,
           u.fingerprint, u.event_type, u.result, u.last_step, u.first_seen_at, u.due_at
      INTO was_inserted, k.source, k.idem_key, k.state, k.attempt, k.claim_token, k.lease_expires_at, k.next_attempt_at,
           k.fingerprint, k.event_type, k.result, k.last_step, k.first_seen_at, k.due_at
      FROM webhook_dedup._s_claim_upsert(source, idem_key, now, token, until, fingerprint, event_type)
        AS u(inserted boolean, source pg_catalog.text, idem_key pg_catalog.text, state pg_catalog.text, attempt integer, claim_token pg_catalog.uuid,
             lease_expires_at pg_catalog.timestamptz, next_attempt_at pg_catalog.timestamptz, fingerprint pg_catalog.bytea, event_type pg_catalog.text, result pg_catalog.jsonb,
             last_step pg_catalog.text, first_seen_at pg_catalog.timestamptz, due_at pg_catalog.timestamptz);
  END IF;
  IF was_inserted THEN
    PERFORM webhook_dedup._count(source, event_type, 'first_claims', true);
    SELECT 'claimed'::pg_catalog.text, token, 1, 'processing'::pg_catalog.text, NULL::pg_catalog.jsonb, NULL::pg_catalog.text, now, until,
                        NULL::pg_catalog.timestamptz, now, true
      INTO outcome, claim_token, attempt, state, result, last_step, first_seen_at, lease_expires_at, retry_at, at, inserted;
    RETURN;
  END IF;
  given := CASE WHEN raw IS NOT NULL AND k.fingerprint OPERATOR(pg_catalog.=) raw THEN k.fingerprint ELSE fingerprint END;
  decision := webhook_dedup._decide(k, given, now, settings.max_attempts);
  label := COALESCE(k.event_type, event_type);
  IF decision.outcome OPERATOR(pg_catalog.=) 'conflict' THEN
    PERFORM webhook_dedup._s_claim_conflict(source, idem_key, now, COALESCE(k.fingerprint, ''::pg_catalog.bytea),
                                            COALESCE(given, ''::pg_catalog.bytea), 'claim');
  END IF;
  PERFORM webhook_dedup._count(source, label, webhook_dedup._outcome_counter(decision.outcome), true);
  IF decision.write OPERATOR(pg_catalog.=) 'lease' THEN
    PERFORM webhook_dedup._s_claim_lease(source, idem_key, now, decision.attempt, token, until, event_type);
    SELECT decision.outcome, token, decision.attempt, 'processing'::pg_catalog.text, k.result, k.last_step,
                        k.first_seen_at, until, NULL::pg_catalog.timestamptz, now, false
      INTO outcome, claim_token, attempt, state, result, last_step, first_seen_at, lease_expires_at, retry_at, at, inserted;
  ELSIF decision.write OPERATOR(pg_catalog.=) 'dead_letter' THEN
    PERFORM webhook_dedup._s_transitions_fail(source, idem_key, now, NULL, 'dead_lettered',
                                              webhook_dedup._exhausted_error(k.attempt));
    PERFORM webhook_dedup._count(source, label, 'dead_letters', false);
    SELECT decision.outcome, NULL::pg_catalog.uuid, k.attempt, 'dead_lettered'::pg_catalog.text, NULL::pg_catalog.jsonb, k.last_step,
                        k.first_seen_at, NULL::pg_catalog.timestamptz, NULL::pg_catalog.timestamptz, now, false
      INTO outcome, claim_token, attempt, state, result, last_step, first_seen_at, lease_expires_at, retry_at, at, inserted;
  ELSE
    SELECT decision.outcome, NULL::pg_catalog.uuid, k.attempt, k.state,
                        CASE WHEN decision.outcome OPERATOR(pg_catalog.=) 'conflict' THEN NULL ELSE k.result END,
                        CASE WHEN decision.outcome OPERATOR(pg_catalog.=) 'conflict' THEN NULL ELSE k.last_step END,
                        k.first_seen_at, k.lease_expires_at,
                        CASE WHEN decision.outcome OPERATOR(pg_catalog.=) 'in_progress' THEN k.lease_expires_at
                                              WHEN decision.outcome OPERATOR(pg_catalog.=) 'retry_later' THEN k.next_attempt_at END,
                        now, false
      INTO outcome, claim_token, attempt, state, result, last_step, first_seen_at, lease_expires_at, retry_at, at, inserted;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._claim(text, text, bytea, bytea, bigint, text, boolean, bytea, bigint, integer, bigint)
  FROM PUBLIC;

-- P0002 for a key that does not exist (error.rs, UnknownKey), with the
-- hint for a bare event id (a key that does not start with the source).
CREATE FUNCTION webhook_dedup._unknown_key(source text, idem_key text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
  IF pg_catalog.starts_with(idem_key, source OPERATOR(pg_catalog.||) ':') THEN
    RAISE EXCEPTION 'no idempotency key "%" for source "%"', idem_key, source USING ERRCODE = 'no_data_found';
  END IF;
  RAISE EXCEPTION 'no idempotency key "%" for source "%"', idem_key, source USING ERRCODE = 'no_data_found',
    HINT = pg_catalog.format('A key made from a provider''s event id starts with "%s:": pass '
                             'webhook_dedup.webhook_key(''%s'', <event id>) (here perhaps '
                             'webhook_dedup.webhook_key(''%s'', ''%s'')), or the idem_key webhook_receive returned, '
                             'not the bare event id.', source, source, source, pg_catalog.replace(idem_key, '''', ''''''));
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._unknown_key(text, text) FROM PUBLIC;

-- A known key, locked for a transition (engine transitions.rs, existing:
-- transitions_lock.sql), or P0002.
CREATE FUNCTION webhook_dedup._lock_key(source text, idem_key text) RETURNS webhook_dedup.keys
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  k webhook_dedup.keys;
BEGIN
  SELECT * INTO k FROM webhook_dedup.keys AS r
   WHERE r.idem_key OPERATOR(pg_catalog.=) _lock_key.idem_key AND r.source OPERATOR(pg_catalog.=) _lock_key.source
     FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    PERFORM webhook_dedup._unknown_key(source, idem_key);
  END IF;
  RETURN k;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._lock_key(text, text) FROM PUBLIC;

-- The locked key when `token` holds its lease (claim.rs, holds_lease:
-- processing and that token); else NULL, the stale token counted (engine
-- transitions.rs, as_holder). P0002 for an unknown key.
CREATE FUNCTION webhook_dedup._as_holder(source text, idem_key text, token uuid) RETURNS webhook_dedup.keys
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  k webhook_dedup.keys := webhook_dedup._lock_key(source, idem_key);
BEGIN
  IF k.state OPERATOR(pg_catalog.=) 'processing' AND k.claim_token OPERATOR(pg_catalog.=) token THEN
    RETURN k;
  END IF;
  PERFORM webhook_dedup._count(source, k.event_type, 'stale_tokens', false);
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._as_holder(text, text, uuid) FROM PUBLIC;
