-- The reference of receive_github.sql with the same guarantees
-- (reference/receive_reference.sql): the same delivery, signed by the
-- sender in the statement; checked with pgcrypto, its body's digest put in
-- the replay guard and its key claimed with the PL/pgSQL claim, in one
-- statement (a data-modifying WITH runs whether or not its rows are read).
\set k random(1, 1000000000000)
WITH d AS (SELECT convert_to('{"n":' || :k || ',' || substr(:body, 2), 'UTF8') AS b),
     v AS (SELECT d.b FROM d
            WHERE 'sha256=' || encode(hmac(d.b, convert_to(:secret, 'UTF8'), 'sha256'), 'hex')
                = 'sha256=' || encode(hmac(d.b, convert_to(:secret, 'UTF8'), 'sha256'), 'hex')),
     g AS (INSERT INTO bench.replay_guards (source, body_sha256, idem_key)
           SELECT 'github', sha256(v.b), 'github:' || :run || '-' || :k FROM v
           ON CONFLICT DO NOTHING RETURNING idem_key)
SELECT c.outcome
  FROM v, LATERAL bench.claim('github', 'github:' || :run || '-' || :k, v.b, '30 seconds') AS c;
