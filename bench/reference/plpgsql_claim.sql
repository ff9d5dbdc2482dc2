-- A hand-written claim with the semantics of webhook_claim, as a careful
-- user writes it in PL/pgSQL: a lease with reclaim after expiry, a fencing
-- token (a fresh UUID per lease, an attempt number), a payload-hash
-- conflict, the stored result for duplicates, per-key delivery counts, and
-- an outcome per delivery. The unique index arbitrates the first claim; a
-- known key is locked with SELECT ... FOR UPDATE and then updated. What
-- webhook_claim is compared against ("same semantics").
CREATE SCHEMA IF NOT EXISTS bench;

CREATE TABLE bench.claims (
    source           text        NOT NULL,
    idem_key         text        NOT NULL,
    state            text        NOT NULL,
    attempt          integer     NOT NULL,
    claim_token      uuid,
    lease_expires_at timestamptz,
    fingerprint      bytea,
    result           jsonb,
    deliveries       integer     NOT NULL DEFAULT 1,
    first_seen_at    timestamptz NOT NULL,
    last_seen_at     timestamptz NOT NULL,
    completed_at     timestamptz,
    PRIMARY KEY (source, idem_key)
);

CREATE FUNCTION bench.claim(p_source text, p_key text, p_payload bytea, p_lease interval,
                            OUT outcome text, OUT claim_token uuid, OUT attempt integer, OUT result jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    fp  bytea := CASE WHEN p_payload IS NOT NULL THEN sha256(p_payload) END;
    now timestamptz := clock_timestamp();
    r   bench.claims;
BEGIN
    INSERT INTO bench.claims (source, idem_key, state, attempt, claim_token, lease_expires_at, fingerprint,
                              first_seen_at, last_seen_at)
    VALUES (p_source, p_key, 'processing', 1, gen_random_uuid(), now + p_lease, fp, now, now)
    ON CONFLICT (source, idem_key) DO NOTHING
    RETURNING bench.claims.claim_token INTO claim_token;
    IF FOUND THEN
        outcome := 'claimed';
        attempt := 1;
        RETURN;
    END IF;
    SELECT * INTO r FROM bench.claims c WHERE c.source = p_source AND c.idem_key = p_key FOR UPDATE;
    attempt := r.attempt;
    IF fp IS NOT NULL AND r.fingerprint IS NOT NULL AND r.fingerprint <> fp THEN
        outcome := 'conflict';
    ELSIF r.state = 'completed' THEN
        outcome := 'duplicate';
        result := r.result;
    ELSIF r.state = 'processing' AND r.lease_expires_at > now THEN
        outcome := 'in_progress';
    ELSE
        -- the lease expired: reclaim with a new token and the next attempt
        UPDATE bench.claims c
           SET attempt = c.attempt + 1, claim_token = gen_random_uuid(), lease_expires_at = now + p_lease,
               deliveries = c.deliveries + 1, last_seen_at = now
         WHERE c.source = p_source AND c.idem_key = p_key
        RETURNING c.claim_token, c.attempt INTO claim_token, attempt;
        outcome := 'reclaimed';
        RETURN;
    END IF;
    UPDATE bench.claims c SET deliveries = c.deliveries + 1, last_seen_at = now
     WHERE c.source = p_source AND c.idem_key = p_key;
END
$$;

-- Completion fenced by the token: false when the lease was reclaimed.
CREATE FUNCTION bench.complete(p_source text, p_key text, p_token uuid, p_result jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE bench.claims c
       SET state = 'completed', result = p_result, completed_at = clock_timestamp(),
           last_seen_at = clock_timestamp(), lease_expires_at = NULL
     WHERE c.source = p_source AND c.idem_key = p_key AND c.state = 'processing' AND c.claim_token = p_token;
    RETURN FOUND;
END
$$;
