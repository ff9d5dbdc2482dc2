-- webhook_dedup: the views (run after functions.sql and the generated
-- functions they read; their grants are in privileges.sql, their comments
-- in comments.sql).

-- Metrics: the flushed counters plus the live ones in shared memory, in
-- the column order of crates/webhook-dedup-core/src/metrics.rs (Counter::ALL;
-- a pg_test checks it).
CREATE VIEW webhook_dedup.counters AS
SELECT c.bucket, c.source, c.event_type, c.bucket_width, c.deliveries, c.first_claims, c.reclaims,
       c.duplicates_of_completed, c.duplicates_in_progress, c.conflicts, c.retry_later,
       c.unknown_outcome, c.dead_lettered, c.completions, c.stale_completions, c.retries_scheduled,
       c.dead_letters, c.marked_unknown, c.enqueued, c.drained, c.forgotten, c.resolved,
       c.stale_tokens, c.expired_leases, c.rejected_missing_header, c.rejected_malformed_header,
       c.rejected_unsupported_version, c.rejected_no_matching_signature,
       c.rejected_timestamp_too_old, c.rejected_timestamp_too_new, c.missing_event_ids, c.ignored, c.replayed,
       c.rejected_token_reused, c.intents_written, c.intents_delivered, c.intent_retries, c.intents_dead_lettered,
       c.intents_unknown, c.intent_leases_expired, c.reconciled
  FROM webhook_dedup.claim_counts AS c
UNION ALL
SELECT l.bucket, l.source, l.event_type,
       CASE WHEN l.minute THEN '1 minute'::interval ELSE '1 hour'::interval END, l.counts[1],
       l.counts[2], l.counts[3], l.counts[4], l.counts[5], l.counts[6], l.counts[7], l.counts[8],
       l.counts[9], l.counts[10], l.counts[11], l.counts[12], l.counts[13], l.counts[14],
       l.counts[15], l.counts[16], l.counts[17], l.counts[18], l.counts[19], l.counts[20],
       l.counts[21], l.counts[22], l.counts[23], l.counts[24], l.counts[25], l.counts[26],
       l.counts[27], l.counts[28], l.counts[29], l.counts[30], l.counts[31], l.counts[32],
       l.counts[33], l.counts[34], l.counts[35], l.counts[36], l.counts[37]
  FROM webhook_dedup.metrics_live_cluster() AS l;

