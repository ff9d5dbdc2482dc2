-- webhook_dedup: views, comments and the first partitions (runs last in
-- the install script, after every generated function exists).

CREATE VIEW webhook_dedup.duplicate_metrics AS
SELECT c.source,
       c.bucket,
       pg_catalog.sum(c.deliveries)::bigint AS deliveries,
       pg_catalog.sum(c.first_claims)::bigint AS first_claims,
       pg_catalog.sum(c.reclaims)::bigint AS reclaims,
       (pg_catalog.sum(c.duplicates_of_completed) + pg_catalog.sum(c.duplicates_in_progress))::bigint AS duplicates,
       pg_catalog.sum(c.duplicates_of_completed)::bigint AS duplicates_of_completed,
       pg_catalog.sum(c.duplicates_in_progress)::bigint AS duplicates_in_progress,
       pg_catalog.sum(c.conflicts)::bigint AS conflicts,
       pg_catalog.sum(c.completions)::bigint AS completions,
       pg_catalog.sum(c.stale_completions)::bigint AS stale_completions,
       CASE WHEN pg_catalog.sum(c.deliveries) > 0
            THEN ((pg_catalog.sum(c.duplicates_of_completed) + pg_catalog.sum(c.duplicates_in_progress))
                  / pg_catalog.sum(c.deliveries))::double precision
       END AS duplicate_ratio
  FROM (SELECT bucket, source, deliveries, first_claims, reclaims, duplicates_of_completed,
               duplicates_in_progress, conflicts, completions, stale_completions
          FROM webhook_dedup.claim_counts
        UNION ALL
        SELECT l.bucket, l.source, l.counts[1], l.counts[2], l.counts[3], l.counts[4],
               l.counts[5], l.counts[6], l.counts[10], l.counts[11]
          FROM webhook_dedup.metrics_live() AS l) AS c
 GROUP BY c.source, c.bucket;

COMMENT ON VIEW webhook_dedup.duplicate_metrics IS
  'Counts per source and hour (bucket): deliveries (webhook_claim and webhook_enqueue calls), first_claims, reclaims (after an expired lease or a due retry, by a claim or webhook_next), duplicates (= duplicates_of_completed + duplicates_in_progress: deliveries of a completed key, and of a key not completed yet), conflicts, completions, stale_completions, and duplicate_ratio = duplicates / deliveries. Flushed counts plus the live shared-memory counts of this database; what a crash or an aborted flush can lose is in docs/design.md (Metrics). Empty without shared_preload_libraries.';

COMMENT ON FUNCTION webhook_dedup.metrics_live() IS
  'This database''s claim counters in shared memory, not yet flushed: bucket (hour), source, event_type and counts[] in the column order of webhook_dedup.claim_counts (deliveries first). Empty when the library is not preloaded.';
COMMENT ON FUNCTION webhook_dedup.flush_metrics() IS
  'Moves this database''s shared-memory claim counters into webhook_dedup.claim_counts; returns the number of (hour, source, event type) entries written (0 without shared_preload_libraries).';
COMMENT ON FUNCTION webhook_dedup.run_maintenance() IS
  'One maintenance pass, what the background worker runs every webhook_dedup.maintenance_interval: (1) expired processing leases become failed, due at once (or dead_lettered with no attempts left); (2) watermarks, conflicts, claim counts and maintenance runs past retention are deleted, and expired completed keys in the default partition; (3) metrics are flushed; (4) sources whose retention is shorter than their provider''s retry horizon are counted (a WARNING; see webhook_dedup.retention_warnings); (5) partitions of webhook_dedup.keys are created ahead (premake), and at most one partition past retention is dropped after carrying forward the keys that must live on (every key not completed, and completed keys within retention of their last activity). One row: ran (false: another pass holds the maintenance lock, or this is a standby; nothing done), the counts of each step, more (a step stopped at webhook_dedup.batch_size or a partition waits: call again) and errors (one entry per step that failed and was rolled back; the others ran). Each step waits at most 500 ms for a lock. Recorded in webhook_dedup.maintenance_runs. Without the worker, schedule it (pg_cron) at least once per partition_interval.';
COMMENT ON FUNCTION webhook_dedup.default_retention() IS
  'webhook_dedup.retention as an interval: how long history of sources without their own retention (webhook_dedup.sources.retention) is kept.';

