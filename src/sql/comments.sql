-- webhook_dedup: the comments on the views, the roles and the functions
-- (schema.sql and distribute.sql comment their objects where they create
-- them). Runs last in the install script (`finalize`): after every
-- generated function, and after the roles privileges.sql creates. A long
-- text is split into adjacent string literals, one per line, which
-- PostgreSQL joins into one.

COMMENT ON FUNCTION webhook_dedup.metrics_live_cluster() IS
  'The live (not yet flushed) counters as webhook_dedup.metrics_live() returns them, of every node '
  'when webhook_dedup is distributed on Citus (webhook_dedup.distribute(); run on each node with '
  'run_command_on_all_nodes; a node that does not answer is left out with a WARNING), else of this '
  'server. The views over the counters read it.';
COMMENT ON VIEW webhook_dedup.counters IS
  'Every counter per bucket (bucket_width 1 hour: per source and event type; 1 minute: per source, '
  'event_type ''''), flushed (webhook_dedup.claim_counts) and live (shared memory, not flushed '
  'yet) as separate rows: sum them within one bucket_width (the minute rows count the last two '
  'hours again). Columns as webhook_dedup.claim_counts. Read webhook_dedup.duplicate_metrics or '
  'duplicate_metrics_by_minute instead unless you need event types.';
COMMENT ON VIEW webhook_dedup.metrics_buckets IS
  'webhook_dedup.counters summed per source, bucket and bucket_width over event types, flushed and '
  'live together, with duplicates, signature_rejections and duplicate_ratio. Filter on '
  'bucket_width (hour and minute rows count the same deliveries); duplicate_metrics and '
  'duplicate_metrics_by_minute are this view for one width.';

COMMENT ON VIEW webhook_dedup.duplicate_metrics IS
  'Counts per source and hour (bucket, UTC-aligned), flushed plus live: deliveries (webhook_claim '
  'and webhook_enqueue calls), first_claims, reclaims (after an expired lease or a due retry, by a '
  'claim or webhook_next), duplicates (= duplicates_of_completed + duplicates_in_progress), '
  'conflicts (same key, different payload), completions, stale_completions, retry_later, '
  'unknown_outcome and dead_lettered (claims answered so), retries_scheduled, dead_letters (keys '
  'that became dead_lettered), marked_unknown, enqueued, drained, forgotten, resolved, '
  'stale_tokens, expired_leases (swept by maintenance), signature_rejections (webhook_receive '
  'deliveries that did not verify, = the sum of the rejected_<reason> columns; '
  'rejected_token_reused: a signed token seen before with other content, mailgun), '
  'missing_event_ids, ignored (event types the source does not accept), replayed (signed bodies '
  're-sent under another event id, refused by the replay guard), duplicate_ratio = duplicates / '
  'deliveries (NULL without deliveries), and the outbox''s intents_written, intents_delivered, '
  'intent_retries, intents_dead_lettered, intents_unknown and intent_leases_expired '
  '(docs/outbox.md), and reconciled (events the provider sent that never arrived, enqueued by a '
  'reconciliation job with webhook_dedup.reconcile: a source with many is a leaky endpoint). What '
  'a crash can lose: docs/metrics.md. Empty without shared_preload_libraries. Filter on bucket: '
  'the condition reaches the index of webhook_dedup.claim_counts.';
COMMENT ON VIEW webhook_dedup.duplicate_metrics_by_minute IS
  'The columns of webhook_dedup.duplicate_metrics per source and minute, for the last hour '
  '(per-minute counts are kept two hours).';

COMMENT ON FUNCTION webhook_dedup.metrics_live() IS
  'This database''s counters in shared memory, not yet flushed: bucket, minute (true: a minute of '
  'a source, event_type ''''; false: an hour of a source and event type), source, event_type and '
  'counts[] in the column order of webhook_dedup.claim_counts (deliveries first). Empty when the '
  'library is not preloaded.';
COMMENT ON FUNCTION webhook_dedup.flush_metrics() IS
  'Moves this database''s shared-memory counters into webhook_dedup.claim_counts; returns the '
  'number of (hour, source, event type) and (minute, source) entries written (0 without '
  'shared_preload_libraries). For the extension''s owner (not granted to PUBLIC): the counts are '
  'taken before they are written, so a caller who cannot write them would lose them.';
COMMENT ON FUNCTION webhook_dedup.run_maintenance() IS
  'One maintenance pass, what the background worker runs every webhook_dedup.maintenance_interval: '
  '(1) expired processing leases become failed, due at once (or dead_lettered with no attempts '
  'left); (2) completed keys past retention are deleted with their payloads (a key active within '
  'its source''s retention of now is kept and looked at again later: keys_kept); (3) watermarks, '
  'replay guards, signed tokens, conflicts, claim counts and maintenance runs past retention are '
  'deleted; (4) metrics are flushed; (5) sources whose retention is shorter than their provider''s '
  'retry horizon are counted (a WARNING; see webhook_dedup.retention_warnings); (6) outbox intents '
  'whose sender''s lease lapsed are taken back (failed and due at once, dead_lettered, or '
  'unknown_outcome when their downstream is not idempotent: intents_expired) and delivered intents '
  'past their source''s retention deleted (intents_pruned); (7) the keys of running bulk redrives '
  '(webhook_dedup.redrive) are moved back to due, batch_size a pass (keys_redriven: moved or '
  'skipped); (8) the payload archive''s day partitions are made ahead (partitions_created) and '
  'dropped whole past the longest payload retention of the sources that keep payloads '
  '(partitions_dropped), and the rows of sources with a shorter payload retention deleted in paced '
  'batches (payloads_pruned). Keys a claim or their holder holds right now are skipped, never '
  'waited for. One row: ran (false: another pass holds the maintenance lock, or this is a standby; '
  'nothing done), the counts of each step, more (a step stopped at webhook_dedup.batch_size: call '
  'again) and errors (one entry per step that failed and was rolled back; the others ran). '
  'Recorded in webhook_dedup.maintenance_runs. Without the worker, schedule it (pg_cron) every '
  'minute or so (expired leases are only swept by maintenance).';
COMMENT ON FUNCTION webhook_dedup.default_retention() IS
  'webhook_dedup.retention as an interval: how long history of sources without their own retention '
  '(webhook_dedup.sources.retention) is kept.';