CREATE VIEW webhook_dedup.metrics_buckets AS
SELECT a.source, a.bucket, a.bucket_width,
       pg_catalog.sum(a.deliveries)::bigint AS deliveries,
       pg_catalog.sum(a.first_claims)::bigint AS first_claims,
       pg_catalog.sum(a.reclaims)::bigint AS reclaims,
       pg_catalog.sum(a.duplicates_of_completed)::bigint AS duplicates_of_completed,
       pg_catalog.sum(a.duplicates_in_progress)::bigint AS duplicates_in_progress,
       pg_catalog.sum(a.conflicts)::bigint AS conflicts,
       pg_catalog.sum(a.retry_later)::bigint AS retry_later,
       pg_catalog.sum(a.unknown_outcome)::bigint AS unknown_outcome,
       pg_catalog.sum(a.dead_lettered)::bigint AS dead_lettered,
       pg_catalog.sum(a.completions)::bigint AS completions,
       pg_catalog.sum(a.stale_completions)::bigint AS stale_completions,
       pg_catalog.sum(a.retries_scheduled)::bigint AS retries_scheduled,
       pg_catalog.sum(a.dead_letters)::bigint AS dead_letters,
       pg_catalog.sum(a.marked_unknown)::bigint AS marked_unknown,
       pg_catalog.sum(a.enqueued)::bigint AS enqueued,
       pg_catalog.sum(a.drained)::bigint AS drained,
       pg_catalog.sum(a.forgotten)::bigint AS forgotten,
       pg_catalog.sum(a.resolved)::bigint AS resolved,
       pg_catalog.sum(a.stale_tokens)::bigint AS stale_tokens,
       pg_catalog.sum(a.expired_leases)::bigint AS expired_leases,
       pg_catalog.sum(a.rejected_missing_header)::bigint AS rejected_missing_header,
       pg_catalog.sum(a.rejected_malformed_header)::bigint AS rejected_malformed_header,
       pg_catalog.sum(a.rejected_unsupported_version)::bigint AS rejected_unsupported_version,
       pg_catalog.sum(a.rejected_no_matching_signature)::bigint AS rejected_no_matching_signature,
       pg_catalog.sum(a.rejected_timestamp_too_old)::bigint AS rejected_timestamp_too_old,
       pg_catalog.sum(a.rejected_timestamp_too_new)::bigint AS rejected_timestamp_too_new,
       pg_catalog.sum(a.missing_event_ids)::bigint AS missing_event_ids,
       pg_catalog.sum(a.ignored)::bigint AS ignored,
       pg_catalog.sum(a.replayed)::bigint AS replayed,
       pg_catalog.sum(a.rejected_token_reused)::bigint AS rejected_token_reused,
       (pg_catalog.sum(a.duplicates_of_completed) OPERATOR(pg_catalog.+) pg_catalog.sum(a.duplicates_in_progress))::bigint
         AS duplicates,
       (pg_catalog.sum(a.rejected_missing_header) OPERATOR(pg_catalog.+) pg_catalog.sum(a.rejected_malformed_header)
        OPERATOR(pg_catalog.+) pg_catalog.sum(a.rejected_unsupported_version)
        OPERATOR(pg_catalog.+) pg_catalog.sum(a.rejected_no_matching_signature)
        OPERATOR(pg_catalog.+) pg_catalog.sum(a.rejected_timestamp_too_old)
        OPERATOR(pg_catalog.+) pg_catalog.sum(a.rejected_timestamp_too_new)
        OPERATOR(pg_catalog.+) pg_catalog.sum(a.rejected_token_reused))::bigint AS signature_rejections,
       CASE WHEN pg_catalog.sum(a.deliveries) OPERATOR(pg_catalog.>) 0
            THEN ((pg_catalog.sum(a.duplicates_of_completed) OPERATOR(pg_catalog.+) pg_catalog.sum(a.duplicates_in_progress))
                  OPERATOR(pg_catalog./) pg_catalog.sum(a.deliveries))::double precision
       END AS duplicate_ratio,
       pg_catalog.sum(a.intents_written)::bigint AS intents_written,
       pg_catalog.sum(a.intents_delivered)::bigint AS intents_delivered,
       pg_catalog.sum(a.intent_retries)::bigint AS intent_retries,
       pg_catalog.sum(a.intents_dead_lettered)::bigint AS intents_dead_lettered,
       pg_catalog.sum(a.intents_unknown)::bigint AS intents_unknown,
       pg_catalog.sum(a.intent_leases_expired)::bigint AS intent_leases_expired,
       pg_catalog.sum(a.reconciled)::bigint AS reconciled
  FROM webhook_dedup.counters AS a
 GROUP BY a.source, a.bucket, a.bucket_width;

CREATE VIEW webhook_dedup.duplicate_metrics AS
SELECT m.source, m.bucket, m.deliveries, m.first_claims, m.reclaims, m.duplicates, m.duplicates_of_completed,
       m.duplicates_in_progress, m.conflicts, m.completions, m.stale_completions, m.retry_later,
       m.unknown_outcome, m.dead_lettered, m.retries_scheduled, m.dead_letters, m.marked_unknown, m.enqueued,
       m.drained, m.forgotten, m.resolved, m.stale_tokens, m.expired_leases, m.signature_rejections,
       m.rejected_missing_header, m.rejected_malformed_header, m.rejected_unsupported_version,
       m.rejected_no_matching_signature, m.rejected_timestamp_too_old, m.rejected_timestamp_too_new,
       m.rejected_token_reused,
       m.missing_event_ids, m.ignored, m.replayed, m.duplicate_ratio, m.intents_written, m.intents_delivered,
       m.intent_retries, m.intents_dead_lettered, m.intents_unknown, m.intent_leases_expired, m.reconciled
  FROM webhook_dedup.metrics_buckets AS m
 WHERE m.bucket_width OPERATOR(pg_catalog.=) '1 hour'::interval;

