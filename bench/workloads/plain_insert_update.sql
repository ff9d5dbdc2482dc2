-- The guides' claim and completion: insert, then mark done, in one transaction.
\set k random(1, 1000000000000)
BEGIN;
INSERT INTO bench.processed_events (source, event_id) VALUES ('bench', :run || '-' || :k)
ON CONFLICT DO NOTHING RETURNING true;
UPDATE bench.processed_events SET status = 'completed', result = '{"status": 200}'
 WHERE source = 'bench' AND event_id = :run || '-' || :k;
END;
