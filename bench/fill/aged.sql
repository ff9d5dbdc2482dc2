-- What 30 days at the default retention leave in the store: :days days of
-- :per_day keys each, completed (kept 30 days after completion; the oldest
-- day is due for deletion), and the payloads of the share enqueued rather
-- than claimed (one in ten, a 4 KiB body each). The layout has no
-- partitions: a month of history is these rows and their indexes.
INSERT INTO webhook_dedup.keys
    (source, idem_key, state, attempt, result, first_seen_at, last_seen_at, completed_at,
     leased_at, expires_at)
SELECT 'bench', 'github:' || lpad(i::text, 12, '0'), 'completed', 1, '{"status": 200}',
       at, at, at, at, at + interval '30 days'
  FROM (SELECT i, now() - (i::float8 / :per_day) * interval '1 day' AS at
          FROM generate_series(1, :days * :per_day) AS i) AS t;
INSERT INTO webhook_dedup.payloads (source, idem_key, payload)
SELECT k.source, k.idem_key, convert_to(repeat('{"action":"completed","delivery":"x"}', 110), 'UTF8')
  FROM webhook_dedup.keys AS k TABLESAMPLE BERNOULLI (10);