COMMENT ON FUNCTION webhook_dedup.webhook_verify(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text, text) IS
  'webhook_dedup.webhook_verify(scheme, payload, headers, secrets, tolerance => NULL, at => now(), '
  'url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => '
  'NULL, method => NULL) -> boolean. True when payload (the raw body) carries a valid signature of '
  'scheme under any of secrets (rotation). Schemes: github, stripe, shopify, slack, standard '
  '(aliases svix, clerk, resend; v1a with whpk_ Ed25519 public keys), paddle, twilio, zoom, '
  'twitter (X), square, hubspot, twitch, intercom, typeform, calendly, discord (Ed25519 public '
  'key), sendgrid (ECDSA P-256 public key), mailgun (signature in the body), linear, hmac; each '
  'one''s rule, window and source are in docs/signatures.md (and the profiles in '
  'webhook_dedup.providers). url is the request URL (twilio, square and hubspot sign it), method '
  'the request method (hubspot signs it; ignored by the others); hmac is the generic scheme '
  '(signature_header, signature_prefix, algorithm sha1/sha256/sha512, encoding hex/base64). '
  'Windows are symmetric and inclusive; tolerance NULL = the provider''s default. False for any '
  'signature that does not verify. Errors: 22023 unknown scheme, no secrets, an empty, '
  'whitespace-padded or (standard) undecodable secret, or a public key that is no key of its kind '
  '(named by position, never echoed), headers not a JSON object of strings or arrays of strings, a '
  'negative tolerance or one with months, an infinite at, url or hmac arguments given to another '
  'scheme or missing for theirs, a missing method for hubspot; 22004 a NULL argument or NULL '
  'secret.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_detail(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text, text) IS
  'webhook_dedup.webhook_verify_detail(same arguments as webhook_verify) -> one row (valid '
  'boolean, reason text, secret_index integer, signed_at timestamptz). reason: ok, missing_header, '
  'malformed_header, unsupported_version, no_matching_signature, timestamp_too_old, '
  'timestamp_too_new. secret_index: 1-based position in secrets of the secret that matched (to '
  'know when an old secret can be retired). signed_at: the signed timestamp, for stripe, slack, '
  'standard and paddle. Errors as webhook_verify.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_github(bytea, text, text) IS
  'webhook_dedup.webhook_verify_github(payload, signature_header, secret) -> boolean: the '
  'X-Hub-Signature-256 value (sha256=<hex>) over the raw body. NULL signature_header is false; '
  'NULL payload or secret 22004.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_stripe(bytea, text, text, interval, timestamptz) IS
  'webhook_dedup.webhook_verify_stripe(payload, signature_header, secret, tolerance => NULL (300 '
  's), at => now()) -> boolean: the Stripe-Signature value (t=<unix>,v1=<hex>), key = the whole '
  'whsec_ string.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_shopify(bytea, text, text) IS
  'webhook_dedup.webhook_verify_shopify(payload, hmac_header, secret) -> boolean: the '
  'X-Shopify-Hmac-Sha256 value (canonical base64) over the raw body.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_slack(bytea, text, text, text, interval, timestamptz) IS
  'webhook_dedup.webhook_verify_slack(payload, timestamp_header, signature_header, secret, '
  'tolerance => NULL (300 s), at => now()) -> boolean: X-Slack-Request-Timestamp and '
  'X-Slack-Signature (v0=<hex> over v0:{ts}:{body}).';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_standard(bytea, text, text, text, text, interval, timestamptz) IS
  'webhook_dedup.webhook_verify_standard(payload, msg_id, msg_timestamp, signature_header, secret, '
  'tolerance => NULL (300 s), at => now()) -> boolean: Standard Webhooks / Svix (webhook-id, '
  'webhook-timestamp, webhook-signature v1,<base64> list); secret whsec_<base64>, undecodable is '
  '22023.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_paddle(bytea, text, text, interval, timestamptz) IS
  'webhook_dedup.webhook_verify_paddle(payload, signature_header, secret, tolerance => NULL (5 s), '
  'at => now()) -> boolean: the Paddle-Signature value (ts=<unix>;h1=<hex>[;h1=...]) over '
  '{ts}:{body}.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_twilio(text, bytea, text, text) IS
  'webhook_dedup.webhook_verify_twilio(url, payload, signature_header, auth_token) -> boolean: '
  'X-Twilio-Signature (base64 HMAC-SHA1) over the full URL plus sorted form parameters, or for '
  'JSON bodies the URL carrying bodySHA256; the URL is tried with and without its default port.';
COMMENT ON FUNCTION webhook_dedup.webhook_hmac(bytea, bytea, text) IS
  'webhook_dedup.webhook_hmac(payload, secret, algorithm => ''sha256'') -> bytea: the raw HMAC '
  '(RFC 2104) with sha1, sha256 or sha512. Strict. Errors: 22023 empty secret or unknown algorithm.';
COMMENT ON FUNCTION webhook_dedup.webhook_sign(text, bytea, text, timestamptz, text, text, text, text, text, text, text) IS
  'webhook_dedup.webhook_sign(scheme, payload, secret, at => now(), msg_id => NULL, url => NULL, '
  'signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL, method '
  '=> NULL) -> jsonb: the headers a sender would send, for tests and for sending webhooks (for '
  'example Standard Webhooks). msg_id is required for standard and twitch (and is the token for '
  'mailgun, whose result is the signature member to merge into the body), url for twilio, square '
  'and hubspot, method for hubspot, signature_header for hmac (22004/22023 otherwise); schemes '
  'signed with a private key (discord, sendgrid, standard with a whpk_ key) cannot be signed here '
  '(22023). Secret rules as webhook_verify.';
COMMENT ON FUNCTION webhook_dedup.webhook_key(text, text, text, text, text) IS
  'webhook_dedup.webhook_key(source, event_id, environment => NULL, account => NULL, operation => '
  'NULL) -> text. Scoped, injective idempotency key: source:event_id, or '
  'source:environment:account:event_id:operation when an optional part is given; parts escaped (% '
  '-> %25, : -> %3A); at most 255 characters (longer forms end in %h and a SHA-256). Errors: 22004 '
  'NULL source or event_id; 22023 empty part.';
COMMENT ON FUNCTION webhook_dedup.webhook_claim(text, text, bytea, interval, text) IS
  'webhook_dedup.webhook_claim(source, idem_key, payload => NULL, lease => NULL, event_type => '
  'NULL) -> one row (outcome, claim_token, attempt, state, result, last_step, first_seen_at, '
  'lease_expires_at). outcome: claimed or reclaimed (process it; claim_token set; resume from '
  'last_step), in_progress (someone holds a live lease), duplicate (result: what the first '
  'completion stored), conflict (same key, different payload; recorded in webhook_dedup.conflicts; '
  'result and last_step withheld), retry_later (a failure not due yet), unknown_outcome and '
  'dead_lettered (an operator decides). The HTTP answer of each: '
  'webhook_dedup.http_answer(outcome, scheme, result). lease NULL = the source''s lease in '
  'webhook_dedup.sources, else webhook_dedup.default_lease. Atomic: the primary key arbitrates a '
  'new key, the row lock every later write; runs in the caller''s transaction. Errors: 22004 NULL '
  'source/idem_key; 22023 empty or over 255 characters, a lease that is not positive, over 365 '
  'days or has months; 40001 under REPEATABLE READ/SERIALIZABLE when a concurrent transaction '
  'changed the key after the snapshot.';
COMMENT ON FUNCTION webhook_dedup.webhook_complete(text, text, uuid, jsonb) IS
  'webhook_dedup.webhook_complete(source, idem_key, claim_token, result => NULL) -> boolean. True '
  'when claim_token holds the key''s lease: the key becomes completed and result is returned to '
  'later duplicates. False (nothing changed; counted as a stale completion) when the token is '
  'stale. Errors: P0002 unknown key; 22004 NULL argument.';

COMMENT ON FUNCTION webhook_dedup.webhook_fail(text, text, uuid, text, boolean, interval) IS
  'webhook_dedup.webhook_fail(source, idem_key, claim_token, error, retryable => true, retry_after '
  '=> NULL) -> text: the new state. failed (due again after retry_after, else after min(30 s * '
  '2^(attempt-1), 1 h)) while retryable and attempt < max_attempts (webhook_dedup.sources, else '
  'webhook_dedup.max_attempts); otherwise dead_lettered. NULL when claim_token is stale (nothing '
  'changes; counted as stale_tokens). error is stored as last_error. Errors: P0002 unknown key; '
  '22004 NULL claim_token or retryable; 22023 a retry_after outside 0..365 days or with months.';
COMMENT ON FUNCTION webhook_dedup.webhook_mark_unknown(text, text, uuid, text) IS
  'webhook_dedup.webhook_mark_unknown(source, idem_key, claim_token, detail => NULL) -> boolean. '
  'The holder may have acted on an external system and lost the answer: the key becomes '
  'unknown_outcome (detail in last_error) and nothing processes it until webhook_resolve. False '
  'when claim_token is stale. Errors: P0002 unknown key; 22004 NULL source, idem_key or '
  'claim_token.';