CREATE VIEW webhook_dedup.duplicate_metrics_by_minute AS
SELECT m.source, m.bucket, m.deliveries, m.first_claims, m.reclaims, m.duplicates, m.duplicates_of_completed,
       m.duplicates_in_progress, m.conflicts, m.completions, m.stale_completions, m.retry_later,
       m.unknown_outcome, m.dead_lettered, m.retries_scheduled, m.dead_letters, m.marked_unknown, m.enqueued,
       m.drained, m.forgotten, m.resolved, m.stale_tokens, m.expired_leases, m.signature_rejections,
       m.rejected_missing_header, m.rejected_malformed_header, m.rejected_unsupported_version,
       m.rejected_no_matching_signature, m.rejected_timestamp_too_old, m.rejected_timestamp_too_new,
       m.rejected_token_reused,
       m.missing_event_ids, m.ignored, m.replayed, m.duplicate_ratio, m.intents_written, m.intents_delivered,
       m.intent_retries, m.intents_dead_lettered, m.intents_unknown, m.intent_leases_expired, m.reconciled
  FROM webhook_dedup.metrics_buckets AS m
 WHERE m.bucket_width OPERATOR(pg_catalog.=) '1 minute'::interval
   AND m.bucket OPERATOR(pg_catalog.>=)
       pg_catalog.date_trunc('minute', pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval, 'UTC');
CREATE VIEW webhook_dedup.providers AS
SELECT scheme, event_id, event_type, event_time, retry_horizon, response_deadline, default_wait, retries_4xx,
       disable_rule, stop_signal, fingerprint, replay_guard, handshake, notes, sources
  FROM webhook_dedup.provider_profiles();

-- (source keeps the database's collation, as in 0.3.0, where
-- webhook_dedup.sources.source had it: the 0.3.0 -> 0.4.0 update replaces
-- the view in place, keeping every grant on it)
CREATE VIEW webhook_dedup.retention_warnings AS
WITH used AS (
  SELECT s.source COLLATE "default" AS source FROM webhook_dedup.sources AS s
  UNION
  -- sources named after a provider that have keys made by webhook_key or
  -- webhook_receive, or counted deliveries
  SELECT p.scheme FROM webhook_dedup.providers AS p
   WHERE webhook_dedup.source_has_history(p.scheme)
), checked AS (
  SELECT u.source,
         COALESCE(s.provider, u.source) AS provider,
         p.scheme IS NOT NULL AS known,
         COALESCE(s.retention, webhook_dedup.default_retention()) AS retention,
         p.retry_horizon
    FROM used AS u
    LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) u.source
    LEFT JOIN webhook_dedup.providers AS p ON p.scheme OPERATOR(pg_catalog.=) COALESCE(s.provider, u.source)
)
SELECT c.source, c.provider, c.retention, c.retry_horizon,
       CASE WHEN c.known
            THEN pg_catalog.format('source %s keeps keys for %s after their last activity, less '
                                   'than the %s retry horizon of %s: a retry that comes later is '
                                   'processed again (raise webhook_dedup.sources.retention or '
                                   'webhook_dedup.retention)',
                                   c.source, c.retention, c.provider, c.retry_horizon)
            ELSE pg_catalog.format('source %s names provider %s, which has no profile in '
                                   'webhook_dedup.providers: its retention cannot be checked',
                                   c.source, c.provider)
       END AS message
  FROM checked AS c
 WHERE (c.known AND c.retry_horizon IS NOT NULL AND c.retention OPERATOR(pg_catalog.<) c.retry_horizon)
    OR (NOT c.known AND c.provider IS DISTINCT FROM c.source);

