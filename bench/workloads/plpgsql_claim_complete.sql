-- The hand-written PL/pgSQL claim and completion in one transaction.
\set k random(1, 1000000000000)
BEGIN;
SELECT claim_token FROM bench.claim('bench', :run || '-' || :k, NULL, '30 seconds') \gset
SELECT bench.complete('bench', :run || '-' || :k, :claim_token, '{"status": 200}');
END;