COMMENT ON FUNCTION webhook_dedup.webhook_checkpoint(text, text, uuid, text) IS
  'webhook_dedup.webhook_checkpoint(source, idem_key, claim_token, step) -> boolean. Records the '
  'last completed step; a delivery that reclaims the key after a crash gets it as last_step and '
  'resumes there. Checkpoint in the same transaction as the step''s own writes. False when '
  'claim_token is stale. Errors: P0002 unknown key; 22004/22023 NULL or empty step.';
COMMENT ON FUNCTION webhook_dedup.webhook_extend_lease(text, text, uuid, interval) IS
  'webhook_dedup.webhook_extend_lease(source, idem_key, claim_token, lease) -> timestamptz: the '
  'new lease expiry (now + lease), or NULL when claim_token is stale (the lease was reclaimed: '
  'stop working). Errors: P0002 unknown key; 22023 a lease that is not positive, over 365 days or '
  'has months.';
COMMENT ON FUNCTION webhook_dedup.webhook_resolve(text, text, text, jsonb) IS
  'webhook_dedup.webhook_resolve(source, idem_key, new_state, result => NULL) -> text: the '
  'previous state. For operators and reconciliation jobs, from any state to completed (result '
  'stored when given), failed (retry now), dead_lettered or pending (hand it to the queue again); '
  'a processing key''s holder is fenced out. Errors: P0002 unknown key; 22023 another new_state.';
COMMENT ON FUNCTION webhook_dedup.pause(text, text) IS
  'webhook_dedup.pause(source, reason => NULL) -> bigint: pauses the source while a system its '
  'processing needs is down. Intake goes on (webhook_claim, webhook_receive and webhook_enqueue '
  'answer and store as before: claims are not refused); webhook_next takes none of its keys: its '
  'pending and failed keys are parked (due_at infinity; the count returned), and a key that '
  'becomes due later is parked by the webhook_next that meets it. Keys in flight keep their lease. '
  'Recorded in webhook_dedup.sources (paused_at, paused_by: the session user, pause_reason; a row '
  'is made for a source without one); pausing a paused source keeps its first pause and takes the '
  'new reason. key_states shows the paused backlog. Executable by webhook_dedup_operator. Errors: '
  '22004 NULL source; 22023 an empty source or one over 255 characters. Distributed on Citus, the '
  'same (sources is a reference table: the pause reaches every node). docs/operations.md, '
  '"Pausing a source".';
COMMENT ON FUNCTION webhook_dedup.resume(text) IS
  'webhook_dedup.resume(source) -> bigint: ends a pause (webhook_dedup.pause): clears paused_at, '
  'paused_by and pause_reason, and makes the parked keys due as before it (a failed key at its '
  'retry time, a pending key at its first delivery, so the oldest is taken first); returns how '
  'many. Unparks keys left parked even when the source is not paused (its row was deleted during a '
  'pause). Waits for a webhook_next that is parking a key of the source, so none stays parked. '
  'Executable by webhook_dedup_operator. Errors: 22004 NULL source; 22023 an empty source or one '
  'over 255 characters. Distributed on Citus, the same.';
COMMENT ON FUNCTION webhook_dedup.redact(text, text, timestamptz, text) IS
  'webhook_dedup.redact(source, idem_key => NULL, before => NULL, account => NULL) -> (keys '
  'bigint, deliveries bigint): erases what deliveries of source carried, for exactly one scope: '
  'one key (idem_key; its archived deliveries even when the key is gone), the keys first seen '
  'before a time (before; and every delivery of the source archived before it), or the keys '
  'derived with one account (account: the third field of a webhook_key with account; a key whose '
  'account field was cut by the 255-character bound is not found), and the archived deliveries of '
  'that key, time or account whose key is gone. Each key keeps its state, fingerprint and times (a '
  'tombstone: later deliveries are still answered duplicate or conflict, never processed again); '
  'its result becomes NULL, redacted_at and redacted_by (the session user) are set '
  '(webhook_dedup.key_history); its payload for the workers (webhook_dedup.payloads) and its '
  'archived bodies and headers (webhook_dedup.archive) are deleted. A key waiting for a worker '
  '(pending, or failed with its payload queued) cannot be processed without it: it becomes '
  'dead_lettered, last_error payload erased by webhook_dedup.redact (else last_error becomes '
  'NULL). keys: keys redacted; deliveries: payloads and archived deliveries erased. Recorded in '
  'webhook_dedup.redactions when anything was erased (who, when, how many, the relations erased '
  'from). The erased bytes stay in the free space of those relations'' data files (heap and TOAST) '
  'until overwritten: webhook_dedup.purge_redactions rewrites them (docs/security.md, "Erased '
  'data"). before and account scan the keys table (its primary key leads with idem_key) and the '
  'source''s archived deliveries. Executable by webhook_dedup_operator. Errors: 22004 NULL source; '
  '22023 a bad source or key, not exactly one scope, an empty account, an infinite before; 0A000 '
  'on a distributed install. docs/operations.md, "Erasing payloads".';
COMMENT ON FUNCTION webhook_dedup.source_node(text) IS
  'source_node(source) -> rows (node_name, node_port, group_id, shard_id): on a distributed '
  'install (Citus), the primary node that holds source''s shard of webhook_dedup.keys (one row; '
  'one per placement of a replicated shard), from the Citus metadata of the node it runs on. A '
  'receiver or a per-node pooler that sends a source''s calls there saves the coordinator''s '
  'planning and round trip, and the calls write the shard directly (the local-shard fast path). No '
  'row on a server that is not distributed. A route can go stale when a shard moves: a call that '
  'reaches a node without the shard is still delegated to the right one (one hop more); ask again '
  'then. Executable by webhook_dedup_receiver, webhook_dedup_operator and webhook_dedup_reader. '
  'Errors: 22004 NULL source; 22023 an empty source, one over 255 characters or the reserved '
  '(overflow). docs/distributed.md.';
COMMENT ON FUNCTION webhook_dedup.unseen(text, text[], text, text, text) IS
  'webhook_dedup.unseen(source, event_ids, environment => NULL, account => NULL, operation => '
  'NULL) -> setof text: of the provider''s event ids (as its API lists them: Stripe''s list of '
  'events, GitHub''s list of deliveries, ...), those source has no key for, in the order given, '
  'each once: events that never reached this database, or whose key is past retention. Keys are '
  'derived as webhook_receive derives them, with the same environment, account and operation. One '
  'primary-key probe per id; at most 100,000 ids per call. Enqueue what it returns '
  '(webhook_enqueue) so that the workers process it. Executable by webhook_dedup_reader (it writes '
  'nothing). Errors: 22004 NULL source, event_ids or id; 22023 a bad source, an empty id or part, '
  'too many ids. docs/operations.md, "Reconciling with the provider".';
COMMENT ON FUNCTION webhook_dedup.reconcile(text, text, bytea, text, jsonb, text, text, text) IS
  'webhook_dedup.reconcile(source, event_id, payload, event_type => NULL, headers => NULL, '
  'environment => NULL, account => NULL, operation => NULL) -> text: enqueues an event a '
  'reconciliation job fetched from the provider''s API because it never arrived '
  '(webhook_dedup.unseen): stored as webhook_enqueue stores a delivery (pending for webhook_next, '
  'with payload and headers; archived when the source keeps payloads) under the key '
  'webhook_receive derives from event_id with the same environment, account and operation, and '
  'marked reconciled_at on the key (key_history). accepted: counted as reconciled '
  '(webhook_dedup.duplicate_metrics; not as a delivery), which duplicate_rate_alerts reports as '
  'reconciled_above_threshold; duplicate or conflict: the key exists by then (it arrived '
  'meanwhile; counted on the key as a delivery of it unless it came within '
  'webhook_dedup.duplicate_record_interval of the key''s last recorded activity, nothing else '
  'stored). Executable by webhook_dedup_receiver. Errors: 22004 NULL source, event_id or payload; '
  '22023 a bad source, an empty id or part. docs/operations.md, "Reconciling with the provider".';
