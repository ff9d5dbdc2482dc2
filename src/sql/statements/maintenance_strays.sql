-- Keys stored in the default partition within [$1, $2), in lock order.
SELECT source, idem_key FROM webhook_dedup.keys_default
  WHERE partition_at OPERATOR(pg_catalog.>=) $1 AND partition_at OPERATOR(pg_catalog.<) $2
  ORDER BY source, idem_key
