-- webhook_dedup: schema and tables (runs first in the install script).
-- Design and the argument for every choice: docs/design.md.

-- Text is handled as UTF-8 throughout (Rust strings, JSON, the signed
-- bytes of every scheme); another server encoding would hand the functions
-- bytes that are not UTF-8. Refuse it here, clearly, rather than fail in
-- every call.
DO $$
BEGIN
  IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.<>) 'UTF8' THEN
    RAISE EXCEPTION 'webhook_dedup needs a database with encoding UTF8, not %', pg_catalog.getdatabaseencoding()
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Create the database with CREATE DATABASE ... ENCODING ''UTF8'' TEMPLATE template0.';
  END IF;
END
$$;

-- Every object of the extension, the functions callers call included, lives
-- in schema webhook_dedup, which this script creates and the extension owns:
-- nobody but its owner (the superuser who ran CREATE EXTENSION) may create
-- objects there, so no overload or operator of someone else's can stand
-- beside the extension's functions (CVE-2018-1058's class: an overload with
-- varchar parameters in a schema a database owner may write to is a better
-- match for a caller binding varchar than a text function, whatever the
-- search_path says). So the schema must be new: one that exists already
-- could have been made, or be writable, by someone else. Nothing is created
-- in the schema CREATE EXTENSION names (@extschema@, public by default).
DO $$
DECLARE
  holder pg_catalog.name;
BEGIN
  SELECT pg_catalog.pg_get_userbyid(n.nspowner) INTO holder
    FROM pg_catalog.pg_namespace AS n WHERE n.nspname OPERATOR(pg_catalog.=) 'webhook_dedup';
  IF FOUND THEN
    RAISE EXCEPTION 'webhook_dedup: schema webhook_dedup already exists (owned by %)', holder
      USING ERRCODE = 'duplicate_schema',
            DETAIL = 'The extension keeps every function callers call in its own schema, which no '
                     'other role may write to; a schema that exists already could hold another '
                     'role''s functions or grant CREATE to others.',
            HINT = 'Drop or rename that schema, then run CREATE EXTENSION again (docs/security.md, '
                   '"Where the functions live").';
  END IF;
END
$$;
CREATE SCHEMA webhook_dedup;
COMMENT ON SCHEMA webhook_dedup IS
  'The webhook_dedup extension: every function callers call (webhook_claim, webhook_receive, ...: '
  'call them schema-qualified, webhook_dedup.webhook_claim(...)), idempotency keys, metrics and '
  'maintenance. Only the extension''s owner may create objects here (docs/security.md).';

-- One row per (source, idem_key): the claim state machine's state. Not
-- partitioned: its primary key arbitrates concurrent first claims (a claim
-- is one INSERT ... ON CONFLICT), and row locks serialise every later
-- writer of a key. Rows are narrow (bulky payloads live in
-- webhook_dedup.payloads); completed keys past retention are deleted by
-- maintenance in batches, oldest first (index keys_expiry). No CHECK
-- constraints: the functions validate every value they write, and a CHECK
-- costs every claim a re-parse of its expression. The measurements behind
-- this layout: docs/design.md, "Storage".
CREATE TABLE webhook_dedup.keys (
    -- "C": keys are opaque identifiers, compared byte for byte (equality
    -- is the same in every deterministic collation; "C" compares faster)
    source           text        COLLATE "C" NOT NULL,
    idem_key         text        COLLATE "C" NOT NULL,
    state            text        NOT NULL,
    attempt          integer     NOT NULL DEFAULT 0,
    claim_token      uuid,
    lease_expires_at timestamptz,
    next_attempt_at  timestamptz,
    due_at           timestamptz,
    fingerprint      bytea,
    event_type       text,
    result           jsonb,
    last_step        text,
    last_error       text,
    deliveries       integer     NOT NULL DEFAULT 1,
    conflicts        integer     NOT NULL DEFAULT 0,
    first_seen_at    timestamptz NOT NULL,
    last_seen_at     timestamptz NOT NULL,
    completed_at     timestamptz,
    leased_at        timestamptz,
    expires_at       timestamptz,
    redacted_at      timestamptz,
    redacted_by      text,
    redriven_at      timestamptz,
    redrive_run      bigint,
    reconciled_at    timestamptz,
    -- idem_key first: key_history looks keys up by idem_key alone.
    CONSTRAINT keys_pkey PRIMARY KEY (idem_key, source)
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02);

COMMENT ON TABLE webhook_dedup.keys IS
  'One row per idempotency key (source, idem_key): its state in the claim state machine. The '
  'primary key arbitrates concurrent first claims; completed keys are deleted by maintenance once '
  'past retention (expires_at). See docs/design.md.';
COMMENT ON COLUMN webhook_dedup.keys.source IS 'Who sent the event (a provider or endpoint name), 1-255 characters.';
COMMENT ON COLUMN webhook_dedup.keys.idem_key IS 'The idempotency key within the source, 1-255 characters (see webhook_key).';
COMMENT ON COLUMN webhook_dedup.keys.state IS 'pending, processing, completed, failed, unknown_outcome or dead_lettered.';
COMMENT ON COLUMN webhook_dedup.keys.attempt IS
  'Processing attempts so far (0 while pending); grows by one with every lease a claim or '
  'webhook_next grants. The fencing token to pass to downstream systems.';
COMMENT ON COLUMN webhook_dedup.keys.claim_token IS 'Token of the current (or last) lease, which webhook_complete must present; NULL once the key is completed (it fences nothing then).';
COMMENT ON COLUMN webhook_dedup.keys.lease_expires_at IS 'When the current lease expires; a later claim reclaims an expired one.';
COMMENT ON COLUMN webhook_dedup.keys.next_attempt_at IS 'For failed keys: when a retry is due.';
COMMENT ON COLUMN webhook_dedup.keys.due_at IS
  'When a claim or webhook_next may next take the key: a pending key at once, a processing key '
  'when its lease expires, a failed key at next_attempt_at; NULL for completed, unknown_outcome '
  'and dead_lettered keys. Indexed (keys_open).';
COMMENT ON COLUMN webhook_dedup.keys.fingerprint IS
  'The content of the first payload claimed or enqueued with the key: SHA-256 of its raw bytes (32 '
  'bytes), or the byte 0x01 and SHA-256 of the RFC 8785 canonical JSON that its source''s '
  'fingerprint rule covers (33 bytes; webhook_receive, docs/providers.md). A later delivery with '
  'other content is a conflict (byte-identical raw bytes never are).';
COMMENT ON COLUMN webhook_dedup.keys.event_type IS 'The provider''s event type, as given to the first claim.';
COMMENT ON COLUMN webhook_dedup.keys.result IS 'What webhook_complete stored; returned to duplicates. Keep it small (a status, an id): it is read by every duplicate.';
COMMENT ON COLUMN webhook_dedup.keys.last_step IS 'The last checkpointed step, so a reclaimed event resumes there.';
COMMENT ON COLUMN webhook_dedup.keys.last_error IS 'The last failure''s error text.';
COMMENT ON COLUMN webhook_dedup.keys.deliveries IS
  'Deliveries recorded on the key (webhook_claim, webhook_receive and webhook_enqueue calls, the '
  'first included): every one that changed it (a lease, a conflict, a fingerprint adopted) and '
  'every duplicate at least webhook_dedup.duplicate_record_interval (60 s by default) after the '
  'key''s last recorded activity; a duplicate within that interval is answered with a read and '
  'counted only in the per-source counters (webhook_dedup.duplicate_metrics). 0.2.0 counted every '
  'one here; issue 29, docs/design.md "Duplicates are reads".';