COMMENT ON FUNCTION webhook_dedup.redrive(text, text[], timestamptz, timestamptz, text[], bigint, boolean) IS
  'webhook_dedup.redrive(source, states => ARRAY[''dead_lettered''], since => NULL, until => NULL, '
  'event_types => NULL, max => NULL, dry_run => false) -> (run bigint, matched bigint): after a '
  'fix, moves keys of source back to due so that the workers (webhook_next) process them again '
  'with their payload. states: dead_lettered (the default), failed, unknown_outcome (only when '
  'named: its effect may have happened), conflict (keys whose latest conflicting delivery is '
  'archived: that delivery is processed and becomes the key''s content). since, until: first seen '
  '(a conflict: received) in [since, until); event_types; max: at most this many, oldest first. '
  'dry_run: count, change nothing (run NULL). A real run is recorded (webhook_dedup.redrive_runs) '
  'and the maintenance worker moves its keys, webhook_dedup.batch_size per pass, skipping a paused '
  'source until it is resumed: each key, under its row lock, is skipped when a live delivery or an '
  'operator changed it since it matched (so no key is processed twice), when it is gone, or when '
  'there is no payload for the workers (claimed, not enqueued, and not archived: keep_payload; or '
  'redacted, or past its payload retention); else its payload is put in the queue (from the '
  'archive) and it becomes pending, due now, with redriven_at and redrive_run set (key_history); '
  'what became of each key is in webhook_dedup.redrive_keys (outcome). NOTICEs say how many '
  'matched keys have no payload to redrive (they will be skipped as no_payload) and when the '
  'source keeps no payloads (keep_payload). Executable by webhook_dedup_operator. Errors: 22004 '
  'NULL source, states, a state or dry_run; 22023 a bad source, no state or another one, since not '
  'before until, an infinite time, max below 1; 0A000 on a distributed install. '
  'docs/operations.md, "Redriving after a fix".';
COMMENT ON FUNCTION webhook_dedup.cancel_redrive(bigint) IS
  'webhook_dedup.cancel_redrive(run) -> bigint: stops a running bulk redrive (status cancelled, '
  'cancelled_by the session user); the keys it has not moved stay as they are, a batch being moved '
  'finishes first. Returns the keys it moved. A finished run is left as it is. Executable by '
  'webhook_dedup_operator. Errors: 22004 NULL run; P0002 unknown run; 0A000 on a distributed '
  'install.';
COMMENT ON FUNCTION webhook_dedup.webhook_forget(text, text) IS
  'webhook_dedup.webhook_forget(source, idem_key) -> boolean: removes the key so that a deliberate '
  'replay is processed again; true when it existed. For operators; counted as forgotten in the '
  'metrics.';
COMMENT ON FUNCTION webhook_dedup.webhook_enqueue(text, text, bytea, text, jsonb) IS
  'webhook_dedup.webhook_enqueue(source, idem_key, payload, event_type => NULL, headers => NULL) '
  '-> text: accepted (stored pending with its raw payload for webhook_next), duplicate (known in '
  'any state; nothing stored) or conflict (known with another payload; recorded in '
  'webhook_dedup.conflicts). Answer the provider 2xx for all three. Errors as webhook_claim; 22004 '
  'NULL payload.';
COMMENT ON FUNCTION webhook_dedup.webhook_next(text, interval, integer) IS
  'webhook_dedup.webhook_next(source => NULL, lease => NULL, batch => 1) -> rows (source, '
  'idem_key, claim_token, attempt, payload, event_type, last_step, headers): up to batch due keys '
  '(pending, expired leases, due retries), oldest first, each leased to the caller; a key whose '
  'lease expired with no attempts left is dead-lettered instead. Keys of a paused source '
  '(webhook_dedup.pause) are not taken: a pending or failed one met is parked until '
  'webhook_dedup.resume. Keys another worker or a claim holds are skipped, never waited for (FOR '
  'NO KEY UPDATE SKIP LOCKED), so two workers never get the same key and a worker cannot deadlock '
  'with a claim. Finish each with webhook_complete or webhook_fail. Errors: 22004 NULL batch; '
  '22023 batch outside 1..1000, a bad source or lease; 40001 under REPEATABLE READ when a key '
  'changed after the snapshot.';
COMMENT ON FUNCTION webhook_dedup.webhook_claim_many(text, text[], interval, text) IS
  'webhook_dedup.webhook_claim_many(source, idem_keys, lease => NULL, event_type => NULL) -> one '
  'row per distinct key (idem_key, then the columns of webhook_claim). The keys are claimed one by '
  'one in sorted order, so transactions claiming overlapping keys in any order never deadlock: the '
  'second waits for the first and then sees its keys in_progress or completed. No payload '
  'fingerprints. Errors as webhook_claim; 22004 a NULL key.';
COMMENT ON VIEW webhook_dedup.providers IS
  'What each scheme''s deliveries carry, as webhook_receive reads them: where the event id is (the '
  'idempotency key is built from it), the event type, the event time to order by (with its '
  'format), the provider''s documented retry horizon (retention should cover it), the fingerprint '
  'rule (what part of the payload identifies the content: raw body, or the RFC 8785 canonical JSON '
  'of the values at some JSON pointers, leaving out what the provider changes between attempts), '
  'whether the replay guard is on by default (schemes that sign neither the event id nor a time), '
  'the handshake webhook_receive answers itself, how the provider takes answers '
  '(response_deadline: how long it waits for one, NULL where it documents none; default_wait: '
  'webhook_receive''s default wait for an in-flight duplicate, the deadline less a fifth of it and '
  'at least 1 s, from an assumed 3 s where none is documented; retries_4xx: whether it retries a '
  '4xx answer; disable_rule: what repeated failures do to the endpoint; stop_signal: the answer '
  'that stops its retries of one message, sent by webhook_dedup.http_answer with a final refusal), '
  'and the sources of these facts. A source overrides the intake settings in '
  'webhook_dedup.sources. The generic hmac scheme has no profile. Per provider: docs/providers.md.';