-- Operational views: the keys to act on. Each reads an index: keys_open
-- (keys not completed, by due_at), the primary key (idem_key, source),
-- conflict_log's indexes.
CREATE VIEW webhook_dedup.key_states AS
WITH open AS (
  SELECT k.source, k.state, pg_catalog.count(*) AS keys,
         pg_catalog.min(k.due_at) FILTER (WHERE k.due_at OPERATOR(pg_catalog.<) 'infinity'::pg_catalog.timestamptz)
           AS oldest_due_at,
         pg_catalog.count(*) FILTER (WHERE k.due_at OPERATOR(pg_catalog.=) 'infinity'::pg_catalog.timestamptz)
           AS paused_keys,
         pg_catalog.min(k.leased_at) AS oldest_leased_at,
         pg_catalog.count(*) FILTER (WHERE k.lease_expires_at OPERATOR(pg_catalog.<) pg_catalog.now()) AS expired
    FROM webhook_dedup.keys AS k
   WHERE k.state OPERATOR(pg_catalog.<>) 'completed'
   GROUP BY k.source, k.state
)
SELECT o.source, o.state, o.keys,
       CASE WHEN o.state OPERATOR(pg_catalog.=) 'pending'
            THEN pg_catalog.now() OPERATOR(pg_catalog.-) o.oldest_due_at END AS oldest_pending_age,
       CASE WHEN o.state OPERATOR(pg_catalog.=) 'processing'
            THEN pg_catalog.now() OPERATOR(pg_catalog.-) o.oldest_leased_at END AS oldest_lease_age,
       CASE WHEN o.state OPERATOR(pg_catalog.=) 'processing' THEN o.expired END AS expired_leases,
       o.paused_keys, s.paused_at
  FROM open AS o
  LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) o.source;

CREATE VIEW webhook_dedup.stuck_claims AS
SELECT k.source, k.idem_key, k.event_type, k.attempt, k.leased_at, k.lease_expires_at,
       pg_catalog.now() OPERATOR(pg_catalog.-) k.lease_expires_at AS overdue, k.last_step, k.deliveries,
       k.first_seen_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'processing'
   AND k.due_at OPERATOR(pg_catalog.<) pg_catalog.now()  -- a processing key is due when its lease ends (keys_open)
   AND k.lease_expires_at OPERATOR(pg_catalog.<) pg_catalog.now();

CREATE VIEW webhook_dedup.lapsed_leases AS
SELECT k.source, k.idem_key, k.event_type, k.attempt, k.last_error, k.last_step, k.due_at, k.last_seen_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'failed'
   AND k.due_at OPERATOR(pg_catalog.<=) pg_catalog.now()  -- still due: no retry reclaimed it (keys_open)
   AND k.last_error OPERATOR(pg_catalog.~~) 'lease of attempt % expired at %';

CREATE VIEW webhook_dedup.queue_backlog AS
SELECT k.source, pg_catalog.count(*) AS due_keys, pg_catalog.min(k.due_at) AS oldest_due_at,
       pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(k.due_at) AS oldest_due_age
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.<>) 'completed' AND k.due_at OPERATOR(pg_catalog.<=) pg_catalog.now()
 GROUP BY k.source;

CREATE VIEW webhook_dedup.dead_letters AS
SELECT k.source, k.idem_key, k.event_type, k.attempt AS attempts, k.last_error, k.last_step, k.deliveries,
       k.first_seen_at, k.last_seen_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'dead_lettered';

CREATE VIEW webhook_dedup.unknown_outcomes AS
SELECT k.source, k.idem_key, k.event_type, k.attempt AS attempts, k.last_error, k.last_step, k.deliveries,
       k.first_seen_at, k.last_seen_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'unknown_outcome';

CREATE VIEW webhook_dedup.conflicts AS
SELECT c.id, c.source, c.idem_key, c.seen_at, c.via, c.stored_fingerprint, c.fingerprint,
       k.state, k.attempt AS attempts, k.last_error, k.deliveries, k.conflicts AS key_conflicts, k.first_seen_at
  FROM webhook_dedup.conflict_log AS c
  LEFT JOIN webhook_dedup.keys AS k
    ON k.idem_key OPERATOR(pg_catalog.=) c.idem_key AND k.source OPERATOR(pg_catalog.=) c.source;