COMMENT ON COLUMN webhook_dedup.keys.conflicts IS 'Deliveries of this key whose payload differed from the fingerprint.';
COMMENT ON COLUMN webhook_dedup.keys.first_seen_at IS 'First claim or enqueue (database clock).';
COMMENT ON COLUMN webhook_dedup.keys.last_seen_at IS
  'Last recorded activity on the key (a recorded delivery, a lease, a completion; at most '
  'webhook_dedup.duplicate_record_interval before its last delivery): retention counts from here.';
COMMENT ON COLUMN webhook_dedup.keys.completed_at IS 'When the key was completed.';
COMMENT ON COLUMN webhook_dedup.keys.leased_at IS 'When the current (or last) lease was granted (a claim, a reclaim or webhook_next).';
COMMENT ON COLUMN webhook_dedup.keys.expires_at IS
  'Completed keys: when maintenance looks at the key again, set at completion to completed_at plus '
  'the source''s retention. Maintenance deletes the key then unless it was active since '
  '(last_seen_at plus the retention is later: it looks again then). NULL for keys not completed, '
  'which never expire. Indexed (keys_expiry).';
COMMENT ON COLUMN webhook_dedup.keys.redacted_at IS
  'When webhook_dedup.redact erased the key''s payloads, headers and stored result (NULL: never). '
  'The key stays (a tombstone: its state and fingerprint still answer duplicates and conflicts).';
COMMENT ON COLUMN webhook_dedup.keys.redacted_by IS 'The session user who called webhook_dedup.redact.';
COMMENT ON COLUMN webhook_dedup.keys.redriven_at IS 'When a bulk redrive (webhook_dedup.redrive) last made the key due again (NULL: never).';
COMMENT ON COLUMN webhook_dedup.keys.redrive_run IS 'Which run did (webhook_dedup.redrive_runs.id).';
COMMENT ON COLUMN webhook_dedup.keys.reconciled_at IS
  'When a reconciliation job enqueued the key''s event (webhook_dedup.reconcile): the provider '
  'sent it, the endpoint never got it (NULL: it arrived as a delivery).';

-- The queue's, the sweep's and the views' index: keys not completed (work
-- to do, in flight or waiting for an operator) by when they are due. The
-- bulk, completed keys, is not in it.
CREATE INDEX keys_open ON webhook_dedup.keys (due_at) WHERE state <> 'completed';

-- Retention's index: completed keys by when maintenance looks at them.
CREATE INDEX keys_expiry ON webhook_dedup.keys (expires_at) WHERE state = 'completed';

-- The raw deliveries webhook_enqueue stores for the workers (persist-then-
-- process), one per key, apart from the keys so that the keys stay narrow.
-- A payload lives exactly as long as its key: every statement of the
-- extension that deletes a key deletes its payload (no foreign key: its
-- check would cost every enqueue a look-up, its cascade every expired key).
CREATE TABLE webhook_dedup.payloads (
    source   text  COLLATE "C" NOT NULL,
    idem_key text  COLLATE "C" NOT NULL,
    payload  bytea NOT NULL,
    headers  jsonb,
    CONSTRAINT payloads_pkey PRIMARY KEY (idem_key, source)
) WITH (autovacuum_vacuum_scale_factor = 0.02);
COMMENT ON TABLE webhook_dedup.payloads IS
  'The raw payload (and headers) webhook_enqueue stored for a key, handed to the worker that takes it with webhook_next. Deleted with its key (retention, webhook_forget).';
COMMENT ON COLUMN webhook_dedup.payloads.source IS 'The key''s source.';
COMMENT ON COLUMN webhook_dedup.payloads.idem_key IS 'The key.';
COMMENT ON COLUMN webhook_dedup.payloads.payload IS 'The raw body, byte for byte.';
COMMENT ON COLUMN webhook_dedup.payloads.headers IS 'The request headers given to webhook_enqueue, if any.';

-- The payload archive (docs/operations.md "The payload archive",
-- src/store/archive.rs): the raw deliveries of the sources that keep them
-- (webhook_dedup.sources.keep_payload), for audit, export and redrive,
-- with their own retention (payload_retention), apart from the keys,
-- which stay narrow and live for the whole retry window. Bulky and
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
  'The payload archive: the raw body and headers of each key''s first delivery and of each '
  'conflicting delivery, for the sources with keep_payload (webhook_dedup.sources), kept for their '
  'payload_retention while the key itself stays for its retention. Partitioned by day of arrival '
  '(UTC, partitions archive_YYYYMMDD made ahead and dropped whole by maintenance; archive_default '
  'holds rows that arrived with no day''s partition, moved out by the next pass). Readable by the '
  'extension''s owner; operators read it through webhook_dedup.export_deliveries and erase it with '
  'webhook_dedup.redact. docs/operations.md, "The payload archive".';
COMMENT ON COLUMN webhook_dedup.archive.received_at IS
  'When the delivery arrived (database clock): the key''s first_seen_at for its first delivery, '
  'the conflict_log.seen_at of a conflicting one. The partition key.';
COMMENT ON COLUMN webhook_dedup.archive.source IS 'The key''s source.';
COMMENT ON COLUMN webhook_dedup.archive.idem_key IS 'The key.';
COMMENT ON COLUMN webhook_dedup.archive.event_id IS 'The provider''s event id as webhook_receive read it (NULL from webhook_claim and webhook_enqueue, which are given the key).';
COMMENT ON COLUMN webhook_dedup.archive.event_type IS 'The event type given with (or read from) the delivery.';
COMMENT ON COLUMN webhook_dedup.archive.conflict IS
  'false: the key''s first delivery (the content the key was processed with); true: a later '
  'delivery whose content differed (a conflict, processed by nobody).';
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

-- The rows webhook_claim and webhook_receive return. Named composite types
-- rather than RETURNS TABLE: a function returning one row of a named type
-- is called without the set-returning protocol, and its row descriptor
-- comes from the type cache instead of being rebuilt from pg_proc on every
-- call (together about a fifth of a claim's CPU time when measured with
-- perf before the change).
CREATE TYPE webhook_dedup.claim_result AS (
    outcome          text,
    claim_token      uuid,
    attempt          integer,
    state            text,
    result           jsonb,
    last_step        text,
    first_seen_at    timestamptz,
    lease_expires_at timestamptz
);
COMMENT ON TYPE webhook_dedup.claim_result IS
  'The row webhook_claim returns: outcome (claimed, reclaimed, in_progress, duplicate, conflict, '
  'retry_later, unknown_outcome, dead_lettered), claim_token (set when the caller must process), '
  'attempt, state, result (the stored result, for duplicates), last_step (where a reclaim '
  'resumes), first_seen_at, lease_expires_at.';

