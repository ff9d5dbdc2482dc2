-- webhook_claim of a new key of one of 8 sources (bench-1 .. bench-8): on a
-- distributed install the sources' shards are on both workers, and each
-- call is delegated to the one that holds its source.
\set s random(1, 8)
\set k random(1, 1000000000000)
SELECT outcome FROM webhook_dedup.webhook_claim('bench-' || :s, :run || '-' || :k, lease => '30 seconds');