COMMENT ON FUNCTION @extschema@.webhook_verify(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text) IS
  'webhook_verify(scheme, payload, headers, secrets, tolerance => NULL, at => now(), url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL) -> boolean. True when payload (the raw body) carries a valid signature of scheme under any of secrets (rotation). Schemes and their sources: github (X-Hub-Signature-256, docs.github.com "Validating webhook deliveries"), stripe (Stripe-Signature t=,v1=, docs.stripe.com/webhooks, 300 s), shopify (X-Shopify-Hmac-Sha256 base64, shopify.dev), slack (X-Slack-Signature v0= and X-Slack-Request-Timestamp, api.slack.com "Verifying requests", 300 s), standard or svix (webhook-id/timestamp/signature v1, Standard Webhooks spec, key = base64 after whsec_, 300 s), paddle (Paddle-Signature ts=;h1=, developer.paddle.com, 5 s), twilio (X-Twilio-Signature over url and form parameters or bodySHA256, twilio.com webhooks security; needs url), hmac (generic: signature_header, signature_prefix, algorithm sha1/sha256/sha512, encoding hex/base64). Windows are symmetric and inclusive; tolerance NULL = the provider''s default. False for any signature that does not verify. Errors: 22023 unknown scheme, no secrets, an empty, whitespace-padded or (standard) undecodable secret (named by position, never echoed), headers not a JSON object of strings or arrays of strings, a negative tolerance or one with months, an infinite at, url or hmac arguments given to another scheme or missing for theirs; 22004 a NULL argument or NULL secret. See docs/signatures.md.';
COMMENT ON FUNCTION @extschema@.webhook_verify_detail(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text) IS
  'webhook_verify_detail(same arguments as webhook_verify) -> one row (valid boolean, reason text, secret_index integer, signed_at timestamptz). reason: ok, missing_header, malformed_header, unsupported_version, no_matching_signature, timestamp_too_old, timestamp_too_new. secret_index: 1-based position in secrets of the secret that matched (to know when an old secret can be retired). signed_at: the signed timestamp, for stripe, slack, standard and paddle. Errors as webhook_verify.';
COMMENT ON FUNCTION @extschema@.webhook_verify_github(bytea, text, text) IS
  'webhook_verify_github(payload, signature_header, secret) -> boolean: the X-Hub-Signature-256 value (sha256=<hex>) over the raw body. NULL signature_header is false; NULL payload or secret 22004.';
COMMENT ON FUNCTION @extschema@.webhook_verify_stripe(bytea, text, text, interval, timestamptz) IS
  'webhook_verify_stripe(payload, signature_header, secret, tolerance => NULL (300 s), at => now()) -> boolean: the Stripe-Signature value (t=<unix>,v1=<hex>), key = the whole whsec_ string.';
COMMENT ON FUNCTION @extschema@.webhook_verify_shopify(bytea, text, text) IS
  'webhook_verify_shopify(payload, hmac_header, secret) -> boolean: the X-Shopify-Hmac-Sha256 value (canonical base64) over the raw body.';
COMMENT ON FUNCTION @extschema@.webhook_verify_slack(bytea, text, text, text, interval, timestamptz) IS
  'webhook_verify_slack(payload, timestamp_header, signature_header, secret, tolerance => NULL (300 s), at => now()) -> boolean: X-Slack-Request-Timestamp and X-Slack-Signature (v0=<hex> over v0:{ts}:{body}).';
COMMENT ON FUNCTION @extschema@.webhook_verify_standard(bytea, text, text, text, text, interval, timestamptz) IS
  'webhook_verify_standard(payload, msg_id, msg_timestamp, signature_header, secret, tolerance => NULL (300 s), at => now()) -> boolean: Standard Webhooks / Svix (webhook-id, webhook-timestamp, webhook-signature v1,<base64> list); secret whsec_<base64>, undecodable is 22023.';
COMMENT ON FUNCTION @extschema@.webhook_verify_paddle(bytea, text, text, interval, timestamptz) IS
  'webhook_verify_paddle(payload, signature_header, secret, tolerance => NULL (5 s), at => now()) -> boolean: the Paddle-Signature value (ts=<unix>;h1=<hex>[;h1=...]) over {ts}:{body}.';