CREATE TYPE webhook_dedup.receive_result AS (
    verified      boolean,
    reject_reason text,
    idem_key      text,
    outcome       text,
    claim_token   uuid,
    attempt       integer,
    result        jsonb,
    event_type    text,
    event_time    timestamptz,
    last_step     text,
    response      jsonb,
    secret_index  integer,
    http_status   integer,
    http_headers  jsonb
);
COMMENT ON TYPE webhook_dedup.receive_result IS
  'The row webhook_receive returns: verified, reject_reason (why not, or missing_event_id, or '
  'repeated_header: the event id, type or time header sent more than once, or refused_handshake: a '
  'handshake answer that could sign a forged delivery), idem_key, outcome (as webhook_claim, or '
  'accepted/duplicate/conflict, or in_progress when the wait ran out, when enqueued; handshake; '
  'ignored), claim_token, attempt, result, event_type, event_time, last_step, response (the JSON '
  'body to answer with: the stored result of a duplicate, the handshake''s answer, {"status": '
  'outcome} or {"error": ...}; NULL for claimed and reclaimed, whose body is the caller''s own '
  'result once its work committed), secret_index (which secret verified: its position in secrets, '
  '1-based as in webhook_verify_detail, or with secrets NULL the id of the '
  'webhook_dedup.source_secrets key), http_status and http_headers (the HTTP status and the '
  'headers, a JSON object of names and string values, to answer with: webhook_dedup.http_answer, '
  'docs/providers.md).';

-- The transactional outbox (docs/outbox.md, crates/webhook-dedup-core/src/outbox.rs): one row per
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
  'The transactional outbox: one row (an intent) per downstream call a receiver decided on while '
  'it held a key''s lease (webhook_outbox_put), committed or rolled back with the receiver''s own '
  'writes; senders take due intents with webhook_outbox_next and finish them with '
  'webhook_outbox_ack, webhook_outbox_fail or webhook_outbox_unknown; operators resolve parked '
  'ones with webhook_outbox_resolve. Delivered intents are deleted by maintenance after their '
  'source''s retention. docs/outbox.md.';
COMMENT ON COLUMN webhook_dedup.outbox.id IS 'Identity: the intent''s id, which the sender passes back with its lease token.';
COMMENT ON COLUMN webhook_dedup.outbox.source IS 'The source of the key whose holder wrote the intent.';
COMMENT ON COLUMN webhook_dedup.outbox.idem_key IS 'The key (the inbound event) whose holder wrote the intent.';
COMMENT ON COLUMN webhook_dedup.outbox.operation IS
  'What the call does, one name per downstream effect of an event (refund, email:receipt), 1-255 '
  'characters. Unique per key: a second intent for the same operation is the first.';
COMMENT ON COLUMN webhook_dedup.outbox.target IS
  'Where senders take the intent from (webhook_outbox_next(target => ...)): a name the receiver '
  'chooses, such as stripe-refunds or email, 1-255 characters.';
COMMENT ON COLUMN webhook_dedup.outbox.request IS 'What the sender needs to make the call (jsonb, as the receiver gave it).';
COMMENT ON COLUMN webhook_dedup.outbox.downstream_key IS
  'The idempotency key to send downstream: webhook_operation_key(source, idem_key, operation, '
  'max_length) at put time; the same on every attempt.';
COMMENT ON COLUMN webhook_dedup.outbox.downstream_idempotent IS
  'Whether the downstream deduplicates by downstream_key. When false, an intent whose sender''s '
  'lease lapsed is parked as unknown_outcome instead of being sent again.';
COMMENT ON COLUMN webhook_dedup.outbox.key_attempt IS 'The attempt of the key''s lease that wrote the intent (its fencing token).';
COMMENT ON COLUMN webhook_dedup.outbox.state IS
  'pending, processing (leased to a sender), completed (delivered), failed (due again at '
  'next_attempt_at), unknown_outcome or dead_lettered: the key state machine''s states.';
COMMENT ON COLUMN webhook_dedup.outbox.attempt IS 'Sending attempts so far (0 while pending); grows by one with every lease webhook_outbox_next grants.';
COMMENT ON COLUMN webhook_dedup.outbox.lease_token IS 'Token of the current (or last) sender''s lease, which ack, fail and unknown must present; NULL once delivered.';
COMMENT ON COLUMN webhook_dedup.outbox.lease_expires_at IS 'When the sender''s lease expires; webhook_outbox_next or maintenance then takes the intent back.';
COMMENT ON COLUMN webhook_dedup.outbox.next_attempt_at IS 'For failed intents: when a retry is due.';
COMMENT ON COLUMN webhook_dedup.outbox.due_at IS
  'When webhook_outbox_next may next take the intent: at once when written (pending), at '
  'next_attempt_at after a failure, at lease_expires_at while a sender holds it (processing); '
  'infinity for unknown_outcome and dead_lettered intents (never due; in outbox_open for the '
  'views); NULL once delivered (completed). Indexed with target (outbox_open).';
COMMENT ON COLUMN webhook_dedup.outbox.response IS 'What webhook_outbox_ack (or an operator''s webhook_outbox_resolve) stored: the downstream''s answer.';
COMMENT ON COLUMN webhook_dedup.outbox.last_error IS 'The last failure''s error text (or why the intent was parked).';
COMMENT ON COLUMN webhook_dedup.outbox.created_at IS 'When the intent was written (database clock).';
COMMENT ON COLUMN webhook_dedup.outbox.leased_at IS 'When the current (or last) sender''s lease was granted.';
COMMENT ON COLUMN webhook_dedup.outbox.delivered_at IS
  'When the intent was acknowledged (or resolved completed). Maintenance deletes a delivered '
  'intent once delivered_at plus its source''s retention (webhook_dedup.sources.retention, else '
  'webhook_dedup.retention) has passed. Summarised per block range (outbox_delivered, BRIN).';
COMMENT ON COLUMN webhook_dedup.outbox.updated_at IS 'The intent''s last change.';

-- Bulk redrive (src/api/redrive.rs, src/maintenance/redrive.rs): one row
-- per run of webhook_dedup.redrive, and one per key it matched, which the
-- maintenance worker moves back to due in paced batches. Read through the
-- view webhook_dedup.redrive_runs; pruned with the source's retention once
-- finished.
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
COMMENT ON COLUMN webhook_dedup.redrives.skipped IS
  'Keys left as they were: changed since they matched (a live delivery or an operator got there '
  'first), gone, or without a payload to process (not archived, past payload retention, or '
  'redacted).';
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
COMMENT ON COLUMN webhook_dedup.redrive_keys.outcome IS
  'NULL (to do), moved, or skipped: changed (no longer as matched), gone (the key was deleted), '
  'no_payload (none archived or queued: nothing for webhook_next to hand over).';

