-- Add one metrics entry's counts to its flushed row (src/metrics.rs, the flush).
-- $1 bucket, $2 source, $3 event_type, $4 bucket_width ('1 hour' or
-- '1 minute'), $5 counts in column order (Counter::ALL of
-- crates/webhook-dedup-core/src/metrics.rs).
INSERT INTO webhook_dedup.claim_counts AS c
    (bucket, source, event_type, bucket_width, deliveries, first_claims, reclaims, duplicates_of_completed,
     duplicates_in_progress, conflicts, retry_later, unknown_outcome, dead_lettered,
     completions, stale_completions, retries_scheduled, dead_letters, marked_unknown,
     enqueued, drained, forgotten, resolved, stale_tokens, expired_leases,
     rejected_missing_header, rejected_malformed_header, rejected_unsupported_version,
     rejected_no_matching_signature, rejected_timestamp_too_old, rejected_timestamp_too_new,
     missing_event_ids, ignored, replayed, rejected_token_reused, intents_written, intents_delivered,
     intent_retries, intents_dead_lettered, intents_unknown, intent_leases_expired, reconciled)
  VALUES ($1, $2, $3, $4::interval, $5[1], $5[2], $5[3], $5[4], $5[5], $5[6], $5[7], $5[8], $5[9], $5[10],
          $5[11], $5[12], $5[13], $5[14], $5[15], $5[16], $5[17], $5[18], $5[19], $5[20],
          $5[21], $5[22], $5[23], $5[24], $5[25], $5[26], $5[27], $5[28], $5[29], $5[30],
          $5[31], $5[32], $5[33], $5[34], $5[35], $5[36], $5[37])
  ON CONFLICT (source, bucket, event_type, bucket_width) DO UPDATE SET
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
    expired_leases = c.expired_leases OPERATOR(pg_catalog.+) EXCLUDED.expired_leases,
    rejected_missing_header = c.rejected_missing_header OPERATOR(pg_catalog.+) EXCLUDED.rejected_missing_header,
    rejected_malformed_header = c.rejected_malformed_header OPERATOR(pg_catalog.+) EXCLUDED.rejected_malformed_header,
    rejected_unsupported_version =
      c.rejected_unsupported_version OPERATOR(pg_catalog.+) EXCLUDED.rejected_unsupported_version,
    rejected_no_matching_signature =
      c.rejected_no_matching_signature OPERATOR(pg_catalog.+) EXCLUDED.rejected_no_matching_signature,
    rejected_timestamp_too_old = c.rejected_timestamp_too_old OPERATOR(pg_catalog.+) EXCLUDED.rejected_timestamp_too_old,
    rejected_timestamp_too_new = c.rejected_timestamp_too_new OPERATOR(pg_catalog.+) EXCLUDED.rejected_timestamp_too_new,
    missing_event_ids = c.missing_event_ids OPERATOR(pg_catalog.+) EXCLUDED.missing_event_ids,
    ignored = c.ignored OPERATOR(pg_catalog.+) EXCLUDED.ignored,
    replayed = c.replayed OPERATOR(pg_catalog.+) EXCLUDED.replayed,
    rejected_token_reused = c.rejected_token_reused OPERATOR(pg_catalog.+) EXCLUDED.rejected_token_reused,
    intents_written = c.intents_written OPERATOR(pg_catalog.+) EXCLUDED.intents_written,
    intents_delivered = c.intents_delivered OPERATOR(pg_catalog.+) EXCLUDED.intents_delivered,
    intent_retries = c.intent_retries OPERATOR(pg_catalog.+) EXCLUDED.intent_retries,
    intents_dead_lettered = c.intents_dead_lettered OPERATOR(pg_catalog.+) EXCLUDED.intents_dead_lettered,
    intents_unknown = c.intents_unknown OPERATOR(pg_catalog.+) EXCLUDED.intents_unknown,
    intent_leases_expired = c.intent_leases_expired OPERATOR(pg_catalog.+) EXCLUDED.intent_leases_expired,
    reconciled = c.reconciled OPERATOR(pg_catalog.+) EXCLUDED.reconciled
