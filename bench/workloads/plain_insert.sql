-- The guides' claim: INSERT ... ON CONFLICT DO NOTHING RETURNING, same key mix as claim.sql.
\set r random(1, 100)
-- (cast: pgbench -M prepared sends variables as parameters of unknown type,
-- which two of them compared would compare as text: '57' > '100')
\set k random(1, 1000000000000)
\set d random(1, :dups)
INSERT INTO bench.processed_events (source, event_id)
VALUES ('bench', CASE WHEN :r::integer <= :dup_pct::integer THEN 'dup-' || :d ELSE :run || '-' || :k END)
ON CONFLICT DO NOTHING RETURNING true;
