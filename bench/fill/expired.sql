-- :keys completed keys past retention, as one day of deliveries leaves them
-- 30 days later: completed 31 days ago, their expiry passed an hour ago
-- (a completed key keeps no claim token).
INSERT INTO webhook_dedup.keys
    (source, idem_key, state, attempt, result, first_seen_at, last_seen_at, completed_at,
     leased_at, expires_at)
SELECT 'expired', 'github:' || txid_current() || '-' || lpad(i::text, 9, '0'), 'completed', 1, '{"status": 200}',
       at, at, at, at, at + interval '30 days'
  FROM (SELECT i, now() - interval '31 days' + i * (interval '1 day' / :keys) - interval '1 hour' AS at
          FROM generate_series(1, :keys) AS i) AS t;