-- Per-source overrides of the settings. Intervals have no months (a month
-- has no fixed length), as every interval argument of the extension.
CREATE TABLE webhook_dedup.sources (
    source       text COLLATE "C" PRIMARY KEY CHECK (pg_catalog.char_length(source) BETWEEN 1 AND 255),
    lease        interval CHECK (lease > interval '0' AND lease <= interval '365 days'
                                 AND pg_catalog.date_part('month', lease) = 0
                                 AND pg_catalog.date_part('year', lease) = 0),
    max_attempts integer  CHECK (max_attempts >= 1),
    retention    interval CHECK (retention >= interval '1 minute' AND retention <= interval '3650 days'
                                 AND pg_catalog.date_part('month', retention) = 0
                                 AND pg_catalog.date_part('year', retention) = 0),
    tolerance    interval CHECK (tolerance >= interval '0' AND tolerance <= interval '365 days'
                                 AND pg_catalog.date_part('month', tolerance) = 0
                                 AND pg_catalog.date_part('year', tolerance) = 0),
    provider     text,
    note         text,
    -- Intake (crates/webhook-dedup-core/src/intake.rs; checked by the constraint sources_intake, 22023):
    -- how webhook_receive reads the source's deliveries where its provider
    -- profile does not.
    event_id_from        text,
    event_type_from      text,
    event_time_from      text,
    event_time_format    text,
    fingerprint_pointers text[],
    replay_guard         boolean,
    accept_event_types   text[],
    -- The payload archive (webhook_dedup.archive):
    keep_payload         boolean,
    payload_retention    interval CHECK (payload_retention >= interval '1 minute'
                                         AND payload_retention <= interval '3650 days'
                                         AND pg_catalog.date_part('month', payload_retention) = 0
                                         AND pg_catalog.date_part('year', payload_retention) = 0
                                         AND payload_retention <= retention),
    -- Pause (webhook_dedup.pause and resume; written by them only):
    paused_at            timestamptz,
    paused_by            text,
    pause_reason         text
);
COMMENT ON COLUMN webhook_dedup.sources.source IS 'The source these settings apply to (as passed to the webhook_* functions).';
COMMENT ON COLUMN webhook_dedup.sources.lease IS 'Lease given when a call passes none; positive, at most 365 days, no months. NULL: webhook_dedup.default_lease.';
COMMENT ON COLUMN webhook_dedup.sources.max_attempts IS 'Attempts after which a failing key (or one due again) is dead-lettered. NULL: webhook_dedup.max_attempts.';
COMMENT ON COLUMN webhook_dedup.sources.retention IS
  'How long completed keys, watermarks, conflicts and counts of the source are kept after their '
  'last activity; 1 minute to 3650 days, no months. NULL: webhook_dedup.retention. Keep it at '
  'least the provider''s retry horizon (webhook_dedup.retention_warnings).';
COMMENT ON COLUMN webhook_dedup.sources.tolerance IS
  'Replay window webhook_receive uses for this source when the call passes no tolerance; 0 to 365 '
  'days, no months. NULL: the provider''s documented default.';
COMMENT ON COLUMN webhook_dedup.sources.provider IS
  'The provider profile (a scheme of webhook_dedup.providers) whose retry horizon the retention is '
  'checked against. NULL: the profile named like the source, if any.';
COMMENT ON COLUMN webhook_dedup.sources.note IS 'Free text for operators.';
COMMENT ON COLUMN webhook_dedup.sources.event_id_from IS
  'Where webhook_receive reads the event id (what the idempotency key is built from): '
  'header:<name> (an HTTP field name, RFC 9110 section 5.1, any case) or a JSON pointer into the '
  'body (RFC 6901, e.g. /data/id). A string or number value; empty or absent is missing_event_id. '
  'NULL: the provider profile''s (webhook_dedup.providers). 22023 when invalid.';
COMMENT ON COLUMN webhook_dedup.sources.event_type_from IS 'Where webhook_receive reads the event type, as event_id_from. NULL: the provider profile''s.';
COMMENT ON COLUMN webhook_dedup.sources.event_time_from IS
  'Where webhook_receive reads the event time (what webhook_advance orders by), as event_id_from; '
  'set together with event_time_format. NULL: the provider profile''s.';
COMMENT ON COLUMN webhook_dedup.sources.event_time_format IS
  'How the event time is written: unix_seconds, unix_milliseconds (digits, a JSON number or '
  'string) or rfc3339. Set exactly when event_time_from is.';
COMMENT ON COLUMN webhook_dedup.sources.fingerprint_pointers IS
  'What the key''s fingerprint covers (a later delivery of the key with another fingerprint is a '
  'conflict): JSON pointers (RFC 6901; at most 64) whose values are hashed as one RFC 8785 '
  'canonical JSON object, so that what the provider changes between attempts (attempt counters, '
  'delivery metadata) is left out; an empty array: the raw body bytes. NULL: the provider '
  'profile''s rule (webhook_dedup.providers.fingerprint), else the raw body.';
COMMENT ON COLUMN webhook_dedup.sources.replay_guard IS
  'Whether webhook_receive claims a replay guard per delivery (webhook_dedup.replay_guards): a '
  'signed body already received under another event id is answered duplicate instead of being '
  'processed again. For sources whose event id the signature does not cover. NULL: on for github, '
  'shopify, linear and twilio (their ids are in headers they do not sign) and for a source whose '
  'event_id_from is a header its scheme does not sign (a generic hmac source), else off.';
COMMENT ON COLUMN webhook_dedup.sources.accept_event_types IS
  'The event types the source wants (at most 1000 entries; an entry ending in * matches every type '
  'starting with what precedes it, e.g. invoice.*). Other verified deliveries, and deliveries '
  'without an event type, are answered outcome ignored: nothing stored, counted as ignored. NULL: '
  'every type.';
COMMENT ON COLUMN webhook_dedup.sources.keep_payload IS
  'Whether the source''s deliveries are archived (webhook_dedup.archive): the raw body and headers '
  'of each key''s first delivery and of each conflicting one, from webhook_claim (given a '
  'payload), webhook_receive and webhook_enqueue. NULL or false: not archived (webhook_enqueue '
  'still stores the payload its worker needs, webhook_dedup.payloads, for as long as the key '
  'lives). Ignored on a distributed install: the archive is single-server (docs/distributed.md).';
COMMENT ON COLUMN webhook_dedup.sources.payload_retention IS
  'How long archived deliveries of the source are kept after they arrived: 1 minute to 3650 days, '
  'no months, at most retention when both are set (else cut to the key''s retention when used). '
  'NULL: the key''s retention (retention, else webhook_dedup.retention). Partitions older than the '
  'longest payload retention are dropped whole; a source with a shorter one has its rows deleted '
  'in paced batches (docs/operations.md, "The payload archive").';
COMMENT ON COLUMN webhook_dedup.sources.paused_at IS
  'When webhook_dedup.pause paused the source (NULL: not paused). While paused, intake goes on '
  '(claims, webhook_receive and webhook_enqueue answer and store as before) and webhook_next takes '
  'none of the source''s keys: its pending and failed keys wait, due_at infinity, until '
  'webhook_dedup.resume. Written by pause and resume only (operators may not write this column).';
COMMENT ON COLUMN webhook_dedup.sources.paused_by IS 'The session user who called webhook_dedup.pause.';
COMMENT ON COLUMN webhook_dedup.sources.pause_reason IS 'Why, as given to webhook_dedup.pause.';
COMMENT ON TABLE webhook_dedup.sources IS
  'Per-source settings: lease (the lease a claim or webhook_next gives when the call passes none; '
  'else webhook_dedup.default_lease), max_attempts (after which webhook_fail dead-letters; else '
  'webhook_dedup.max_attempts), retention (else webhook_dedup.retention), tolerance '
  '(webhook_receive''s replay window; else the provider''s default), provider (the profile for '
  'retention_warnings), and how webhook_receive reads the source''s deliveries: event_id_from, '
  'event_type_from, event_time_from and event_time_format, fingerprint_pointers, replay_guard, '
  'accept_event_types (docs/providers.md, "Custom sources"); whether its deliveries are archived '
  '(keep_payload, payload_retention: webhook_dedup.archive); and whether it is paused (paused_at, '
  'paused_by, pause_reason: webhook_dedup.pause). NULL columns fall back to the settings and the '
  'provider profile.';