COMMENT ON FUNCTION @extschema@.webhook_verify_twilio(text, bytea, text, text) IS
  'webhook_verify_twilio(url, payload, signature_header, auth_token) -> boolean: X-Twilio-Signature (base64 HMAC-SHA1) over the full URL plus sorted form parameters, or for JSON bodies the URL carrying bodySHA256; the URL is tried with and without its default port.';
COMMENT ON FUNCTION @extschema@.webhook_hmac(bytea, bytea, text) IS
  'webhook_hmac(payload, secret, algorithm => ''sha256'') -> bytea: the raw HMAC (RFC 2104) with sha1, sha256 or sha512. Strict. Errors: 22023 empty secret or unknown algorithm.';
COMMENT ON FUNCTION @extschema@.webhook_sign(text, bytea, text, timestamptz, text, text, text, text, text, text) IS
  'webhook_sign(scheme, payload, secret, at => now(), msg_id => NULL, url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL) -> jsonb: the headers a sender would send, for tests and for sending webhooks (for example Standard Webhooks). msg_id is required for standard, url for twilio, signature_header for hmac (22004/22023 otherwise). Secret rules as webhook_verify.';
COMMENT ON FUNCTION @extschema@.webhook_key(text, text, text, text, text) IS
  'webhook_key(source, event_id, environment => NULL, account => NULL, operation => NULL) -> text. Scoped, injective idempotency key: source:event_id, or source:environment:account:event_id:operation when an optional part is given; parts escaped (% -> %25, : -> %3A); at most 255 characters (longer forms end in %h and a SHA-256). Errors: 22004 NULL source or event_id; 22023 empty part.';
COMMENT ON FUNCTION @extschema@.webhook_claim(text, text, bytea, interval, text) IS
  'webhook_claim(source, idem_key, payload => NULL, lease => NULL, event_type => NULL) -> one row (outcome, claim_token, attempt, state, result, last_step, first_seen_at, lease_expires_at). outcome: claimed or reclaimed (process it; claim_token set; resume from last_step), in_progress (answer 409 + Retry-After), duplicate (answer 2xx with result), conflict (same key, different payload; recorded in webhook_dedup.conflicts; result and last_step withheld), retry_later (a failure not due yet), unknown_outcome and dead_lettered (an operator decides). lease NULL = the source''s lease in webhook_dedup.sources, else webhook_dedup.default_lease. Atomic under a per-key lock; runs in the caller''s transaction. Errors: 22004 NULL source/idem_key; 22023 empty or over 255 characters, a lease that is not positive, over 365 days or has months; 40001 under REPEATABLE READ/SERIALIZABLE when a concurrent transaction changed the key after the snapshot.';
COMMENT ON FUNCTION @extschema@.webhook_complete(text, text, uuid, jsonb) IS
  'webhook_complete(source, idem_key, claim_token, result => NULL) -> boolean. True when claim_token holds the key''s lease: the key becomes completed and result is returned to later duplicates. False (nothing changed; counted as a stale completion) when the token is stale. Errors: P0002 unknown key; 22004 NULL argument.';

COMMENT ON FUNCTION @extschema@.webhook_fail(text, text, uuid, text, boolean, interval) IS
  'webhook_fail(source, idem_key, claim_token, error, retryable => true, retry_after => NULL) -> text: the new state. failed (due again after retry_after, else after min(30 s * 2^(attempt-1), 1 h)) while retryable and attempt < max_attempts (webhook_dedup.sources, else webhook_dedup.max_attempts); otherwise dead_lettered. NULL when claim_token is stale (nothing changes; counted as stale_tokens). error is stored as last_error. Errors: P0002 unknown key; 22004 NULL claim_token or retryable; 22023 a retry_after outside 0..365 days or with months.';
COMMENT ON FUNCTION @extschema@.webhook_mark_unknown(text, text, uuid, text) IS
  'webhook_mark_unknown(source, idem_key, claim_token, detail => NULL) -> boolean. The holder may have acted on an external system and lost the answer: the key becomes unknown_outcome (detail in last_error) and nothing processes it until webhook_resolve. False when claim_token is stale. Errors: P0002 unknown key; 22004 NULL source, idem_key or claim_token.';
