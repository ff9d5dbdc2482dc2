-- Claim a new key and complete it in one transaction, as a receiver does
-- with its business writes.
\set k random(1, 1000000000000)
BEGIN;
SELECT claim_token FROM webhook_dedup.webhook_claim('bench', :run || '-' || :k, lease => '30 seconds') \gset
SELECT webhook_dedup.webhook_complete('bench', :run || '-' || :k, :claim_token, '{"status": 200}');
END;