-- Deliveries whose payload differed from the key's fingerprint: one row
-- each, for inspection.
CREATE TABLE webhook_dedup.conflict_log (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- compared with the keys' own columns, so in their collation
    source             text        COLLATE "C" NOT NULL,
    idem_key           text        COLLATE "C" NOT NULL,
    seen_at            timestamptz NOT NULL,
    stored_fingerprint bytea       NOT NULL,
    fingerprint        bytea       NOT NULL,
    via                text        NOT NULL CHECK (via IN ('claim', 'enqueue'))
);
CREATE INDEX conflict_log_key ON webhook_dedup.conflict_log (idem_key, source);
CREATE INDEX conflict_log_seen_at ON webhook_dedup.conflict_log (seen_at);
COMMENT ON COLUMN webhook_dedup.conflict_log.id IS 'Identity.';
COMMENT ON COLUMN webhook_dedup.conflict_log.source IS 'The key''s source.';
COMMENT ON COLUMN webhook_dedup.conflict_log.idem_key IS 'The key.';
COMMENT ON COLUMN webhook_dedup.conflict_log.seen_at IS 'When the conflicting delivery arrived (database clock).';
COMMENT ON COLUMN webhook_dedup.conflict_log.stored_fingerprint IS 'The key''s fingerprint (webhook_dedup.keys.fingerprint): the content it was first stored with.';
COMMENT ON COLUMN webhook_dedup.conflict_log.fingerprint IS 'The fingerprint of the conflicting delivery, under the same rule.';
COMMENT ON COLUMN webhook_dedup.conflict_log.via IS 'claim or enqueue: the call that saw the conflict.';
COMMENT ON TABLE webhook_dedup.conflict_log IS
  'One row per delivery of a known key with a different payload (the fingerprints of the stored '
  'and the new payload, webhook_dedup.keys.fingerprint; via = claim or enqueue). Nothing was '
  'processed for these deliveries. Read it through the view webhook_dedup.conflicts, which adds '
  'the key''s state.';

-- Verification keys per source (src/store/secrets.rs): webhook_receive
-- uses the source's keys valid at the delivery's time when the call passes
-- no secrets, so receivers hold no secret and rotation is a row. Readable
-- by the extension's owner only; not registered for pg_dump (secrets stay
-- out of dumps: docs/operations.md, "Backups").
CREATE TABLE webhook_dedup.source_secrets (
    id         integer     GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source     text        COLLATE "C" NOT NULL,
    secret     text        NOT NULL,
    not_before timestamptz NOT NULL,
    not_after  timestamptz,
    created_at timestamptz NOT NULL,
    note       text,
    scheme     text
);
CREATE INDEX source_secrets_source ON webhook_dedup.source_secrets (source);
COMMENT ON COLUMN webhook_dedup.source_secrets.id IS 'The key''s id: webhook_receive''s secret_index names it when it verified a delivery.';
COMMENT ON COLUMN webhook_dedup.source_secrets.source IS 'The source the key verifies (as passed to webhook_receive).';
COMMENT ON COLUMN webhook_dedup.source_secrets.secret IS 'The secret (or, for asymmetric schemes, the public key), as the provider shows it. Never returned by the functions.';
COMMENT ON COLUMN webhook_dedup.source_secrets.not_before IS 'From when the key verifies deliveries (inclusive; the delivery''s at).';
COMMENT ON COLUMN webhook_dedup.source_secrets.not_after IS 'Until when the key verifies deliveries (exclusive); NULL: no end. Set by retire_secret.';
COMMENT ON COLUMN webhook_dedup.source_secrets.created_at IS 'When add_secret stored the key (database clock).';
COMMENT ON COLUMN webhook_dedup.source_secrets.note IS 'Free text for operators.';
COMMENT ON COLUMN webhook_dedup.source_secrets.scheme IS
  'The scheme the key was checked against and accepted for by add_secret (the source''s provider '
  'in webhook_dedup.sources, else its name, when that is a scheme; canonical name, e.g. standard '
  'for svix); NULL when the source named no scheme then. webhook_receive verifies a scheme only '
  'with keys accepted for it (or NULL), so changing webhook_dedup.sources.provider later never '
  'turns a key into a key of another scheme; the unsigned X (twitter) CRC is answered only with a '
  'key accepted for twitter.';
COMMENT ON TABLE webhook_dedup.source_secrets IS
  'Verification keys per source, for webhook_receive calls that pass no secrets: the keys whose '
  '[not_before, not_after) holds the delivery''s at. Rotation is add_secret (the new key) and '
  'retire_secret (the old one, usually 24 hours later). Managed with webhook_dedup.add_secret, '
  'retire_secret and list_secrets (webhook_dedup_operator); readable by the extension''s owner '
  'only, and left out of pg_dump.';

-- The replay guard (src/store/replay_guards.rs): per source and signed
-- body, the key the body belongs to, so that a body re-sent under a new
-- event id is a duplicate (webhook_receive; on for github, shopify and linear).
CREATE TABLE webhook_dedup.replay_guards (
    -- compared with the keys' own columns, so in their collation
    source      text        COLLATE "C" NOT NULL,
    body_sha256 bytea       NOT NULL,
    idem_key    text        COLLATE "C" NOT NULL,
    seen_at     timestamptz NOT NULL,
    PRIMARY KEY (body_sha256, source)
);
CREATE INDEX replay_guards_seen_at ON webhook_dedup.replay_guards (seen_at);
COMMENT ON COLUMN webhook_dedup.replay_guards.source IS 'The source the body was delivered to.';
COMMENT ON COLUMN webhook_dedup.replay_guards.body_sha256 IS 'SHA-256 of the raw body, as signed.';
COMMENT ON COLUMN webhook_dedup.replay_guards.idem_key IS
  'The idempotency key the body belongs to: the first delivery''s, or the one that took the body '
  'over when that key was gone, had failed with nothing but the provider to retry it (no payload), '
  'or never took this content (a conflict left the guard).';
COMMENT ON COLUMN webhook_dedup.replay_guards.seen_at IS 'When the body was given to idem_key (database clock); the row is pruned by maintenance after the source''s retention, once idem_key is gone.';
COMMENT ON TABLE webhook_dedup.replay_guards IS
  'The replay guard of webhook_receive (webhook_dedup.sources.replay_guard; on by default for '
  'github, shopify, linear and twilio, which do not sign the event id, and for sources reading '
  'their id from an unsigned header): one row per source and signed body (twilio: its canonical '
  'signed text, the URL and the form parameters sorted), naming the key it belongs to. A delivery '
  'of the body under another event id is answered from that key (duplicate, in_progress, '
  'unknown_outcome or dead_lettered) and processes nothing. Its one false positive: two genuinely '
  'distinct events with byte-identical bodies. Pruned after the source''s retention once its key '
  'is gone.';

