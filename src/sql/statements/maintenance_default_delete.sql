-- Delete the listed completed keys from the default partition if they are
-- still past retention (the caller holds their locks).
-- $1 now, $2 webhook_dedup.retention, $3 sources, $4 idem_keys.
DELETE FROM webhook_dedup.keys_default AS k
 WHERE (k.source, k.idem_key) IN (SELECT * FROM ROWS FROM (pg_catalog.unnest($3::pg_catalog.text[]), pg_catalog.unnest($4::pg_catalog.text[])))
   AND k.state OPERATOR(pg_catalog.=) 'completed'
   AND k.last_seen_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) COALESCE(
         (SELECT s.retention FROM webhook_dedup.sources AS s
           WHERE s.source OPERATOR(pg_catalog.=) k.source), $2))
