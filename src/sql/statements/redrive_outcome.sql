-- What became of key n of run $1: $3 (moved, changed, gone, no_payload).
UPDATE webhook_dedup.redrive_keys
   SET outcome = $3
 WHERE run OPERATOR(pg_catalog.=) $1 AND n OPERATOR(pg_catalog.=) $2