-- Signed tokens bound to their content (src/store/signature_tokens.rs):
-- a scheme whose signature does not cover the body (Mailgun signs its
-- timestamp and token only) proves that the provider sent *a* request, not
-- which; its token is remembered with the exact bytes it first arrived
-- with, so that the same signature block on other content is refused
-- (webhook_receive: verified false, reject_reason token_reused).
CREATE TABLE webhook_dedup.signature_tokens (
    source       text        COLLATE "C" NOT NULL,
    token_sha256 bytea       NOT NULL,
    body_sha256  bytea       NOT NULL,
    signed_at    timestamptz NOT NULL,
    window_until timestamptz NOT NULL,
    seen_at      timestamptz NOT NULL,
    PRIMARY KEY (token_sha256, source)
);
CREATE INDEX signature_tokens_signed_at ON webhook_dedup.signature_tokens (signed_at);
COMMENT ON COLUMN webhook_dedup.signature_tokens.source IS 'The source the delivery was received for.';
COMMENT ON COLUMN webhook_dedup.signature_tokens.token_sha256 IS 'SHA-256 of the signed token (Mailgun: signature.token, a 50-character random string), 32 bytes.';
COMMENT ON COLUMN webhook_dedup.signature_tokens.body_sha256 IS
  'SHA-256 of the raw body the token first arrived with (32 bytes): the same token with the same '
  'bytes is an ordinary duplicate, with other bytes a forgery.';
COMMENT ON COLUMN webhook_dedup.signature_tokens.signed_at IS
  'The signed timestamp of the token''s signature (one token has one: the signature covers both). '
  'Maintenance prunes the row once signed_at is older than the source''s retention and '
  'window_until has passed; webhook_receive refuses a signature older than the source''s retention '
  '(timestamp_too_old), whose token may have been pruned.';
COMMENT ON COLUMN webhook_dedup.signature_tokens.window_until IS 'signed_at plus the tolerance the token was verified with: after it, the signature no longer verifies, whatever the token.';
COMMENT ON COLUMN webhook_dedup.signature_tokens.seen_at IS 'When the token was first received (database clock).';
COMMENT ON TABLE webhook_dedup.signature_tokens IS
  'For schemes whose signature does not cover the body (mailgun: docs/signatures.md, "What each '
  'signature covers"): each signed token seen per source, with the bytes it first arrived with. '
  'webhook_dedup.webhook_receive refuses the token on other content (verified false, reject_reason '
  'token_reused, counted as rejected_token_reused) and writes nothing else; concurrent first uses '
  'of one token with different bodies: the first to commit wins. Kept while the signed time is '
  'within the source''s retention, and at least until the signature''s window closes; a signature '
  'older than the retention is refused (timestamp_too_old), so a pruned token cannot come back.';

-- The out-of-order guard: the newest source_updated_at seen per entity.
CREATE TABLE webhook_dedup.watermarks (
    source            text        COLLATE "C" NOT NULL CHECK (pg_catalog.char_length(source) BETWEEN 1 AND 255),
    entity_id         text        NOT NULL CHECK (pg_catalog.char_length(entity_id) BETWEEN 1 AND 255),
    source_updated_at timestamptz NOT NULL,
    event_id          text,
    sequence          bigint,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (source, entity_id)
);
CREATE INDEX watermarks_updated_at ON webhook_dedup.watermarks (updated_at);
COMMENT ON TABLE webhook_dedup.watermarks IS
  'The out-of-order guard of webhook_advance: per (source, entity_id), the newest '
  'source_updated_at applied. Pruned by maintenance when not moved within the source''s retention '
  '(webhook_dedup.sources.retention, else webhook_dedup.retention).';
COMMENT ON COLUMN webhook_dedup.watermarks.source IS 'The source the entity belongs to.';
COMMENT ON COLUMN webhook_dedup.watermarks.entity_id IS 'The entity (a subscription, an order, ...) whose updates are ordered.';
COMMENT ON COLUMN webhook_dedup.watermarks.source_updated_at IS 'The provider''s time of the newest event applied to the entity (the profile''s event time).';
COMMENT ON COLUMN webhook_dedup.watermarks.event_id IS 'The id of that event, when given (a re-apply of the same event is allowed).';
COMMENT ON COLUMN webhook_dedup.watermarks.sequence IS 'The tie-breaking sequence of that event, when given.';
COMMENT ON COLUMN webhook_dedup.watermarks.updated_at IS 'When the watermark last moved (database clock).';