COMMENT ON FUNCTION @extschema@.webhook_checkpoint(text, text, uuid, text) IS
  'webhook_checkpoint(source, idem_key, claim_token, step) -> boolean. Records the last completed step; a delivery that reclaims the key after a crash gets it as last_step and resumes there. Checkpoint in the same transaction as the step''s own writes. False when claim_token is stale. Errors: P0002 unknown key; 22004/22023 NULL or empty step.';
COMMENT ON FUNCTION @extschema@.webhook_extend_lease(text, text, uuid, interval) IS
  'webhook_extend_lease(source, idem_key, claim_token, lease) -> timestamptz: the new lease expiry (now + lease), or NULL when claim_token is stale (the lease was reclaimed: stop working). Errors: P0002 unknown key; 22023 a lease that is not positive, over 365 days or has months.';
COMMENT ON FUNCTION @extschema@.webhook_resolve(text, text, text, jsonb) IS
  'webhook_resolve(source, idem_key, new_state, result => NULL) -> text: the previous state. For operators and reconciliation jobs, from any state to completed (result stored when given), failed (retry now), dead_lettered or pending (hand it to the queue again); a processing key''s holder is fenced out. Errors: P0002 unknown key; 22023 another new_state.';
COMMENT ON FUNCTION @extschema@.webhook_forget(text, text) IS
  'webhook_forget(source, idem_key) -> boolean: removes the key so that a deliberate replay is processed again; true when it existed. For operators; counted as forgotten in the metrics.';
COMMENT ON FUNCTION @extschema@.webhook_enqueue(text, text, bytea, text, jsonb) IS
  'webhook_enqueue(source, idem_key, payload, event_type => NULL, headers => NULL) -> text: accepted (stored pending with its raw payload for webhook_next), duplicate (known in any state; nothing stored) or conflict (known with another payload; recorded in webhook_dedup.conflicts). Answer the provider 2xx for all three. Errors as webhook_claim; 22004 NULL payload.';
COMMENT ON FUNCTION @extschema@.webhook_next(text, interval, integer) IS
  'webhook_next(source => NULL, lease => NULL, batch => 1) -> rows (source, idem_key, claim_token, attempt, payload, event_type, last_step, headers): up to batch due keys (pending, expired leases, due retries), oldest first, each leased to the caller; a key due again with no attempts left is dead-lettered instead. Keys another worker or a claim holds are skipped, never waited for (each key lock is tried before its row is touched), so two workers never get the same key and a worker cannot deadlock with a claim. Finish each with webhook_complete or webhook_fail. Errors: 22004 NULL batch; 22023 batch outside 1..1000, a bad source or lease; 40001 under REPEATABLE READ when a key changed after the snapshot.';
COMMENT ON FUNCTION @extschema@.webhook_claim_many(text, text[], interval, text) IS
  'webhook_claim_many(source, idem_keys, lease => NULL, event_type => NULL) -> one row per distinct key (idem_key, then the columns of webhook_claim). The keys are claimed one by one in sorted order, so transactions claiming overlapping keys in any order never deadlock: the second waits for the first and then sees its keys in_progress or completed. No payload fingerprints. Errors as webhook_claim; 22004 a NULL key.';
CREATE VIEW webhook_dedup.providers AS
SELECT scheme, event_id, event_type, event_time, retry_horizon, notes, sources
  FROM webhook_dedup.provider_profiles();
COMMENT ON VIEW webhook_dedup.providers IS
  'What each scheme''s deliveries carry, as webhook_receive reads them: where the event id is (the idempotency key is built from it), the event type, the event time to order by (with its format), the provider''s documented retry horizon (retention should cover it) and the sources of these facts. The generic hmac scheme has no profile.';
COMMENT ON FUNCTION webhook_dedup.provider_profiles() IS
  'The built-in provider profiles as rows; read them through webhook_dedup.providers.';
COMMENT ON FUNCTION @extschema@.webhook_body_key(text, bytea, text, text, text) IS
  'webhook_body_key(source, payload, environment => NULL, account => NULL, operation => NULL) -> text. The key of an event without an event id: SHA-256 over the raw payload (%b and 64 hex digits where the event id goes; never equal to a webhook_key), scoped like webhook_key. Wrong when two distinct events have byte-identical bodies (one key) or a provider re-serialises a retry (a new key). Errors: 22004 NULL source or payload; 22023 empty part.';
