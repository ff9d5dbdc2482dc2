-- The hand-written PL/pgSQL claim with the same semantics, same key mix as claim.sql.
\set r random(1, 100)
-- (cast: pgbench -M prepared sends variables as parameters of unknown type,
-- which two of them compared would compare as text: '57' > '100')
\set k random(1, 1000000000000)
\set d random(1, :dups)
SELECT outcome FROM bench.claim('bench', CASE WHEN :r::integer <= :dup_pct::integer THEN 'dup-' || :d ELSE :run || '-' || :k END,
                                NULL, '30 seconds');
