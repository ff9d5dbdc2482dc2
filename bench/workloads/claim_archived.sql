-- claim_payload.sql for source 'archived', which keeps payloads
-- (webhook_dedup.sources.keep_payload): the claim also archives the raw
-- body in today's partition of webhook_dedup.archive.
\set k random(1, 1000000000000)
SELECT outcome FROM webhook_dedup.webhook_claim('archived', :run || '-' || :k, convert_to(:body, 'UTF8'),
                                               lease => '30 seconds');
