-- The guides' claim: INSERT ... ON CONFLICT DO NOTHING RETURNING, same key mix as claim.sql.
\set r random(1, 100)
\set k random(1, 1000000000000)
\set d random(1, :dups)
INSERT INTO bench.processed_events (source, event_id)
VALUES ('bench', CASE WHEN :r <= :dup_pct THEN 'dup-' || :d ELSE :run || '-' || :k END)
ON CONFLICT DO NOTHING RETURNING true;
