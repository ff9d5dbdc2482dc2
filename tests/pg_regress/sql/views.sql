-- views.sql: the views an operator or an analyst reads (docs/metrics.md
-- has every column): the provider profiles, retention_warnings, the keys
-- to act on (key_states, stuck_claims, lapsed_leases, queue_backlog,
-- dead_letters, unknown_outcomes, conflicts, key_history) and the counters
-- (duplicate_metrics and the views under it). The source views holds one
-- key in each state; the counters' values depend on whether the library is
-- preloaded (shared memory), so only their columns are shown.
--
-- SQLSTATEs in this file:
--   2BP01  DROP EXTENSION while an object of your own depends on it
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

--
-- 1. webhook_dedup.providers: per scheme, where webhook_receive reads the
--    event id, type and time, how long the provider may still deliver
--    (retry_horizon: keep keys at least that long), the fingerprint rule,
--    the replay guard, the handshake and how it takes answers.
--
SELECT scheme, event_id, event_type, event_time, retry_horizon, replay_guard
  FROM webhook_dedup.providers ORDER BY scheme;
SELECT scheme, fingerprint, handshake FROM webhook_dedup.providers ORDER BY scheme;
SELECT scheme, response_deadline, default_wait, retries_4xx, stop_signal
  FROM webhook_dedup.providers ORDER BY scheme;

--
-- 2. retention_warnings: sources kept for less than their provider's
--    retry horizon, and sources whose provider has no profile. Empty is
--    good; run_maintenance raises each as a WARNING.
--
INSERT INTO webhook_dedup.sources (source, provider, retention) VALUES ('views_short', 'stripe', '1 day'),
                                                                       ('views_long', 'stripe', '7 days'),
                                                                       ('views_unknown', 'acme-pay', NULL);
SELECT source, provider, retention, retry_horizon, message
  FROM webhook_dedup.retention_warnings WHERE source LIKE 'views%' ORDER BY source;

--
-- 3. The keys to act on. One key of the source views in each state:
--
SELECT webhook_dedup.webhook_enqueue('views', 'views:pending', '{}'::bytea, event_type => 'a') AS pending;
SELECT claim_token AS t FROM webhook_dedup.webhook_claim('views', 'views:completed', event_type => 'a') \gset completed_
SELECT webhook_dedup.webhook_complete('views', 'views:completed', :'completed_t', '{"done": 1}') AS completed;
SELECT claim_token AS t FROM webhook_dedup.webhook_claim('views', 'views:processing', lease => '1 hour', event_type => 'b') \gset
SELECT claim_token AS t FROM webhook_dedup.webhook_claim('views', 'views:failed', event_type => 'b') \gset failed_
SELECT webhook_dedup.webhook_fail('views', 'views:failed', :'failed_t', 'HTTP 503', retry_after => '1 hour') AS failed;
SELECT claim_token AS t FROM webhook_dedup.webhook_claim('views', 'views:dead', event_type => 'b') \gset dead_
SELECT webhook_dedup.webhook_fail('views', 'views:dead', :'dead_t', 'HTTP 400', retryable => false) AS dead;
SELECT claim_token AS t FROM webhook_dedup.webhook_claim('views', 'views:unknown', event_type => 'c') \gset unknown_
SELECT webhook_dedup.webhook_mark_unknown('views', 'views:unknown', :'unknown_t', 'timeout') AS unknown;
SELECT claim_token AS t FROM webhook_dedup.webhook_claim('views', 'views:expired', lease => '10 milliseconds') \gset expired_
SELECT claim_token AS t FROM webhook_dedup.webhook_claim('views', 'views:conflict', payload => '{"v":1}'::bytea) \gset conflict_
SELECT webhook_dedup.webhook_complete('views', 'views:conflict', :'conflict_t') AS completed;
SELECT outcome FROM webhook_dedup.webhook_claim('views', 'views:conflict', payload => '{"v":2}'::bytea);
SELECT pg_sleep(0.05);
-- key_states: keys per state (completed keys are not counted: they are
-- history), the oldest pending key's age, expired leases, paused keys
SELECT source, state, keys, oldest_pending_age IS NOT NULL AS has_pending_age,
       oldest_lease_age IS NOT NULL AS has_lease_age, expired_leases, paused_keys, paused_at
  FROM webhook_dedup.key_states WHERE source = 'views' ORDER BY state;
-- stuck_claims: processing keys whose lease expired (their holder died)
SELECT source, idem_key, attempt, deliveries FROM webhook_dedup.stuck_claims WHERE source = 'views';
-- queue_backlog: work due now per source (pending keys, expired leases,
-- due retries: not the failed key, due in an hour)
SELECT source, due_keys FROM webhook_dedup.queue_backlog WHERE source = 'views';
-- dead_letters and unknown_outcomes: the keys waiting for an operator
SELECT source, idem_key, event_type, attempts, last_error FROM webhook_dedup.dead_letters WHERE source = 'views';
SELECT source, idem_key, event_type, attempts, last_error FROM webhook_dedup.unknown_outcomes WHERE source = 'views';
-- conflicts: deliveries whose payload differed from the key's
SELECT source, idem_key, via, stored_fingerprint <> fingerprint AS differs, state, key_conflicts
  FROM webhook_dedup.conflicts WHERE source = 'views';
-- key_history: everything about one key
\x on
SELECT source, idem_key, state, event_type, attempts, deliveries, conflicts, last_step, last_error, result,
       completed_at IS NOT NULL AS completed, redacted_at, redriven_at, reconciled_at
  FROM webhook_dedup.key_history WHERE idem_key = 'views:conflict';
\x off
-- The maintenance pass sweeps the expired lease: the key is failed, due
-- at once, saying which lease expired (lapsed_leases).
SET client_min_messages = error;
SELECT ran FROM webhook_dedup.run_maintenance();
SET client_min_messages = warning;
SELECT source, idem_key, attempt, last_error LIKE 'lease of attempt 1 expired at %' AS says_which
  FROM webhook_dedup.lapsed_leases WHERE source = 'views';
SELECT count(*) AS stuck FROM webhook_dedup.stuck_claims WHERE source = 'views';
-- A delivery of it now reclaims it, attempt 2.
SELECT outcome, attempt FROM webhook_dedup.webhook_claim('views', 'views:expired');

--
-- 4. The counters: every delivery counted by source, event type and
--    outcome, in shared memory until a flush (with the library preloaded;
--    without it nothing is counted). Their columns:
--
SELECT * FROM webhook_dedup.duplicate_metrics LIMIT 0;
SELECT * FROM webhook_dedup.duplicate_metrics_by_minute LIMIT 0;
SELECT * FROM webhook_dedup.duplicate_rate_alerts() LIMIT 0;
SELECT * FROM webhook_dedup.metrics_live() LIMIT 0;
SELECT webhook_dedup.flush_metrics() >= 0 AS flushed;
SELECT * FROM webhook_dedup.redrive_runs LIMIT 0;

--
-- 5. 2BP01: DROP EXTENSION refuses while objects of your own depend on it
--    (a view over its views, a trigger calling webhook_monotonic_guard).
--
CREATE VIEW views_open_work AS SELECT source, state, keys FROM webhook_dedup.key_states;
DROP EXTENSION webhook_dedup;
DROP VIEW views_open_work;
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'webhook_dedup';
