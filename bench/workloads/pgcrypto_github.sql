-- The same delivery checked with pgcrypto and stored with a plain insert, in one statement.
\set k random(1, 1000000000000)
INSERT INTO bench.github_deliveries (delivery_id, event)
SELECT :run || '-' || :k, :event
 WHERE :signature = 'sha256=' || encode(hmac(convert_to(:body, 'UTF8'), convert_to(:secret, 'UTF8'), 'sha256'), 'hex')
ON CONFLICT DO NOTHING RETURNING true;