COMMENT ON FUNCTION webhook_dedup.http_answer(text, text, jsonb, interval, text) IS
  'webhook_dedup.http_answer(outcome, scheme => NULL, result => NULL, retry_after => NULL, mode => '
  '''claim'') -> one row (http_status integer, http_headers jsonb, response jsonb): the HTTP '
  'answer webhook_receive returns with its rows, for an outcome named by the caller: any outcome '
  'of webhook_claim, webhook_receive or webhook_enqueue; rejected (a signature that did not '
  'verify: 401), missing_event_id, repeated_header (a header the event id, type or time is read '
  'from, sent more than once) and refused_handshake (400, or the provider''s stop signal: Mailgun '
  '406, Slack X-Slack-No-Retry: 1, Svix webhook-delivery: abort-message); completed '
  '(webhook_complete returned true: 200 with result); lease_lost (webhook_complete or '
  'webhook_checkpoint returned false: 503); error (the database could not be asked: 500). Success '
  'is always 200 (Mailgun, Paddle, Linear, X and Intercom count only 200); duplicate, conflict, '
  'unknown_outcome and dead_lettered are 200 (a 409 or 422 makes some providers drop the event and '
  'counts toward disabling the endpoint at others); in_progress, retry_later and lease_lost are '
  '503 with Retry-After (retry_after rounded up to whole seconds, at least 1; none when NULL). '
  'http_headers always has Content-Type: application/json; response is result (duplicate, '
  'completed, handshake) or {"status": outcome}, {"error": ...}, NULL for claimed and reclaimed. '
  'The rules and their sources: docs/providers.md. Changes nothing; every role may call it. '
  'Errors: 22004 NULL outcome or mode; 22023 an unknown outcome, scheme or mode, an outcome the '
  'mode never ends in, a negative retry_after or one with months.';
COMMENT ON FUNCTION webhook_dedup.provider_profiles() IS
  'The built-in provider profiles as rows; read them through webhook_dedup.providers.';
COMMENT ON FUNCTION webhook_dedup.webhook_body_key(text, bytea, text, text, text) IS
  'webhook_dedup.webhook_body_key(source, payload, environment => NULL, account => NULL, operation '
  '=> NULL) -> text. The key of an event without an event id: SHA-256 over the raw payload (%b and '
  '64 hex digits where the event id goes; never equal to a webhook_key), scoped like webhook_key. '
  'Wrong when two distinct events have byte-identical bodies (one key) or a provider re-serialises '
  'a retry (a new key). Errors: 22004 NULL source or payload; 22023 empty part.';
COMMENT ON FUNCTION webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean, interval, timestamptz, text, text, text, text, text, text, interval) IS
  'webhook_dedup.webhook_receive(scheme, payload, headers, secrets => NULL, source => NULL, '
  'environment => NULL, account => NULL, operation => NULL, mode => ''claim'', lease => NULL, '
  'body_key_fallback => false, tolerance => NULL, at => now(), url => NULL, signature_header => '
  'NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL, method => NULL, wait => '
  'NULL) -> one row (verified, reject_reason, idem_key, outcome, claim_token, attempt, result, '
  'event_type, event_time, last_step, response, secret_index, http_status, http_headers). Answer '
  'the provider with http_status, http_headers and response, for every outcome '
  '(webhook_dedup.http_answer: 200 for duplicates, conflicts and parked keys, 503 with Retry-After '
  'for in_progress and retry_later, 401 for a bad signature, 400 for what no retry can fix; for '
  'claimed and reclaimed, http_status and http_headers once the work committed, with your own '
  'result as the body). (1) Verifies with secrets, or with secrets NULL with the source''s keys in '
  'webhook_dedup.source_secrets valid at at (secret_index: the position of the secret that '
  'verified, or the key''s id), and writes nothing for a delivery that fails (verified false, '
  'reject_reason as webhook_verify_detail); stored keys verify only the scheme add_secret accepted '
  'them for. A scheme whose signature covers nothing of the body (mailgun) binds its signed token '
  'to the bytes it first arrived with (webhook_dedup.signature_tokens): the token on other bytes '
  'is refused (verified false, reject_reason token_reused), nothing else written. (2) Answers a '
  'provider handshake: outcome handshake, response = the JSON body to answer, nothing stored '
  '(slack url_verification, zoom endpoint.url_validation and the discord PING once verified; the '
  'unsigned twitter CRC, payload empty and the request URL in url, before verification with '
  'verified false); an answer that could sign a forged delivery is refused (reject_reason '
  'refused_handshake). (3) Reads the event id, type and time by the scheme''s profile '
  '(webhook_dedup.providers) with the source''s settings in its place (webhook_dedup.sources; '
  'source defaults to the scheme); an event type the source does not accept (accept_event_types) '
  'is outcome ignored, nothing stored. (4) A delivery without an event id gets reject_reason '
  'missing_event_id unless body_key_fallback; one whose event id, type or time header was sent '
  'more than once gets reject_reason repeated_header (400, nothing written: which value is the '
  'provider''s cannot be told; docs/signatures.md, "Repeated headers") (zoom and twitter, which '
  'send no id, are keyed on the body). url: Twilio, Square and HubSpot sign it, X''s CRC carries '
  'its token; ignored for a signed twitter delivery; method: HubSpot signs it. (5) With the '
  'source''s replay guard on (by default for github, shopify, linear and twilio, and for a source '
  'whose event_id_from is a header its scheme does not sign), a signed body (twilio: its canonical '
  'signed text) already received under another event id is answered from that key (duplicate, '
  'in_progress, unknown_outcome or dead_lettered; idem_key names it) and nothing is processed '
  '(webhook_dedup.replay_guards). (6) Claims (mode claim: outcome as webhook_claim) or stores for '
  'webhook_next (mode enqueue: accepted, duplicate, conflict; in_progress as below), with the '
  'fingerprint of the source''s rule (fingerprint_pointers, else the profile''s: the raw body; for '
  'stripe the RFC 8785 canonical JSON of /type and /data, so that a retry Stripe re-rendered is no '
  'conflict; for twilio the signed URL and form parameters sorted by name). (7) In mode claim, '
  'before it writes anything, a delivery whose key another worker holds with a live lease (a claim '
  'would answer in_progress) waits for that holder, at most wait (NULL: the provider''s '
  'default_wait in webhook_dedup.providers; 0 turns it off): holding no lock, woken when the '
  'holder''s transaction commits a change of the key (else every 500 ms at most, 100 ms without '
  'the library preloaded, and at the lease''s expiry), it then claims as usual, so a holder that '
  'completed in time makes the answer a duplicate''s 200 with the stored result, an expired lease '
  'a reclaim; a cancel or statement_timeout ends it at once. (8) The whole call is bounded by '
  'wait, in both modes: every lock wait after verification (a holder whose open transaction '
  'changed the key, a first claim not yet committed) ends by then, what the call wrote is rolled '
  'back, and it answers in_progress (503, Retry-After: the holder''s remaining lease, else the '
  'source''s lease); a session''s own lock_timeout that ends sooner raises 55P03 as before. Errors '
  'as webhook_verify and webhook_claim; 22023 another mode, a wait outside 0 to 60 seconds, a '
  'webhook_dedup.sources row whose intake settings do not check, or a stored key that cannot be a '
  'key of the scheme (named by id, never echoed); 55000 secrets NULL and no key of the source for '
  'the scheme valid at at; 25006 on a standby or in a read-only transaction, once it would write.';

COMMENT ON FUNCTION webhook_dedup.webhook_advance(text, text, timestamptz, text, bigint) IS
  'webhook_dedup.webhook_advance(source, entity_id, source_updated_at, event_id => NULL, sequence '
  '=> NULL) -> boolean. The out-of-order guard: true when the event is newer than every event seen '
  'for (source, entity_id) (apply it; the watermark moves), false when it is older (skip it; '
  'nothing changed). Ties on source_updated_at: the same event_id is an idempotent re-apply '
  '(true); with both sequences given the greater wins; any other tie is refused (false). One '
  'atomic upsert on webhook_dedup.watermarks; concurrent advances end at the newest event in any '
  'order. Errors: 22004 NULL source, entity_id or source_updated_at; 22023 empty or over 255 '
  'characters, an infinite time. See docs/ordering.md.';
COMMENT ON FUNCTION webhook_dedup.webhook_monotonic_guard() IS
  'Trigger function for the caller''s own tables: CREATE TRIGGER ... BEFORE INSERT OR UPDATE ... '
  'FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard(''source_updated_at''). '
  'Skips an update whose new value of the named timestamptz/timestamp column is older than the '
  'stored one (the statement reports zero rows), also in INSERT ... ON CONFLICT DO UPDATE. Stored '
  'NULL: passes; incoming NULL over a stored value: skipped; equal: passes; inserts pass. Errors '
  'at trigger time: 22023 not exactly one argument; 42703 no such column; 42804 not a timestamp '
  'type; 39P01 not a BEFORE row trigger on INSERT or UPDATE, or called as a plain function (SELECT '
  'webhook_dedup.webhook_monotonic_guard()).';
COMMENT ON FUNCTION webhook_dedup.source_has_history(text) IS
  'source_has_history(source) -> boolean: whether source has keys made by webhook_key or '
  'webhook_receive (idempotency keys starting with source:) or counted deliveries '
  '(webhook_dedup.claim_counts). Used by webhook_dedup.retention_warnings for sources named after '
  'a provider; executable by webhook_dedup_reader and pg_monitor.';
COMMENT ON VIEW webhook_dedup.retention_warnings IS
  'Sources kept for less than their provider''s documented retry horizon (a retry after the '
  'retention would be processed again), and sources whose webhook_dedup.sources.provider names no '
  'profile. One row each: source, provider, retention (webhook_dedup.sources.retention, else '
  'webhook_dedup.retention), retry_horizon (webhook_dedup.providers), message. Sources checked: '
  'every row of webhook_dedup.sources, and every provider scheme used as a source name that has '
  'keys made by webhook_key or webhook_receive, or counted deliveries. run_maintenance() raises '
  'the messages as WARNINGs. Empty is good.';
COMMENT ON VIEW webhook_dedup.key_states IS
  'Keys not completed, per source and state (pending, processing, failed, unknown_outcome, '
  'dead_lettered; one row per state that has keys): keys (count), oldest_pending_age (pending: how '
  'long the oldest pending key has been due, now - its due_at; the queue''s backlog), '
  'oldest_lease_age (processing: now - the oldest leased_at; the longest attempt in flight), '
  'expired_leases (processing: leases past expiry not swept yet), paused_keys (pending and failed '
  'keys parked by a pause of the source until webhook_dedup.resume: the paused backlog; they are '
  'not in oldest_pending_age), paused_at (when webhook_dedup.pause paused the source; NULL when it '
  'is not paused). Read from the partial index keys_open, which holds only keys not completed, so '
  'its cost follows the open work, never the history. Completed keys are not counted here: that '
  'would read every key kept for retention (see docs/metrics.md); their flow is '
  'duplicate_metrics.completions.';
COMMENT ON VIEW webhook_dedup.stuck_claims IS
  'Processing keys whose lease expired and that maintenance has not swept yet (the holder crashed '
  'or hangs): source, idem_key, event_type, attempt, leased_at, lease_expires_at, overdue (now - '
  'lease_expires_at), last_step, deliveries, first_seen_at. Normally empty or short-lived: the '
  'next maintenance pass moves them to failed (or dead_lettered). Reads the partial index '
  'keys_open.';
COMMENT ON VIEW webhook_dedup.lapsed_leases IS
  'Keys whose lease expired without a completion, swept to failed by maintenance and still due (no '
  'retry or webhook_next reclaimed them since): source, idem_key, event_type, attempt, last_error '
  '(lease of attempt N expired at T), last_step, due_at, last_seen_at. Rows that stay mean nothing '
  'retries them (a claim-mode key waits for the provider''s retry). Reads the partial index '
  'keys_open. For webhook_dedup_reader and pg_monitor, which have no access to webhook_dedup.keys.';
COMMENT ON VIEW webhook_dedup.queue_backlog IS
  'Work due now, per source: due_keys (pending keys, expired leases, failed keys whose retry is '
  'due: what webhook_next or a claim would take), oldest_due_at, oldest_due_age (now - '
  'oldest_due_at). Empty when nothing is due. Reads the partial index keys_open. For '
  'webhook_dedup_reader and pg_monitor, which have no access to webhook_dedup.keys.';
COMMENT ON VIEW webhook_dedup.dead_letters IS
  'Keys that will not be retried: out of attempts (webhook_dedup.max_attempts or the source''s), '
  'failed as not retryable, or dead-lettered by webhook_resolve. source, idem_key, event_type, '
  'attempts, last_error, last_step, deliveries, first_seen_at, last_seen_at. An operator decides: '
  'webhook_dedup.webhook_resolve(source, idem_key, ''failed'') retries now, ''completed'' closes '
  'it. Reads the partial index keys_open.';
COMMENT ON VIEW webhook_dedup.unknown_outcomes IS
  'Keys whose holder may have acted on an external system and lost the answer '
  '(webhook_mark_unknown): nothing processes them until an operator checks the external system and '
  'calls webhook_resolve. Columns as webhook_dedup.dead_letters (last_error holds the holder''s '
  'detail). Reads the partial index keys_open.';
COMMENT ON VIEW webhook_dedup.conflicts IS
  'One row per delivery of a known key with a different payload (nothing was processed for it): '
  'id, source, idem_key, seen_at, via (claim or enqueue), stored_fingerprint and fingerprint (the '
  'fingerprints of the first and of this payload, webhook_dedup.keys.fingerprint), and the key '
  'now: state, attempts, last_error, deliveries, key_conflicts (conflicting deliveries of the '
  'key), first_seen_at (NULL when the key is gone). Filter on seen_at or idem_key: both are '
  'indexed in webhook_dedup.conflict_log.';
COMMENT ON VIEW webhook_dedup.key_history IS
  'Everything known about a key: SELECT * FROM webhook_dedup.key_history WHERE idem_key = '
  '''github:...'' (an index scan of the primary key, which leads with idem_key). source, idem_key, '
  'state, event_type, first_seen_at, last_seen_at, completed_at, attempts (leases granted), '
  'deliveries (claims and enqueues, the first included: deliveries - 1 duplicates), conflicts, '
  'last_step, last_error, result (what webhook_complete stored), leased_at, lease_expires_at, '
  'next_attempt_at, due_at, last_conflict_at, redacted_at and redacted_by (when and by which '
  'session user webhook_dedup.redact erased the key''s payloads and result), redriven_at and '
  'redrive_run (when and by which bulk redrive, webhook_dedup.redrive_runs, the key was last made '
  'due again), reconciled_at (when a reconciliation job enqueued its event, which never arrived: '
  'webhook_dedup.reconcile). No payload or headers.';