-- Flushed claim counters, one row per hour, source and event type.
CREATE TABLE webhook_dedup.claim_counts (
    bucket                  timestamptz NOT NULL,
    source                  text        COLLATE "C" NOT NULL,
    event_type              text        NOT NULL DEFAULT '',
    bucket_width            interval    NOT NULL DEFAULT '1 hour' CHECK (bucket_width IN ('1 hour', '1 minute')),
    deliveries              bigint      NOT NULL DEFAULT 0,
    first_claims            bigint      NOT NULL DEFAULT 0,
    reclaims                bigint      NOT NULL DEFAULT 0,
    duplicates_of_completed bigint      NOT NULL DEFAULT 0,
    duplicates_in_progress  bigint      NOT NULL DEFAULT 0,
    conflicts               bigint      NOT NULL DEFAULT 0,
    retry_later             bigint      NOT NULL DEFAULT 0,
    unknown_outcome         bigint      NOT NULL DEFAULT 0,
    dead_lettered           bigint      NOT NULL DEFAULT 0,
    completions             bigint      NOT NULL DEFAULT 0,
    stale_completions       bigint      NOT NULL DEFAULT 0,
    retries_scheduled       bigint      NOT NULL DEFAULT 0,
    dead_letters            bigint      NOT NULL DEFAULT 0,
    marked_unknown          bigint      NOT NULL DEFAULT 0,
    enqueued                bigint      NOT NULL DEFAULT 0,
    drained                 bigint      NOT NULL DEFAULT 0,
    forgotten               bigint      NOT NULL DEFAULT 0,
    resolved                bigint      NOT NULL DEFAULT 0,
    stale_tokens            bigint      NOT NULL DEFAULT 0,
    expired_leases          bigint      NOT NULL DEFAULT 0,
    rejected_missing_header        bigint NOT NULL DEFAULT 0,
    rejected_malformed_header      bigint NOT NULL DEFAULT 0,
    rejected_unsupported_version   bigint NOT NULL DEFAULT 0,
    rejected_no_matching_signature bigint NOT NULL DEFAULT 0,
    rejected_timestamp_too_old     bigint NOT NULL DEFAULT 0,
    rejected_timestamp_too_new     bigint NOT NULL DEFAULT 0,
    missing_event_ids              bigint NOT NULL DEFAULT 0,
    ignored                        bigint NOT NULL DEFAULT 0,
    replayed                       bigint NOT NULL DEFAULT 0,
    rejected_token_reused          bigint NOT NULL DEFAULT 0,
    intents_written                bigint NOT NULL DEFAULT 0,
    intents_delivered              bigint NOT NULL DEFAULT 0,
    intent_retries                 bigint NOT NULL DEFAULT 0,
    intents_dead_lettered          bigint NOT NULL DEFAULT 0,
    intents_unknown                bigint NOT NULL DEFAULT 0,
    intent_leases_expired          bigint NOT NULL DEFAULT 0,
    reconciled                     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (source, bucket, event_type, bucket_width)
);
CREATE INDEX claim_counts_bucket ON webhook_dedup.claim_counts (bucket);
COMMENT ON COLUMN webhook_dedup.claim_counts.bucket IS 'Start of the hour (or minute) the counts fall in (UTC-aligned).';
COMMENT ON COLUMN webhook_dedup.claim_counts.bucket_width IS '1 hour (per source and event type, kept for the source''s retention) or 1 minute (per source, event_type '''', kept for two hours).';
COMMENT ON COLUMN webhook_dedup.claim_counts.source IS 'The source.';
COMMENT ON COLUMN webhook_dedup.claim_counts.event_type IS 'The event type given to the claim or enqueue ('''' when none).';
COMMENT ON COLUMN webhook_dedup.claim_counts.deliveries IS 'webhook_claim and webhook_enqueue calls.';
COMMENT ON COLUMN webhook_dedup.claim_counts.first_claims IS 'Claims answered claimed.';
COMMENT ON COLUMN webhook_dedup.claim_counts.reclaims IS 'Leases granted again after an expired lease or a due retry (claims and webhook_next).';
COMMENT ON COLUMN webhook_dedup.claim_counts.duplicates_of_completed IS 'Deliveries of a completed key (claims answered duplicate, enqueues answered duplicate).';
COMMENT ON COLUMN webhook_dedup.claim_counts.duplicates_in_progress IS 'Deliveries of a key not completed yet (claims answered in_progress, enqueues answered duplicate).';
COMMENT ON COLUMN webhook_dedup.claim_counts.conflicts IS 'Deliveries with another payload than the key''s.';
COMMENT ON COLUMN webhook_dedup.claim_counts.retry_later IS 'Claims answered retry_later.';
COMMENT ON COLUMN webhook_dedup.claim_counts.unknown_outcome IS 'Claims answered unknown_outcome.';
COMMENT ON COLUMN webhook_dedup.claim_counts.dead_lettered IS 'Claims answered dead_lettered.';
COMMENT ON COLUMN webhook_dedup.claim_counts.completions IS 'webhook_complete calls that completed a key.';
COMMENT ON COLUMN webhook_dedup.claim_counts.stale_completions IS 'webhook_complete calls with a stale token.';
COMMENT ON COLUMN webhook_dedup.claim_counts.retries_scheduled IS 'webhook_fail calls that scheduled a retry.';
COMMENT ON COLUMN webhook_dedup.claim_counts.dead_letters IS 'Keys that became dead_lettered (webhook_fail, webhook_resolve, or due again with no attempts left).';
COMMENT ON COLUMN webhook_dedup.claim_counts.marked_unknown IS 'webhook_mark_unknown calls that marked a key.';
COMMENT ON COLUMN webhook_dedup.claim_counts.enqueued IS 'webhook_enqueue calls answered accepted.';
COMMENT ON COLUMN webhook_dedup.claim_counts.drained IS 'Keys handed out by webhook_next.';
COMMENT ON COLUMN webhook_dedup.claim_counts.forgotten IS 'Keys removed by webhook_forget.';
COMMENT ON COLUMN webhook_dedup.claim_counts.resolved IS 'webhook_resolve calls.';
COMMENT ON COLUMN webhook_dedup.claim_counts.stale_tokens IS 'Holder calls other than webhook_complete (fail, mark_unknown, checkpoint, extend_lease) with a stale token.';
COMMENT ON COLUMN webhook_dedup.claim_counts.rejected_missing_header IS 'webhook_receive deliveries rejected: the signature header (or a signed header) was missing.';
COMMENT ON COLUMN webhook_dedup.claim_counts.rejected_malformed_header IS 'webhook_receive deliveries rejected: a signature header could not be parsed.';
COMMENT ON COLUMN webhook_dedup.claim_counts.rejected_unsupported_version IS 'webhook_receive deliveries rejected: only signatures of another version were presented.';
COMMENT ON COLUMN webhook_dedup.claim_counts.rejected_no_matching_signature IS
  'webhook_receive deliveries rejected: no signature matched any secret (a forgery, a wrong '
  'secret, or a body changed in transit).';
COMMENT ON COLUMN webhook_dedup.claim_counts.rejected_timestamp_too_old IS 'webhook_receive deliveries rejected: the signed timestamp was older than the tolerance (a replay, or a clock off).';
COMMENT ON COLUMN webhook_dedup.claim_counts.rejected_timestamp_too_new IS 'webhook_receive deliveries rejected: the signed timestamp was further ahead than the tolerance.';
COMMENT ON COLUMN webhook_dedup.claim_counts.missing_event_ids IS
  'webhook_receive deliveries that verified but carried no event id, or sent the header it is read '
  'from (or the type''s or time''s) more than once (answered missing_event_id or repeated_header, '
  'nothing claimed).';
COMMENT ON COLUMN webhook_dedup.claim_counts.ignored IS
  'webhook_receive deliveries that verified but whose event type the source does not accept '
  '(webhook_dedup.sources.accept_event_types; answered ignored, nothing stored).';
COMMENT ON COLUMN webhook_dedup.claim_counts.replayed IS
  'webhook_receive deliveries whose signed body the replay guard found under another event id '
  '(webhook_dedup.replay_guards; answered from that key, nothing processed). Not counted as '
  'deliveries or duplicates: a provider''s retries carry the same id.';
COMMENT ON COLUMN webhook_dedup.claim_counts.rejected_token_reused IS
  'webhook_receive deliveries whose signature verified but whose signed token had come before with '
  'other content (schemes whose signature covers nothing of the body: mailgun; '
  'webhook_dedup.signature_tokens): a copied signature block, refused (verified false, '
  'reject_reason token_reused), nothing written. Part of signature_rejections.';
COMMENT ON COLUMN webhook_dedup.claim_counts.intents_written IS 'Outbox intents written (webhook_outbox_put calls that stored a new intent; a second put of an operation is not counted).';
COMMENT ON COLUMN webhook_dedup.claim_counts.intents_delivered IS 'Outbox intents acknowledged by their sender (webhook_outbox_ack).';
COMMENT ON COLUMN webhook_dedup.claim_counts.intent_retries IS 'Outbox intents a sender failed retryably (webhook_outbox_fail: due again after the backoff).';
COMMENT ON COLUMN webhook_dedup.claim_counts.intents_dead_lettered IS 'Outbox intents dead-lettered: failed without retry, or out of attempts.';
COMMENT ON COLUMN webhook_dedup.claim_counts.intents_unknown IS
  'Outbox intents parked as unknown_outcome: marked by their sender (webhook_outbox_unknown), or a '
  'lapsed lease of a downstream that is not idempotent.';
COMMENT ON COLUMN webhook_dedup.claim_counts.intent_leases_expired IS 'Outbox intents whose sender''s lease lapsed (taken back by webhook_outbox_next or maintenance).';
COMMENT ON COLUMN webhook_dedup.claim_counts.reconciled IS
  'Events the provider sent that never arrived, enqueued by a reconciliation job '
  '(webhook_dedup.reconcile answered accepted; not counted as enqueued): a leaky endpoint '
  '(webhook_dedup.duplicate_rate_alerts, alert reconciled_above_threshold).';
