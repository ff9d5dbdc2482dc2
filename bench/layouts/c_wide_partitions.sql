-- Layout C (prototype): the keys stay time-partitioned, but in few, wide
-- partitions derived from the retention (:partitions live ones), without
-- CHECK constraints, and a claim inserts straight into the current leaf
-- (no tuple routing). There is still no unique index across partitions, so
-- a per-key advisory lock (held to commit) arbitrates, and a look-up probes
-- every live partition. Retention stays a DROP TABLE of the oldest.
CREATE SCHEMA layout_c;

CREATE TABLE layout_c.keys (
    idem_key         text        NOT NULL,
    source           text        NOT NULL,
    partition_at     timestamptz NOT NULL,
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
    leased_at        timestamptz
) PARTITION BY RANGE (partition_at);
CREATE INDEX ON layout_c.keys (due_at) WHERE state <> 'completed';

DO $$
DECLARE
    width interval := interval '40 days' / :partitions;
    lo timestamptz;
    name text;
BEGIN
    FOR i IN 0 .. :partitions - 1 LOOP
        lo := date_trunc('day', now()) - interval '30 days' + width * i;
        name := CASE WHEN now() >= lo AND now() < lo + width THEN 'keys_current' ELSE 'keys_' || i END;
        EXECUTE format('CREATE TABLE layout_c.%I PARTITION OF layout_c.keys FOR VALUES FROM (%L) TO (%L)
                          WITH (fillfactor = 90)', name, lo, lo + width);
        EXECUTE format('CREATE UNIQUE INDEX ON layout_c.%I (idem_key, source)', name);
    END LOOP;
END
$$;

CREATE FUNCTION layout_c.claim(p_source text, p_key text, p_fp bytea, p_lease interval,
                               OUT outcome text, OUT token uuid, OUT attempt integer)
LANGUAGE plpgsql AS $$
DECLARE
    now timestamptz := clock_timestamp();
    tok uuid := gen_random_uuid();
    r   record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_source || chr(1) || p_key, 0));
    SELECT k.partition_at, k.state, k.attempt, k.lease_expires_at, k.fingerprint INTO r
      FROM layout_c.keys k WHERE k.idem_key = p_key AND k.source = p_source;
    IF NOT FOUND THEN
        -- straight into the leaf holding now (keys_current)
        INSERT INTO layout_c.keys_current (idem_key, source, partition_at, state, attempt, claim_token,
                                           lease_expires_at, due_at, fingerprint, first_seen_at, last_seen_at,
                                           leased_at)
        VALUES (p_key, p_source, now, 'processing', 1, tok, now + p_lease, now + p_lease, p_fp, now, now, now);
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
        UPDATE layout_c.keys k SET state = 'processing', attempt = k.attempt + 1, claim_token = tok,
               lease_expires_at = now + p_lease, due_at = now + p_lease, leased_at = now,
               deliveries = k.deliveries + 1, last_seen_at = now
         WHERE k.partition_at = r.partition_at AND k.idem_key = p_key AND k.source = p_source;
        outcome := 'reclaimed'; token := tok; attempt := r.attempt + 1;
        RETURN;
    END IF;
    UPDATE layout_c.keys k SET deliveries = k.deliveries + 1, last_seen_at = now
     WHERE k.partition_at = r.partition_at AND k.idem_key = p_key AND k.source = p_source;
END
$$;