COMMENT ON VIEW webhook_dedup.redrive_runs IS
  'One row per bulk redrive (webhook_dedup.redrive), newest last: id (what cancel_redrive takes), '
  'source, states (as named: dead_lettered, failed, unknown_outcome, conflict), since, until, '
  'event_types, max_keys, status (running: the maintenance worker moves its keys, batch_size a '
  'pass; paused: running, but its source is paused (webhook_dedup.pause), so nothing moves until '
  'webhook_dedup.resume; done; cancelled), matched (keys when it started), moved (made due again: '
  'webhook_next hands them out with their payload), skipped (changed since they matched, gone, or '
  'without a payload: which, per key, in webhook_dedup.redrive_keys.outcome, readable by '
  'webhook_dedup_operator), remaining, created_at, created_by, finished_at, cancelled_by. Finished '
  'runs are pruned after their source''s retention.';
COMMENT ON FUNCTION webhook_dedup.export_deliveries(text, timestamptz, timestamptz, text[], text[], boolean, integer) IS
  'webhook_dedup.export_deliveries(source, since, until, event_types => NULL, states => NULL, '
  'include_conflicts => false, max => 10000) -> rows (received_at, idem_key, event_id, event_type, '
  'conflict, state, payload, headers, delivery): the source''s archived deliveries '
  '(webhook_dedup.archive) that arrived in [since, until), oldest first, at most max (1 to 100000: '
  'page by received_at): each key''s first delivery, and the conflicting ones with '
  'include_conflicts; filtered by event type and by the key''s state now (NULL state: the key is '
  'gone). payload is the raw body, byte for byte; delivery is the same as one JSON document in the '
  'stable format webhook_dedup.delivery/1: format, source, scheme (the source''s provider, else '
  'its name), idem_key, event_id (NULL when not read by webhook_receive), event_type, received_at '
  '(RFC 3339, UTC, microseconds), conflict, state, headers (as given), body_base64 (the raw body, '
  'RFC 4648 base64). One line of JSON Lines each: psql -At -c "SELECT delivery FROM '
  'webhook_dedup.export_deliveries(...)" > deliveries.jsonl, replayed into staging by '
  'examples/replay/resend.py. A NOTICE says when the source keeps no payloads (only deliveries '
  'received while keep_payload was on are archived). Executable by webhook_dedup_operator (readers '
  'never see payloads). Errors: 22004 a NULL argument but the filters; 22023 since not before '
  'until, an infinite time, max outside 1..100000, an unknown state. docs/operations.md, '
  '"Replaying into staging".';
