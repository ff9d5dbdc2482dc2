-- A database with many sources, one of them with a short retention
-- (docs/operations.md's own example, 'internal-jobs' at 1 day), and work
-- for every step of a maintenance pass: history rows of many sources older
-- than the shortest retention but within their own (the candidates each
-- statement looks up its source's retention for), keys past retention and
-- leases expired, delivered and lapsed outbox intents, archived deliveries
-- past a short payload retention, a finished and a running bulk redrive.
-- Read by bench/bench.py (scenario sources) and
-- tests/cluster/test_maintenance_plans.py. The number of sources is the
-- setting fill.sources, the history rows per table fill.rows:
--   SET fill.sources = '10000'; SET fill.rows = '2000'; \i many_sources.sql
INSERT INTO webhook_dedup.sources (source)
  SELECT pg_catalog.format('fill-%s', g) FROM pg_catalog.generate_series(1, current_setting('fill.sources')::int) AS g;
INSERT INTO webhook_dedup.sources (source, retention) VALUES ('internal-jobs', '1 day');
INSERT INTO webhook_dedup.sources (source, keep_payload, payload_retention) VALUES
  ('archived', true, '1 hour'), ('archived-long', true, '2 days');

CREATE TEMP TABLE fill_rows AS
  SELECT g AS n,
         pg_catalog.format('fill-%s', 1 + (g * 7919) % current_setting('fill.sources')::int) AS source,
         now() - interval '2 days' - g * interval '1 second' AS at
    FROM pg_catalog.generate_series(1, current_setting('fill.rows')::int) AS g;

INSERT INTO webhook_dedup.watermarks (source, entity_id, source_updated_at, updated_at)
  SELECT source, 'e-' || n, at, at FROM fill_rows;
INSERT INTO webhook_dedup.replay_guards (source, body_sha256, idem_key, seen_at)
  SELECT source, sha256(n::text::bytea), 'gone-' || n, at FROM fill_rows;
INSERT INTO webhook_dedup.signature_tokens (source, token_sha256, body_sha256, signed_at, window_until, seen_at)
  SELECT source, sha256(('t' || n)::bytea), sha256(n::text::bytea), at, at + interval '5 minutes', at FROM fill_rows;
INSERT INTO webhook_dedup.conflict_log (source, idem_key, seen_at, stored_fingerprint, fingerprint, via)
  SELECT source, 'c-' || n, at, '\x01', '\x02', 'claim' FROM fill_rows;
INSERT INTO webhook_dedup.claim_counts (bucket, source, deliveries)
  SELECT pg_catalog.date_trunc('hour', at), source, 1 FROM fill_rows ON CONFLICT DO NOTHING;

-- keys: completed ones of each kind of source, then aged past their
-- retention (expiry), and leases that expired (the sweep)
SELECT webhook_dedup.webhook_complete(source, k,
         (SELECT claim_token FROM webhook_dedup.webhook_claim(source, k)), '{"ok": true}')
  FROM (SELECT source, 'done-' || n AS k FROM fill_rows WHERE n % 10 = 0
        UNION ALL SELECT 'internal-jobs', 'job-' || g FROM pg_catalog.generate_series(1, 200) AS g) AS x;
UPDATE webhook_dedup.keys
   SET first_seen_at = now() - interval '40 days', last_seen_at = now() - interval '40 days',
       completed_at = now() - interval '40 days', expires_at = now() - interval '1 day'
 WHERE idem_key LIKE 'job-%' OR idem_key LIKE 'done-%0';
SELECT webhook_dedup.webhook_claim(source, 'leased-' || n, lease => '1 millisecond') FROM fill_rows WHERE n % 20 = 0;

-- the outbox: delivered intents past the short retention's cut-off but
-- within their own, and a sender's lease that lapsed
DO $$
DECLARE
  r record;
  tok uuid;
  id bigint;
BEGIN
  FOR r IN SELECT source, n FROM fill_rows WHERE n % 4 = 0 LOOP
    tok := (SELECT claim_token FROM webhook_dedup.webhook_claim(r.source, 'o-' || r.n));
    PERFORM webhook_dedup.webhook_outbox_put(r.source, 'o-' || r.n, tok, 'op', 'fill', '{}');
    PERFORM webhook_dedup.webhook_complete(r.source, 'o-' || r.n, tok);
  END LOOP;
END
$$;
SELECT webhook_dedup.webhook_outbox_ack(id, lease_token)
  FROM webhook_dedup.webhook_outbox_next('fill', batch => 1000) WHERE id % 10 <> 0;
UPDATE webhook_dedup.outbox SET delivered_at = now() - interval '2 days' WHERE state = 'completed';
UPDATE webhook_dedup.outbox SET lease_expires_at = now() - interval '1 minute', due_at = now() - interval '1 minute'
 WHERE state = 'processing';

-- the archive: a pass makes the day partitions; deliveries of a source
-- whose payload retention (1 hour) is shorter than the longest (2 days)
SELECT * FROM webhook_dedup.run_maintenance();
SELECT webhook_dedup.webhook_enqueue('archived', 'a-' || g, 'payload'::bytea) FROM pg_catalog.generate_series(1, 200) AS g;
SELECT webhook_dedup.webhook_enqueue('archived-long', 'l-' || g, 'payload'::bytea) FROM pg_catalog.generate_series(1, 20) AS g;
UPDATE webhook_dedup.archive SET received_at = received_at - interval '3 hours' WHERE source = 'archived';

-- bulk redrives: a finished run, past its source's retention; a running one
-- with dead letters to move
SELECT webhook_dedup.webhook_fail(source, idem_key, claim_token, 'broken', retryable => false)
  FROM webhook_dedup.webhook_next('archived-long', batch => 20);
-- (and claimed ones, whose payload a redrive copies from the archive)
SELECT webhook_dedup.webhook_fail('archived-long', k, (SELECT claim_token FROM webhook_dedup.webhook_claim('archived-long', k, 'body'::bytea)),
                                  'broken', retryable => false)
  FROM (SELECT 'claimed-' || g AS k FROM pg_catalog.generate_series(1, 5) AS g) AS x;
SELECT * FROM webhook_dedup.redrive('archived-long');
SELECT * FROM webhook_dedup.redrive('internal-jobs', ARRAY['failed']);
UPDATE webhook_dedup.redrives SET status = 'done', finished_at = now() - interval '60 days'
 WHERE source = 'internal-jobs';

DROP TABLE fill_rows;
ANALYZE;
