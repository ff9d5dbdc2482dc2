-- webhook_claim of a delivery: a new key, or (when :dup_pct > 0) that share
-- of duplicates of completed keys dup-1 .. dup-:dups made before the run.
\set r random(1, 100)
-- (cast: pgbench -M prepared sends variables as parameters of unknown type,
-- which two of them compared would compare as text: '57' > '100')
\set k random(1, 1000000000000)
\set d random(1, :dups)
SELECT outcome FROM webhook_dedup.webhook_claim('bench', CASE WHEN :r::integer <= :dup_pct::integer THEN 'dup-' || :d ELSE :run || '-' || :k END,
                                  lease => '30 seconds');
