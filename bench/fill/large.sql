-- :keys completed keys, as a month of deliveries leaves them (completed over
-- the last 29 days, kept 30 days after completion). Numbered ids in index
-- order, so that the fill is fast; the primary key is then what a month of
-- random ids builds, and the benchmark's new keys probe it at random.
INSERT INTO webhook_dedup.keys
    (source, idem_key, state, attempt, result, first_seen_at, last_seen_at, completed_at,
     leased_at, expires_at)
SELECT 'bench', 'github:' || lpad(i::text, 12, '0'), 'completed', 1, '{"status": 200}',
       at, at, at, at, at + interval '30 days'
  FROM generate_series(1, :keys) AS i, LATERAL (SELECT now() - random() * interval '29 days' AS at) AS t;
