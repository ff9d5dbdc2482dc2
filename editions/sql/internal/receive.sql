-- webhook_receive's pipeline (src/engine/receive.rs), stage by stage:
-- verify (X's unsigned CRC, the signature, a signed token bound to its
-- bytes, a signed handshake), extract (the event id, type and time by the
-- scheme's rules, _intake_rules, with the source's settings in their
-- place; the accepted types; the key and the fingerprint), store (within
-- the call's deadline: the wait for a holder, a recent duplicate answered
-- from reads, the replay guard, the claim or enqueue, the archive).
-- Internal: the owner's alone.

-- A JSON number as serde_json's Number writes it (its Display): an
-- integer literal within u64 (or, negative, within i64) as written; any
-- other number (a fraction, an exponent, -0, beyond those ranges) read as
-- a double and written as the ryu crate's format_finite does (_ryu_number).
CREATE FUNCTION webhook_dedup._serde_number(literal text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE
  WHEN literal OPERATOR(pg_catalog.~) '^(0|[1-9][0-9]*)$'
       AND literal::numeric OPERATOR(pg_catalog.<=) 18446744073709551615 THEN literal
  WHEN literal OPERATOR(pg_catalog.~) '^-[1-9][0-9]*$'
       AND literal::numeric OPERATOR(pg_catalog.>=) -9223372036854775808 THEN literal
  ELSE webhook_dedup._ryu_number(literal::double precision) END;
REVOKE ALL ON FUNCTION webhook_dedup._serde_number(text) FROM PUBLIC;

-- The JSON string at `pointer` in `doc` (serde_json's Value::as_str of
-- the value Value::pointer finds), NULL when it is none (or holds \u0000,
-- as _json_text).
CREATE FUNCTION webhook_dedup._json_string(doc json, pointer text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  v pg_catalog.json := webhook_dedup._json_pointer(doc, pointer);
BEGIN
  IF v IS NULL OR pg_catalog.json_typeof(v) OPERATOR(pg_catalog.<>) 'string' THEN
    RETURN NULL;
  END IF;
  RETURN webhook_dedup._json_text(v);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._json_string(json, text) FROM PUBLIC;

-- A value the rules read, as text (profile.rs, value): a JSON string as
-- is, a number as serde_json writes it, anything else NULL. A string
-- holding \u0000 is NULL here (PostgreSQL's text holds no U+0000:
-- docs/sql-edition.md, "Differences").
CREATE FUNCTION webhook_dedup._json_text(v json) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
  RETURN CASE WHEN pg_catalog.json_typeof(v) OPERATOR(pg_catalog.=) 'string' THEN v OPERATOR(pg_catalog.#>>) '{}'
           WHEN pg_catalog.json_typeof(v) OPERATOR(pg_catalog.=) 'number' THEN webhook_dedup._serde_number(v::pg_catalog.text) END;
EXCEPTION WHEN untranslatable_character OR character_not_in_repertoire THEN
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._json_text(json) FROM PUBLIC;

-- The value at `places` (_intake_rules: 'header:<name>' entries, the
-- first one sent deciding, or one JSON pointer into `doc`), trimmed as
-- str::trim, NULL when absent or empty (profile.rs, value). `repeated`:
-- the deciding header was sent more than once (profile.rs,
-- RepeatedHeader), then no value. `headers` as _headers folds them.
CREATE FUNCTION webhook_dedup._place_value(places text[], headers jsonb, doc json, OUT value text, OUT repeated boolean)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  place pg_catalog.text;
  sent pg_catalog.jsonb;
BEGIN
  repeated := false;
  IF places IS NULL THEN
    RETURN;
  END IF;
  IF NOT pg_catalog.starts_with(places[1], 'header:') THEN
    IF doc IS NOT NULL THEN
      value := webhook_dedup._json_text(webhook_dedup._json_pointer(doc, places[1]));
    END IF;
  ELSE
    FOREACH place IN ARRAY places LOOP
      sent := headers OPERATOR(pg_catalog.->) pg_catalog.substr(place, 8);
      CONTINUE WHEN sent IS NULL OR pg_catalog.jsonb_array_length(sent) OPERATOR(pg_catalog.=) 0;
      IF pg_catalog.jsonb_array_length(sent) OPERATOR(pg_catalog.>) 1 THEN
        repeated := true;
        RETURN;
      END IF;
      value := sent OPERATOR(pg_catalog.->>) 0;
      EXIT;
    END LOOP;
  END IF;
  value := webhook_dedup._trim(value);
  IF value OPERATOR(pg_catalog.=) '' THEN
    value := NULL;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._place_value(text[], jsonb, json) FROM PUBLIC;

-- Unix microseconds as a timestamptz, exactly (hours and seconds, no
-- day arithmetic in the session's time zone).
CREATE FUNCTION webhook_dedup._unix_us_time(us numeric) RETURNS timestamptz
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN TIMESTAMPTZ '1970-01-01 00:00:00+00'
       OPERATOR(pg_catalog.+) pg_catalog.make_interval(
         hours => pg_catalog.div(us, 3600000000)::integer,
         secs => pg_catalog.mod(us, 3600000000) OPERATOR(pg_catalog./) 1000000);
REVOKE ALL ON FUNCTION webhook_dedup._unix_us_time(numeric) FROM PUBLIC;

-- An event time in `format` (profile.rs, parse_time): unix_seconds, 1 to
-- 12 ASCII digits; unix_milliseconds, 1 to 15; rfc3339 as _rfc3339_ns
-- reads it (microseconds kept, truncated toward zero). NULL otherwise.
CREATE FUNCTION webhook_dedup._event_time(text text, format text) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
  RETURN CASE WHEN format OPERATOR(pg_catalog.=) 'unix_seconds' THEN
    CASE WHEN text OPERATOR(pg_catalog.~) '^[0-9]{1,12}$'
         THEN webhook_dedup._unix_us_time(text::numeric OPERATOR(pg_catalog.*) 1000000) END
  WHEN format OPERATOR(pg_catalog.=) 'unix_milliseconds' THEN
    CASE WHEN text OPERATOR(pg_catalog.~) '^[0-9]{1,15}$'
         THEN webhook_dedup._unix_us_time(text::numeric OPERATOR(pg_catalog.*) 1000) END
  WHEN format OPERATOR(pg_catalog.=) 'rfc3339' THEN
    webhook_dedup._unix_us_time(pg_catalog.trunc(webhook_dedup._rfc3339_ns(text) OPERATOR(pg_catalog./) 1000))
  END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._event_time(text, text) FROM PUBLIC;

-- The answer to X's CRC (handshake.rs, unsigned; twitter.rs,
-- crc_response_token) when the request is one: scheme twitter, no body,
-- a crc_token query parameter. `response` the JSON to answer, or
-- `refused` true (a token that is empty, longer than 255 bytes or not of
-- base64 and base64url characters and '=' could be a body to sign).
-- No row when the request is no CRC.
CREATE FUNCTION webhook_dedup._twitter_crc(body bytea, url text, key bytea, OUT response jsonb, OUT refused boolean)
  RETURNS SETOF record
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  token pg_catalog.bytea;
BEGIN
  IF pg_catalog.length(body) OPERATOR(pg_catalog.<>) 0 OR url IS NULL THEN
    RETURN;
  END IF;
  token := webhook_dedup._query_parameter(url, 'crc_token');
  IF token IS NULL THEN
    RETURN;
  END IF;
  refused := pg_catalog.length(token) OPERATOR(pg_catalog.=) 0 OR pg_catalog.length(token) OPERATOR(pg_catalog.>) 255
             OR pg_catalog.encode(token, 'escape') OPERATOR(pg_catalog.!~) '^[A-Za-z0-9+/_=-]+$';
  IF NOT refused THEN
    response := pg_catalog.jsonb_build_object('response_token', 'sha256=' OPERATOR(pg_catalog.||)
                                              pg_catalog.encode(webhook_dedup._hmac('sha256', key, token), 'base64'));
  END IF;
  RETURN NEXT;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._twitter_crc(bytea, text, bytea) FROM PUBLIC;

-- The answer to a verified body that is its scheme's handshake
-- (handshake.rs, answer): Slack's url_verification ({"challenge": c});
-- Zoom's endpoint.url_validation ({"plainToken": t, "encryptedToken":
-- hex HMAC-SHA256 of t under `key`}, refused for an empty token or one
-- holding ':', zoom.rs encrypted_token). No row when it is none.
CREATE FUNCTION webhook_dedup._signed_handshake(scheme text, doc json, key bytea, OUT response jsonb,
                                                OUT refused boolean)
  RETURNS SETOF record
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  text_value pg_catalog.text;
BEGIN
  IF doc IS NULL THEN
    RETURN;
  END IF;
  IF scheme OPERATOR(pg_catalog.=) 'slack' THEN
    text_value := webhook_dedup._json_string(doc, '/challenge');
    IF (webhook_dedup._json_string(doc, '/type') OPERATOR(pg_catalog.=) 'url_verification') IS NOT TRUE
       OR text_value IS NULL THEN
      RETURN;
    END IF;
    response := pg_catalog.jsonb_build_object('challenge', text_value);
    refused := false;
    RETURN NEXT;
  ELSIF scheme OPERATOR(pg_catalog.=) 'zoom' THEN
    text_value := webhook_dedup._json_string(doc, '/payload/plainToken');
    IF (webhook_dedup._json_string(doc, '/event') OPERATOR(pg_catalog.=) 'endpoint.url_validation') IS NOT TRUE
       OR text_value IS NULL THEN
      RETURN;
    END IF;
    refused := text_value OPERATOR(pg_catalog.=) '' OR pg_catalog.strpos(text_value, ':') OPERATOR(pg_catalog.>) 0;
    IF NOT refused THEN
      response := pg_catalog.jsonb_build_object(
        'plainToken', text_value,
        'encryptedToken', pg_catalog.encode(webhook_dedup._hmac('sha256', key, pg_catalog.convert_to(text_value, 'UTF8')), 'hex'));
    END IF;
    RETURN NEXT;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._signed_handshake(text, json, bytea) FROM PUBLIC;

-- The source's verification keys valid at `at` for `scheme`
-- (engine receive.rs, stored_keys; secrets_read.sql): those add_secret
-- accepted for the scheme or for none, oldest first, with their ids and
-- the newest one's scheme. 55000 when there is none (the hint names the
-- scheme the source's keys were added for); 22023 naming a key that
-- cannot verify the scheme (the secret is never echoed).
CREATE FUNCTION webhook_dedup._stored_keys(source text, scheme text, at timestamptz, OUT secrets text[],
                                           OUT ids integer[], OUT newest_scheme text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  other pg_catalog.text;
  i integer;
BEGIN
  SELECT pg_catalog.array_agg(s.secret ORDER BY s.id), pg_catalog.array_agg(s.id ORDER BY s.id),
         (pg_catalog.array_agg(s.scheme ORDER BY s.id DESC))[1]
    INTO secrets, ids, newest_scheme
    FROM webhook_dedup._s_secrets_read(source) AS s(id integer, secret pg_catalog.text, not_before pg_catalog.timestamptz,
                                                    not_after pg_catalog.timestamptz, secrets pg_catalog.oid, scheme pg_catalog.text)
   WHERE s.id IS NOT NULL AND s.not_before OPERATOR(pg_catalog.<=) at
     AND (s.not_after IS NULL OR at OPERATOR(pg_catalog.<) s.not_after)
     AND (s.scheme IS NULL OR s.scheme OPERATOR(pg_catalog.=) _stored_keys.scheme);
  IF secrets IS NULL THEN
    SELECT s.scheme INTO other
      FROM webhook_dedup._s_secrets_read(source) AS s(id integer, secret pg_catalog.text, not_before pg_catalog.timestamptz,
                                                      not_after pg_catalog.timestamptz, secrets pg_catalog.oid, scheme pg_catalog.text)
     WHERE s.scheme IS NOT NULL AND s.scheme OPERATOR(pg_catalog.<>) _stored_keys.scheme
     ORDER BY s.id LIMIT 1;
    RAISE EXCEPTION 'source "%" has no verification key for scheme % valid at the delivery''s time', source, scheme
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = CASE WHEN other IS NULL
                        THEN 'Add one with webhook_dedup.add_secret (as webhook_dedup_operator), or pass secrets.'
                        ELSE pg_catalog.format('The source''s keys were added for scheme %s and verify only that scheme; '
                                               'add a key for %s with webhook_dedup.add_secret once the source''s '
                                               'provider says so.', other, scheme) END;
  END IF;
  FOR i IN 1 .. pg_catalog.cardinality(secrets) LOOP
    BEGIN
      IF secrets[i] OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'the secret is empty' USING ERRCODE = 'invalid_parameter_value';
      ELSIF webhook_dedup._trim(secrets[i]) OPERATOR(pg_catalog.<>) secrets[i] THEN
        RAISE EXCEPTION 'the secret has leading or trailing whitespace' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      PERFORM webhook_dedup._scheme_keys(scheme, ARRAY[secrets[i]]);
    EXCEPTION WHEN invalid_parameter_value THEN
      RAISE EXCEPTION 'key % of source "%" in webhook_dedup.source_secrets cannot verify scheme %: %', ids[i], source,
        scheme, SQLERRM USING ERRCODE = 'invalid_parameter_value';
    END;
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._stored_keys(text, text, timestamptz) FROM PUBLIC;

-- The bounded wait for a holder (src/wait.rs; engine receive.rs,
-- wait_for_holder): until `deadline`, while the key is held by another
-- worker's live lease so that a claim of this content would answer
-- in_progress (_decide, the state machine's own rule), look at the key
-- every 50 ms (or at its lease's expiry, if sooner) with the latest
-- snapshot, without a lock: pg_sleep, which a cancel or statement_timeout
-- ends. The SQL edition has no shared memory to be woken at the holder's
-- commit (docs/sql-edition.md). Returns whether the last look found the
-- key.
CREATE FUNCTION webhook_dedup._wait_for_holder(source text, idem_key text, fingerprint bytea, raw bytea,
                                               deadline timestamptz, max_attempts integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  k webhook_dedup.keys;
  now pg_catalog.timestamptz;
  given pg_catalog.bytea;
  until pg_catalog.timestamptz;
BEGIN
  LOOP
    SELECT * INTO k FROM webhook_dedup.keys AS r
     WHERE r.idem_key OPERATOR(pg_catalog.=) _wait_for_holder.idem_key
       AND r.source OPERATOR(pg_catalog.=) _wait_for_holder.source;
    IF NOT FOUND THEN
      RETURN false;
    END IF;
    now := pg_catalog.clock_timestamp();
    given := CASE WHEN raw IS NOT NULL AND k.fingerprint OPERATOR(pg_catalog.=) raw THEN k.fingerprint ELSE fingerprint END;
    IF (webhook_dedup._decide(k, given, now, max_attempts)).outcome OPERATOR(pg_catalog.<>) 'in_progress'
       OR now OPERATOR(pg_catalog.>=) deadline THEN
      RETURN true;
    END IF;
    until := LEAST(deadline, COALESCE(k.lease_expires_at, 'infinity'), now OPERATOR(pg_catalog.+) INTERVAL '50 milliseconds');
    PERFORM pg_catalog.pg_sleep(GREATEST(EXTRACT(epoch FROM until OPERATOR(pg_catalog.-) now), 0)::double precision);
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._wait_for_holder(text, text, bytea, bytea, timestamptz, integer) FROM PUBLIC;

-- The replay guard (engine replay.rs, replay_guard; the native store's
-- replay_guards_*.sql): NULL owner when the body (its SHA-256
-- `body_sha256`, of what the signature covers) is this key's to process:
-- new, a redelivery of the same key, or taken over from an owner that is
-- gone, never took this content, or failed without a payload to retry.
-- Else the owner's key with its answer: duplicate (with its result when
-- completed), in_progress, unknown_outcome, dead_lettered; every one of
-- them duplicate in enqueue mode. An answer the owner's committed state
-- decides is first given from reads alone, where a recent duplicate may
-- be (_duplicate_read_interval_us); else the guard's row is locked before
-- the owner is read. 40001 after three rounds that each found the guard
-- pruned.
CREATE FUNCTION webhook_dedup._replay_guard(source text, idem_key text, body_sha256 bytea, fingerprint bytea, raw bytea,
                                            mode text, OUT owner text, OUT outcome text, OUT result jsonb)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  now pg_catalog.timestamptz := pg_catalog.clock_timestamp();
  round integer;
  found_owner pg_catalog.text;
  o record;
BEGIN
  FOR round IN 0 .. 2 LOOP
    IF EXISTS (SELECT FROM webhook_dedup._s_replay_guards_insert(source, body_sha256, idem_key, now) AS i(inserted boolean)) THEN
      RETURN;
    END IF;
    IF round OPERATOR(pg_catalog.=) 0 AND webhook_dedup._duplicate_read_interval_us() IS NOT NULL THEN
      SELECT p.idem_key INTO found_owner FROM webhook_dedup._s_replay_guards_peek(source, body_sha256) AS p(idem_key pg_catalog.text);
      IF found_owner IS NOT NULL AND found_owner OPERATOR(pg_catalog.<>) idem_key THEN
        o := webhook_dedup._replayed_answer(source, found_owner, fingerprint, raw, mode);
        IF o.outcome IS NOT NULL THEN
          owner := found_owner;
          outcome := o.outcome;
          result := o.result;
          RETURN;
        END IF;
      END IF;
    END IF;
    found_owner := NULL;
    SELECT g.idem_key INTO found_owner FROM webhook_dedup._s_replay_guards_read(source, body_sha256) AS g(idem_key pg_catalog.text);
    CONTINUE WHEN found_owner IS NULL; -- pruned meanwhile
    IF found_owner OPERATOR(pg_catalog.=) idem_key THEN
      RETURN;
    END IF;
    o := webhook_dedup._replayed_answer(source, found_owner, fingerprint, raw, mode);
    IF o.outcome IS NOT NULL THEN
      owner := found_owner;
      outcome := o.outcome;
      result := o.result;
      RETURN;
    END IF;
    IF EXISTS (SELECT FROM webhook_dedup._s_replay_guards_take_over(source, body_sha256, idem_key, now) AS t(taken boolean)) THEN
      RETURN;
    END IF;
  END LOOP;
  RAISE EXCEPTION 'could not change the key: it was changed by a concurrent transaction after this transaction''s snapshot'
    USING ERRCODE = 'serialization_failure';
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._replay_guard(text, text, bytea, bytea, bytea, text) FROM PUBLIC;

-- What the owner of a replayed body answers (engine replay.rs,
-- replayed_answer; replay_guards_owner.sql): NULL outcome when the
-- delivery may take the body over (the owner is gone, took other
-- content, or failed without a payload to retry).
CREATE FUNCTION webhook_dedup._replayed_answer(source text, owner text, fingerprint bytea, raw bytea, mode text,
                                               OUT outcome text, OUT result jsonb)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  o record;
BEGIN
  SELECT * INTO o FROM webhook_dedup._s_replay_guards_owner(source, owner)
    AS x(state pg_catalog.text, result pg_catalog.jsonb, fingerprint pg_catalog.bytea, queued boolean);
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF NOT (o.fingerprint IS NULL OR o.fingerprint OPERATOR(pg_catalog.=) fingerprint
          OR (raw IS NOT NULL AND o.fingerprint OPERATOR(pg_catalog.=) raw))
     OR (o.state OPERATOR(pg_catalog.=) 'failed' AND NOT o.queued) THEN
    RETURN;
  END IF;
  outcome := CASE WHEN mode OPERATOR(pg_catalog.=) 'enqueue' OR o.state OPERATOR(pg_catalog.=) 'completed' THEN 'duplicate'
                  WHEN o.state OPERATOR(pg_catalog.=) ANY (ARRAY['processing', 'pending', 'failed']) THEN 'in_progress'
                  ELSE o.state END;
  IF o.state OPERATOR(pg_catalog.=) 'completed' THEN
    result := o.result;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._replayed_answer(text, text, bytea, bytea, text) FROM PUBLIC;

-- A signed token (Mailgun's) bound to the bytes it first arrived with
-- (engine receive.rs, bind_token; signature_tokens_bind.sql and
-- signature_tokens_read.sql): 'same' when new or first seen with these
-- bytes, 'other' when first seen with other bytes (a copied signature
-- block). Every lock wait ends by `lock_deadline` (or the session's own
-- lock_timeout, `session_ms`, where shorter: 55P03). 40001 after three
-- rounds that each found the row pruned.
CREATE FUNCTION webhook_dedup._bind_token(source text, token_sha256 bytea, body_sha256 bytea, signed_at timestamptz,
                                          window_until timestamptz, lock_deadline timestamptz, session_ms integer)
  RETURNS text
LANGUAGE plpgsql VOLATILE
SET lock_timeout = 0
AS $$
DECLARE
  first pg_catalog.bytea;
BEGIN
  PERFORM webhook_dedup._lock_set(lock_deadline, session_ms, NULL);
  FOR round IN 1 .. 3 LOOP
    IF EXISTS (SELECT FROM webhook_dedup._s_signature_tokens_bind(source, token_sha256, body_sha256, signed_at, window_until,
                                                                  pg_catalog.clock_timestamp()) AS b(inserted boolean)) THEN
      RETURN 'same';
    END IF;
    first := NULL;
    SELECT t.body_sha256 INTO first FROM webhook_dedup._s_signature_tokens_read(source, token_sha256) AS t(body_sha256 pg_catalog.bytea);
    IF first IS NOT NULL THEN
      RETURN CASE WHEN first OPERATOR(pg_catalog.=) body_sha256 THEN 'same' ELSE 'other' END;
    END IF;
  END LOOP;
  RAISE EXCEPTION 'could not change the key: it was changed by a concurrent transaction after this transaction''s snapshot'
    USING ERRCODE = 'serialization_failure';
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._bind_token(text, bytea, bytea, timestamptz, timestamptz, timestamptz, integer)
  FROM PUBLIC;

-- Set lock_timeout (for the current subtransaction) to the time left
-- until `deadline` in milliseconds, rounded up and at least 1, or the
-- session's own (`session_ms`, 0: none) where that is shorter (engine
-- bound.rs, effective_ms); unless the one in force (`set_ms`, NULL: none
-- yet) ends at most 10 ms later (bound.rs, refresh: setting it costs the
-- GUC machinery). Returns the lock_timeout in force.
CREATE FUNCTION webhook_dedup._lock_set(deadline timestamptz, session_ms integer, set_ms integer) RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  ms integer := LEAST(GREATEST(pg_catalog.ceil(EXTRACT(epoch FROM deadline OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp())
                                               OPERATOR(pg_catalog.*) 1000), 1), 2147483647)::integer;
BEGIN
  IF session_ms OPERATOR(pg_catalog.>) 0 AND session_ms OPERATOR(pg_catalog.<=) ms THEN
    ms := session_ms;
  END IF;
  IF set_ms IS NOT NULL AND set_ms OPERATOR(pg_catalog.-) ms OPERATOR(pg_catalog.<=) 10 THEN
    RETURN set_ms;
  END IF;
  PERFORM pg_catalog.set_config('lock_timeout', ms::pg_catalog.text OPERATOR(pg_catalog.||) 'ms', true);
  RETURN ms;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._lock_set(timestamptz, integer, integer) FROM PUBLIC;

-- Stage 3 of webhook_receive (engine receive.rs, stored), run by _receive
-- in a subtransaction whose lock waits end by `lock_deadline` (or the
-- session's own lock_timeout, `session_ms`, where it is shorter): the wait
-- for a holder (claim mode, `wait_us` > 0), a recent duplicate of a key
-- whose body this is answered from reads alone (the replay guard's
-- locking read would take a transaction id), the replay guard, then the
-- claim (waiting again for a copy that claimed the key after the look)
-- and the archive of a new or conflicting delivery, or the enqueue.
-- `outcome`: the claim's or enqueue's, or the replay guard's for the key
-- it names in `answer_key`.
CREATE FUNCTION webhook_dedup._receive_store(source text, idem_key text, mode text, fingerprint bytea, raw bytea,
                                             signed_sha256 bytea, replay_guard boolean, event_id text, event_type text,
                                             payload bytea, given_headers jsonb, lease_us bigint, wait_us bigint,
                                             max_attempts integer, default_lease_us bigint, retention_us bigint,
                                             keep_payload boolean, lock_deadline timestamptz, session_ms integer,
                                             OUT outcome text, OUT answer_key text, OUT claim_token uuid,
                                             OUT attempt integer, OUT result jsonb, OUT last_step text,
                                             OUT retry_at timestamptz)
LANGUAGE plpgsql VOLATILE
-- (what _lock_set sets ends with the call: the caller's own is restored)
SET lock_timeout = 0
AS $$
DECLARE
  set_ms integer := webhook_dedup._lock_set(lock_deadline, session_ms, NULL);
  deadline pg_catalog.timestamptz := webhook_dedup._plus_us(pg_catalog.clock_timestamp(), wait_us);
  may_exist boolean := true;
  c record;
  read_only boolean := false;
  enqueued pg_catalog.text;
  g record;
BEGIN
  answer_key := idem_key;
  IF mode OPERATOR(pg_catalog.=) 'claim' AND wait_us OPERATOR(pg_catalog.>) 0 THEN
    may_exist := webhook_dedup._wait_for_holder(source, idem_key, fingerprint, raw, deadline, max_attempts);
    set_ms := webhook_dedup._lock_set(lock_deadline, session_ms, set_ms);
  END IF;
  IF replay_guard AND mode OPERATOR(pg_catalog.=) 'claim' AND may_exist THEN
    c := webhook_dedup._claim(source, idem_key, fingerprint, raw, lease_us, event_type,
                              wait_us OPERATOR(pg_catalog.>) 0 AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) deadline,
                              signed_sha256, default_lease_us, max_attempts, retention_us);
    read_only := c.outcome IS NOT NULL;
  ELSIF replay_guard AND mode OPERATOR(pg_catalog.=) 'enqueue' THEN
    enqueued := webhook_dedup._enqueue(source, idem_key, payload, fingerprint, raw, event_type, NULL, true, event_id,
                                       given_headers, false, signed_sha256);
  END IF;
  IF replay_guard AND NOT read_only AND enqueued IS NULL THEN
    set_ms := webhook_dedup._lock_set(lock_deadline, session_ms, set_ms);
    g := webhook_dedup._replay_guard(source, idem_key, signed_sha256, fingerprint, raw, mode);
    IF g.owner IS NOT NULL THEN
      PERFORM webhook_dedup._count(source, event_type, 'replayed', false);
      outcome := g.outcome;
      answer_key := g.owner;
      result := g.result;
      RETURN;
    END IF;
  END IF;
  IF mode OPERATOR(pg_catalog.=) 'enqueue' THEN
    set_ms := webhook_dedup._lock_set(lock_deadline, session_ms, set_ms);
    outcome := COALESCE(enqueued, webhook_dedup._enqueue(source, idem_key, payload, fingerprint, raw, event_type, NULL,
                                                         true, event_id, given_headers, false));
    RETURN;
  END IF;
  WHILE NOT read_only LOOP
    set_ms := webhook_dedup._lock_set(lock_deadline, session_ms, set_ms);
    c := webhook_dedup._claim(source, idem_key, fingerprint, raw, lease_us, event_type,
                              wait_us OPERATOR(pg_catalog.>) 0 AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) deadline,
                              NULL, default_lease_us, max_attempts, retention_us);
    EXIT WHEN c.outcome IS NOT NULL;
    -- another copy claimed the key after the look: wait for it again
    PERFORM webhook_dedup._wait_for_holder(source, idem_key, fingerprint, raw, deadline, max_attempts);
  END LOOP;
  IF c.inserted OR c.outcome OPERATOR(pg_catalog.=) 'conflict' THEN
    set_ms := webhook_dedup._lock_set(lock_deadline, session_ms, set_ms);
    PERFORM webhook_dedup._archive_keep(source, idem_key, c.at, event_id, event_type, NOT c.inserted, payload,
                                        given_headers, keep_payload);
  END IF;
  outcome := c.outcome;
  claim_token := c.claim_token;
  attempt := c.attempt;
  result := c.result;
  last_step := c.last_step;
  retry_at := c.retry_at;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._receive_store(text, text, text, bytea, bytea, bytea, boolean, text, text, bytea, jsonb,
                                                    bigint, bigint, integer, bigint, bigint, boolean, timestamptz, integer)
  FROM PUBLIC;

-- The row of webhook_dedup.receive_result (src/api/receive.rs, row): the
-- answer's columns with the HTTP answer of its kind (a refusal's, else
-- its outcome's; _reply), Retry-After from `retry_at`.
CREATE FUNCTION webhook_dedup._receive_row(verified boolean, reject_reason text, idem_key text, outcome text,
                                           claim_token uuid, attempt integer, result jsonb, event_type text,
                                           event_time timestamptz, last_step text, handshake jsonb,
                                           secret_index integer, retry_at timestamptz, mode text, scheme text)
  RETURNS webhook_dedup.receive_result
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  kind pg_catalog.text := CASE WHEN reject_reason IS NULL THEN outcome
                    WHEN reject_reason OPERATOR(pg_catalog.=) ANY (ARRAY['missing_event_id', 'repeated_header',
                                                                         'refused_handshake']) THEN reject_reason
                    ELSE 'rejected' END;
  us numeric := EXTRACT(epoch FROM retry_at OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000000;
  http record;
BEGIN
  http := webhook_dedup._reply(kind, mode, scheme,
                               CASE WHEN us IS NOT NULL
                                    THEN pg_catalog.div(GREATEST(us, 0) OPERATOR(pg_catalog.+) 999999, 1000000) END,
                               result, handshake);
  RETURN ROW(verified, reject_reason, idem_key, outcome, claim_token, attempt, result, event_type, event_time, last_step,
             http.response, secret_index, http.http_status, http.http_headers)::webhook_dedup.receive_result;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._receive_row(boolean, text, text, text, uuid, integer, jsonb, text, timestamptz, text,
                                                  jsonb, integer, timestamptz, text, text) FROM PUBLIC;

-- A place a source's setting names (intake.rs, Place::parse, checked
-- when the row was written): 'header:' and the name in lower case, or the
-- JSON pointer as is.
CREATE FUNCTION webhook_dedup._place(text text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE WHEN pg_catalog.starts_with(text, 'header:')
            THEN 'header:' OPERATOR(pg_catalog.||) pg_catalog.translate(pg_catalog.substr(text, 8),
                                                                       'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
                                                                       'abcdefghijklmnopqrstuvwxyz')
            ELSE text END;
REVOKE ALL ON FUNCTION webhook_dedup._place(text) FROM PUBLIC;

-- The live lease of a key, as the latest snapshot shows it, read without
-- waiting for a lock (a rewrite of the keys table holds one: a wait of
-- 1 ms, then NULL). What an in_progress answer's Retry-After is taken from
-- when the call's deadline ran out (engine receive.rs, store).
CREATE FUNCTION webhook_dedup._held_until(source text, idem_key text) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
SET lock_timeout = '1ms'
AS $$
BEGIN
  RETURN (SELECT k.lease_expires_at FROM webhook_dedup.keys AS k
           WHERE k.idem_key OPERATOR(pg_catalog.=) _held_until.idem_key AND k.source OPERATOR(pg_catalog.=) _held_until.source
             AND k.lease_expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp());
EXCEPTION WHEN lock_not_available THEN
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._held_until(text, text) FROM PUBLIC;

-- A scheme's rules with a source's intake settings in their place
-- (intake.rs, SourceIntake::apply, over _intake_rules): where the event
-- id, type and time are read, the time's format, the fingerprint rule
-- ('body', 'pointers', 'signed_text') and its pointers, the replay guard
-- (the source's choice, else the profile's, else on when the id is read
-- from a header the scheme does not sign), whether deliveries without an
-- id are keyed on the body, the default wait (microseconds).
CREATE FUNCTION webhook_dedup._applied_rules(scheme text, event_id_from text, event_type_from text, event_time_from text,
                                             event_time_format text, fingerprint_pointers text[], replay_guard boolean,
                                             OUT id_places text[], OUT type_places text[], OUT time_places text[],
                                             OUT time_format text, OUT fingerprint_rule text, OUT pointers text[],
                                             OUT guard_on boolean, OUT body_key boolean, OUT default_wait_us bigint)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  rules record;
BEGIN
  SELECT * INTO rules FROM webhook_dedup._intake_rules() AS r WHERE r.scheme OPERATOR(pg_catalog.=) _applied_rules.scheme;
  id_places := CASE WHEN event_id_from IS NULL THEN rules.event_id ELSE ARRAY[webhook_dedup._place(event_id_from)] END;
  type_places := CASE WHEN event_type_from IS NULL THEN rules.event_type ELSE ARRAY[webhook_dedup._place(event_type_from)] END;
  time_places := CASE WHEN event_time_from IS NULL THEN rules.event_time ELSE ARRAY[webhook_dedup._place(event_time_from)] END;
  time_format := CASE WHEN event_time_from IS NULL THEN rules.time_format ELSE event_time_format END;
  fingerprint_rule := CASE WHEN fingerprint_pointers IS NULL THEN rules.fingerprint
                           WHEN pg_catalog.cardinality(fingerprint_pointers) OPERATOR(pg_catalog.=) 0 THEN 'body'
                           ELSE 'pointers' END;
  pointers := CASE WHEN pg_catalog.cardinality(fingerprint_pointers) OPERATOR(pg_catalog.>) 0 THEN fingerprint_pointers
                   ELSE rules.pointers END;
  guard_on := COALESCE(replay_guard,
                       rules.replay_guard
                       OR (event_id_from IS NOT NULL AND pg_catalog.starts_with(id_places[1], 'header:')
                           AND pg_catalog.substr(id_places[1], 8) OPERATOR(pg_catalog.<>) ALL (rules.signed_id_headers)));
  body_key := rules.body_key;
  default_wait_us := rules.default_wait_us;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._applied_rules(text, text, text, text, text, text[], boolean) FROM PUBLIC;

-- Whether a source that accepts `accepted` (accept_event_types; NULL:
-- every type) wants an event of `event_type` (intake.rs, accepts): an
-- entry equal to it, or ending in '*' and a prefix of it; an event
-- without a type only when every type is.
CREATE FUNCTION webhook_dedup._accepts(accepted text[], event_type text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
  RETURN accepted IS NULL
      OR (event_type IS NOT NULL
          AND EXISTS (SELECT FROM pg_catalog.unnest(accepted) AS e
                       WHERE e OPERATOR(pg_catalog.=) event_type
                          OR (pg_catalog.right(e, 1) OPERATOR(pg_catalog.=) '*'
                              AND pg_catalog.starts_with(event_type, pg_catalog.left(e, -1)))));
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._accepts(text[], text) FROM PUBLIC;

-- A delivery's fingerprint under `rule` (profile.rs, Fingerprint and
-- fingerprint_signed; the tags of _fingerprint_tags): the signed tag and
-- the SHA-256 of the scheme's canonical signed text (signed_text, when
-- there is one); the canonical tag and the SHA-256 of
-- the RFC 8785 text of the values at `pointers` (pointers, when the body
-- is JSON serde_json reads and no covered integer loses digits); else the
-- SHA-256 of the raw bytes. `raw`: the raw bytes' SHA-256 when the
-- fingerprint is not it (a key stored under another rule still knows its
-- own bytes), else NULL.
CREATE FUNCTION webhook_dedup._fingerprint(rule text, pointers text[], payload bytea, signed_text bytea,
                                           OUT fingerprint bytea, OUT raw bytea)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  canonical pg_catalog.text;
BEGIN
  IF rule OPERATOR(pg_catalog.=) 'signed_text' AND signed_text IS NOT NULL THEN
    fingerprint := (webhook_dedup._fingerprint_tags()).signed OPERATOR(pg_catalog.||) pg_catalog.sha256(signed_text);
  ELSIF rule OPERATOR(pg_catalog.=) 'pointers' THEN
    canonical := webhook_dedup._canonical_values(payload, pointers);
    IF canonical IS NOT NULL THEN
      fingerprint := (webhook_dedup._fingerprint_tags()).canonical
                     OPERATOR(pg_catalog.||) pg_catalog.sha256(pg_catalog.convert_to(canonical, 'UTF8'));
    END IF;
  END IF;
  raw := pg_catalog.sha256(payload);
  IF fingerprint IS NULL THEN
    fingerprint := raw;
    raw := NULL;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._fingerprint(text, text[], bytea, bytea) FROM PUBLIC;

-- The whole intake of one delivery (engine receive.rs, receive), its
-- arguments checked by webhook_receive: `headers` folded (_headers),
-- `given_headers` as given (for the archive), `secrets` NULL for the
-- source's stored keys, `lease_us` NULL for the source's lease,
-- `wait_us` NULL for the scheme's default wait.
CREATE FUNCTION webhook_dedup._receive(scheme text, payload bytea, headers jsonb, given_headers jsonb, secrets text[],
                                       source text, environment text, account text, operation text, mode text,
                                       lease_us bigint, body_key_fallback boolean, tolerance interval, at timestamptz,
                                       url text, signature_header text, signature_prefix text, algorithm text,
                                       encoding text, method text, wait_us bigint)
  RETURNS webhook_dedup.receive_result
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  settings record := webhook_dedup._source_settings(source);
  claim_settings record := webhook_dedup._claim_settings_of(settings.lease, settings.max_attempts, settings.retention);
  rules record;
  stored boolean := secrets IS NULL;
  newest_scheme pg_catalog.text;
  ids integer[];
  n integer;
  budget_us bigint;
  lock_deadline pg_catalog.timestamptz;
  waits_us bigint;
  session_ms integer;
  signed_url pg_catalog.text := CASE WHEN scheme OPERATOR(pg_catalog.=) 'twitter' THEN NULL ELSE url END;
  key pg_catalog.bytea;
  hs record;
  v record;
  secret_index integer;
  doc pg_catalog.json;
  token pg_catalog.text;
  tolerance_us bigint;
  signed_at pg_catalog.timestamptz;
  binding pg_catalog.text;
  id record;
  ty record;
  tm record;
  event_time pg_catalog.timestamptz;
  id_text pg_catalog.text;
  body_hash boolean := false;
  idem_key pg_catalog.text;
  signed_text pg_catalog.bytea;
  fingerprint pg_catalog.bytea;
  raw pg_catalog.bytea;
  s record;
  held_until pg_catalog.timestamptz;
BEGIN
  rules := webhook_dedup._applied_rules(scheme, settings.event_id_from, settings.event_type_from, settings.event_time_from,
                                        settings.event_time_format, settings.fingerprint_pointers, settings.replay_guard);
  IF stored THEN
    SELECT k.secrets, k.ids, k.newest_scheme INTO secrets, ids, newest_scheme
      FROM webhook_dedup._stored_keys(source, scheme, at) AS k;
  ELSE
    PERFORM webhook_dedup._check_secrets(secrets);
    SELECT pg_catalog.array_agg(i) INTO ids FROM pg_catalog.generate_series(1, pg_catalog.cardinality(secrets)) AS i;
  END IF;
  n := pg_catalog.cardinality(secrets);
  budget_us := COALESCE(wait_us, rules.default_wait_us);
  lock_deadline := webhook_dedup._plus_us(pg_catalog.clock_timestamp(), budget_us);
  -- no wait for a holder where it cannot help (src/wait.rs): a transaction
  -- that wrote before this call, or one that reads a single snapshot
  waits_us := CASE WHEN pg_catalog.current_setting('transaction_isolation')
                          OPERATOR(pg_catalog.<>) ALL (ARRAY['read committed', 'read uncommitted'])
                        OR pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN 0 ELSE budget_us END;
  tolerance := COALESCE(tolerance, settings.tolerance);
  IF tolerance IS NOT NULL THEN
    tolerance_us := webhook_dedup._duration_us(tolerance, 'tolerance');
  END IF;

  -- Stage 1: X's unsigned CRC, answered with the current secret (the
  -- first given, or the newest key) before verification; stored keys
  -- answer only for a source meant for X with a key add_secret accepted
  -- for X (the answer is a MAC of caller-chosen text)
  IF scheme OPERATOR(pg_catalog.=) 'twitter' THEN
    key := (webhook_dedup._scheme_keys(scheme, ARRAY[CASE WHEN stored THEN secrets[n] ELSE secrets[1] END]))[1];
    SELECT * INTO hs FROM webhook_dedup._twitter_crc(payload, url, key);
    IF FOUND THEN
      IF stored
         AND (pg_catalog.translate(COALESCE(settings.provider, source), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
                                   'abcdefghijklmnopqrstuvwxyz') OPERATOR(pg_catalog.<>) 'twitter'
              OR (newest_scheme OPERATOR(pg_catalog.=) 'twitter') IS NOT TRUE) THEN
        hs.refused := true;
      END IF;
      RETURN webhook_dedup._receive_row(false, CASE WHEN hs.refused THEN 'refused_handshake' END, NULL,
                                        CASE WHEN NOT hs.refused THEN 'handshake' END, NULL, NULL, NULL, NULL, NULL,
                                        NULL, hs.response, NULL, NULL, mode, scheme);
    END IF;
  END IF;
  v := webhook_dedup._verify(scheme, payload, headers, secrets, tolerance, at, signed_url, method,
                            signature_header, signature_prefix, algorithm, encoding, true);
  IF NOT v.valid THEN
    PERFORM webhook_dedup._count(source, NULL, 'rejected_' OPERATOR(pg_catalog.||) v.reason, false);
    RETURN webhook_dedup._receive_row(false, v.reason, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                      mode, scheme);
  END IF;
  secret_index := ids[v.secret_index];

  -- A signature that covers nothing of the body (Mailgun) is bound to the
  -- bytes its token first arrived with; a token is remembered while its
  -- signed time is within the source's retention
  IF scheme OPERATOR(pg_catalog.=) 'mailgun' THEN
    doc := webhook_dedup._body_json(payload);
    token := webhook_dedup._json_string(doc, '/signature/token');
    signed_at := COALESCE(v.signed_at, at);
    IF signed_at OPERATOR(pg_catalog.<) webhook_dedup._plus_us(at, OPERATOR(pg_catalog.-) claim_settings.retention_us) THEN
      PERFORM webhook_dedup._count(source, NULL, 'rejected_timestamp_too_old', false);
      RETURN webhook_dedup._receive_row(false, 'timestamp_too_old', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                        NULL, NULL, mode, scheme);
    END IF;
    session_ms := (EXTRACT(epoch FROM pg_catalog.current_setting('lock_timeout')::interval) OPERATOR(pg_catalog.*) 1000)::integer;
    BEGIN
      binding := webhook_dedup._bind_token(source, pg_catalog.sha256(pg_catalog.convert_to(token, 'UTF8')),
                                           pg_catalog.sha256(payload), signed_at,
                                           webhook_dedup._plus_us(signed_at, COALESCE(tolerance_us,
                                             (SELECT x.default_tolerance_s FROM webhook_dedup._schemes() AS x
                                               WHERE x.name OPERATOR(pg_catalog.=) 'mailgun') OPERATOR(pg_catalog.*) 1000000, 0)),
                                           lock_deadline, session_ms);
    EXCEPTION WHEN lock_not_available THEN
      IF session_ms OPERATOR(pg_catalog.>) 0
         AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) (lock_deadline OPERATOR(pg_catalog.-) INTERVAL '5 milliseconds') THEN
        RAISE; -- the session's own, shorter lock_timeout
      END IF;
      PERFORM webhook_dedup._count(source, NULL, 'duplicates_in_progress', true);
      RETURN webhook_dedup._receive_row(true, NULL, NULL, 'in_progress', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                        secret_index,
                                        webhook_dedup._plus_us(pg_catalog.clock_timestamp(),
                                                               COALESCE(lease_us, claim_settings.lease_us)),
                                        mode, scheme);
    END;
    IF binding OPERATOR(pg_catalog.=) 'other' THEN
      PERFORM webhook_dedup._count(source, NULL, 'rejected_token_reused', false);
      RETURN webhook_dedup._receive_row(false, 'token_reused', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                        secret_index, NULL, mode, scheme);
    END IF;
  END IF;

  -- A signed handshake, answered with the key that verified it
  IF scheme OPERATOR(pg_catalog.=) ANY (ARRAY['slack', 'zoom']) THEN
    doc := webhook_dedup._body_json(payload);
    key := (webhook_dedup._scheme_keys(scheme, ARRAY[secrets[v.secret_index]]))[1];
    SELECT * INTO hs FROM webhook_dedup._signed_handshake(scheme, doc, key);
    IF FOUND THEN
      RETURN webhook_dedup._receive_row(true, CASE WHEN hs.refused THEN 'refused_handshake' END, NULL,
                                        CASE WHEN NOT hs.refused THEN 'handshake' END, NULL, NULL, NULL, NULL, NULL,
                                        NULL, hs.response, secret_index, NULL, mode, scheme);
    END IF;
  END IF;

  -- Stage 2: the event id, type and time by the rules (the source's
  -- settings in the scheme's place, read above)
  IF doc IS NULL AND (NOT pg_catalog.starts_with(rules.id_places[1], 'header:')
                      OR NOT pg_catalog.starts_with(rules.type_places[1], 'header:')
                      OR NOT pg_catalog.starts_with(rules.time_places[1], 'header:')) THEN
    doc := webhook_dedup._body_json(payload);
  END IF;
  id := webhook_dedup._place_value(rules.id_places, headers, doc);
  ty := webhook_dedup._place_value(rules.type_places, headers, doc);
  tm := webhook_dedup._place_value(rules.time_places, headers, doc);
  IF id.repeated OR ty.repeated OR tm.repeated THEN
    -- which of the values is the provider's cannot be told
    PERFORM webhook_dedup._count(source, NULL, 'missing_event_ids', false);
    RETURN webhook_dedup._receive_row(true, 'repeated_header', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                      secret_index, NULL, mode, scheme);
  END IF;
  IF tm.value IS NOT NULL THEN
    event_time := webhook_dedup._event_time(tm.value, rules.time_format);
  END IF;
  IF settings.accept_event_types IS NOT NULL AND NOT webhook_dedup._accepts(settings.accept_event_types, ty.value) THEN
    PERFORM webhook_dedup._count(source, ty.value, 'ignored', false);
    RETURN webhook_dedup._receive_row(true, NULL, NULL, 'ignored', NULL, NULL, NULL, ty.value, event_time, NULL, NULL,
                                      secret_index, NULL, mode, scheme);
  END IF;
  id_text := id.value;
  IF id_text IS NULL THEN
    IF NOT (body_key_fallback OR rules.body_key) THEN
      PERFORM webhook_dedup._count(source, ty.value, 'missing_event_ids', false);
      RETURN webhook_dedup._receive_row(true, 'missing_event_id', NULL, NULL, NULL, NULL, NULL, ty.value, event_time,
                                        NULL, NULL, secret_index, NULL, mode, scheme);
    END IF;
    id_text := '%b' OPERATOR(pg_catalog.||) pg_catalog.encode(pg_catalog.sha256(payload), 'hex');
    body_hash := true;
  END IF;
  idem_key := webhook_dedup._key_derive(source, id_text,
                                        CASE WHEN body_hash THEN id_text ELSE webhook_dedup._key_escape(id_text) END,
                                        environment, account, operation);
  -- the fingerprint of the rule; of the raw bytes too when the rule covers
  -- less; and what the replay guard keys on (what the signature covers)
  IF scheme OPERATOR(pg_catalog.=) 'twilio' AND signed_url IS NOT NULL THEN
    signed_text := webhook_dedup._twilio_signed_text(signed_url, payload);
  END IF;
  SELECT f.fingerprint, f.raw INTO fingerprint, raw
    FROM webhook_dedup._fingerprint(rules.fingerprint_rule, rules.pointers, payload, signed_text) AS f;

  -- Stage 3, every lock wait bounded by the call's deadline: when the time
  -- runs out, what it wrote is rolled back and the delivery answered
  -- in_progress (engine receive.rs, store)
  session_ms := (EXTRACT(epoch FROM pg_catalog.current_setting('lock_timeout')::interval) OPERATOR(pg_catalog.*) 1000)::integer;
  BEGIN
    s := webhook_dedup._receive_store(source, idem_key, mode, fingerprint, raw,
                                     pg_catalog.sha256(COALESCE(signed_text, payload)), rules.guard_on,
                                     CASE WHEN NOT body_hash THEN id_text END, ty.value, payload,
                                     given_headers, lease_us, waits_us, claim_settings.max_attempts,
                                     claim_settings.lease_us, claim_settings.retention_us,
                                     settings.keep_payload, lock_deadline, session_ms);
  EXCEPTION WHEN lock_not_available THEN
    IF session_ms OPERATOR(pg_catalog.>) 0
       AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) (lock_deadline OPERATOR(pg_catalog.-) INTERVAL '5 milliseconds') THEN
      RAISE; -- the session's own, shorter lock_timeout
    END IF;
    -- the key is busy in a transaction that has not ended: a retry can
    -- succeed once the holder's lease runs out, else within a lease
    PERFORM webhook_dedup._count(source, ty.value, 'duplicates_in_progress', true);
    held_until := webhook_dedup._held_until(source, idem_key);
    RETURN webhook_dedup._receive_row(true, NULL, idem_key, 'in_progress', NULL, NULL, NULL, ty.value, event_time, NULL,
                                      NULL, secret_index,
                                      COALESCE(held_until, webhook_dedup._plus_us(pg_catalog.clock_timestamp(),
                                                                                  COALESCE(lease_us, claim_settings.lease_us))),
                                      mode, scheme);
  END;
  RETURN webhook_dedup._receive_row(true, NULL, s.answer_key, s.outcome, s.claim_token, s.attempt, s.result, ty.value,
                                    event_time, s.last_step, NULL, secret_index, s.retry_at, mode, scheme);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._receive(text, bytea, jsonb, jsonb, text[], text, text, text, text, text, bigint,
                                              boolean, interval, timestamptz, text, text, text, text, text, text, bigint)
  FROM PUBLIC;
