-- The hand-written PL/pgSQL claim with the same semantics, same key mix as claim.sql.
\set r random(1, 100)
\set k random(1, 1000000000000)
\set d random(1, :dups)
SELECT outcome FROM bench.claim('bench', CASE WHEN :r <= :dup_pct THEN 'dup-' || :d ELSE :run || '-' || :k END,
                                NULL, '30 seconds');
