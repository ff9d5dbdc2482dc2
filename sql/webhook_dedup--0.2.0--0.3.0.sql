-- webhook_dedup 0.2.0 -> 0.3.0: exactly once past the claim (issue 26,
-- docs/outbox.md). Adds downstream idempotency keys
-- (webhook_operation_key, webhook_dedup.downstream_key_limits) and the
-- transactional outbox (webhook_dedup.outbox, webhook_outbox_put, _next,
-- _ack, _fail, _unknown, _resolve, its views and counters); maintenance
-- gains the outbox step; sources can be paused (webhook_dedup.pause,
-- resume; issue 27), keep their payloads in an archive with its own
-- retention (webhook_dedup.archive, redact, export_deliveries), be
-- redriven in bulk (redrive, cancel_redrive, redrive_runs) and be
-- reconciled (unseen, reconcile); a distributed install says which node
-- holds a source (source_node; issue 28).
-- Nothing stored is rewritten: claim_counts, maintenance_runs, sources
-- and keys gain columns (with defaults or NULL: no table rewrite), every key
-- is left as it is. Tested by tests/upgrade (from 0.2.0 and from 0.1.0
-- through 0.2.0: the result is a fresh install's schema, object for object).
\echo Use "ALTER EXTENSION webhook_dedup UPDATE TO '0.3.0'" to load this file. \quit

-- The transactional outbox (docs/outbox.md, src/outbox.rs): one row per
-- downstream call a receiver decided on while it held a key's lease
-- (webhook_outbox_put), written in the receiver's transaction, taken by
-- senders with a lease (webhook_outbox_next) and finished with ack, fail
-- or unknown. An intent runs the key state machine (the same states,
-- leases, attempts, backoff and dead letters as webhook_dedup.keys). The
-- unique (source, idem_key, operation) makes a second intent for the same
-- operation of an event the first one. Intents not delivered, by target
-- and due time, are outbox_open (the senders' index, and the views';
-- parked intents are due at infinity); delivery times are summarised per
-- block range in outbox_delivered (BRIN: an ack adds no B-tree entry for
-- it), retention's.
CREATE TABLE webhook_dedup.outbox (
    id                    bigint      GENERATED ALWAYS AS IDENTITY,
    source                text        COLLATE "C" NOT NULL,
    idem_key              text        COLLATE "C" NOT NULL,
    operation             text        COLLATE "C" NOT NULL,
    target                text        COLLATE "C" NOT NULL,
    request               jsonb       NOT NULL,
    downstream_key        text        NOT NULL,
    downstream_idempotent boolean     NOT NULL,
    key_attempt           integer     NOT NULL,
    state                 text        NOT NULL,
    attempt               integer     NOT NULL DEFAULT 0,
    lease_token           uuid,
    lease_expires_at      timestamptz,
    next_attempt_at       timestamptz,
    due_at                timestamptz,
    response              jsonb,
    last_error            text,
    created_at            timestamptz NOT NULL,
    leased_at             timestamptz,
    delivered_at          timestamptz,
    updated_at            timestamptz NOT NULL,
    CONSTRAINT outbox_pkey PRIMARY KEY (id),
    CONSTRAINT outbox_operation UNIQUE (source, idem_key, operation)
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02);
CREATE INDEX outbox_open ON webhook_dedup.outbox (target, due_at) WHERE due_at IS NOT NULL;
CREATE INDEX outbox_delivered ON webhook_dedup.outbox USING brin (delivered_at) WITH (autosummarize = on);
COMMENT ON TABLE webhook_dedup.outbox IS
  'The transactional outbox: one row (an intent) per downstream call a receiver decided on while it held a key''s lease (webhook_outbox_put), committed or rolled back with the receiver''s own writes; senders take due intents with webhook_outbox_next and finish them with webhook_outbox_ack, webhook_outbox_fail or webhook_outbox_unknown; operators resolve parked ones with webhook_outbox_resolve. Delivered intents are deleted by maintenance after their source''s retention. docs/outbox.md.';
COMMENT ON COLUMN webhook_dedup.outbox.id IS 'Identity: the intent''s id, which the sender passes back with its lease token.';
COMMENT ON COLUMN webhook_dedup.outbox.source IS 'The source of the key whose holder wrote the intent.';
COMMENT ON COLUMN webhook_dedup.outbox.idem_key IS 'The key (the inbound event) whose holder wrote the intent.';
COMMENT ON COLUMN webhook_dedup.outbox.operation IS 'What the call does, one name per downstream effect of an event (refund, email:receipt), 1-255 characters. Unique per key: a second intent for the same operation is the first.';
COMMENT ON COLUMN webhook_dedup.outbox.target IS 'Where senders take the intent from (webhook_outbox_next(target => ...)): a name the receiver chooses, such as stripe-refunds or email, 1-255 characters.';
COMMENT ON COLUMN webhook_dedup.outbox.request IS 'What the sender needs to make the call (jsonb, as the receiver gave it).';
COMMENT ON COLUMN webhook_dedup.outbox.downstream_key IS 'The idempotency key to send downstream: webhook_operation_key(source, idem_key, operation, max_length) at put time; the same on every attempt.';
COMMENT ON COLUMN webhook_dedup.outbox.downstream_idempotent IS 'Whether the downstream deduplicates by downstream_key. When false, an intent whose sender''s lease lapsed is parked as unknown_outcome instead of being sent again.';
COMMENT ON COLUMN webhook_dedup.outbox.key_attempt IS 'The attempt of the key''s lease that wrote the intent (its fencing token).';
COMMENT ON COLUMN webhook_dedup.outbox.state IS 'pending, processing (leased to a sender), completed (delivered), failed (due again at next_attempt_at), unknown_outcome or dead_lettered: the key state machine''s states.';
COMMENT ON COLUMN webhook_dedup.outbox.attempt IS 'Sending attempts so far (0 while pending); grows by one with every lease webhook_outbox_next grants.';
COMMENT ON COLUMN webhook_dedup.outbox.lease_token IS 'Token of the current (or last) sender''s lease, which ack, fail and unknown must present; NULL once delivered.';
COMMENT ON COLUMN webhook_dedup.outbox.lease_expires_at IS 'When the sender''s lease expires; webhook_outbox_next or maintenance then takes the intent back.';
COMMENT ON COLUMN webhook_dedup.outbox.next_attempt_at IS 'For failed intents: when a retry is due.';
COMMENT ON COLUMN webhook_dedup.outbox.due_at IS 'When webhook_outbox_next may next take the intent: at once when written (pending), at next_attempt_at after a failure, at lease_expires_at while a sender holds it (processing); infinity for unknown_outcome and dead_lettered intents (never due; in outbox_open for the views); NULL once delivered (completed). Indexed with target (outbox_open).';
COMMENT ON COLUMN webhook_dedup.outbox.response IS 'What webhook_outbox_ack (or an operator''s webhook_outbox_resolve) stored: the downstream''s answer.';
COMMENT ON COLUMN webhook_dedup.outbox.last_error IS 'The last failure''s error text (or why the intent was parked).';
COMMENT ON COLUMN webhook_dedup.outbox.created_at IS 'When the intent was written (database clock).';
COMMENT ON COLUMN webhook_dedup.outbox.leased_at IS 'When the current (or last) sender''s lease was granted.';
COMMENT ON COLUMN webhook_dedup.outbox.delivered_at IS 'When the intent was acknowledged (or resolved completed). Maintenance deletes a delivered intent once delivered_at plus its source''s retention (webhook_dedup.sources.retention, else webhook_dedup.retention) has passed. Summarised per block range (outbox_delivered, BRIN).';
COMMENT ON COLUMN webhook_dedup.outbox.updated_at IS 'The intent''s last change.';

-- The outbox's counters (src/metrics.rs, Counter::ALL: appended).
ALTER TABLE webhook_dedup.claim_counts
    ADD COLUMN intents_written                bigint NOT NULL DEFAULT 0,
    ADD COLUMN intents_delivered              bigint NOT NULL DEFAULT 0,
    ADD COLUMN intent_retries                 bigint NOT NULL DEFAULT 0,
    ADD COLUMN intents_dead_lettered          bigint NOT NULL DEFAULT 0,
    ADD COLUMN intents_unknown                bigint NOT NULL DEFAULT 0,
    ADD COLUMN intent_leases_expired          bigint NOT NULL DEFAULT 0,
    ADD COLUMN reconciled                     bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN webhook_dedup.claim_counts.intents_written IS 'Outbox intents written (webhook_outbox_put calls that stored a new intent; a second put of an operation is not counted).';
COMMENT ON COLUMN webhook_dedup.claim_counts.intents_delivered IS 'Outbox intents acknowledged by their sender (webhook_outbox_ack).';
COMMENT ON COLUMN webhook_dedup.claim_counts.intent_retries IS 'Outbox intents a sender failed retryably (webhook_outbox_fail: due again after the backoff).';
COMMENT ON COLUMN webhook_dedup.claim_counts.intents_dead_lettered IS 'Outbox intents dead-lettered: failed without retry, or out of attempts.';
COMMENT ON COLUMN webhook_dedup.claim_counts.intents_unknown IS 'Outbox intents parked as unknown_outcome: marked by their sender (webhook_outbox_unknown), or a lapsed lease of a downstream that is not idempotent.';
COMMENT ON COLUMN webhook_dedup.claim_counts.intent_leases_expired IS 'Outbox intents whose sender''s lease lapsed (taken back by webhook_outbox_next or maintenance).';
COMMENT ON COLUMN webhook_dedup.claim_counts.reconciled IS 'Events the provider sent that never arrived, enqueued by a reconciliation job (webhook_dedup.reconcile answered accepted; not counted as enqueued): a leaky endpoint (webhook_dedup.duplicate_rate_alerts, alert reconciled_above_threshold).';

-- Maintenance's outbox step.
ALTER TABLE webhook_dedup.maintenance_runs
    ADD COLUMN intents_expired      integer     NOT NULL DEFAULT 0,
    ADD COLUMN intents_pruned       bigint      NOT NULL DEFAULT 0,
    ADD COLUMN payloads_pruned      bigint      NOT NULL DEFAULT 0,
    ADD COLUMN partitions_created   integer     NOT NULL DEFAULT 0,
    ADD COLUMN partitions_dropped   integer     NOT NULL DEFAULT 0,
    ADD COLUMN keys_redriven        bigint      NOT NULL DEFAULT 0;
COMMENT ON COLUMN webhook_dedup.maintenance_runs.intents_expired IS 'Outbox intents whose sender''s lease lapsed, taken back (failed and due at once, dead_lettered with no attempts left, or unknown_outcome when the downstream is not idempotent).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.intents_pruned IS 'Delivered outbox intents deleted past their source''s retention.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.payloads_pruned IS 'Archived deliveries deleted row by row: past their source''s payload_retention (sources whose payload retention is shorter than the longest: paced batches), or in archive_default past every retention.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.partitions_created IS 'Day partitions of webhook_dedup.archive created (ahead of time, or for rows that arrived in archive_default).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.partitions_dropped IS 'Day partitions of webhook_dedup.archive dropped whole, past the longest payload retention.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.keys_redriven IS 'Keys bulk redrives (webhook_dedup.redrive) moved back to due, or skipped as changed, gone or without a payload.';

-- Pausing a source (issue 27, docs/operations.md): the pause is recorded
-- in the source's row; the payload archive's settings.
ALTER TABLE webhook_dedup.sources
    ADD COLUMN keep_payload         boolean,
    ADD COLUMN payload_retention    interval CHECK (payload_retention >= interval '1 minute'
                                         AND payload_retention <= interval '3650 days'
                                         AND pg_catalog.date_part('month', payload_retention) = 0
                                         AND pg_catalog.date_part('year', payload_retention) = 0
                                         AND payload_retention <= retention),
    ADD COLUMN paused_at            timestamptz,
    ADD COLUMN paused_by            text,
    ADD COLUMN pause_reason         text;
COMMENT ON COLUMN webhook_dedup.sources.keep_payload IS 'Whether the source''s deliveries are archived (webhook_dedup.archive): the raw body and headers of each key''s first delivery and of each conflicting one, from webhook_claim (given a payload), webhook_receive and webhook_enqueue. NULL or false: not archived (webhook_enqueue still stores the payload its worker needs, webhook_dedup.payloads, for as long as the key lives). Ignored on a distributed install: the archive is single-server (docs/distributed.md).';
COMMENT ON COLUMN webhook_dedup.sources.payload_retention IS 'How long archived deliveries of the source are kept after they arrived: 1 minute to 3650 days, no months, at most retention when both are set (else cut to the key''s retention when used). NULL: the key''s retention (retention, else webhook_dedup.retention). Partitions older than the longest payload retention are dropped whole; a source with a shorter one has its rows deleted in paced batches (docs/operations.md, "The payload archive").';
COMMENT ON COLUMN webhook_dedup.sources.paused_at IS 'When webhook_dedup.pause paused the source (NULL: not paused). While paused, intake goes on (claims, webhook_receive and webhook_enqueue answer and store as before) and webhook_next takes none of the source''s keys: its pending and failed keys wait, due_at infinity, until webhook_dedup.resume. Written by pause and resume only (operators may not write this column).';
COMMENT ON COLUMN webhook_dedup.sources.paused_by IS 'The session user who called webhook_dedup.pause.';
COMMENT ON COLUMN webhook_dedup.sources.pause_reason IS 'Why, as given to webhook_dedup.pause.';
COMMENT ON TABLE webhook_dedup.sources IS
  'Per-source settings: lease (the lease a claim or webhook_next gives when the call passes none; else webhook_dedup.default_lease), max_attempts (after which webhook_fail dead-letters; else webhook_dedup.max_attempts), retention (else webhook_dedup.retention), tolerance (webhook_receive''s replay window; else the provider''s default), provider (the profile for retention_warnings), and how webhook_receive reads the source''s deliveries: event_id_from, event_type_from, event_time_from and event_time_format, fingerprint_pointers, replay_guard, accept_event_types (docs/providers.md, "Custom sources"); whether its deliveries are archived (keep_payload, payload_retention: webhook_dedup.archive); and whether it is paused (paused_at, paused_by, pause_reason: webhook_dedup.pause). NULL columns fall back to the settings and the provider profile.';

-- The payload archive (issue 27, docs/operations.md "The payload
-- archive", src/store/archive.rs): the raw deliveries of the sources that
-- keep them (webhook_dedup.sources.keep_payload), for audit, export and
-- redrive, with their own retention (payload_retention), apart from the
-- keys, which stay narrow and live for the whole retry window. Bulky and
-- append-only, so partitioned by day of arrival (UTC): the maintenance
-- worker attaches each day's partition ahead of time and drops it whole
-- once it is past the longest payload retention (no row-by-row delete, no
-- bloat); a source whose payload retention ends earlier has its rows
-- deleted in paced batches. The default partition catches what arrives
-- when no day's partition exists (the worker stopped for days); the next
-- pass moves those rows into their day's partition. One row per key's
-- first delivery (received_at = the key's first_seen_at) and per
-- conflicting delivery (received_at = its conflict_log.seen_at): a key's
-- deliveries are found through those times, by the one index (source,
-- received_at) of each partition, with no index on the key (a random insert into a second
-- B-tree was a tenth of an archived claim's CPU, perf). A key's payload
-- retention is at most its retention and counts from its first delivery,
-- but partitions go by whole days: an archived delivery can outlive its
-- key by up to a day (webhook_dedup.redact then finds it by a scan of the
-- source's deliveries); webhook_forget deletes a key's with it.
CREATE TABLE webhook_dedup.archive (
    received_at timestamptz NOT NULL,
    source      text        COLLATE "C" NOT NULL,
    idem_key    text        COLLATE "C" NOT NULL,
    event_id    text,
    event_type  text,
    conflict    boolean     NOT NULL,
    payload     bytea       NOT NULL,
    headers     jsonb
) PARTITION BY RANGE (received_at);
-- Each partition has its own index (source, received_at), made with it
-- (archive_default_source here, archive_YYYYMMDD_source by maintenance),
-- and the archive none of its own: a partitioned index would be the
-- extension's, and pg_restore, attaching a dumped day partition to it,
-- would make the partition's index a second time (the dump's CREATE
-- INDEX of it then fails). Queries on the archive use each partition's.
CREATE TABLE webhook_dedup.archive_default PARTITION OF webhook_dedup.archive DEFAULT;
CREATE INDEX archive_default_source ON webhook_dedup.archive_default (source, received_at);
COMMENT ON TABLE webhook_dedup.archive IS
  'The payload archive: the raw body and headers of each key''s first delivery and of each conflicting delivery, for the sources with keep_payload (webhook_dedup.sources), kept for their payload_retention while the key itself stays for its retention. Partitioned by day of arrival (UTC, partitions archive_YYYYMMDD made ahead and dropped whole by maintenance; archive_default holds rows that arrived with no day''s partition, moved out by the next pass). Readable by the extension''s owner; operators read it through webhook_dedup.export_deliveries and erase it with webhook_dedup.redact. docs/operations.md, "The payload archive".';
COMMENT ON COLUMN webhook_dedup.archive.received_at IS 'When the delivery arrived (database clock): the key''s first_seen_at for its first delivery, the conflict_log.seen_at of a conflicting one. The partition key.';
COMMENT ON COLUMN webhook_dedup.archive.source IS 'The key''s source.';
COMMENT ON COLUMN webhook_dedup.archive.idem_key IS 'The key.';
COMMENT ON COLUMN webhook_dedup.archive.event_id IS 'The provider''s event id as webhook_receive read it (NULL from webhook_claim and webhook_enqueue, which are given the key).';
COMMENT ON COLUMN webhook_dedup.archive.event_type IS 'The event type given with (or read from) the delivery.';
COMMENT ON COLUMN webhook_dedup.archive.conflict IS 'false: the key''s first delivery (the content the key was processed with); true: a later delivery whose content differed (a conflict, processed by nobody).';
COMMENT ON COLUMN webhook_dedup.archive.payload IS 'The raw body, byte for byte.';
COMMENT ON COLUMN webhook_dedup.archive.headers IS 'The request headers as given to webhook_receive or webhook_enqueue (a JSON object), NULL for webhook_claim.';
-- Bodies are compressed with LZ4 where the server has it (PostgreSQL 14
-- and later built --with-lz4, as Debian's and the PGDG packages are):
-- pglz spent a third of an archived claim's CPU compressing a 4 KiB body
-- (perf, docs/benchmarks.md "The payload archive"); LZ4 compresses JSON
-- several times faster at a similar ratio. A server without it keeps pglz.
DO $$
BEGIN
  ALTER TABLE webhook_dedup.archive ALTER COLUMN payload SET COMPRESSION lz4;
  ALTER TABLE webhook_dedup.archive_default ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  NULL;
END
$$;
-- The keys gain who and when webhook_dedup.redact erased them.
ALTER TABLE webhook_dedup.keys
    ADD COLUMN redacted_at      timestamptz,
    ADD COLUMN redacted_by      text,
    ADD COLUMN redriven_at      timestamptz,
    ADD COLUMN redrive_run      bigint,
    ADD COLUMN reconciled_at    timestamptz;
COMMENT ON COLUMN webhook_dedup.keys.redacted_at IS 'When webhook_dedup.redact erased the key''s payloads, headers and stored result (NULL: never). The key stays (a tombstone: its state and fingerprint still answer duplicates and conflicts).';
COMMENT ON COLUMN webhook_dedup.keys.redacted_by IS 'The session user who called webhook_dedup.redact.';
COMMENT ON COLUMN webhook_dedup.keys.redriven_at IS 'When a bulk redrive (webhook_dedup.redrive) last made the key due again (NULL: never).';
COMMENT ON COLUMN webhook_dedup.keys.redrive_run IS 'Which run did (webhook_dedup.redrive_runs.id).';
COMMENT ON COLUMN webhook_dedup.keys.reconciled_at IS 'When a reconciliation job enqueued the key''s event (webhook_dedup.reconcile): the provider sent it, the endpoint never got it (NULL: it arrived as a delivery).';

-- Bulk redrive (issue 27, src/api/redrive.rs, src/maintenance/redrive.rs):
-- one row per run of webhook_dedup.redrive, and one per key it matched,
-- which the maintenance worker moves back to due in paced batches. Read
-- through the view webhook_dedup.redrive_runs; pruned with the source's
-- retention once finished.
CREATE TABLE webhook_dedup.redrives (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source       text        COLLATE "C" NOT NULL,
    states       text[]      NOT NULL,
    conflicts    boolean     NOT NULL,
    since        timestamptz,
    "until"      timestamptz,
    event_types  text[],
    max_keys     bigint,
    created_at   timestamptz NOT NULL,
    created_by   text        NOT NULL,
    status       text        NOT NULL,
    matched      bigint      NOT NULL,
    moved        bigint      NOT NULL DEFAULT 0,
    skipped      bigint      NOT NULL DEFAULT 0,
    finished_at  timestamptz,
    cancelled_by text
);
CREATE INDEX redrives_running ON webhook_dedup.redrives (id) WHERE status = 'running';
COMMENT ON TABLE webhook_dedup.redrives IS
  'One row per bulk redrive (webhook_dedup.redrive): what it matched, who started it, how far the maintenance worker got. Read it through webhook_dedup.redrive_runs.';
COMMENT ON COLUMN webhook_dedup.redrives.id IS 'Identity: the run id redrive returns and cancel_redrive takes.';
COMMENT ON COLUMN webhook_dedup.redrives.source IS 'The source whose keys the run moves.';
COMMENT ON COLUMN webhook_dedup.redrives.states IS 'The key states it matched (dead_lettered, failed, unknown_outcome).';
COMMENT ON COLUMN webhook_dedup.redrives.conflicts IS 'Whether it also matched keys with an archived conflicting delivery (state conflict), to process that delivery.';
COMMENT ON COLUMN webhook_dedup.redrives.since IS 'Keys first seen (conflicts: received) at or after this time; NULL: no bound.';
COMMENT ON COLUMN webhook_dedup.redrives."until" IS 'Keys first seen (conflicts: received) before this time; NULL: no bound.';
COMMENT ON COLUMN webhook_dedup.redrives.event_types IS 'The event types matched; NULL: every type.';
COMMENT ON COLUMN webhook_dedup.redrives.max_keys IS 'The most keys the run matched; NULL: no limit.';
COMMENT ON COLUMN webhook_dedup.redrives.created_at IS 'When redrive started the run (database clock).';
COMMENT ON COLUMN webhook_dedup.redrives.created_by IS 'The session user who called redrive.';
COMMENT ON COLUMN webhook_dedup.redrives.status IS 'running (maintenance moves its keys), done (every key moved or skipped) or cancelled (cancel_redrive: the keys not moved yet stay as they are).';
COMMENT ON COLUMN webhook_dedup.redrives.matched IS 'Keys matched when the run started.';
COMMENT ON COLUMN webhook_dedup.redrives.moved IS 'Keys made due again so far (pending, with their payload for webhook_next).';
COMMENT ON COLUMN webhook_dedup.redrives.skipped IS 'Keys left as they were: changed since they matched (a live delivery or an operator got there first), gone, or without a payload to process (not archived, past payload retention, or redacted).';
COMMENT ON COLUMN webhook_dedup.redrives.finished_at IS 'When the run was done or cancelled.';
COMMENT ON COLUMN webhook_dedup.redrives.cancelled_by IS 'The session user who called cancel_redrive.';

CREATE TABLE webhook_dedup.redrive_keys (
    run         bigint      NOT NULL,
    n           bigint      NOT NULL,
    idem_key    text        COLLATE "C" NOT NULL,
    conflict_at timestamptz,
    outcome     text,
    PRIMARY KEY (run, n)
);
CREATE INDEX redrive_keys_todo ON webhook_dedup.redrive_keys (run, n) WHERE outcome IS NULL;
COMMENT ON TABLE webhook_dedup.redrive_keys IS
  'The keys each bulk redrive matched, in the order it moves them (n), and what became of each (outcome NULL: not yet; moved; skipped: changed, gone or no_payload). Deleted with their run.';
COMMENT ON COLUMN webhook_dedup.redrive_keys.run IS 'The run (webhook_dedup.redrives.id).';
COMMENT ON COLUMN webhook_dedup.redrive_keys.n IS 'The key''s place in the run: oldest first.';
COMMENT ON COLUMN webhook_dedup.redrive_keys.idem_key IS 'The key (of the run''s source).';
COMMENT ON COLUMN webhook_dedup.redrive_keys.conflict_at IS 'For a conflict: the received_at of the archived conflicting delivery to process; NULL: the key''s own payload.';
COMMENT ON COLUMN webhook_dedup.redrive_keys.outcome IS 'NULL (to do), moved, or skipped: changed (no longer as matched), gone (the key was deleted), no_payload (none archived or queued: nothing for webhook_next to hand over).';


-- run_maintenance() returns the outbox step's counts too: a new row type.
DROP FUNCTION webhook_dedup.run_maintenance();
CREATE FUNCTION webhook_dedup."run_maintenance"() RETURNS TABLE (
	"ran" bool,  /* bool */
	"leases_expired" INT,  /* i32 */
	"dead_lettered" INT,  /* i32 */
	"keys_pruned" bigint,  /* i64 */
	"keys_kept" bigint,  /* i64 */
	"history_pruned" bigint,  /* i64 */
	"metrics_flushed" bigint,  /* i64 */
	"retention_warnings" INT,  /* i32 */
	"more" bool,  /* bool */
	"errors" TEXT[],  /* Vec < String > */
	"intents_expired" INT,  /* i32 */
	"intents_pruned" bigint,  /* i64 */
	"payloads_pruned" bigint,  /* i64 */
	"partitions_created" INT,  /* i32 */
	"partitions_dropped" INT,  /* i32 */
	"keys_redriven" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'run_maintenance_wrapper';
COMMENT ON FUNCTION webhook_dedup.run_maintenance() IS
  'One maintenance pass, what the background worker runs every webhook_dedup.maintenance_interval: (1) expired processing leases become failed, due at once (or dead_lettered with no attempts left); (2) completed keys past retention are deleted with their payloads (a key active within its source''s retention of now is kept and looked at again later: keys_kept); (3) watermarks, replay guards, signed tokens, conflicts, claim counts and maintenance runs past retention are deleted; (4) metrics are flushed; (5) sources whose retention is shorter than their provider''s retry horizon are counted (a WARNING; see webhook_dedup.retention_warnings); (6) outbox intents whose sender''s lease lapsed are taken back (failed and due at once, dead_lettered, or unknown_outcome when their downstream is not idempotent: intents_expired) and delivered intents past their source''s retention deleted (intents_pruned); (7) the keys of running bulk redrives (webhook_dedup.redrive) are moved back to due, batch_size a pass (keys_redriven: moved or skipped); (8) the payload archive''s day partitions are made ahead (partitions_created) and dropped whole past the longest payload retention of the sources that keep payloads (partitions_dropped), and the rows of sources with a shorter payload retention deleted in paced batches (payloads_pruned). Keys a claim or their holder holds right now are skipped, never waited for. One row: ran (false: another pass holds the maintenance lock, or this is a standby; nothing done), the counts of each step, more (a step stopped at webhook_dedup.batch_size: call again) and errors (one entry per step that failed and was rolled back; the others ran). Recorded in webhook_dedup.maintenance_runs. Without the worker, schedule it (pg_cron) every minute or so (expired leases are only swept by maintenance).';
ALTER FUNCTION webhook_dedup.run_maintenance() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION webhook_dedup.run_maintenance() FROM PUBLIC;
-- (granted to webhook_dedup_operator below, once default privileges are undone)

-- A failed key an operator resolved after its last attempt gets one more
-- (src/claim.rs, decide): webhook_next's description says so.
COMMENT ON FUNCTION webhook_dedup.webhook_next(text, interval, integer) IS
  'webhook_dedup.webhook_next(source => NULL, lease => NULL, batch => 1) -> rows (source, idem_key, claim_token, attempt, payload, event_type, last_step, headers): up to batch due keys (pending, expired leases, due retries), oldest first, each leased to the caller; a key whose lease expired with no attempts left is dead-lettered instead. Keys of a paused source (webhook_dedup.pause) are not taken: a pending or failed one met is parked until webhook_dedup.resume. Keys another worker or a claim holds are skipped, never waited for (FOR NO KEY UPDATE SKIP LOCKED), so two workers never get the same key and a worker cannot deadlock with a claim. Finish each with webhook_complete or webhook_fail. Errors: 22004 NULL batch; 22023 batch outside 1..1000, a bad source or lease; 40001 under REPEATABLE READ when a key changed after the snapshot.';

-- The counters' views gain the outbox's columns, at their ends.
CREATE OR REPLACE VIEW webhook_dedup.counters AS
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
CREATE OR REPLACE VIEW webhook_dedup.metrics_buckets AS
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
CREATE OR REPLACE VIEW webhook_dedup.duplicate_metrics AS
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
CREATE OR REPLACE VIEW webhook_dedup.duplicate_metrics_by_minute AS
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
COMMENT ON VIEW webhook_dedup.duplicate_metrics IS
  'Counts per source and hour (bucket, UTC-aligned), flushed plus live: deliveries (webhook_claim and webhook_enqueue calls), first_claims, reclaims (after an expired lease or a due retry, by a claim or webhook_next), duplicates (= duplicates_of_completed + duplicates_in_progress), conflicts (same key, different payload), completions, stale_completions, retry_later, unknown_outcome and dead_lettered (claims answered so), retries_scheduled, dead_letters (keys that became dead_lettered), marked_unknown, enqueued, drained, forgotten, resolved, stale_tokens, expired_leases (swept by maintenance), signature_rejections (webhook_receive deliveries that did not verify, = the sum of the rejected_<reason> columns; rejected_token_reused: a signed token seen before with other content, mailgun), missing_event_ids, ignored (event types the source does not accept), replayed (signed bodies re-sent under another event id, refused by the replay guard), duplicate_ratio = duplicates / deliveries (NULL without deliveries), and the outbox''s intents_written, intents_delivered, intent_retries, intents_dead_lettered, intents_unknown and intent_leases_expired (docs/outbox.md), and reconciled (events the provider sent that never arrived, enqueued by a reconciliation job with webhook_dedup.reconcile: a source with many is a leaky endpoint). What a crash can lose: docs/metrics.md. Empty without shared_preload_libraries. Filter on bucket: the condition reaches the index of webhook_dedup.claim_counts.';

-- key_states shows the paused backlog, in columns at its end.
CREATE OR REPLACE VIEW webhook_dedup.key_states AS
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
COMMENT ON VIEW webhook_dedup.key_states IS
  'Keys not completed, per source and state (pending, processing, failed, unknown_outcome, dead_lettered; one row per state that has keys): keys (count), oldest_pending_age (pending: how long the oldest pending key has been due, now - its due_at; the queue''s backlog), oldest_lease_age (processing: now - the oldest leased_at; the longest attempt in flight), expired_leases (processing: leases past expiry not swept yet), paused_keys (pending and failed keys parked by a pause of the source until webhook_dedup.resume: the paused backlog; they are not in oldest_pending_age), paused_at (when webhook_dedup.pause paused the source; NULL when it is not paused). Read from the partial index keys_open, which holds only keys not completed, so its cost follows the open work, never the history. Completed keys are not counted here: that would read every key kept for retention (see docs/metrics.md); their flow is duplicate_metrics.completions.';

-- Downstream keys and the outbox's functions.
CREATE FUNCTION webhook_dedup."webhook_operation_key"(
	"source" TEXT, /* Option < & str > */
	"idem_key" TEXT, /* Option < & str > */
	"operation" TEXT, /* Option < & str > */
	"max_length" INT DEFAULT 255, /* Option < i32 > */
	"downstream" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TEXT /* String */
IMMUTABLE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'webhook_operation_key_wrapper';
CREATE FUNCTION webhook_dedup."downstream_key_limits_rows"() RETURNS TABLE (
	"downstream" TEXT,  /* String */
	"carrier" TEXT,  /* String */
	"max_length" INT,  /* i32 */
	"key_retention" TEXT,  /* String */
	"sources" TEXT  /* String */
)
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'downstream_key_limits_rows_wrapper';
CREATE FUNCTION webhook_dedup."webhook_outbox_put"(
	"source" TEXT, /* Option < & str > */
	"idem_key" TEXT, /* Option < & str > */
	"claim_token" uuid, /* Option < Uuid > */
	"operation" TEXT, /* Option < & str > */
	"target" TEXT, /* Option < & str > */
	"request" jsonb, /* Option < Jsonb > */
	"max_length" INT DEFAULT 255, /* Option < i32 > */
	"downstream" TEXT DEFAULT NULL, /* Option < & str > */
	"downstream_idempotent" bool DEFAULT true /* Option < bool > */
) RETURNS bigint /* Option < i64 > */
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'webhook_outbox_put_wrapper';
CREATE FUNCTION webhook_dedup."webhook_outbox_next"(
	"target" TEXT DEFAULT NULL, /* Option < & str > */
	"lease" interval DEFAULT NULL, /* Option < Interval > */
	"batch" INT DEFAULT 1 /* Option < i32 > */
) RETURNS TABLE (
	"id" bigint,  /* i64 */
	"lease_token" uuid,  /* Uuid */
	"downstream_key" TEXT,  /* String */
	"target" TEXT,  /* String */
	"operation" TEXT,  /* String */
	"request" jsonb,  /* Option < Jsonb > */
	"attempt" INT,  /* i32 */
	"lease_expires_at" timestamp with time zone,  /* TimestampWithTimeZone */
	"source" TEXT,  /* String */
	"idem_key" TEXT,  /* String */
	"downstream_idempotent" bool  /* bool */
)
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'webhook_outbox_next_wrapper';
CREATE FUNCTION webhook_dedup."webhook_outbox_ack"(
	"id" bigint, /* Option < i64 > */
	"lease_token" uuid, /* Option < Uuid > */
	"response" jsonb DEFAULT NULL /* Option < Jsonb > */
) RETURNS bool /* bool */
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'webhook_outbox_ack_wrapper';
CREATE FUNCTION webhook_dedup."webhook_outbox_fail"(
	"id" bigint, /* Option < i64 > */
	"lease_token" uuid, /* Option < Uuid > */
	"error" TEXT, /* Option < & str > */
	"retryable" bool DEFAULT true, /* Option < bool > */
	"retry_after" interval DEFAULT NULL /* Option < Interval > */
) RETURNS TEXT /* Option < String > */
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'webhook_outbox_fail_wrapper';
CREATE FUNCTION webhook_dedup."webhook_outbox_unknown"(
	"id" bigint, /* Option < i64 > */
	"lease_token" uuid, /* Option < Uuid > */
	"detail" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS bool /* bool */
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'webhook_outbox_unknown_wrapper';
CREATE FUNCTION webhook_dedup."webhook_outbox_resolve"(
	"id" bigint, /* Option < i64 > */
	"new_state" TEXT, /* Option < & str > */
	"response" jsonb DEFAULT NULL /* Option < Jsonb > */
) RETURNS TEXT /* String */
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'webhook_outbox_resolve_wrapper';
CREATE FUNCTION webhook_dedup."pause"(
	"source" TEXT, /* Option < & str > */
	"reason" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'pause_wrapper';
CREATE FUNCTION webhook_dedup."resume"(
	"source" TEXT /* Option < & str > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'resume_wrapper';
CREATE FUNCTION webhook_dedup."redact"(
	"source" TEXT, /* Option < & str > */
	"idem_key" TEXT DEFAULT NULL, /* Option < & str > */
	"before" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"account" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"keys" bigint,  /* i64 */
	"deliveries" bigint  /* i64 */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'redact_wrapper';
CREATE FUNCTION webhook_dedup."unseen"(
	"source" TEXT, /* Option < & str > */
	"event_ids" TEXT[], /* :: std :: option :: Option < Array < '_, & str > > */
	"environment" TEXT DEFAULT NULL, /* Option < & str > */
	"account" TEXT DEFAULT NULL, /* Option < & str > */
	"operation" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS SETOF TEXT /* String */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'unseen_wrapper';
CREATE FUNCTION webhook_dedup."redrive"(
	"source" TEXT, /* Option < & str > */
	"states" TEXT[] DEFAULT ARRAY['dead_lettered'], /* :: std :: option :: Option < Array < '_, & str > > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"event_types" TEXT[] DEFAULT NULL, /* :: std :: option :: Option < Array < '_, & str > > */
	"max" bigint DEFAULT NULL, /* Option < i64 > */
	"dry_run" bool DEFAULT false /* Option < bool > */
) RETURNS TABLE (
	"run" bigint,  /* Option < i64 > */
	"matched" bigint  /* i64 */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'redrive_wrapper';
CREATE FUNCTION webhook_dedup."cancel_redrive"(
	"run" bigint /* Option < i64 > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'cancel_redrive_wrapper';
CREATE FUNCTION webhook_dedup."reconcile"(
	"source" TEXT, /* Option < & str > */
	"event_id" TEXT, /* Option < & str > */
	"payload" bytea, /* Option < & [u8] > */
	"event_type" TEXT DEFAULT NULL, /* Option < & str > */
	"headers" jsonb DEFAULT NULL, /* Option < crate :: jsonb :: Jsonb > */
	"environment" TEXT DEFAULT NULL, /* Option < & str > */
	"account" TEXT DEFAULT NULL, /* Option < & str > */
	"operation" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TEXT /* String */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'reconcile_wrapper';
CREATE FUNCTION webhook_dedup."source_node"(
	"source" TEXT /* Option < & str > */
) RETURNS TABLE (
	"node_name" TEXT,  /* String */
	"node_port" INT,  /* i32 */
	"group_id" INT,  /* i32 */
	"shard_id" bigint  /* i64 */
)
STABLE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'source_node_wrapper';

COMMENT ON FUNCTION webhook_dedup.pause(text, text) IS
  'webhook_dedup.pause(source, reason => NULL) -> bigint: pauses the source while a system its processing needs is down. Intake goes on (webhook_claim, webhook_receive and webhook_enqueue answer and store as before: claims are not refused); webhook_next takes none of its keys: its pending and failed keys are parked (due_at infinity; the count returned), and a key that becomes due later is parked by the webhook_next that meets it. Keys in flight keep their lease. Recorded in webhook_dedup.sources (paused_at, paused_by: the session user, pause_reason; a row is made for a source without one); pausing a paused source keeps its first pause and takes the new reason. key_states shows the paused backlog. Executable by webhook_dedup_operator. Errors: 22004 NULL source; 22023 an empty source or one over 255 characters; 0A000 on a distributed install. docs/operations.md, "Pausing a source".';
COMMENT ON FUNCTION webhook_dedup.resume(text) IS
  'webhook_dedup.resume(source) -> bigint: ends a pause (webhook_dedup.pause): clears paused_at, paused_by and pause_reason, and makes the parked keys due as before it (a failed key at its retry time, a pending key at its first delivery, so the oldest is taken first); returns how many. Unparks keys left parked even when the source is not paused (its row was deleted during a pause). Waits for a webhook_next that is parking a key of the source, so none stays parked. Executable by webhook_dedup_operator. Errors: 22004 NULL source; 22023 an empty source or one over 255 characters; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.redact(text, text, timestamptz, text) IS
  'webhook_dedup.redact(source, idem_key => NULL, before => NULL, account => NULL) -> (keys bigint, deliveries bigint): erases what deliveries of source carried, for exactly one scope: one key (idem_key; its archived deliveries even when the key is gone), the keys first seen before a time (before; and every delivery of the source archived before it), or the keys derived with one account (account: the third field of a webhook_key with account; a key whose account field was cut by the 255-character bound is not found), and the archived deliveries of that key, time or account whose key is gone. Each key keeps its state, fingerprint and times (a tombstone: later deliveries are still answered duplicate or conflict, never processed again); its result becomes NULL, redacted_at and redacted_by (the session user) are set (webhook_dedup.key_history); its payload for the workers (webhook_dedup.payloads) and its archived bodies and headers (webhook_dedup.archive) are deleted. A key waiting for a worker (pending, or failed with its payload queued) cannot be processed without it: it becomes dead_lettered, last_error payload erased by webhook_dedup.redact (else last_error becomes NULL). keys: keys redacted; deliveries: payloads and archived deliveries erased. before and account scan the keys table (its primary key leads with idem_key) and the source''s archived deliveries. Executable by webhook_dedup_operator. Errors: 22004 NULL source; 22023 a bad source or key, not exactly one scope, an empty account, an infinite before; 0A000 on a distributed install. docs/operations.md, "Erasing payloads".';
COMMENT ON FUNCTION webhook_dedup.unseen(text, text[], text, text, text) IS
  'webhook_dedup.unseen(source, event_ids, environment => NULL, account => NULL, operation => NULL) -> setof text: of the provider''s event ids (as its API lists them: Stripe''s list of events, GitHub''s list of deliveries, ...), those source has no key for, in the order given, each once: events that never reached this database, or whose key is past retention. Keys are derived as webhook_receive derives them, with the same environment, account and operation. One primary-key probe per id; at most 100,000 ids per call. Enqueue what it returns (webhook_enqueue) so that the workers process it. Executable by webhook_dedup_reader (it writes nothing). Errors: 22004 NULL source, event_ids or id; 22023 a bad source, an empty id or part, too many ids. docs/operations.md, "Reconciling with the provider".';
COMMENT ON FUNCTION webhook_dedup.redrive(text, text[], timestamptz, timestamptz, text[], bigint, boolean) IS
  'webhook_dedup.redrive(source, states => ARRAY[''dead_lettered''], since => NULL, until => NULL, event_types => NULL, max => NULL, dry_run => false) -> (run bigint, matched bigint): after a fix, moves keys of source back to due so that the workers (webhook_next) process them again with their payload. states: dead_lettered (the default), failed, unknown_outcome (only when named: its effect may have happened), conflict (keys whose latest conflicting delivery is archived: that delivery is processed and becomes the key''s content). since, until: first seen (a conflict: received) in [since, until); event_types; max: at most this many, oldest first. dry_run: count, change nothing (run NULL). A real run is recorded (webhook_dedup.redrive_runs) and the maintenance worker moves its keys, webhook_dedup.batch_size per pass, skipping a paused source until it is resumed: each key, under its row lock, is skipped when a live delivery or an operator changed it since it matched (so no key is processed twice), when it is gone, or when there is no payload for the workers (claimed, not enqueued, and not archived: keep_payload; or redacted, or past its payload retention); else its payload is put in the queue (from the archive) and it becomes pending, due now, with redriven_at and redrive_run set (key_history). Executable by webhook_dedup_operator. Errors: 22004 NULL source, states, a state or dry_run; 22023 a bad source, no state or another one, since not before until, an infinite time, max below 1; 0A000 on a distributed install. docs/operations.md, "Redriving after a fix".';
COMMENT ON FUNCTION webhook_dedup.cancel_redrive(bigint) IS
  'webhook_dedup.cancel_redrive(run) -> bigint: stops a running bulk redrive (status cancelled, cancelled_by the session user); the keys it has not moved stay as they are, a batch being moved finishes first. Returns the keys it moved. A finished run is left as it is. Executable by webhook_dedup_operator. Errors: 22004 NULL run; P0002 unknown run; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.reconcile(text, text, bytea, text, jsonb, text, text, text) IS
  'webhook_dedup.reconcile(source, event_id, payload, event_type => NULL, headers => NULL, environment => NULL, account => NULL, operation => NULL) -> text: enqueues an event a reconciliation job fetched from the provider''s API because it never arrived (webhook_dedup.unseen): stored as webhook_enqueue stores a delivery (pending for webhook_next, with payload and headers; archived when the source keeps payloads) under the key webhook_receive derives from event_id with the same environment, account and operation, and marked reconciled_at on the key (key_history). accepted: counted as reconciled (webhook_dedup.duplicate_metrics; not as a delivery), which duplicate_rate_alerts reports as reconciled_above_threshold; duplicate or conflict: the key exists by then (it arrived meanwhile; counted on the key as a delivery of it unless it came within webhook_dedup.duplicate_record_interval of the key''s last recorded activity, nothing else stored). Executable by webhook_dedup_receiver. Errors: 22004 NULL source, event_id or payload; 22023 a bad source, an empty id or part. docs/operations.md, "Reconciling with the provider".';
COMMENT ON FUNCTION webhook_dedup.source_node(text) IS
  'source_node(source) -> rows (node_name, node_port, group_id, shard_id): on a distributed install (Citus), the primary node that holds source''s shard of webhook_dedup.keys (one row; one per placement of a replicated shard), from the Citus metadata of the node it runs on. A receiver or a per-node pooler that sends a source''s calls there saves the coordinator''s planning and round trip, and the calls write the shard directly (the local-shard fast path). No row on a server that is not distributed. A route can go stale when a shard moves: a call that reaches a node without the shard is still delegated to the right one (one hop more); ask again then. Executable by webhook_dedup_receiver, webhook_dedup_operator and webhook_dedup_reader. Errors: 22004 NULL source; 22023 an empty source, one over 255 characters or the reserved (overflow). docs/distributed.md.';

-- The payload archive's export (issue 27, docs/operations.md "Replaying
-- into staging"): a source's archived deliveries in a documented, stable
-- format, for audit and for replaying real events into staging
-- (examples/replay/resend.py). Runs as the extension's owner (the archive
-- is the owner's alone); executable by webhook_dedup_operator (granted
-- below).
CREATE FUNCTION webhook_dedup.export_deliveries(source text, since timestamptz, "until" timestamptz,
                                                event_types text[] DEFAULT NULL, states text[] DEFAULT NULL,
                                                include_conflicts boolean DEFAULT false,
                                                "max" integer DEFAULT 10000)
RETURNS TABLE (received_at timestamptz, idem_key text, event_id text, event_type text, conflict boolean,
               state text, payload bytea, headers jsonb, delivery jsonb)
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
  bad text;
BEGIN
  IF source IS NULL OR since IS NULL OR "until" IS NULL OR include_conflicts IS NULL OR "max" IS NULL THEN
    RAISE EXCEPTION 'webhook_dedup.export_deliveries: source, since, until, include_conflicts and max must not be NULL'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF NOT pg_catalog.isfinite(since) OR NOT pg_catalog.isfinite("until") OR since OPERATOR(pg_catalog.>=) "until" THEN
    RAISE EXCEPTION 'webhook_dedup.export_deliveries: since and until must be finite, since before until'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF "max" OPERATOR(pg_catalog.<) 1 OR "max" OPERATOR(pg_catalog.>) 100000 THEN
    RAISE EXCEPTION 'webhook_dedup.export_deliveries: max must be between 1 and 100000 (page by received_at)'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT x INTO bad FROM pg_catalog.unnest(states) AS x
   WHERE x IS NULL OR x OPERATOR(pg_catalog.<>) ALL (ARRAY['pending', 'processing', 'completed', 'failed',
                                                           'unknown_outcome', 'dead_lettered'])
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'webhook_dedup.export_deliveries: unknown state "%"', bad
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY
    SELECT a.received_at, a.idem_key::text, a.event_id, a.event_type, a.conflict, k.state, a.payload, a.headers,
           pg_catalog.jsonb_build_object(
             'format', 'webhook_dedup.delivery/1',
             'source', a.source::text,
             'scheme', COALESCE(s.provider, a.source::text),
             'idem_key', a.idem_key::text,
             'event_id', a.event_id,
             'event_type', a.event_type,
             'received_at', pg_catalog.to_char(a.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
             'conflict', a.conflict,
             'state', k.state,
             'headers', a.headers,
             'body_base64', pg_catalog.translate(pg_catalog.encode(a.payload, 'base64'), E'\n', ''))
      FROM webhook_dedup.archive AS a
      LEFT JOIN webhook_dedup.keys AS k
        ON k.idem_key OPERATOR(pg_catalog.=) a.idem_key AND k.source OPERATOR(pg_catalog.=) a.source
      LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) a.source
     WHERE a.source OPERATOR(pg_catalog.=) export_deliveries.source
       AND a.received_at OPERATOR(pg_catalog.>=) since AND a.received_at OPERATOR(pg_catalog.<) "until"
       AND (event_types IS NULL OR a.event_type OPERATOR(pg_catalog.=) ANY (event_types))
       AND (states IS NULL OR k.state OPERATOR(pg_catalog.=) ANY (states))
       AND (include_conflicts OR NOT a.conflict)
     ORDER BY a.received_at, a.idem_key
     LIMIT "max";
END
$fn$;
COMMENT ON FUNCTION webhook_dedup.export_deliveries(text, timestamptz, timestamptz, text[], text[], boolean, integer) IS
  'webhook_dedup.export_deliveries(source, since, until, event_types => NULL, states => NULL, include_conflicts => false, max => 10000) -> rows (received_at, idem_key, event_id, event_type, conflict, state, payload, headers, delivery): the source''s archived deliveries (webhook_dedup.archive) that arrived in [since, until), oldest first, at most max (1 to 100000: page by received_at): each key''s first delivery, and the conflicting ones with include_conflicts; filtered by event type and by the key''s state now (NULL state: the key is gone). payload is the raw body, byte for byte; delivery is the same as one JSON document in the stable format webhook_dedup.delivery/1: format, source, scheme (the source''s provider, else its name), idem_key, event_id (NULL when not read by webhook_receive), event_type, received_at (RFC 3339, UTC, microseconds), conflict, state, headers (as given), body_base64 (the raw body, RFC 4648 base64). One line of JSON Lines each: psql -At -c "SELECT delivery FROM webhook_dedup.export_deliveries(...)" > deliveries.jsonl, replayed into staging by examples/replay/resend.py. Executable by webhook_dedup_operator (readers never see payloads). Errors: 22004 a NULL argument but the filters; 22023 since not before until, an infinite time, max outside 1..100000, an unknown state. docs/operations.md, "Replaying into staging".';


-- distribute() grants the readers the keys' new columns that key_history
-- shows (Citus checks a view's shards with the reader's rights); on an
-- install distributed already, they are granted here.
CREATE OR REPLACE FUNCTION webhook_dedup.distribute(shard_count integer DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $distribute$
DECLARE
  t record;
  f record;
  node record;
  done integer := 0;
BEGIN
  IF pg_catalog.to_regproc('pg_catalog.create_distributed_table') IS NULL THEN
    RAISE EXCEPTION 'webhook_dedup.distribute() needs Citus: the extension citus is not installed in this database'
      USING ERRCODE = '55000',
            HINT = 'Install Citus from its packages, add citus first to shared_preload_libraries, CREATE EXTENSION citus and add the workers (docs/distributed.md).';
  END IF;
  IF NOT pg_catalog.citus_is_coordinator() THEN
    RAISE EXCEPTION 'webhook_dedup.distribute() runs on the coordinator' USING ERRCODE = '55000';
  END IF;
  -- Every node preloads the library: its guard keeps a NULL source from
  -- Citus's function delegation, which would crash the server on it
  -- (src/citus_guard.rs), and its worker does that node's maintenance.
  FOR node IN SELECT r.nodeid, r.success, r.result
                FROM pg_catalog.run_command_on_all_nodes('SHOW shared_preload_libraries') AS r LOOP
    IF NOT node.success OR NOT EXISTS (
         SELECT FROM pg_catalog.unnest(pg_catalog.string_to_array(node.result, ',')) AS e(lib)
          WHERE pg_catalog.btrim(e.lib, ' "') OPERATOR(pg_catalog.~) '(^|/)webhook_dedup(\.so)?$') THEN
      RAISE EXCEPTION 'webhook_dedup.distribute() needs webhook_dedup in shared_preload_libraries on every node: Citus node % has %',
        node.nodeid, node.result
        USING ERRCODE = '55000',
              HINT = 'Set shared_preload_libraries = ''citus,webhook_dedup'' on every node, restart it, and try again (docs/distributed.md).';
    END IF;
  END LOOP;
  IF shard_count IS NOT NULL AND (shard_count OPERATOR(pg_catalog.<) 1 OR shard_count OPERATOR(pg_catalog.>) 64000) THEN
    RAISE EXCEPTION 'shard_count must be between 1 and 64000, not %', shard_count USING ERRCODE = '22023';
  END IF;

  -- The statement triggers that empty every backend's caches of the
  -- sources and their keys when they change are kept on the reference
  -- tables, and Citus puts them on every node's copy as well.
  PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
  IF shard_count IS NOT NULL THEN
    PERFORM pg_catalog.set_config('citus.shard_count', shard_count::text, true);
  END IF;

  FOR t IN SELECT x.rel::pg_catalog.regclass AS rel FROM (VALUES
      ('webhook_dedup.sources'), ('webhook_dedup.source_secrets')) AS x(rel)
  LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid OPERATOR(pg_catalog.=) t.rel) THEN
      PERFORM pg_catalog.create_reference_table(t.rel);
      -- the rows were copied to every node; the coordinator's own copy
      -- under the table is no longer read, and would only take space
      PERFORM pg_catalog.truncate_local_data_after_distributing_table(t.rel);
      done := done OPERATOR(pg_catalog.+) 1;
    END IF;
  END LOOP;

  -- A distributed table's unique constraints must hold its distribution
  -- column: the conflict log's identity becomes (id, source).
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p
                  WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'webhook_dedup.conflict_log'::pg_catalog.regclass) THEN
    ALTER TABLE webhook_dedup.conflict_log DROP CONSTRAINT conflict_log_pkey;
    ALTER TABLE webhook_dedup.conflict_log ADD CONSTRAINT conflict_log_pkey PRIMARY KEY (id, source);
  END IF;

  -- One co-location group (every source column is text COLLATE "C"):
  -- a source's rows of every table are in shards on one node, so a
  -- statement that names the source, whichever tables it reads, runs there.
  FOR t IN SELECT x.rel::pg_catalog.regclass AS rel, x.ord, x.colocate_with FROM (VALUES
      ('webhook_dedup.keys', 1, 'none'), ('webhook_dedup.payloads', 2, 'webhook_dedup.keys'),
      ('webhook_dedup.replay_guards', 3, 'webhook_dedup.keys'), ('webhook_dedup.conflict_log', 4, 'webhook_dedup.keys'),
      ('webhook_dedup.watermarks', 5, 'webhook_dedup.keys'),
      ('webhook_dedup.claim_counts', 6, 'webhook_dedup.keys'),
      ('webhook_dedup.signature_tokens', 7, 'webhook_dedup.keys')) AS x(rel, ord, colocate_with)
    ORDER BY x.ord
  LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid OPERATOR(pg_catalog.=) t.rel) THEN
      PERFORM pg_catalog.create_distributed_table(t.rel, 'source', colocate_with => t.colocate_with);
      PERFORM pg_catalog.truncate_local_data_after_distributing_table(t.rel);
      done := done OPERATOR(pg_catalog.+) 1;
    END IF;
  END LOOP;

  -- Readers: the views run with their owner's rights on one server, but
  -- Citus checks the shards it reads on the workers with the reader's own
  -- (citusdata/citus#1683, #6161). So the roles the views are granted to
  -- may read what the views show: the key columns they read (never
  -- claim_token or fingerprint; payloads, headers and secrets stay out of
  -- reach), the conflicts, the counts and the per-source settings.
  GRANT SELECT (source, idem_key, state, event_type, attempt, leased_at, lease_expires_at, next_attempt_at, due_at,
                last_step, last_error, deliveries, conflicts, result, first_seen_at, last_seen_at, completed_at,
                redacted_at, redacted_by, redriven_at, redrive_run, reconciled_at)
    ON webhook_dedup.keys TO webhook_dedup_reader, pg_monitor;
  GRANT SELECT ON webhook_dedup.conflict_log, webhook_dedup.claim_counts, webhook_dedup.sources
    TO webhook_dedup_reader, pg_monitor;

  -- Every function of one source's state runs on the node that holds the
  -- source's shard, in one round trip, when it is called outside a
  -- transaction block (Citus delegates such calls; inside one, the call
  -- runs on the coordinator and its statements go to that shard).
  FOR f IN SELECT x.signature::pg_catalog.regprocedure AS fn, x.colocate_with FROM (VALUES
      ('webhook_dedup.webhook_claim(text, text, bytea, interval, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_claim_many(text, text[], interval, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_complete(text, text, uuid, jsonb)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_fail(text, text, uuid, text, boolean, interval)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_mark_unknown(text, text, uuid, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_checkpoint(text, text, uuid, text)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_extend_lease(text, text, uuid, interval)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_enqueue(text, text, bytea, text, jsonb)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean, interval,'
       ' timestamptz, text, text, text, text, text, text, interval)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_advance(text, text, timestamptz, text, bigint)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_resolve(text, text, text, jsonb)', 'webhook_dedup.keys'),
      ('webhook_dedup.webhook_forget(text, text)', 'webhook_dedup.keys')) AS x(signature, colocate_with)
  LOOP
    PERFORM pg_catalog.create_distributed_function(f.fn, 'source', colocate_with => f.colocate_with);
  END LOOP;
  RETURN pg_catalog.format('webhook_dedup is distributed by source (%s tables converted now)', done);
END
$distribute$;
DO $$
DECLARE
  distributed boolean := false;
BEGIN
  -- (Citus's catalog is named only when it exists: dynamic SQL)
  IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p'
            ' WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''webhook_dedup.keys''::pg_catalog.regclass)'
      INTO distributed;
  END IF;
  IF distributed THEN
    GRANT SELECT (redacted_at, redacted_by, redriven_at, redrive_run, reconciled_at)
      ON webhook_dedup.keys TO webhook_dedup_reader, pg_monitor;
  END IF;
END
$$;

-- duplicate_rate_alerts gains the reconciled_above_threshold alert and a
-- column: a new row type (grants a DBA gave on it must be given again).
DROP FUNCTION webhook_dedup.duplicate_rate_alerts(double precision, interval);
CREATE FUNCTION webhook_dedup.duplicate_rate_alerts(threshold double precision DEFAULT 0.02,
                                                    "window" interval DEFAULT '1 hour')
RETURNS TABLE (source text, alert text, deliveries bigint, duplicates bigint, duplicate_ratio double precision,
               previous_duplicates bigint, reconciled bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'  -- buckets are UTC-aligned; so are the windows
AS $fn$
DECLARE
  width interval;
  unit text;
BEGIN
  IF threshold IS NULL OR "window" IS NULL THEN
    RAISE EXCEPTION 'webhook_dedup.duplicate_rate_alerts: threshold and window must not be NULL'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF threshold < 0 OR threshold > 1 THEN  -- NaN sorts above 1 in PostgreSQL
    RAISE EXCEPTION 'webhook_dedup.duplicate_rate_alerts: threshold must be between 0 and 1, not %', threshold
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF "window" < interval '1 minute' OR "window" > interval '366 days' THEN
    RAISE EXCEPTION 'webhook_dedup.duplicate_rate_alerts: window must be between 1 minute and 366 days, not %', "window"
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Windows up to an hour use the per-minute counts (kept two hours, so
  -- the previous window is there too); longer ones the hourly counts.
  IF "window" <= interval '1 hour' THEN
    width := interval '1 minute'; unit := 'minute';
  ELSE
    width := interval '1 hour'; unit := 'hour';
  END IF;
  RETURN QUERY
  WITH b AS (
    SELECT m.source, m.bucket, m.deliveries, m.duplicates, m.reconciled
      FROM webhook_dedup.metrics_buckets AS m
     WHERE m.bucket_width = width
       AND m.bucket >= date_trunc(unit, now() - 2 * "window")
  ), w AS (
    SELECT b.source,
           coalesce(sum(b.deliveries) FILTER (WHERE b.bucket >= date_trunc(unit, now() - "window")), 0)::bigint AS d,
           coalesce(sum(b.duplicates) FILTER (WHERE b.bucket >= date_trunc(unit, now() - "window")), 0)::bigint AS dup,
           coalesce(sum(b.duplicates) FILTER (WHERE b.bucket < date_trunc(unit, now() - "window")), 0)::bigint AS prev,
           coalesce(sum(b.reconciled) FILTER (WHERE b.bucket >= date_trunc(unit, now() - "window")), 0)::bigint AS rec
      FROM b GROUP BY b.source
  )
  SELECT w.source,
         CASE WHEN w.dup = 0 THEN 'duplicates_stopped' ELSE 'ratio_above_threshold' END,
         w.d, w.dup,
         CASE WHEN w.d > 0 THEN w.dup::double precision / w.d END,
         w.prev, w.rec
    FROM w
   WHERE (w.d > 0 AND w.dup::double precision / w.d > threshold)
      OR (w.dup = 0 AND w.prev > 0)
  UNION ALL
  -- a leaky endpoint: events the provider sent that a reconciliation job
  -- had to enqueue (webhook_dedup.reconcile), against all it sent
  SELECT w.source, 'reconciled_above_threshold', w.d, w.dup,
         CASE WHEN w.d > 0 THEN w.dup::double precision / w.d END,
         w.prev, w.rec
    FROM w
   WHERE w.rec > 0 AND w.rec::double precision / (w.d + w.rec) > threshold
   ORDER BY 1, 2;
END
$fn$;
COMMENT ON FUNCTION webhook_dedup.duplicate_rate_alerts(double precision, interval) IS
  'duplicate_rate_alerts(threshold => 0.02, "window" => ''1 hour'') -> rows (source, alert, deliveries, duplicates, duplicate_ratio, previous_duplicates, reconciled). alert ratio_above_threshold: duplicates / deliveries over the window is above threshold (providers are retrying: the receiver is slow or failing). alert duplicates_stopped: no duplicates in the window after some in the window before it (deduplication may have stopped working, or traffic stopped: see deliveries). alert reconciled_above_threshold: reconciled / (deliveries + reconciled) is above threshold: events the provider sent never arrived and a reconciliation job enqueued them (webhook_dedup.reconcile): a leaky endpoint (a proxy or a firewall dropping requests, a receiver answering 2xx before storing). Windows are aligned to buckets: per minute up to 1 hour, else per hour (the window starts at the bucket holding now() - window). Errors: 22004 a NULL argument; 22023 threshold outside 0..1, window outside 1 minute..366 days.';
REVOKE ALL ON FUNCTION webhook_dedup.duplicate_rate_alerts(double precision, interval) FROM PUBLIC;

-- key_history shows who redacted a key and which redrive moved it, in
-- columns at its end; the redrives' progress.
CREATE OR REPLACE VIEW webhook_dedup.key_history AS
SELECT k.source, k.idem_key, k.state, k.event_type, k.first_seen_at, k.last_seen_at, k.completed_at,
       k.attempt AS attempts, k.deliveries, k.conflicts, k.last_step, k.last_error, k.result, k.leased_at,
       k.lease_expires_at, k.next_attempt_at, k.due_at,
       (SELECT pg_catalog.max(c.seen_at) FROM webhook_dedup.conflict_log AS c
         WHERE c.idem_key OPERATOR(pg_catalog.=) k.idem_key AND c.source OPERATOR(pg_catalog.=) k.source)
         AS last_conflict_at,
       k.redacted_at, k.redacted_by, k.redriven_at, k.redrive_run, k.reconciled_at
  FROM webhook_dedup.keys AS k;
COMMENT ON VIEW webhook_dedup.key_history IS
  'Everything known about a key: SELECT * FROM webhook_dedup.key_history WHERE idem_key = ''github:...'' (an index scan of the primary key, which leads with idem_key). source, idem_key, state, event_type, first_seen_at, last_seen_at, completed_at, attempts (leases granted), deliveries (claims and enqueues, the first included: deliveries - 1 duplicates), conflicts, last_step, last_error, result (what webhook_complete stored), leased_at, lease_expires_at, next_attempt_at, due_at, last_conflict_at, redacted_at and redacted_by (when and by which session user webhook_dedup.redact erased the key''s payloads and result), redriven_at and redrive_run (when and by which bulk redrive, webhook_dedup.redrive_runs, the key was last made due again), reconciled_at (when a reconciliation job enqueued its event, which never arrived: webhook_dedup.reconcile). No payload or headers.';
CREATE VIEW webhook_dedup.redrive_runs AS
SELECT r.id, r.source::text AS source,
       CASE WHEN r.conflicts THEN r.states OPERATOR(pg_catalog.||) 'conflict'::text ELSE r.states END AS states,
       r.since, r."until", r.event_types, r.max_keys, r.status, r.matched, r.moved, r.skipped,
       r.matched OPERATOR(pg_catalog.-) r.moved OPERATOR(pg_catalog.-) r.skipped AS remaining,
       r.created_at, r.created_by, r.finished_at, r.cancelled_by
  FROM webhook_dedup.redrives AS r;
COMMENT ON VIEW webhook_dedup.redrive_runs IS
  'One row per bulk redrive (webhook_dedup.redrive), newest last: id (what cancel_redrive takes), source, states (as named: dead_lettered, failed, unknown_outcome, conflict), since, until, event_types, max_keys, status (running: the maintenance worker moves its keys, batch_size a pass; done; cancelled), matched (keys when it started), moved (made due again: webhook_next hands them out with their payload), skipped (changed since they matched, gone, or without a payload), remaining, created_at, created_by, finished_at, cancelled_by. Finished runs are pruned after their source''s retention.';
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
COMMENT ON VIEW webhook_dedup.outbox_backlog IS
  'Per outbox target with intents not delivered: undelivered (= pending + in_flight + failed: still to be sent), pending (written, never taken), in_flight (leased to a sender), failed (due again at their next attempt), due (takeable now, lapsed leases included), unknown_outcome and dead_lettered (wait for an operator: webhook_dedup.outbox_unknown_outcomes, outbox_dead_letters), oldest_undelivered_at and oldest_undelivered_age (now() minus it: the lag of the target''s senders; alert on it). Targets with only delivered intents have no row. Reads the partial index outbox_open.';

CREATE VIEW webhook_dedup.outbox_dead_letters AS
SELECT o.id, o.target, o.operation, o.source, o.idem_key, o.downstream_key, o.attempt AS attempts, o.last_error,
       o.created_at, o.updated_at
  FROM webhook_dedup.outbox AS o
 WHERE o.due_at IS NOT NULL AND o.state OPERATOR(pg_catalog.=) 'dead_lettered';
COMMENT ON VIEW webhook_dedup.outbox_dead_letters IS
  'Outbox intents that will not be sent again: out of attempts (the source''s max_attempts), failed as not retryable, or dead-lettered by an operator. id, target, operation, source and idem_key (the event), downstream_key, attempts, last_error, created_at, updated_at. An operator decides: webhook_dedup.webhook_outbox_resolve(id, ''pending'') sends it again with the same downstream key, ''completed'' closes it.';

CREATE VIEW webhook_dedup.outbox_unknown_outcomes AS
SELECT o.id, o.target, o.operation, o.source, o.idem_key, o.downstream_key, o.attempt AS attempts, o.last_error,
       o.created_at, o.updated_at
  FROM webhook_dedup.outbox AS o
 WHERE o.due_at IS NOT NULL AND o.state OPERATOR(pg_catalog.=) 'unknown_outcome';
COMMENT ON VIEW webhook_dedup.outbox_unknown_outcomes IS
  'Outbox intents that may or may not have reached their downstream: marked by their sender (webhook_outbox_unknown: sent, answer lost), or a lapsed lease of a downstream that takes no idempotency key (downstream_idempotent = false). Never sent again automatically. Reconcile with the downstream (search it by downstream_key or the request), then webhook_dedup.webhook_outbox_resolve(id, ''completed'') or (id, ''pending''). Columns as webhook_dedup.outbox_dead_letters.';

COMMENT ON FUNCTION webhook_dedup.webhook_operation_key(text, text, text, integer, text) IS
  'webhook_dedup.webhook_operation_key(source, idem_key, operation, max_length => 255, downstream => NULL) -> text: the downstream idempotency key of one operation of an event, to send with the receiver''s own call to a payment, shipping or e-mail API: operation:source:idem_key with each part percent-encoded (RFC 3986 unreserved characters kept) when it fits max_length, else as much of the encoded operation as fits, ''-'' and the first 128 bits of SHA-256 of that plain form in hex. Deterministic (every retry, reclaim, replica and restore gives the same key), distinct for distinct (event, operation), of the characters A-Z a-z 0-9 - . _ % :. downstream names a preset of webhook_dedup.downstream_key_limits (stripe 255, square_payments 45, square_refunds 45, square_orders 192, paypal_orders 108, adyen 64) whose limit replaces max_length. Errors: 22004 a NULL argument; 22023 an empty part or one over 255 characters, max_length outside 32..255, an unknown downstream, or a max_length other than 255 that contradicts the downstream''s.';
COMMENT ON FUNCTION webhook_dedup.downstream_key_limits_rows() IS
  'The rows of webhook_dedup.downstream_key_limits.';
CREATE VIEW webhook_dedup.downstream_key_limits AS
SELECT d.downstream, d.carrier, d.max_length, d.key_retention, d.sources
  FROM webhook_dedup.downstream_key_limits_rows() AS d;
COMMENT ON VIEW webhook_dedup.downstream_key_limits IS
  'The downstream APIs webhook_dedup.webhook_operation_key(..., downstream => ...) knows: downstream (the preset''s name), carrier (where the key goes: a header or a body field), max_length (characters), key_retention (how long the downstream remembers a key, as documented: a retry later than that is a new request there), sources (the documents each fact is from).';

COMMENT ON FUNCTION webhook_dedup.webhook_outbox_put(text, text, uuid, text, text, jsonb, integer, text, boolean) IS
  'webhook_dedup.webhook_outbox_put(source, idem_key, claim_token, operation, target, request, max_length => 255, downstream => NULL, downstream_idempotent => true) -> bigint: records one downstream call to make (an intent) while claim_token holds the key''s lease, in the caller''s transaction (it commits or vanishes with the business write and webhook_complete). operation names the downstream effect (refund, email:receipt), unique per key; target the senders that take it (stripe-refunds, email); request what they need. Its downstream_key is webhook_operation_key(source, idem_key, operation, max_length, downstream). Returns the intent''s id; the first intent''s id when the key has one for this operation (nothing written again); NULL when claim_token does not hold the lease (nothing written; counted as stale_tokens). downstream_idempotent => false for a downstream that takes no idempotency key: a lapsed sender lease then parks the intent as unknown_outcome instead of sending it again. Executable by webhook_dedup_receiver. Errors: P0002 unknown key; 22004 a NULL argument; 22023 key rules, an operation or target of 0 or over 255 characters, max_length or downstream as webhook_operation_key; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_next(text, interval, integer) IS
  'webhook_dedup.webhook_outbox_next(target => NULL, lease => NULL, batch => 1) -> rows (id, lease_token, downstream_key, target, operation, request, attempt, lease_expires_at, source, idem_key, downstream_idempotent): up to batch due intents of target (NULL: every target), oldest due first (pending, lapsed leases, due retries), each leased to the caller for lease (NULL: its source''s lease, else webhook_dedup.default_lease) with a fresh lease_token. Send each with its downstream_key (the same on every attempt), then webhook_outbox_ack, webhook_outbox_fail or webhook_outbox_unknown with id and lease_token. An intent due again with no attempts left is dead-lettered, a lapsed lease of a downstream that is not idempotent parked as unknown_outcome; neither is returned. Intents another sender holds are skipped, not waited for (SKIP LOCKED): two senders never get one intent. Executable by webhook_dedup_receiver. Errors: 22004 NULL batch; 22023 batch outside 1..1000, a target of 0 or over 255 characters, a bad lease; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_ack(bigint, uuid, jsonb) IS
  'webhook_dedup.webhook_outbox_ack(id, lease_token, response => NULL) -> boolean: the call was delivered; the intent becomes completed with response kept, and is deleted by maintenance after its source''s retention. False (nothing changed; counted as stale_tokens) when lease_token no longer holds the intent (its lease lapsed and another sender took it, or an operator resolved it). Executable by webhook_dedup_receiver. Errors: P0002 unknown intent; 22004 NULL id or lease_token; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_fail(bigint, uuid, text, boolean, interval) IS
  'webhook_dedup.webhook_outbox_fail(id, lease_token, error, retryable => true, retry_after => NULL) -> text: the call failed without effect. The new state: failed (due again after retry_after, else min(30 s * 2^(attempt-1), 1 h)) while retryable and attempt < the source''s max_attempts; otherwise dead_lettered. NULL when lease_token is stale (nothing changes). error is kept as last_error. For a call whose effect is unknown use webhook_outbox_unknown. Executable by webhook_dedup_receiver. Errors: P0002 unknown intent; 22004 NULL id, lease_token or retryable; 22023 a retry_after outside 0..365 days or with months; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_unknown(bigint, uuid, text) IS
  'webhook_dedup.webhook_outbox_unknown(id, lease_token, detail => NULL) -> boolean: the call was sent and its answer lost, and the downstream cannot deduplicate a repeat: the intent becomes unknown_outcome (detail in last_error) and is never sent again automatically (webhook_dedup.outbox_unknown_outcomes; an operator reconciles and calls webhook_outbox_resolve). False when lease_token is stale. Executable by webhook_dedup_receiver. Errors: P0002 unknown intent; 22004 NULL id or lease_token; 0A000 on a distributed install.';
COMMENT ON FUNCTION webhook_dedup.webhook_outbox_resolve(bigint, text, jsonb) IS
  'webhook_dedup.webhook_outbox_resolve(id, new_state, response => NULL) -> text: the previous state. An operator''s decision after reconciling an intent with its downstream, from any state: completed (it was delivered; response stored when given), failed or pending (send it again now, with the same downstream key; its attempts start over), dead_lettered (give up). A sender holding the intent is fenced out. Executable by webhook_dedup_operator. Errors: P0002 unknown intent; 22004 NULL id or new_state; 22023 another new_state; 0A000 on a distributed install.';

-- Nothing on the objects this update creates but what follows: what the
-- installing role's default privileges gave is revoked, as CREATE
-- EXTENSION revokes it on every object (src/sql/finalize.sql). Grants on
-- the objects the update replaces in place (the counters' views) are kept.
DO $$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT DISTINCT c.oid::pg_catalog.regclass AS rel, c.relkind, a.grantee
             FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
            WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY['webhook_dedup.outbox', 'webhook_dedup.outbox_id_seq',
                    'webhook_dedup.outbox_backlog', 'webhook_dedup.outbox_dead_letters',
                    'webhook_dedup.outbox_unknown_outcomes', 'webhook_dedup.downstream_key_limits',
                    'webhook_dedup.archive', 'webhook_dedup.archive_default', 'webhook_dedup.redrives',
                    'webhook_dedup.redrives_id_seq', 'webhook_dedup.redrive_keys',
                    'webhook_dedup.redrive_runs']::pg_catalog.regclass[])
              AND a.grantee OPERATOR(pg_catalog.<>) c.relowner LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s',
                              CASE WHEN g.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, g.rel,
                              CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                   ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END);
  END LOOP;
  FOR g IN SELECT DISTINCT p.oid::pg_catalog.regprocedure AS fn, a.grantee
             FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
            WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                    'webhook_dedup.webhook_operation_key(text, text, text, integer, text)',
                    'webhook_dedup.downstream_key_limits_rows()',
                    'webhook_dedup.webhook_outbox_put(text, text, uuid, text, text, jsonb, integer, text, boolean)',
                    'webhook_dedup.webhook_outbox_next(text, interval, integer)',
                    'webhook_dedup.webhook_outbox_ack(bigint, uuid, jsonb)',
                    'webhook_dedup.webhook_outbox_fail(bigint, uuid, text, boolean, interval)',
                    'webhook_dedup.webhook_outbox_unknown(bigint, uuid, text)',
                    'webhook_dedup.webhook_outbox_resolve(bigint, text, jsonb)',
                    'webhook_dedup.pause(text, text)', 'webhook_dedup.resume(text)',
                    'webhook_dedup.redact(text, text, timestamptz, text)',
                    'webhook_dedup.unseen(text, text[], text, text, text)',
                    'webhook_dedup.source_node(text)',
                    'webhook_dedup.export_deliveries(text, timestamptz, timestamptz, text[], text[], boolean, integer)',
                    'webhook_dedup.redrive(text, text[], timestamptz, timestamptz, text[], bigint, boolean)',
                    'webhook_dedup.cancel_redrive(bigint)',
                    'webhook_dedup.reconcile(text, text, bytea, text, jsonb, text, text, text)',
                    'webhook_dedup.duplicate_rate_alerts(double precision, interval)',
                    'webhook_dedup.run_maintenance()']::pg_catalog.regprocedure[])
              AND a.grantee OPERATOR(pg_catalog.<>) p.proowner AND a.grantee OPERATOR(pg_catalog.<>) 0 LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %I', g.fn, pg_catalog.pg_get_userbyid(g.grantee));
  END LOOP;
END
$$;
REVOKE ALL ON webhook_dedup.outbox, webhook_dedup.outbox_id_seq FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_dedup.run_maintenance() TO webhook_dedup_operator;
GRANT EXECUTE ON FUNCTION webhook_dedup.duplicate_rate_alerts(double precision, interval)
  TO webhook_dedup_reader, pg_monitor;

-- Each function that changes state, with the role that may call it (as
-- src/sql/finalize.sql).
DO $$
DECLARE
  f record;
BEGIN
  FOR f IN SELECT x.signature::pg_catalog.regprocedure AS fn, x.role FROM (VALUES
      ('webhook_dedup.webhook_outbox_put(text, text, uuid, text, text, jsonb, integer, text, boolean)',
       'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_next(text, interval, integer)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_ack(bigint, uuid, jsonb)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_fail(bigint, uuid, text, boolean, interval)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_unknown(bigint, uuid, text)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_resolve(bigint, text, jsonb)', 'webhook_dedup_operator'),
      ('webhook_dedup.pause(text, text)', 'webhook_dedup_operator'),
      ('webhook_dedup.resume(text)', 'webhook_dedup_operator'),
      ('webhook_dedup.redact(text, text, timestamptz, text)', 'webhook_dedup_operator'),
      ('webhook_dedup.unseen(text, text[], text, text, text)', 'webhook_dedup_reader'),
      ('webhook_dedup.source_node(text)', 'webhook_dedup_receiver'),
      ('webhook_dedup.export_deliveries(text, timestamptz, timestamptz, text[], text[], boolean, integer)',
       'webhook_dedup_operator'),
      ('webhook_dedup.redrive(text, text[], timestamptz, timestamptz, text[], bigint, boolean)',
       'webhook_dedup_operator'),
      ('webhook_dedup.cancel_redrive(bigint)', 'webhook_dedup_operator'),
      ('webhook_dedup.reconcile(text, text, bytea, text, jsonb, text, text, text)', 'webhook_dedup_receiver'))
      AS x(signature, role)
  LOOP
    EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f.fn);
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.fn);
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f.fn, f.role);
  END LOOP;
END
$$;
GRANT EXECUTE ON FUNCTION webhook_dedup.source_node(text) TO webhook_dedup_operator, webhook_dedup_reader;
GRANT SELECT (id, source, idem_key, operation, target, request, downstream_key, downstream_idempotent, key_attempt,
              state, attempt, lease_expires_at, next_attempt_at, due_at, response, last_error, created_at, leased_at,
              delivered_at, updated_at)
  ON webhook_dedup.outbox TO webhook_dedup_operator;
REVOKE INSERT, UPDATE ON webhook_dedup.sources FROM webhook_dedup_operator;
-- Operators configure sources with SQL, all but the pause: paused_at,
-- paused_by and pause_reason are written by pause() and resume() only,
-- which park and unpark the source's keys with them.
GRANT SELECT, DELETE ON webhook_dedup.sources TO webhook_dedup_operator;
COMMENT ON ROLE webhook_dedup_operator IS
  'webhook_dedup: may resolve and forget keys, run maintenance, flush the counters, configure webhook_dedup.sources, pause and resume sources, erase payloads (redact); reads what webhook_dedup_reader reads.';
COMMENT ON ROLE webhook_dedup_reader IS
  'webhook_dedup: may read the views of schema webhook_dedup (no payload, header or claim token is in any) and call its read-only functions (unseen among them).';
GRANT SELECT ON webhook_dedup.outbox_backlog, webhook_dedup.outbox_dead_letters,
                webhook_dedup.outbox_unknown_outcomes, webhook_dedup.downstream_key_limits,
                webhook_dedup.redrive_runs
  TO webhook_dedup_reader, pg_monitor;

-- Intents are the record of what is still to be sent: pg_dump dumps them.
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.outbox_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.archive_default', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redrives', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redrives_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redrive_keys', '');

-- issue 29: a recent duplicate is a read; what the key's counts record
COMMENT ON COLUMN webhook_dedup.keys.deliveries IS 'Deliveries recorded on the key (webhook_claim, webhook_receive and webhook_enqueue calls, the first included): every one that changed it (a lease, a conflict, a fingerprint adopted) and every duplicate at least webhook_dedup.duplicate_record_interval (60 s by default) after the key''s last recorded activity; a duplicate within that interval is answered with a read and counted only in the per-source counters (webhook_dedup.duplicate_metrics). 0.2.0 counted every one here; issue 29, docs/design.md "Duplicates are reads".';
COMMENT ON COLUMN webhook_dedup.keys.last_seen_at IS 'Last recorded activity on the key (a recorded delivery, a lease, a completion; at most webhook_dedup.duplicate_record_interval before its last delivery): retention counts from here.';