COMMENT ON FUNCTION @extschema@.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean, interval, timestamptz, text, text, text, text, text) IS
  'webhook_receive(scheme, payload, headers, secrets, source => NULL, environment => NULL, account => NULL, operation => NULL, mode => ''claim'', lease => NULL, body_key_fallback => false, tolerance => NULL, at => now(), url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL) -> one row (verified, reject_reason, idem_key, outcome, claim_token, attempt, result, event_type, event_time, last_step). Verifies first and writes nothing for a delivery that fails (verified false, reject_reason as webhook_verify_detail); derives the key from the scheme''s profile (webhook_dedup.providers; source defaults to the scheme); a delivery without an event id gets reject_reason missing_event_id unless body_key_fallback; then claims (mode claim: outcome as webhook_claim) or stores for webhook_next (mode enqueue: accepted, duplicate, conflict). Errors as webhook_verify and webhook_claim; 22023 another mode.';

COMMENT ON FUNCTION @extschema@.webhook_advance(text, text, timestamptz, text, bigint) IS
  'webhook_advance(source, entity_id, source_updated_at, event_id => NULL, sequence => NULL) -> boolean. The out-of-order guard: true when the event is newer than every event seen for (source, entity_id) (apply it; the watermark moves), false when it is older (skip it; nothing changed). Ties on source_updated_at: the same event_id is an idempotent re-apply (true); with both sequences given the greater wins; any other tie is refused (false). One atomic upsert on webhook_dedup.watermarks; concurrent advances end at the newest event in any order. Errors: 22004 NULL source, entity_id or source_updated_at; 22023 empty or over 255 characters, an infinite time. See docs/ordering.md.';
COMMENT ON FUNCTION @extschema@.webhook_monotonic_guard() IS
  'Trigger function for the caller''s own tables: CREATE TRIGGER ... BEFORE INSERT OR UPDATE ... FOR EACH ROW EXECUTE FUNCTION webhook_monotonic_guard(''source_updated_at''). Skips an update whose new value of the named timestamptz/timestamp column is older than the stored one (the statement reports zero rows), also in INSERT ... ON CONFLICT DO UPDATE. Stored NULL: passes; incoming NULL over a stored value: skipped; equal: passes; inserts pass. Errors at trigger time: 22023 not exactly one argument; 42703 no such column; 42804 not a timestamp type; 39P01 not a BEFORE row trigger on INSERT or UPDATE.';

CREATE VIEW webhook_dedup.retention_warnings AS
WITH used AS (
  SELECT s.source FROM webhook_dedup.sources AS s
  UNION
  -- sources named after a provider that have keys (one index probe per partition)
  SELECT p.scheme FROM webhook_dedup.providers AS p
   WHERE EXISTS (SELECT FROM webhook_dedup.keys AS k WHERE k.source OPERATOR(pg_catalog.=) p.scheme)
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
            THEN pg_catalog.format('source %s keeps keys for %s after their last activity, less than the %s retry horizon of %s: a retry that comes later is processed again (raise webhook_dedup.sources.retention or webhook_dedup.retention)',
                                   c.source, c.retention, c.provider, c.retry_horizon)
            ELSE pg_catalog.format('source %s names provider %s, which has no profile in webhook_dedup.providers: its retention cannot be checked',
                                   c.source, c.provider)
       END AS message
  FROM checked AS c
 WHERE (c.known AND c.retry_horizon IS NOT NULL AND c.retention OPERATOR(pg_catalog.<) c.retry_horizon)
    OR (NOT c.known AND c.provider IS DISTINCT FROM c.source);
COMMENT ON VIEW webhook_dedup.retention_warnings IS
  'Sources kept for less than their provider''s documented retry horizon (a retry after the retention would be processed again), and sources whose webhook_dedup.sources.provider names no profile. One row each: source, provider, retention (webhook_dedup.sources.retention, else webhook_dedup.retention), retry_horizon (webhook_dedup.providers), message. Sources checked: every row of webhook_dedup.sources, and every provider scheme used as a source name that has keys. run_maintenance() raises the messages as WARNINGs. Empty is good.';

-- The first partitions, so claims never start in the default partition.
SELECT webhook_dedup.run_maintenance();