COMMENT ON FUNCTION webhook_dedup.purge_redactions(boolean) IS
  'webhook_dedup.purge_redactions(include_keys => false) -> rows (relation, bytes_before, '
  'bytes_after): makes the redactions of webhook_dedup.redactions not yet purged final on this '
  'server: rewrites (CLUSTER) each relation they erased from, so that the erased bodies, headers '
  'and results leave its data files (heap and TOAST): webhook_dedup.payloads and the archive '
  'partitions, and with include_keys webhook_dedup.keys (the erased results). Each table is locked '
  'ACCESS EXCLUSIVE from its rewrite to the end of the call: webhook_next and enqueues wait for '
  'payloads, and with include_keys every claim waits for keys (a webhook_receive answers '
  'in_progress when its wait runs out); the rewrite takes about the time of reading the table. '
  'Records purged_at, purged_by (and keys_purged). Refused (55000, naming them) while a session, a '
  'standby''s feedback, a replication slot or a prepared transaction holds a snapshot from before '
  'the newest redaction (it could still read the erased rows, and the rewrite would copy them), '
  'and in the redaction''s own transaction. What it does not reach: the WAL written before (until '
  'its segments are recycled, and archived WAL), base backups taken before, standbys until they '
  'replay the rewrite and checkpoint, and the file system''s own copies of freed blocks. '
  'Executable by webhook_dedup_operator. Errors: 22004 NULL include_keys; 55000 as above; 0A000 on '
  'a distributed install. docs/security.md, "Erased data".';
COMMENT ON FUNCTION webhook_dedup.duplicate_rate_alerts(double precision, interval) IS
  'duplicate_rate_alerts(threshold => 0.02, "window" => ''1 hour'') -> rows (source, alert, '
  'deliveries, duplicates, duplicate_ratio, previous_duplicates, reconciled). alert '
  'ratio_above_threshold: duplicates / deliveries over the window is above threshold (providers '
  'are retrying: the receiver is slow or failing). alert duplicates_stopped: no duplicates in the '
  'window after some in the window before it (deduplication may have stopped working, or traffic '
  'stopped: see deliveries). alert reconciled_above_threshold: reconciled / (deliveries + '
  'reconciled) is above threshold: events the provider sent never arrived and a reconciliation job '
  'enqueued them (webhook_dedup.reconcile): a leaky endpoint (a proxy or a firewall dropping '
  'requests, a receiver answering 2xx before storing). Windows are aligned to buckets: per minute '
  'up to 1 hour, else per hour (the window starts at the bucket holding now() - window). Errors: '
  '22004 a NULL argument; 22023 threshold outside 0..1, window outside 1 minute..366 days.';
COMMENT ON FUNCTION webhook_dedup.dump_secrets(boolean) IS
  'dump_secrets(include) -> boolean: whether pg_dump dumps the rows of '
  'webhook_dedup.source_secrets (the verification keys) with the other tables; false by default, '
  'so that dumps, which often travel further than the database, hold no secret. Returns include. '
  'Executable by webhook_dedup_operator. Errors: 22004 NULL.';
COMMENT ON VIEW webhook_dedup.outbox_backlog IS
  'Per outbox target with intents not delivered: undelivered (= pending + in_flight + failed: '
  'still to be sent), pending (written, never taken), in_flight (leased to a sender), failed (due '
  'again at their next attempt), due (takeable now, lapsed leases included), unknown_outcome and '
  'dead_lettered (wait for an operator: webhook_dedup.outbox_unknown_outcomes, '
  'outbox_dead_letters), oldest_undelivered_at and oldest_undelivered_age (now() minus it: the lag '
  'of the target''s senders; alert on it). Targets with only delivered intents have no row. Reads '
  'the partial index outbox_open.';
COMMENT ON VIEW webhook_dedup.outbox_dead_letters IS
  'Outbox intents that will not be sent again: out of attempts (the source''s max_attempts), '
  'failed as not retryable, or dead-lettered by an operator. id, target, operation, source and '
  'idem_key (the event), downstream_key, attempts, last_error, created_at, updated_at. An operator '
  'decides: webhook_dedup.webhook_outbox_resolve(id, ''pending'') sends it again with the same '
  'downstream key, ''completed'' closes it.';
COMMENT ON VIEW webhook_dedup.outbox_unknown_outcomes IS
  'Outbox intents that may or may not have reached their downstream: marked by their sender '
  '(webhook_outbox_unknown: sent, answer lost), or a lapsed lease of a downstream that takes no '
  'idempotency key (downstream_idempotent = false). Never sent again automatically. Reconcile with '
  'the downstream (search it by downstream_key or the request), then '
  'webhook_dedup.webhook_outbox_resolve(id, ''completed'') or (id, ''pending''). Columns as '
  'webhook_dedup.outbox_dead_letters.';

COMMENT ON FUNCTION webhook_dedup.webhook_operation_key(text, text, text, integer, text) IS
  'webhook_dedup.webhook_operation_key(source, idem_key, operation, max_length => 255, downstream '
  '=> NULL) -> text: the downstream idempotency key of one operation of an event, to send with the '
  'receiver''s own call to a payment, shipping or e-mail API: operation:source:idem_key with each '
  'part percent-encoded (RFC 3986 unreserved characters kept) when it fits max_length, else as '
  'much of the encoded operation as fits, ''-'' and the first 128 bits of SHA-256 of that plain '
  'form in hex. Deterministic (every retry, reclaim, replica and restore gives the same key), '
  'distinct for distinct (event, operation), of the characters A-Z a-z 0-9 - . _ % :. downstream '
  'names a preset of webhook_dedup.downstream_key_limits (stripe 255, square_payments 45, '
  'square_refunds 45, square_orders 192, paypal_orders 108, adyen 64) whose limit replaces '
  'max_length. Errors: 22004 a NULL argument; 22023 an empty part or one over 255 characters, '
  'max_length outside 32..255, an unknown downstream, or a max_length other than 255 that '
  'contradicts the downstream''s.';
COMMENT ON FUNCTION webhook_dedup.downstream_key_limits_rows() IS
  'The rows of webhook_dedup.downstream_key_limits.';
COMMENT ON VIEW webhook_dedup.downstream_key_limits IS
  'The downstream APIs webhook_dedup.webhook_operation_key(..., downstream => ...) knows: '
  'downstream (the preset''s name), carrier (where the key goes: a header or a body field), '
  'max_length (characters), key_retention (how long the downstream remembers a key, as documented: '
  'a retry later than that is a new request there), sources (the documents each fact is from).';

