-- Carry keys forward out of a partition about to be dropped: setting
-- partition_at to now moves each row into the current partition (a delete
-- and an insert in this transaction; look-ups under the key's lock see
-- exactly one of them). Only keys whose lock the caller holds are listed.
-- $1 lower bound, $2 upper bound, $3 now, $4 sources, $5 idem_keys.
UPDATE webhook_dedup.keys AS k
   SET partition_at = $3
 WHERE k.partition_at OPERATOR(pg_catalog.>=) $1 AND k.partition_at OPERATOR(pg_catalog.<) $2
   AND (k.source, k.idem_key) IN (SELECT * FROM ROWS FROM (pg_catalog.unnest($4::pg_catalog.text[]), pg_catalog.unnest($5::pg_catalog.text[])))
