-- webhook_claim of a delivery: a new key, or (when :dup_pct > 0) that share
-- of duplicates of completed keys dup-1 .. dup-:dups made before the run.
\set r random(1, 100)
\set k random(1, 1000000000000)
\set d random(1, :dups)
SELECT outcome FROM webhook_dedup.webhook_claim('bench', CASE WHEN :r <= :dup_pct THEN 'dup-' || :d ELSE :run || '-' || :k END,
                                  lease => '30 seconds');
