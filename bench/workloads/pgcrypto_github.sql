-- The same delivery (a body of its own, signed by the sender in the
-- statement as in receive_github.sql) checked with pgcrypto and stored with
-- a plain insert, in one statement. It has no replay guard: a re-sent body
-- under a new id would be stored again.
\set k random(1, 1000000000000)
INSERT INTO bench.github_deliveries (delivery_id, event)
SELECT :run || '-' || :k, :event
  FROM (SELECT convert_to('{"n":' || :k || ',' || substr(:body, 2), 'UTF8') AS b) AS d,
       LATERAL (SELECT 'sha256=' || encode(hmac(d.b, convert_to(:secret, 'UTF8'), 'sha256'), 'hex') AS signature) AS s
 WHERE s.signature = 'sha256=' || encode(hmac(d.b, convert_to(:secret, 'UTF8'), 'sha256'), 'hex')
ON CONFLICT DO NOTHING RETURNING true;
