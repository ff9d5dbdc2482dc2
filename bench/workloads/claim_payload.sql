-- webhook_claim of a new key with the 4 KiB GitHub body as its payload
-- (fingerprinted), for a source that does not archive payloads: the
-- reference of claim_archived.sql.
\set k random(1, 1000000000000)
SELECT outcome FROM webhook_dedup.webhook_claim('bench', :run || '-' || :k, convert_to(:body, 'UTF8'),
                                               lease => '30 seconds');
