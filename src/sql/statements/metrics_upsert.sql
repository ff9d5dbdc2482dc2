-- Add one metrics entry's counts to its flushed row (src/metrics.rs).
-- $1 bucket, $2 source, $3 event_type, $4 counts in column order.
INSERT INTO webhook_dedup.claim_counts AS c
    (bucket, source, event_type, deliveries, first_claims, reclaims, duplicates_of_completed,
     duplicates_in_progress, conflicts, retry_later, unknown_outcome, dead_lettered,
     completions, stale_completions, retries_scheduled, dead_letters, marked_unknown,
     enqueued, drained, forgotten, resolved, stale_tokens, expired_leases)
  VALUES ($1, $2, $3, $4[1], $4[2], $4[3], $4[4], $4[5], $4[6], $4[7], $4[8], $4[9], $4[10], $4[11],
          $4[12], $4[13], $4[14], $4[15], $4[16], $4[17], $4[18], $4[19], $4[20])
  ON CONFLICT (source, bucket, event_type) DO UPDATE SET
    deliveries = c.deliveries OPERATOR(pg_catalog.+) EXCLUDED.deliveries,
    first_claims = c.first_claims OPERATOR(pg_catalog.+) EXCLUDED.first_claims,
    reclaims = c.reclaims OPERATOR(pg_catalog.+) EXCLUDED.reclaims,
    duplicates_of_completed = c.duplicates_of_completed OPERATOR(pg_catalog.+) EXCLUDED.duplicates_of_completed,
    duplicates_in_progress = c.duplicates_in_progress OPERATOR(pg_catalog.+) EXCLUDED.duplicates_in_progress,
    conflicts = c.conflicts OPERATOR(pg_catalog.+) EXCLUDED.conflicts,
    retry_later = c.retry_later OPERATOR(pg_catalog.+) EXCLUDED.retry_later,
    unknown_outcome = c.unknown_outcome OPERATOR(pg_catalog.+) EXCLUDED.unknown_outcome,
    dead_lettered = c.dead_lettered OPERATOR(pg_catalog.+) EXCLUDED.dead_lettered,
    completions = c.completions OPERATOR(pg_catalog.+) EXCLUDED.completions,
    stale_completions = c.stale_completions OPERATOR(pg_catalog.+) EXCLUDED.stale_completions,
    retries_scheduled = c.retries_scheduled OPERATOR(pg_catalog.+) EXCLUDED.retries_scheduled,
    dead_letters = c.dead_letters OPERATOR(pg_catalog.+) EXCLUDED.dead_letters,
    marked_unknown = c.marked_unknown OPERATOR(pg_catalog.+) EXCLUDED.marked_unknown,
    enqueued = c.enqueued OPERATOR(pg_catalog.+) EXCLUDED.enqueued,
    drained = c.drained OPERATOR(pg_catalog.+) EXCLUDED.drained,
    forgotten = c.forgotten OPERATOR(pg_catalog.+) EXCLUDED.forgotten,
    resolved = c.resolved OPERATOR(pg_catalog.+) EXCLUDED.resolved,
    stale_tokens = c.stale_tokens OPERATOR(pg_catalog.+) EXCLUDED.stale_tokens,
    expired_leases = c.expired_leases OPERATOR(pg_catalog.+) EXCLUDED.expired_leases
