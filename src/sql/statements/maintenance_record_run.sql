-- Record a maintenance pass that ran (webhook_dedup.maintenance_runs).
-- $1 started_at, $2 finished_at, $3 leases_expired, $4 dead_lettered,
-- $5 partitions_created, $6 partitions_dropped, $7 keys_carried_forward,
-- $8 keys_pruned, $9 history_pruned, $10 metrics_flushed,
-- $11 retention_warnings, $12 more, $13 errors.
INSERT INTO webhook_dedup.maintenance_runs
    (started_at, finished_at, application_name, leases_expired, dead_lettered, partitions_created,
     partitions_dropped, keys_carried_forward, keys_pruned, history_pruned, metrics_flushed,
     retention_warnings, more, errors)
  VALUES ($1, $2, COALESCE(pg_catalog.current_setting('application_name'), ''), $3, $4, $5, $6, $7, $8, $9,
          $10, $11, $12, $13)
