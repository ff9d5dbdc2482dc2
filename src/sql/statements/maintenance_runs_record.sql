-- Record a maintenance pass that ran (webhook_dedup.maintenance_runs).
-- $1 started_at, $2 finished_at, $3 leases_expired, $4 dead_lettered,
-- $5 keys_pruned, $6 keys_kept, $7 history_pruned, $8 metrics_flushed,
-- $9 retention_warnings, $10 more, $11 errors, $12 intents_expired,
-- $13 intents_pruned, $14 payloads_pruned, $15 partitions_created,
-- $16 partitions_dropped, $17 keys_redriven.
INSERT INTO webhook_dedup.maintenance_runs
    (started_at, finished_at, application_name, leases_expired, dead_lettered, keys_pruned, keys_kept,
     history_pruned, metrics_flushed, retention_warnings, more, errors, intents_expired, intents_pruned,
     payloads_pruned, partitions_created, partitions_dropped, keys_redriven)
  VALUES ($1, $2, COALESCE(pg_catalog.current_setting('application_name'), ''), $3, $4, $5, $6, $7, $8, $9,
          $10, $11, $12, $13, $14, $15, $16, $17)