COMMENT ON FUNCTION webhook_dedup.webhook_outbox_put(text, text, uuid, text, text, jsonb, integer, text, boolean) IS
  'webhook_dedup.webhook_outbox_put(source, idem_key, claim_token, operation, target, request, '
  'max_length => 255, downstream => NULL, downstream_idempotent => true) -> bigint: records one '
  'downstream call to make (an intent) while claim_token holds the key''s lease, in the caller''s '
  'transaction (it commits or vanishes with the business write and webhook_complete). operation '
  'names the downstream effect (refund, email:receipt), unique per key; target the senders that '
  'take it (stripe-refunds, email); request what they need. Its downstream_key is '
  'webhook_operation_key(source, idem_key, operation, max_length, downstream). Returns the '
  'intent''s id; the first intent''s id when the key has one for this operation (nothing written '
  'again); NULL when claim_token does not hold the lease (nothing written; counted as '
  'stale_tokens). downstream_idempotent => false for a downstream that takes no idempotency key: a '
  'lapsed sender lease then parks the intent as unknown_outcome instead of sending it again. '
  'Executable by webhook_dedup_receiver. Errors: P0002 unknown key; 22004 a NULL argument; 22023 '
  'key rules, an operation or target of 0 or over 255 characters, max_length or downstream as '
  'webhook_operation_key; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_next(text, interval, integer) IS
  'webhook_dedup.webhook_outbox_next(target => NULL, lease => NULL, batch => 1) -> rows (id, '
  'lease_token, downstream_key, target, operation, request, attempt, lease_expires_at, source, '
  'idem_key, downstream_idempotent): up to batch due intents of target (NULL: every target), '
  'oldest due first (pending, lapsed leases, due retries), each leased to the caller for lease '
  '(NULL: its source''s lease, else webhook_dedup.default_lease) with a fresh lease_token. Send '
  'each with its downstream_key (the same on every attempt), then webhook_outbox_ack, '
  'webhook_outbox_fail or webhook_outbox_unknown with id and lease_token. An intent due again with '
  'no attempts left is dead-lettered, a lapsed lease of a downstream that is not idempotent parked '
  'as unknown_outcome; neither is returned. Intents another sender holds are skipped, not waited '
  'for (SKIP LOCKED): two senders never get one intent. Executable by webhook_dedup_receiver. '
  'Errors: 22004 NULL batch; 22023 batch outside 1..1000, a target of 0 or over 255 characters, a '
  'bad lease; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_ack(bigint, uuid, jsonb) IS
  'webhook_dedup.webhook_outbox_ack(id, lease_token, response => NULL) -> boolean: the call was '
  'delivered; the intent becomes completed with response kept, and is deleted by maintenance after '
  'its source''s retention. False (nothing changed; counted as stale_tokens) when lease_token no '
  'longer holds the intent (its lease lapsed and another sender took it, or an operator resolved '
  'it). Executable by webhook_dedup_receiver. Errors: P0002 unknown intent; 22004 NULL id or '
  'lease_token; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_fail(bigint, uuid, text, boolean, interval) IS
  'webhook_dedup.webhook_outbox_fail(id, lease_token, error, retryable => true, retry_after => '
  'NULL) -> text: the call failed without effect. The new state: failed (due again after '
  'retry_after, else min(30 s * 2^(attempt-1), 1 h)) while retryable and attempt < the source''s '
  'max_attempts; otherwise dead_lettered. NULL when lease_token is stale (nothing changes). error '
  'is kept as last_error. For a call whose effect is unknown use webhook_outbox_unknown. '
  'Executable by webhook_dedup_receiver. Errors: P0002 unknown intent; 22004 NULL id, lease_token '
  'or retryable; 22023 a retry_after outside 0..365 days or with months; 0A000 on a distributed '
  'install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_unknown(bigint, uuid, text) IS
  'webhook_dedup.webhook_outbox_unknown(id, lease_token, detail => NULL) -> boolean: the call was '
  'sent and its answer lost, and the downstream cannot deduplicate a repeat: the intent becomes '
  'unknown_outcome (detail in last_error) and is never sent again automatically '
  '(webhook_dedup.outbox_unknown_outcomes; an operator reconciles and calls '
  'webhook_outbox_resolve). False when lease_token is stale. Executable by webhook_dedup_receiver. '
  'Errors: P0002 unknown intent; 22004 NULL id or lease_token; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_resolve(bigint, text, jsonb) IS
  'webhook_dedup.webhook_outbox_resolve(id, new_state, response => NULL) -> text: the previous '
  'state. An operator''s decision after reconciling an intent with its downstream, from any state: '
  'completed (it was delivered; response stored when given), failed or pending (send it again now, '
  'with the same downstream key; its attempts start over), dead_lettered (give up). A sender '
  'holding the intent is fenced out. Executable by webhook_dedup_operator. Errors: P0002 unknown '
  'intent; 22004 NULL id or new_state; 22023 another new_state; 0A000 on a distributed install.';
COMMENT ON ROLE webhook_dedup_receiver IS
  'webhook_dedup: may claim, complete, fail, checkpoint, extend and mark keys unknown, receive, '
  'enqueue, take (webhook_next) and advance watermarks, through the functions only. Grant it to a '
  'receiver''s login role.';
COMMENT ON ROLE webhook_dedup_operator IS
  'webhook_dedup: may resolve and forget keys, run maintenance, flush the counters, configure '
  'webhook_dedup.sources, pause and resume sources, erase payloads (redact); reads what '
  'webhook_dedup_reader reads.';
COMMENT ON ROLE webhook_dedup_reader IS
  'webhook_dedup: may read the views of schema webhook_dedup (no payload, header or claim token is '
  'in any) and call its read-only functions (unseen among them).';
COMMENT ON FUNCTION webhook_dedup.sources_changed() IS
  'Trigger function of sources_changed on webhook_dedup.sources and source_secrets_changed on '
  'webhook_dedup.source_secrets: sends a relation cache invalidation of the table, which empties '
  'every backend''s cache of per-source settings and keys when the change commits. 39P01 when '
  'called other than by a trigger.';
COMMENT ON FUNCTION webhook_dedup.add_secret(text, text, timestamptz, timestamptz, text) IS
  'add_secret(source, secret, not_before => now(), not_after => NULL, note => NULL) -> integer: '
  'stores a verification key of source (a provider''s secret, or an asymmetric scheme''s public '
  'key) valid from not_before (inclusive) until not_after (exclusive; NULL: no end) and returns '
  'its id. webhook_dedup.webhook_receive(..., secrets => NULL) verifies with the source''s keys '
  'valid at the delivery''s time. The secret is never returned or echoed. Executable by '
  'webhook_dedup_operator. Errors: 22004 NULL source, secret or not_before; 22023 a source of 0 or '
  'over 255 characters, an empty or whitespace-padded secret, a secret that is no key of the '
  'source''s scheme (its provider in webhook_dedup.sources, else its name, when that is a scheme: '
  'a Standard Webhooks whsec_ secret in canonical base64, an Ed25519 or P-256 public key), '
  'infinite times, not_after not after not_before. The key is stored with that scheme '
  '(source_secrets.scheme) and verifies only it, whatever the source''s provider says later.';
COMMENT ON FUNCTION webhook_dedup.retire_secret(text, integer, timestamptz) IS
  'retire_secret(source, key_id, not_after => now()) -> timestamptz: ends the key''s validity at '
  'not_after (exclusive) and returns it; deliveries at or after it no longer verify with the key. '
  'Rotation: add_secret the new key, then retire the old one once the provider signs with the new '
  'one (a 24-hour overlap is usual). Executable by webhook_dedup_operator. Errors: 22004 NULL '
  'argument; P0002 no such key of the source; 22023 not_after not after the key''s not_before, or '
  'infinite.';
COMMENT ON FUNCTION webhook_dedup.list_secrets(text) IS
  'list_secrets(source => NULL) -> rows (id, source, not_before, not_after, created_at, valid_now, '
  'fingerprint, note, scheme): the keys of source (NULL: every source) without their values; '
  'fingerprint is sha256: and the first 8 hex digits of the secret''s SHA-256 (32 bits: enough to '
  'tell keys apart); scheme is the scheme add_secret accepted the key for, the only one it '
  'verifies (NULL: the source named no scheme then; any). Executable by webhook_dedup_operator.';
COMMENT ON FUNCTION webhook_dedup.source_intake_valid(text, text, text, text, text, text[], text[]) IS
  'source_intake_valid(source, event_id_from, event_type_from, event_time_from, event_time_format, '
  'fingerprint_pointers, accept_event_types) -> true, or 22023 naming the column and the problem '
  '(never false): the check constraint sources_intake of webhook_dedup.sources. Locations are '
  'header:<name> (RFC 9110 field name) or a JSON pointer (RFC 6901); event_time_format '
  'unix_seconds, unix_milliseconds or rfc3339, set exactly with event_time_from; '
  'fingerprint_pointers at most 64 JSON pointers (empty: the raw body); accept_event_types 1 to '
  '1000 entries of 1 to 255 characters, * only at the end.';