COMMENT ON COLUMN webhook_dedup.claim_counts.expired_leases IS 'Expired leases that maintenance moved to failed (or dead_lettered): the holder neither completed, failed nor extended in time.';
COMMENT ON TABLE webhook_dedup.claim_counts IS
  'Claim counters flushed from shared memory by webhook_dedup.run_maintenance(): one row per hour '
  '(bucket), source and event type ('''' when unknown), and one per minute and source for the last '
  'two hours (bucket_width). Read them through webhook_dedup.duplicate_metrics and '
  'webhook_dedup.duplicate_metrics_by_minute.';

-- One row per redaction (webhook_dedup.redact): who erased how much of
-- which source, when, in which transaction, and from which relations,
-- until webhook_dedup.purge_redactions rewrote those relations so that
-- the erased bytes leave the primary's data files (a deleted or updated
-- row version stays in its page, and in the TOAST table, until the space
-- is reused: VACUUM frees the space, it does not wipe it). What was
-- erased is not recorded (no key, account or time of the scope): the
-- record of an erasure must not keep what it erased. Kept until an
-- operator deletes it.
CREATE TABLE webhook_dedup.redactions (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source      text        COLLATE "C" NOT NULL,
    redacted_at timestamptz NOT NULL,
    redacted_by text        NOT NULL,
    keys        bigint      NOT NULL,
    deliveries  bigint      NOT NULL,
    xid         xid8        NOT NULL,
    relations   text[]      NOT NULL,
    purged_at   timestamptz,
    purged_by   text,
    keys_purged boolean     NOT NULL DEFAULT false
);
COMMENT ON TABLE webhook_dedup.redactions IS
  'One row per webhook_dedup.redact call that erased something, and whether '
  'webhook_dedup.purge_redactions has since rewritten the relations it erased from (purged_at). '
  'Until then the erased bodies, headers and results stay in the free space of those relations'' '
  'data files (and TOAST) until overwritten. docs/security.md, "Erased data".';
COMMENT ON COLUMN webhook_dedup.redactions.id IS 'Identity.';
COMMENT ON COLUMN webhook_dedup.redactions.source IS 'The source redacted.';
COMMENT ON COLUMN webhook_dedup.redactions.redacted_at IS 'When (database clock).';
COMMENT ON COLUMN webhook_dedup.redactions.redacted_by IS 'The session user who called redact.';
COMMENT ON COLUMN webhook_dedup.redactions.keys IS 'Keys redacted (their result and last_error erased).';
COMMENT ON COLUMN webhook_dedup.redactions.deliveries IS 'Payloads and archived deliveries deleted.';
COMMENT ON COLUMN webhook_dedup.redactions.xid IS
  'The redacting transaction: the erased row versions are gone from every snapshot once no '
  'transaction at or before it is running (what purge_redactions checks).';
COMMENT ON COLUMN webhook_dedup.redactions.relations IS
  'The relations rows were erased from: webhook_dedup.keys (the results'' old versions), '
  'webhook_dedup.payloads, archive partitions (webhook_dedup.archive_YYYYMMDD, archive_default).';
COMMENT ON COLUMN webhook_dedup.redactions.purged_at IS
  'When purge_redactions rewrote the relations (but webhook_dedup.keys unless keys_purged); NULL: '
  'the erased bytes may still be in the data files.';
COMMENT ON COLUMN webhook_dedup.redactions.purged_by IS 'The session user who ran purge_redactions.';
COMMENT ON COLUMN webhook_dedup.redactions.keys_purged IS
  'Whether webhook_dedup.keys was rewritten too (purge_redactions(include_keys => true)): only '
  'then are the erased results gone from its files.';

-- One row per maintenance pass that ran (what it did), for operators and
-- the worker's tests; pruned after webhook_dedup.retention.
CREATE TABLE webhook_dedup.maintenance_runs (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at           timestamptz NOT NULL,
    finished_at          timestamptz NOT NULL,
    application_name     text        NOT NULL,
    leases_expired       integer     NOT NULL,
    dead_lettered        integer     NOT NULL,
    keys_pruned          bigint      NOT NULL,
    keys_kept            bigint      NOT NULL,
    history_pruned       bigint      NOT NULL,
    metrics_flushed      bigint      NOT NULL,
    retention_warnings   integer     NOT NULL,
    more                 boolean     NOT NULL,
    errors               text[]      NOT NULL,
    intents_expired      integer     NOT NULL DEFAULT 0,
    intents_pruned       bigint      NOT NULL DEFAULT 0,
    payloads_pruned      bigint      NOT NULL DEFAULT 0,
    partitions_created   integer     NOT NULL DEFAULT 0,
    partitions_dropped   integer     NOT NULL DEFAULT 0,
    keys_redriven        bigint      NOT NULL DEFAULT 0
);
CREATE INDEX maintenance_runs_started_at ON webhook_dedup.maintenance_runs (started_at);
COMMENT ON TABLE webhook_dedup.maintenance_runs IS
  'One row per webhook_dedup.run_maintenance() pass that ran (by the worker or by hand): what it did, and the steps that failed. Pruned after webhook_dedup.retention.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.id IS 'Identity.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.started_at IS 'When the pass started (database clock).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.finished_at IS 'When the pass finished, before its transaction committed.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.application_name IS 'application_name of the session that ran the pass (webhook_dedup maintenance for the worker).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.leases_expired IS 'Expired processing leases moved to failed (due at once).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.dead_lettered IS 'Expired processing leases moved to dead_lettered (no attempts left).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.keys_pruned IS 'Completed keys past retention deleted (with their payloads).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.keys_kept IS
  'Completed keys whose expires_at came but that were active since (a late duplicate) or whose '
  'source''s retention grew: looked at again later instead of deleted.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.history_pruned IS
  'Watermarks, replay guards, signed tokens (once their signature''s window closed), conflicts, '
  'claim counts and maintenance runs deleted past retention.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.metrics_flushed IS 'Metrics entries flushed from shared memory.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.retention_warnings IS 'Sources whose retention is shorter than their provider''s retry horizon (webhook_dedup.retention_warnings).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.more IS
  'A step stopped at webhook_dedup.batch_size: the worker runs the next pass after a rest that '
  'keeps it to webhook_dedup.maintenance_duty_cycle of the time.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.intents_expired IS
  'Outbox intents whose sender''s lease lapsed, taken back (failed and due at once, dead_lettered '
  'with no attempts left, or unknown_outcome when the downstream is not idempotent).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.intents_pruned IS 'Delivered outbox intents deleted past their source''s retention.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.payloads_pruned IS
  'Archived deliveries deleted row by row: past their source''s payload_retention (sources whose '
  'payload retention is shorter than the longest: paced batches), or in archive_default past every '
  'retention.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.partitions_created IS 'Day partitions of webhook_dedup.archive created (ahead of time, or for rows that arrived in archive_default).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.partitions_dropped IS 'Day partitions of webhook_dedup.archive dropped whole, past the longest payload retention.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.keys_redriven IS 'Keys bulk redrives (webhook_dedup.redrive) moved back to due, or skipped as changed, gone or without a payload.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.errors IS 'One entry per step that failed (SQLSTATE and message); the pass went on with the other steps.';
