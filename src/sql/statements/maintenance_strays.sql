-- Keys stored in the default partition within [$1, $2), in key-lock order
-- (bytewise, as webhook_claim_many sorts), at most $3 of them.
SELECT source, idem_key FROM webhook_dedup.keys_default
  WHERE partition_at OPERATOR(pg_catalog.>=) $1 AND partition_at OPERATOR(pg_catalog.<) $2
  ORDER BY source COLLATE "C", idem_key COLLATE "C"
  LIMIT $3
