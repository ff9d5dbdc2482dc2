-- webhook_receive of a signed 4 KiB GitHub delivery, a new event each time:
-- a new X-GitHub-Delivery id and a body of its own (a first member "n"),
-- since GitHub never sends one body for two events and the replay guard
-- answers a re-sent body duplicate. The sender's signature is computed in
-- the statement with pgcrypto, as in the reference (pgcrypto_github.sql):
-- both pay it. Then verify, key, replay guard, claim.
\set k random(1, 1000000000000)
SELECT r.outcome
  FROM (SELECT convert_to('{"n":' || :k || ',' || substr(:body, 2), 'UTF8') AS b) AS d,
       webhook_dedup.webhook_receive('github', d.b,
         jsonb_build_object('X-GitHub-Event', CAST(:event AS text), 'X-GitHub-Delivery', CAST(:run || '-' || :k AS text),
                            'X-Hub-Signature-256', 'sha256=' || encode(hmac(d.b, convert_to(:secret, 'UTF8'), 'sha256'), 'hex')),
         ARRAY[CAST(:secret AS text)]) AS r;