CREATE VIEW webhook_dedup.key_history AS
SELECT k.source, k.idem_key, k.state, k.event_type, k.first_seen_at, k.last_seen_at, k.completed_at,
       k.attempt AS attempts, k.deliveries, k.conflicts, k.last_step, k.last_error, k.result, k.leased_at,
       k.lease_expires_at, k.next_attempt_at, k.due_at,
       (SELECT pg_catalog.max(c.seen_at) FROM webhook_dedup.conflict_log AS c
         WHERE c.idem_key OPERATOR(pg_catalog.=) k.idem_key AND c.source OPERATOR(pg_catalog.=) k.source)
         AS last_conflict_at,
       k.redacted_at, k.redacted_by, k.redriven_at, k.redrive_run, k.reconciled_at
  FROM webhook_dedup.keys AS k;

-- Bulk redrives and their progress (webhook_dedup.redrive).
CREATE VIEW webhook_dedup.redrive_runs AS
SELECT r.id, r.source::text AS source,
       CASE WHEN r.conflicts THEN r.states OPERATOR(pg_catalog.||) 'conflict'::text ELSE r.states END AS states,
       r.since, r."until", r.event_types, r.max_keys,
       -- a running run of a paused source waits for its resume
       CASE WHEN r.status OPERATOR(pg_catalog.=) 'running' AND s.paused_at IS NOT NULL THEN 'paused'::text
            ELSE r.status END AS status,
       r.matched, r.moved, r.skipped,
       r.matched OPERATOR(pg_catalog.-) r.moved OPERATOR(pg_catalog.-) r.skipped AS remaining,
       r.created_at, r.created_by, r.finished_at, r.cancelled_by
  FROM webhook_dedup.redrives AS r
  LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) r.source;

-- The outbox (docs/outbox.md): what waits per target, and the intents
-- that wait for an operator. No request, response or lease token is in
-- any view (they may carry personal data or let a reader act as a sender).
CREATE VIEW webhook_dedup.outbox_backlog AS
SELECT o.target,
       pg_catalog.count(*) FILTER (WHERE o.state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'processing', 'failed']))
         AS undelivered,
       pg_catalog.count(*) FILTER (WHERE o.state OPERATOR(pg_catalog.=) 'pending') AS pending,
       pg_catalog.count(*) FILTER (WHERE o.state OPERATOR(pg_catalog.=) 'processing') AS in_flight,
       pg_catalog.count(*) FILTER (WHERE o.state OPERATOR(pg_catalog.=) 'failed') AS failed,
       pg_catalog.count(*) FILTER (WHERE o.due_at OPERATOR(pg_catalog.<=) pg_catalog.now()) AS due,
       pg_catalog.count(*) FILTER (WHERE o.state OPERATOR(pg_catalog.=) 'unknown_outcome') AS unknown_outcome,
       pg_catalog.count(*) FILTER (WHERE o.state OPERATOR(pg_catalog.=) 'dead_lettered') AS dead_lettered,
       pg_catalog.min(o.created_at) FILTER (WHERE o.state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'processing', 'failed']))
         AS oldest_undelivered_at,
       pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(o.created_at)
         FILTER (WHERE o.state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'processing', 'failed']))
         AS oldest_undelivered_age
  FROM webhook_dedup.outbox AS o
 WHERE o.due_at IS NOT NULL
 GROUP BY o.target;

CREATE VIEW webhook_dedup.outbox_dead_letters AS
SELECT o.id, o.target, o.operation, o.source, o.idem_key, o.downstream_key, o.attempt AS attempts, o.last_error,
       o.created_at, o.updated_at
  FROM webhook_dedup.outbox AS o
 WHERE o.due_at IS NOT NULL AND o.state OPERATOR(pg_catalog.=) 'dead_lettered';

CREATE VIEW webhook_dedup.outbox_unknown_outcomes AS
SELECT o.id, o.target, o.operation, o.source, o.idem_key, o.downstream_key, o.attempt AS attempts, o.last_error,
       o.created_at, o.updated_at
  FROM webhook_dedup.outbox AS o
 WHERE o.due_at IS NOT NULL AND o.state OPERATOR(pg_catalog.=) 'unknown_outcome';
CREATE VIEW webhook_dedup.downstream_key_limits AS
SELECT d.downstream, d.carrier, d.max_length, d.key_retention, d.sources
  FROM webhook_dedup.downstream_key_limits_rows() AS d;
