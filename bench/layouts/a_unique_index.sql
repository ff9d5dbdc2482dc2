-- Layout A (prototype): one table of keys, not partitioned, whose unique
-- index arbitrates the first claim (no per-key lock). Time-partitioned side
-- tables would hold the bulky columns (payloads); completed keys are deleted
-- by maintenance past retention (index keys_expiry). Queue, sweep and views
-- read keys_open, which holds only keys not completed. The claim is one
-- INSERT ... ON CONFLICT DO UPDATE that inserts a new key or counts the
-- delivery on a known one and returns what the decision needs; only a
-- reclaim writes again. The decision is PL/pgSQL here, Rust in the product.
CREATE SCHEMA layout_a;

CREATE TABLE layout_a.keys (
    idem_key         text        NOT NULL,
    source           text        NOT NULL,
    state            text        NOT NULL,
    attempt          integer     NOT NULL DEFAULT 0,
    claim_token      uuid,
    lease_expires_at timestamptz,
    next_attempt_at  timestamptz,
    due_at           timestamptz,
    fingerprint      bytea,
    event_type       text,
    result           jsonb,
    last_step        text,
    last_error       text,
    deliveries       integer     NOT NULL DEFAULT 1,
    conflicts        integer     NOT NULL DEFAULT 0,
    first_seen_at    timestamptz NOT NULL,
    last_seen_at     timestamptz NOT NULL,
    completed_at     timestamptz,
    leased_at        timestamptz,
    expires_at       timestamptz,
    PRIMARY KEY (idem_key, source)
) WITH (fillfactor = 90);
CREATE INDEX ON layout_a.keys (due_at) WHERE state <> 'completed';
CREATE INDEX ON layout_a.keys (expires_at) WHERE state = 'completed';

CREATE FUNCTION layout_a.claim(p_source text, p_key text, p_fp bytea, p_lease interval,
                               OUT outcome text, OUT token uuid, OUT attempt integer)
LANGUAGE plpgsql AS $$
DECLARE
    now timestamptz := clock_timestamp();
    tok uuid := gen_random_uuid();
    r   record;
BEGIN
    INSERT INTO layout_a.keys AS k (idem_key, source, state, attempt, claim_token, lease_expires_at, due_at,
                                    fingerprint, first_seen_at, last_seen_at, leased_at)
    VALUES (p_key, p_source, 'processing', 1, tok, now + p_lease, now + p_lease, p_fp, now, now, now)
    ON CONFLICT (idem_key, source) DO UPDATE
       SET deliveries = k.deliveries + 1, last_seen_at = EXCLUDED.last_seen_at,
           fingerprint = COALESCE(k.fingerprint, EXCLUDED.fingerprint)
    RETURNING k.claim_token = tok AS inserted, k.state, k.attempt, k.lease_expires_at, k.next_attempt_at,
              k.fingerprint INTO r;
    IF r.inserted THEN
        outcome := 'claimed'; token := tok; attempt := 1; RETURN;
    END IF;
    attempt := r.attempt;
    IF p_fp IS NOT NULL AND r.fingerprint <> p_fp THEN
        outcome := 'conflict';
    ELSIF r.state = 'completed' THEN
        outcome := 'duplicate';
    ELSIF r.state = 'processing' AND r.lease_expires_at > now THEN
        outcome := 'in_progress';
    ELSE
        UPDATE layout_a.keys k SET state = 'processing', attempt = k.attempt + 1, claim_token = tok,
               lease_expires_at = now + p_lease, due_at = now + p_lease, leased_at = now
         WHERE k.idem_key = p_key AND k.source = p_source;
        outcome := 'reclaimed'; token := tok; attempt := r.attempt + 1;
    END IF;
END
$$;

CREATE FUNCTION layout_a.complete(p_source text, p_key text, p_token uuid, p_result jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE layout_a.keys k
       SET state = 'completed', result = p_result, completed_at = clock_timestamp(),
           last_seen_at = clock_timestamp(), lease_expires_at = NULL, due_at = NULL,
           expires_at = clock_timestamp() + interval '30 days'
     WHERE k.idem_key = p_key AND k.source = p_source AND k.state = 'processing' AND k.claim_token = p_token;
    RETURN FOUND;
END
$$;
