-- webhook_dedup 0.1.0 -> 0.2.0: the storage layout chosen by measurement
-- (docs/design.md, "Storage"; docs/benchmarks.md). Keys move from a table
-- partitioned by time, whose uniqueness an advisory lock per key kept, into
-- one table whose primary key arbitrates; payloads move to their own table;
-- completed keys get the time maintenance looks at them again (expires_at);
-- webhook_claim and webhook_receive return named row types; maintenance no
-- longer creates or drops partitions. Every key keeps its state, attempt,
-- lease, token (but completed keys', which fences nothing), fingerprint,
-- result, step, error, counts and times. Runs in one transaction: the key
-- table is locked for the copy, so claims wait for it (about a second per
-- 100,000 keys on a 2-core machine).
\echo Use "ALTER EXTENSION webhook_dedup UPDATE TO '0.2.0'" to load this file. \quit

-- 0.2.0 refuses a database whose encoding is not UTF8 (src/sql/schema.sql);
-- 0.1.0 failed in its calls there instead.
DO $$
BEGIN
  IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.<>) 'UTF8' THEN
    RAISE EXCEPTION 'webhook_dedup needs a database with encoding UTF8, not %', pg_catalog.getdatabaseencoding()
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Dump the data, create the database with ENCODING ''UTF8'' TEMPLATE template0, restore.';
  END IF;
END
$$;

-- Nothing may write keys while they move.
LOCK TABLE webhook_dedup.keys IN ACCESS EXCLUSIVE MODE;

-- Privileges granted on the tables and views of the schema (the key
-- table, maintenance_runs and the views over keys are rebuilt) are carried
-- over to the new objects at the end of this script; those on the key
-- table also to webhook_dedup.payloads, which takes over the payloads the
-- key rows held. Kept until then in a setting of this transaction:
-- (relation, relkind, grantee, privilege, grantable). Grants on functions
-- are not carried over: in 0.1.0 a function ran with its caller's rights,
-- so EXECUTE alone let a role change nothing; 0.2.0's functions run as
-- their owner and are granted to the roles for each job instead.
SELECT pg_catalog.set_config('webhook_dedup_upgrade.grants', pg_catalog.jsonb_build_object(
  'relations', COALESCE((
    SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(c.relname, c.relkind, a.grantee, a.privilege_type,
                                                             a.is_grantable))
      FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
     WHERE c.relnamespace OPERATOR(pg_catalog.=) 'webhook_dedup'::pg_catalog.regnamespace
       AND a.grantee OPERATOR(pg_catalog.<>) c.relowner), '[]'::pg_catalog.jsonb))::text, true);

-- The old table (and its partitions, which go with it) makes way.
ALTER TABLE webhook_dedup.keys RENAME TO keys_0_1;
ALTER INDEX webhook_dedup.keys_open RENAME TO keys_0_1_open;

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
    -- idem_key first: key_history looks keys up by idem_key alone.
    CONSTRAINT keys_pkey PRIMARY KEY (idem_key, source)
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02);

COMMENT ON TABLE webhook_dedup.keys IS
  'One row per idempotency key (source, idem_key): its state in the claim state machine. The primary key arbitrates concurrent first claims; completed keys are deleted by maintenance once past retention (expires_at). See docs/design.md.';
COMMENT ON COLUMN webhook_dedup.keys.source IS 'Who sent the event (a provider or endpoint name), 1-255 characters.';
COMMENT ON COLUMN webhook_dedup.keys.idem_key IS 'The idempotency key within the source, 1-255 characters (see webhook_key).';
COMMENT ON COLUMN webhook_dedup.keys.state IS 'pending, processing, completed, failed, unknown_outcome or dead_lettered.';
COMMENT ON COLUMN webhook_dedup.keys.attempt IS 'Processing attempts so far (0 while pending); grows by one with every lease a claim or webhook_next grants. The fencing token to pass to downstream systems.';
COMMENT ON COLUMN webhook_dedup.keys.claim_token IS 'Token of the current (or last) lease, which webhook_complete must present; NULL once the key is completed (it fences nothing then).';
COMMENT ON COLUMN webhook_dedup.keys.lease_expires_at IS 'When the current lease expires; a later claim reclaims an expired one.';
COMMENT ON COLUMN webhook_dedup.keys.next_attempt_at IS 'For failed keys: when a retry is due.';
COMMENT ON COLUMN webhook_dedup.keys.due_at IS 'When a claim or webhook_next may next take the key: a pending key at once, a processing key when its lease expires, a failed key at next_attempt_at; NULL for completed, unknown_outcome and dead_lettered keys. Indexed (keys_open).';
COMMENT ON COLUMN webhook_dedup.keys.fingerprint IS 'The content of the first payload claimed or enqueued with the key: SHA-256 of its raw bytes (32 bytes), or the byte 0x01 and SHA-256 of the RFC 8785 canonical JSON that its source''s fingerprint rule covers (33 bytes; webhook_receive, docs/providers.md). A later delivery with other content is a conflict (byte-identical raw bytes never are).';
COMMENT ON COLUMN webhook_dedup.keys.event_type IS 'The provider''s event type, as given to the first claim.';
COMMENT ON COLUMN webhook_dedup.keys.result IS 'What webhook_complete stored; returned to duplicates. Keep it small (a status, an id): it is read by every duplicate.';
COMMENT ON COLUMN webhook_dedup.keys.last_step IS 'The last checkpointed step, so a reclaimed event resumes there.';
COMMENT ON COLUMN webhook_dedup.keys.last_error IS 'The last failure''s error text.';
COMMENT ON COLUMN webhook_dedup.keys.deliveries IS 'webhook_claim and webhook_enqueue calls seen for this key (the first included).';
COMMENT ON COLUMN webhook_dedup.keys.conflicts IS 'Deliveries of this key whose payload differed from the fingerprint.';
COMMENT ON COLUMN webhook_dedup.keys.first_seen_at IS 'First claim or enqueue (database clock).';
COMMENT ON COLUMN webhook_dedup.keys.last_seen_at IS 'Last activity on the key (a delivery, a lease, a completion): retention counts from here.';
COMMENT ON COLUMN webhook_dedup.keys.completed_at IS 'When the key was completed.';
COMMENT ON COLUMN webhook_dedup.keys.leased_at IS 'When the current (or last) lease was granted (a claim, a reclaim or webhook_next).';
COMMENT ON COLUMN webhook_dedup.keys.expires_at IS 'Completed keys: when maintenance looks at the key again, set at completion to completed_at plus the source''s retention. Maintenance deletes the key then unless it was active since (last_seen_at plus the retention is later: it looks again then). NULL for keys not completed, which never expire. Indexed (keys_expiry).';

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
  'The row webhook_claim returns: outcome (claimed, reclaimed, in_progress, duplicate, conflict, retry_later, unknown_outcome, dead_lettered), claim_token (set when the caller must process), attempt, state, result (the stored result, for duplicates), last_step (where a reclaim resumes), first_seen_at, lease_expires_at.';

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
  'The row webhook_receive returns: verified, reject_reason (why not, or missing_event_id, or refused_handshake: a handshake answer that could sign a forged delivery), idem_key, outcome (as webhook_claim, or accepted/duplicate/conflict when enqueued; handshake; ignored), claim_token, attempt, result, event_type, event_time, last_step, response (the JSON body to answer with: the stored result of a duplicate, the handshake''s answer, {"status": outcome} or {"error": ...}; NULL for claimed and reclaimed, whose body is the caller''s own result once its work committed), secret_index (which secret verified: its position in secrets, 1-based as in webhook_verify_detail, or with secrets NULL the id of the webhook_dedup.source_secrets key), http_status and http_headers (the HTTP status and the headers, a JSON object of names and string values, to answer with: webhook_dedup.http_answer, docs/providers.md).';


-- The keys, in key order; a completed key is looked at again by maintenance
-- when its source's retention after its last activity ends (the rule
-- 0.1.0 applied to whole partitions).
INSERT INTO webhook_dedup.keys
    (source, idem_key, state, attempt, claim_token, lease_expires_at, next_attempt_at, due_at, fingerprint,
     event_type, result, last_step, last_error, deliveries, conflicts, first_seen_at, last_seen_at, completed_at,
     leased_at, expires_at)
SELECT o.source, o.idem_key, o.state, o.attempt,
       CASE WHEN o.state OPERATOR(pg_catalog.<>) 'completed' THEN o.claim_token END,
       o.lease_expires_at, o.next_attempt_at, o.due_at, o.fingerprint, o.event_type, o.result, o.last_step,
       o.last_error, o.deliveries, o.conflicts, o.first_seen_at, o.last_seen_at, o.completed_at, o.leased_at,
       CASE WHEN o.state OPERATOR(pg_catalog.=) 'completed'
            THEN o.last_seen_at OPERATOR(pg_catalog.+)
                 COALESCE(s.retention, webhook_dedup.default_retention())
       END
  FROM webhook_dedup.keys_0_1 AS o
  LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) o.source
 ORDER BY o.idem_key COLLATE "C", o.source COLLATE "C";

INSERT INTO webhook_dedup.payloads (source, idem_key, payload, headers)
SELECT o.source, o.idem_key, o.payload, o.headers
  FROM webhook_dedup.keys_0_1 AS o
 WHERE o.payload IS NOT NULL;

-- The views over keys go with the old table and come back over the new one.
DROP TABLE webhook_dedup.keys_0_1 CASCADE;

-- Conflicts are compared with keys, so in their collation (the index is
-- rebuilt; the rows stay).
ALTER TABLE webhook_dedup.conflict_log
    ALTER COLUMN source TYPE text COLLATE "C",
    ALTER COLUMN idem_key TYPE text COLLATE "C";

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
COMMENT ON COLUMN webhook_dedup.source_secrets.scheme IS 'The scheme the key was checked against and accepted for by add_secret (the source''s provider in webhook_dedup.sources, else its name, when that is a scheme; canonical name, e.g. standard for svix); NULL when the source named no scheme then. webhook_receive verifies a scheme only with keys accepted for it (or NULL), so changing webhook_dedup.sources.provider later never turns a key into a key of another scheme; the unsigned X (twitter) CRC is answered only with a key accepted for twitter.';
COMMENT ON TABLE webhook_dedup.source_secrets IS
  'Verification keys per source, for webhook_receive calls that pass no secrets: the keys whose [not_before, not_after) holds the delivery''s at. Rotation is add_secret (the new key) and retire_secret (the old one, usually 24 hours later). Managed with webhook_dedup.add_secret, retire_secret and list_secrets (webhook_dedup_operator); readable by the extension''s owner only, and left out of pg_dump.';

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
COMMENT ON COLUMN webhook_dedup.replay_guards.idem_key IS 'The idempotency key the body belongs to: the first delivery''s, or the one that took the body over when that key was gone, had failed with nothing but the provider to retry it (no payload), or never took this content (a conflict left the guard).';
COMMENT ON COLUMN webhook_dedup.replay_guards.seen_at IS 'When the body was given to idem_key (database clock); the row is pruned by maintenance after the source''s retention, once idem_key is gone.';
COMMENT ON TABLE webhook_dedup.replay_guards IS
  'The replay guard of webhook_receive (webhook_dedup.sources.replay_guard; on by default for github, shopify, linear and twilio, which do not sign the event id, and for sources reading their id from an unsigned header): one row per source and signed body (twilio: its canonical signed text, the URL and the form parameters sorted), naming the key it belongs to. A delivery of the body under another event id is answered from that key (duplicate, in_progress, unknown_outcome or dead_lettered) and processes nothing. Its one false positive: two genuinely distinct events with byte-identical bodies. Pruned after the source''s retention once its key is gone.';

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
COMMENT ON COLUMN webhook_dedup.signature_tokens.body_sha256 IS 'SHA-256 of the raw body the token first arrived with (32 bytes): the same token with the same bytes is an ordinary duplicate, with other bytes a forgery.';
COMMENT ON COLUMN webhook_dedup.signature_tokens.signed_at IS 'The signed timestamp of the token''s signature (one token has one: the signature covers both). Maintenance prunes the row once signed_at is older than the source''s retention and window_until has passed; webhook_receive refuses a signature older than the source''s retention (timestamp_too_old), whose token may have been pruned.';
COMMENT ON COLUMN webhook_dedup.signature_tokens.window_until IS 'signed_at plus the tolerance the token was verified with: after it, the signature no longer verifies, whatever the token.';
COMMENT ON COLUMN webhook_dedup.signature_tokens.seen_at IS 'When the token was first received (database clock).';
COMMENT ON TABLE webhook_dedup.signature_tokens IS
  'For schemes whose signature does not cover the body (mailgun: docs/signatures.md, "What each signature covers"): each signed token seen per source, with the bytes it first arrived with. webhook_dedup.webhook_receive refuses the token on other content (verified false, reject_reason token_reused, counted as rejected_token_reused) and writes nothing else; concurrent first uses of one token with different bodies: the first to commit wins. Kept while the signed time is within the source''s retention, and at least until the signature''s window closes; a signature older than the retention is refused (timestamp_too_old), so a pruned token cannot come back.';

-- Fingerprints are of raw bytes or (tagged) of canonical JSON.
COMMENT ON TABLE webhook_dedup.conflict_log IS
  'One row per delivery of a known key with a different payload (the fingerprints of the stored and the new payload, webhook_dedup.keys.fingerprint; via = claim or enqueue). Nothing was processed for these deliveries. Read it through the view webhook_dedup.conflicts, which adds the key''s state.';
COMMENT ON COLUMN webhook_dedup.conflict_log.stored_fingerprint IS 'The key''s fingerprint (webhook_dedup.keys.fingerprint): the content it was first stored with.';
COMMENT ON COLUMN webhook_dedup.conflict_log.fingerprint IS 'The fingerprint of the conflicting delivery, under the same rule.';

-- webhook_dedup.providers shows each profile's fingerprint rule, replay
-- guard and handshake, and how its provider takes answers (new columns of
-- provider_profiles()).
DROP VIEW webhook_dedup.providers;
DROP FUNCTION webhook_dedup.provider_profiles();
CREATE FUNCTION webhook_dedup."provider_profiles"() RETURNS TABLE (
	"scheme" TEXT,  /* String */
	"event_id" TEXT,  /* Option < String > */
	"event_type" TEXT,  /* Option < String > */
	"event_time" TEXT,  /* Option < String > */
	"retry_horizon" interval,  /* Option < pgrx :: datum :: Interval > */
	"response_deadline" interval,  /* Option < pgrx :: datum :: Interval > */
	"default_wait" interval,  /* pgrx :: datum :: Interval */
	"retries_4xx" TEXT,  /* String */
	"disable_rule" TEXT,  /* String */
	"stop_signal" TEXT,  /* Option < String > */
	"fingerprint" TEXT,  /* String */
	"replay_guard" bool,  /* bool */
	"handshake" TEXT,  /* Option < String > */
	"notes" TEXT,  /* String */
	"sources" TEXT  /* String */
)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'provider_profiles_wrapper';
CREATE VIEW webhook_dedup.providers AS
SELECT scheme, event_id, event_type, event_time, retry_horizon, response_deadline, default_wait, retries_4xx,
       disable_rule, stop_signal, fingerprint, replay_guard, handshake, notes, sources
  FROM webhook_dedup.provider_profiles();
COMMENT ON VIEW webhook_dedup.providers IS
  'What each scheme''s deliveries carry, as webhook_receive reads them: where the event id is (the idempotency key is built from it), the event type, the event time to order by (with its format), the provider''s documented retry horizon (retention should cover it), the fingerprint rule (what part of the payload identifies the content: raw body, or the RFC 8785 canonical JSON of the values at some JSON pointers, leaving out what the provider changes between attempts), whether the replay guard is on by default (schemes that sign neither the event id nor a time), the handshake webhook_receive answers itself, how the provider takes answers (response_deadline: how long it waits for one, NULL where it documents none; default_wait: webhook_receive''s default wait for an in-flight duplicate, the deadline less a fifth of it and at least 1 s, from an assumed 3 s where none is documented; retries_4xx: whether it retries a 4xx answer; disable_rule: what repeated failures do to the endpoint; stop_signal: the answer that stops its retries of one message, sent by webhook_dedup.http_answer with a final refusal), and the sources of these facts. A source overrides the intake settings in webhook_dedup.sources. The generic hmac scheme has no profile. Per provider: docs/providers.md.';
COMMENT ON FUNCTION webhook_dedup.provider_profiles() IS
  'The built-in provider profiles as rows; read them through webhook_dedup.providers.';

-- Whether a source has keys made by webhook_key or webhook_receive (they
-- start with '<source>:': one range probe of the primary key (idem_key,
-- source)) or counted deliveries (the primary key of claim_counts leads
-- with source). A function rather than a subquery of the view: each probe
-- names one source, so on a distributed install (docs/distributed.md)
-- Citus routes it to that source's shard, where a correlated subquery over
-- the distributed keys could not be planned. SECURITY DEFINER: the view's
-- readers may not read the keys; this says only whether there are any.
CREATE FUNCTION webhook_dedup.source_has_history(source text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- PL/pgSQL: Citus plans its parameters, not an SQL function's
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  RETURN EXISTS (SELECT FROM webhook_dedup.keys AS k
                  WHERE k.idem_key OPERATOR(pg_catalog.>=) ($1 OPERATOR(pg_catalog.||) ':')
                    AND k.idem_key OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.||) ';')
                    AND k.source OPERATOR(pg_catalog.=) $1)
      OR EXISTS (SELECT FROM webhook_dedup.claim_counts AS c WHERE c.source OPERATOR(pg_catalog.=) $1);
END
$fn$;
REVOKE ALL ON FUNCTION webhook_dedup.source_has_history(text) FROM PUBLIC;
COMMENT ON FUNCTION webhook_dedup.source_has_history(text) IS
  'source_has_history(source) -> boolean: whether source has keys made by webhook_key or webhook_receive (idempotency keys starting with source:) or counted deliveries (webhook_dedup.claim_counts). Used by webhook_dedup.retention_warnings for sources named after a provider; executable by webhook_dedup_reader and pg_monitor.';

CREATE VIEW webhook_dedup.retention_warnings AS
WITH used AS (
  SELECT s.source FROM webhook_dedup.sources AS s
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
            THEN pg_catalog.format('source %s keeps keys for %s after their last activity, less than the %s retry horizon of %s: a retry that comes later is processed again (raise webhook_dedup.sources.retention or webhook_dedup.retention)',
                                   c.source, c.retention, c.provider, c.retry_horizon)
            ELSE pg_catalog.format('source %s names provider %s, which has no profile in webhook_dedup.providers: its retention cannot be checked',
                                   c.source, c.provider)
       END AS message
  FROM checked AS c
 WHERE (c.known AND c.retry_horizon IS NOT NULL AND c.retention OPERATOR(pg_catalog.<) c.retry_horizon)
    OR (NOT c.known AND c.provider IS DISTINCT FROM c.source);
COMMENT ON VIEW webhook_dedup.retention_warnings IS
  'Sources kept for less than their provider''s documented retry horizon (a retry after the retention would be processed again), and sources whose webhook_dedup.sources.provider names no profile. One row each: source, provider, retention (webhook_dedup.sources.retention, else webhook_dedup.retention), retry_horizon (webhook_dedup.providers), message. Sources checked: every row of webhook_dedup.sources, and every provider scheme used as a source name that has keys made by webhook_key or webhook_receive, or counted deliveries. run_maintenance() raises the messages as WARNINGs. Empty is good.';

-- Operational views: the keys to act on. Each reads an index: keys_open
-- (keys not completed, by due_at), the primary key (idem_key, source),
-- conflict_log's indexes.
CREATE VIEW webhook_dedup.key_states AS
WITH open AS (
  SELECT k.source, k.state, pg_catalog.count(*) AS keys,
         pg_catalog.min(k.due_at) AS oldest_due_at,
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
       CASE WHEN o.state OPERATOR(pg_catalog.=) 'processing' THEN o.expired END AS expired_leases
  FROM open AS o;
COMMENT ON VIEW webhook_dedup.key_states IS
  'Keys not completed, per source and state (pending, processing, failed, unknown_outcome, dead_lettered; one row per state that has keys): keys (count), oldest_pending_age (pending: how long the oldest pending key has been due, now - its due_at; the queue''s backlog), oldest_lease_age (processing: now - the oldest leased_at; the longest attempt in flight), expired_leases (processing: leases past expiry not swept yet). Read from the partial index keys_open, which holds only keys not completed, so its cost follows the open work, never the history. Completed keys are not counted here: that would read every key kept for retention (see docs/metrics.md); their flow is duplicate_metrics.completions.';

CREATE VIEW webhook_dedup.stuck_claims AS
SELECT k.source, k.idem_key, k.event_type, k.attempt, k.leased_at, k.lease_expires_at,
       pg_catalog.now() OPERATOR(pg_catalog.-) k.lease_expires_at AS overdue, k.last_step, k.deliveries,
       k.first_seen_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'processing'
   AND k.due_at OPERATOR(pg_catalog.<) pg_catalog.now()  -- a processing key is due when its lease ends (keys_open)
   AND k.lease_expires_at OPERATOR(pg_catalog.<) pg_catalog.now();
COMMENT ON VIEW webhook_dedup.stuck_claims IS
  'Processing keys whose lease expired and that maintenance has not swept yet (the holder crashed or hangs): source, idem_key, event_type, attempt, leased_at, lease_expires_at, overdue (now - lease_expires_at), last_step, deliveries, first_seen_at. Normally empty or short-lived: the next maintenance pass moves them to failed (or dead_lettered). Reads the partial index keys_open.';

CREATE VIEW webhook_dedup.lapsed_leases AS
SELECT k.source, k.idem_key, k.event_type, k.attempt, k.last_error, k.last_step, k.due_at, k.last_seen_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'failed'
   AND k.due_at OPERATOR(pg_catalog.<=) pg_catalog.now()  -- still due: no retry reclaimed it (keys_open)
   AND k.last_error OPERATOR(pg_catalog.~~) 'lease of attempt % expired at %';
COMMENT ON VIEW webhook_dedup.lapsed_leases IS
  'Keys whose lease expired without a completion, swept to failed by maintenance and still due (no retry or webhook_next reclaimed them since): source, idem_key, event_type, attempt, last_error (lease of attempt N expired at T), last_step, due_at, last_seen_at. Rows that stay mean nothing retries them (a claim-mode key waits for the provider''s retry). Reads the partial index keys_open. For webhook_dedup_reader and pg_monitor, which have no access to webhook_dedup.keys.';

CREATE VIEW webhook_dedup.queue_backlog AS
SELECT k.source, pg_catalog.count(*) AS due_keys, pg_catalog.min(k.due_at) AS oldest_due_at,
       pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(k.due_at) AS oldest_due_age
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.<>) 'completed' AND k.due_at OPERATOR(pg_catalog.<=) pg_catalog.now()
 GROUP BY k.source;
COMMENT ON VIEW webhook_dedup.queue_backlog IS
  'Work due now, per source: due_keys (pending keys, expired leases, failed keys whose retry is due: what webhook_next or a claim would take), oldest_due_at, oldest_due_age (now - oldest_due_at). Empty when nothing is due. Reads the partial index keys_open. For webhook_dedup_reader and pg_monitor, which have no access to webhook_dedup.keys.';

CREATE VIEW webhook_dedup.dead_letters AS
SELECT k.source, k.idem_key, k.event_type, k.attempt AS attempts, k.last_error, k.last_step, k.deliveries,
       k.first_seen_at, k.last_seen_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'dead_lettered';
COMMENT ON VIEW webhook_dedup.dead_letters IS
  'Keys that will not be retried: out of attempts (webhook_dedup.max_attempts or the source''s), failed as not retryable, or dead-lettered by webhook_resolve. source, idem_key, event_type, attempts, last_error, last_step, deliveries, first_seen_at, last_seen_at. An operator decides: webhook_dedup.webhook_resolve(source, idem_key, ''failed'') retries now, ''completed'' closes it. Reads the partial index keys_open.';

CREATE VIEW webhook_dedup.unknown_outcomes AS
SELECT k.source, k.idem_key, k.event_type, k.attempt AS attempts, k.last_error, k.last_step, k.deliveries,
       k.first_seen_at, k.last_seen_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'unknown_outcome';
COMMENT ON VIEW webhook_dedup.unknown_outcomes IS
  'Keys whose holder may have acted on an external system and lost the answer (webhook_mark_unknown): nothing processes them until an operator checks the external system and calls webhook_resolve. Columns as webhook_dedup.dead_letters (last_error holds the holder''s detail). Reads the partial index keys_open.';

CREATE VIEW webhook_dedup.conflicts AS
SELECT c.id, c.source, c.idem_key, c.seen_at, c.via, c.stored_fingerprint, c.fingerprint,
       k.state, k.attempt AS attempts, k.last_error, k.deliveries, k.conflicts AS key_conflicts, k.first_seen_at
  FROM webhook_dedup.conflict_log AS c
  LEFT JOIN webhook_dedup.keys AS k
    ON k.idem_key OPERATOR(pg_catalog.=) c.idem_key AND k.source OPERATOR(pg_catalog.=) c.source;
COMMENT ON VIEW webhook_dedup.conflicts IS
  'One row per delivery of a known key with a different payload (nothing was processed for it): id, source, idem_key, seen_at, via (claim or enqueue), stored_fingerprint and fingerprint (the fingerprints of the first and of this payload, webhook_dedup.keys.fingerprint), and the key now: state, attempts, last_error, deliveries, key_conflicts (conflicting deliveries of the key), first_seen_at (NULL when the key is gone). Filter on seen_at or idem_key: both are indexed in webhook_dedup.conflict_log.';

CREATE VIEW webhook_dedup.key_history AS
SELECT k.source, k.idem_key, k.state, k.event_type, k.first_seen_at, k.last_seen_at, k.completed_at,
       k.attempt AS attempts, k.deliveries, k.conflicts, k.last_step, k.last_error, k.result, k.leased_at,
       k.lease_expires_at, k.next_attempt_at, k.due_at,
       (SELECT pg_catalog.max(c.seen_at) FROM webhook_dedup.conflict_log AS c
         WHERE c.idem_key OPERATOR(pg_catalog.=) k.idem_key AND c.source OPERATOR(pg_catalog.=) k.source)
         AS last_conflict_at
  FROM webhook_dedup.keys AS k;
COMMENT ON VIEW webhook_dedup.key_history IS
  'Everything known about a key: SELECT * FROM webhook_dedup.key_history WHERE idem_key = ''github:...'' (an index scan of the primary key, which leads with idem_key). source, idem_key, state, event_type, first_seen_at, last_seen_at, completed_at, attempts (leases granted), deliveries (claims and enqueues, the first included: deliveries - 1 duplicates), conflicts, last_step, last_error, result (what webhook_complete stored), leased_at, lease_expires_at, next_attempt_at, due_at, last_conflict_at. No payload or headers.';


-- maintenance_runs: the partition columns go, keys_kept comes (rebuilt, so
-- that its columns are in the order of a fresh install).
ALTER TABLE webhook_dedup.maintenance_runs RENAME TO maintenance_runs_0_1;
ALTER INDEX webhook_dedup.maintenance_runs_started_at RENAME TO maintenance_runs_0_1_started_at;
ALTER TABLE webhook_dedup.maintenance_runs_0_1 RENAME CONSTRAINT maintenance_runs_pkey TO maintenance_runs_0_1_pkey;
ALTER SEQUENCE webhook_dedup.maintenance_runs_id_seq RENAME TO maintenance_runs_0_1_id_seq;
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
    errors               text[]      NOT NULL
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
COMMENT ON COLUMN webhook_dedup.maintenance_runs.keys_kept IS 'Completed keys whose expires_at came but that were active since (a late duplicate) or whose source''s retention grew: looked at again later instead of deleted.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.history_pruned IS 'Watermarks, replay guards, signed tokens (once their signature''s window closed), conflicts, claim counts and maintenance runs deleted past retention.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.metrics_flushed IS 'Metrics entries flushed from shared memory.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.retention_warnings IS 'Sources whose retention is shorter than their provider''s retry horizon (webhook_dedup.retention_warnings).';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.more IS 'A step stopped at webhook_dedup.batch_size: the worker runs the next pass after a rest that keeps it to webhook_dedup.maintenance_duty_cycle of the time.';
COMMENT ON COLUMN webhook_dedup.maintenance_runs.errors IS 'One entry per step that failed (SQLSTATE and message); the pass went on with the other steps.';

INSERT INTO webhook_dedup.maintenance_runs
    (id, started_at, finished_at, application_name, leases_expired, dead_lettered, keys_pruned, keys_kept,
     history_pruned, metrics_flushed, retention_warnings, more, errors)
  OVERRIDING SYSTEM VALUE
SELECT r.id, r.started_at, r.finished_at, r.application_name, r.leases_expired, r.dead_lettered, r.keys_pruned,
       0, r.history_pruned, r.metrics_flushed, r.retention_warnings, r.more, r.errors
  FROM webhook_dedup.maintenance_runs_0_1 AS r;
SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence('webhook_dedup.maintenance_runs', 'id'),
                         COALESCE((SELECT pg_catalog.max(r.id) FROM webhook_dedup.maintenance_runs AS r), 0)
                           OPERATOR(pg_catalog.+) 1, false);
DROP TABLE webhook_dedup.maintenance_runs_0_1;

-- Functions whose result changed.
DROP FUNCTION @extschema@.webhook_claim(text, text, bytea, interval, text);
CREATE FUNCTION @extschema@.webhook_claim(
    "source" TEXT,
    "idem_key" TEXT,
    "payload" bytea DEFAULT NULL,
    "lease" interval DEFAULT NULL,
    "event_type" TEXT DEFAULT NULL
) RETURNS webhook_dedup.claim_result
VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'webhook_claim_wrapper';
COMMENT ON FUNCTION @extschema@.webhook_claim(text, text, bytea, interval, text) IS
  'webhook_dedup.webhook_claim(source, idem_key, payload => NULL, lease => NULL, event_type => NULL) -> one row (outcome, claim_token, attempt, state, result, last_step, first_seen_at, lease_expires_at). outcome: claimed or reclaimed (process it; claim_token set; resume from last_step), in_progress (someone holds a live lease), duplicate (result: what the first completion stored), conflict (same key, different payload; recorded in webhook_dedup.conflicts; result and last_step withheld), retry_later (a failure not due yet), unknown_outcome and dead_lettered (an operator decides). The HTTP answer of each: webhook_dedup.http_answer(outcome, scheme, result). lease NULL = the source''s lease in webhook_dedup.sources, else webhook_dedup.default_lease. Atomic: the primary key arbitrates a new key, the row lock every later write; runs in the caller''s transaction. Errors: 22004 NULL source/idem_key; 22023 empty or over 255 characters, a lease that is not positive, over 365 days or has months; 40001 under REPEATABLE READ/SERIALIZABLE when a concurrent transaction changed the key after the snapshot.';

DROP FUNCTION @extschema@.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean,
                                          interval, timestamptz, text, text, text, text, text);
CREATE FUNCTION @extschema@.webhook_receive(
    "scheme" TEXT,
    "payload" bytea,
    "headers" jsonb,
    "secrets" TEXT[] DEFAULT NULL,
    "source" TEXT DEFAULT NULL,
    "environment" TEXT DEFAULT NULL,
    "account" TEXT DEFAULT NULL,
    "operation" TEXT DEFAULT NULL,
    "mode" TEXT DEFAULT 'claim',
    "lease" interval DEFAULT NULL,
    "body_key_fallback" bool DEFAULT false,
    "tolerance" interval DEFAULT NULL,
    "at" timestamp with time zone DEFAULT now(),
    "url" TEXT DEFAULT NULL,
    "signature_header" TEXT DEFAULT NULL,
    "signature_prefix" TEXT DEFAULT NULL,
    "algorithm" TEXT DEFAULT NULL,
    "encoding" TEXT DEFAULT NULL,
    "method" TEXT DEFAULT NULL,
    "wait" interval DEFAULT NULL
) RETURNS webhook_dedup.receive_result
VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'webhook_receive_wrapper';
COMMENT ON FUNCTION @extschema@.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean, interval, timestamptz, text, text, text, text, text, text, interval) IS
  'webhook_dedup.webhook_receive(scheme, payload, headers, secrets => NULL, source => NULL, environment => NULL, account => NULL, operation => NULL, mode => ''claim'', lease => NULL, body_key_fallback => false, tolerance => NULL, at => now(), url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL, method => NULL, wait => NULL) -> one row (verified, reject_reason, idem_key, outcome, claim_token, attempt, result, event_type, event_time, last_step, response, secret_index, http_status, http_headers). Answer the provider with http_status, http_headers and response, for every outcome (webhook_dedup.http_answer: 200 for duplicates, conflicts and parked keys, 503 with Retry-After for in_progress and retry_later, 401 for a bad signature, 400 for what no retry can fix; for claimed and reclaimed, http_status and http_headers once the work committed, with your own result as the body). (1) Verifies with secrets, or with secrets NULL with the source''s keys in webhook_dedup.source_secrets valid at at (secret_index: the position of the secret that verified, or the key''s id), and writes nothing for a delivery that fails (verified false, reject_reason as webhook_verify_detail); stored keys verify only the scheme add_secret accepted them for. A scheme whose signature covers nothing of the body (mailgun) binds its signed token to the bytes it first arrived with (webhook_dedup.signature_tokens): the token on other bytes is refused (verified false, reject_reason token_reused), nothing else written. (2) Answers a provider handshake: outcome handshake, response = the JSON body to answer, nothing stored (slack url_verification, zoom endpoint.url_validation and the discord PING once verified; the unsigned twitter CRC, payload empty and the request URL in url, before verification with verified false); an answer that could sign a forged delivery is refused (reject_reason refused_handshake). (3) Reads the event id, type and time by the scheme''s profile (webhook_dedup.providers) with the source''s settings in its place (webhook_dedup.sources; source defaults to the scheme); an event type the source does not accept (accept_event_types) is outcome ignored, nothing stored. (4) A delivery without an event id gets reject_reason missing_event_id unless body_key_fallback (zoom and twitter, which send no id, are keyed on the body). url: Twilio, Square and HubSpot sign it, X''s CRC carries its token; ignored for a signed twitter delivery; method: HubSpot signs it. (5) With the source''s replay guard on (by default for github, shopify, linear and twilio, and for a source whose event_id_from is a header its scheme does not sign), a signed body (twilio: its canonical signed text) already received under another event id is answered from that key (duplicate, in_progress, unknown_outcome or dead_lettered; idem_key names it) and nothing is processed (webhook_dedup.replay_guards). (6) Claims (mode claim: outcome as webhook_claim) or stores for webhook_next (mode enqueue: accepted, duplicate, conflict), with the fingerprint of the source''s rule (fingerprint_pointers, else the profile''s: the raw body; for stripe the RFC 8785 canonical JSON of /type and /data, so that a retry Stripe re-rendered is no conflict; for twilio the signed URL and form parameters sorted by name). (7) In mode claim, before it writes anything, a delivery whose key another worker holds with a live lease (a claim would answer in_progress) waits for that holder, at most wait (NULL: the provider''s default_wait in webhook_dedup.providers; 0 turns it off): holding no lock, woken when the holder''s transaction commits a change of the key (else every 500 ms at most, 100 ms without the library preloaded, and at the lease''s expiry), it then claims as usual, so a holder that completed in time makes the answer a duplicate''s 200 with the stored result, an expired lease a reclaim; a cancel or statement_timeout ends it at once. Errors as webhook_verify and webhook_claim; 22023 another mode, a wait outside 0 to 60 seconds, a webhook_dedup.sources row whose intake settings do not check, or a stored key that cannot be a key of the scheme (named by id, never echoed); 55000 secrets NULL and no key of the source for the scheme valid at at; 25006 on a standby or in a read-only transaction, once it would write.';

DROP FUNCTION webhook_dedup.run_maintenance();
CREATE FUNCTION webhook_dedup.run_maintenance() RETURNS TABLE (
    "ran" bool,
    "leases_expired" INT,
    "dead_lettered" INT,
    "keys_pruned" bigint,
    "keys_kept" bigint,
    "history_pruned" bigint,
    "metrics_flushed" bigint,
    "retention_warnings" INT,
    "more" bool,
    "errors" TEXT[]
)
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'run_maintenance_wrapper';
COMMENT ON FUNCTION webhook_dedup.run_maintenance() IS
  'One maintenance pass, what the background worker runs every webhook_dedup.maintenance_interval: (1) expired processing leases become failed, due at once (or dead_lettered with no attempts left); (2) completed keys past retention are deleted with their payloads (a key active within its source''s retention of now is kept and looked at again later: keys_kept); (3) watermarks, replay guards, signed tokens, conflicts, claim counts and maintenance runs past retention are deleted; (4) metrics are flushed; (5) sources whose retention is shorter than their provider''s retry horizon are counted (a WARNING; see webhook_dedup.retention_warnings). Keys a claim or their holder holds right now are skipped, never waited for. One row: ran (false: another pass holds the maintenance lock, or this is a standby; nothing done), the counts of each step, more (a step stopped at webhook_dedup.batch_size: call again) and errors (one entry per step that failed and was rolled back; the others ran). Recorded in webhook_dedup.maintenance_runs. Without the worker, schedule it (pg_cron) every minute or so (expired leases are only swept by maintenance).';

-- webhook_verify, webhook_verify_detail and webhook_sign take the request
-- method (HubSpot signs it) and know more schemes.
DROP FUNCTION @extschema@.webhook_verify(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text);
DROP FUNCTION @extschema@.webhook_verify_detail(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text);
DROP FUNCTION @extschema@.webhook_sign(text, bytea, text, timestamptz, text, text, text, text, text, text);
CREATE FUNCTION @extschema@.webhook_verify(
	"scheme" TEXT,
	"payload" bytea,
	"headers" jsonb,
	"secrets" TEXT[],
	"tolerance" interval DEFAULT NULL,
	"at" timestamp with time zone DEFAULT now(),
	"url" TEXT DEFAULT NULL,
	"signature_header" TEXT DEFAULT NULL,
	"signature_prefix" TEXT DEFAULT NULL,
	"algorithm" TEXT DEFAULT NULL,
	"encoding" TEXT DEFAULT NULL,
	"method" TEXT DEFAULT NULL
) RETURNS bool
IMMUTABLE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'webhook_verify_wrapper';
CREATE FUNCTION @extschema@.webhook_verify_detail(
	"scheme" TEXT,
	"payload" bytea,
	"headers" jsonb,
	"secrets" TEXT[],
	"tolerance" interval DEFAULT NULL,
	"at" timestamp with time zone DEFAULT now(),
	"url" TEXT DEFAULT NULL,
	"signature_header" TEXT DEFAULT NULL,
	"signature_prefix" TEXT DEFAULT NULL,
	"algorithm" TEXT DEFAULT NULL,
	"encoding" TEXT DEFAULT NULL,
	"method" TEXT DEFAULT NULL
) RETURNS TABLE (
	"valid" bool, 
	"reason" TEXT, 
	"secret_index" INT, 
	"signed_at" timestamp with time zone 
)
IMMUTABLE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'webhook_verify_detail_wrapper';
CREATE FUNCTION @extschema@.webhook_sign(
	"scheme" TEXT,
	"payload" bytea,
	"secret" TEXT,
	"at" timestamp with time zone DEFAULT now(),
	"msg_id" TEXT DEFAULT NULL,
	"url" TEXT DEFAULT NULL,
	"signature_header" TEXT DEFAULT NULL,
	"signature_prefix" TEXT DEFAULT NULL,
	"algorithm" TEXT DEFAULT NULL,
	"encoding" TEXT DEFAULT NULL,
	"method" TEXT DEFAULT NULL
) RETURNS jsonb
IMMUTABLE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'webhook_sign_wrapper';
COMMENT ON FUNCTION @extschema@.webhook_verify(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text, text) IS
  'webhook_dedup.webhook_verify(scheme, payload, headers, secrets, tolerance => NULL, at => now(), url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL, method => NULL) -> boolean. True when payload (the raw body) carries a valid signature of scheme under any of secrets (rotation). Schemes: github, stripe, shopify, slack, standard (aliases svix, clerk, resend; v1a with whpk_ Ed25519 public keys), paddle, twilio, zoom, twitter (X), square, hubspot, twitch, intercom, typeform, calendly, discord (Ed25519 public key), sendgrid (ECDSA P-256 public key), mailgun (signature in the body), linear, hmac; each one''s rule, window and source are in docs/signatures.md (and the profiles in webhook_dedup.providers). url is the request URL (twilio, square and hubspot sign it), method the request method (hubspot signs it; ignored by the others); hmac is the generic scheme (signature_header, signature_prefix, algorithm sha1/sha256/sha512, encoding hex/base64). Windows are symmetric and inclusive; tolerance NULL = the provider''s default. False for any signature that does not verify. Errors: 22023 unknown scheme, no secrets, an empty, whitespace-padded or (standard) undecodable secret, or a public key that is no key of its kind (named by position, never echoed), headers not a JSON object of strings or arrays of strings, a negative tolerance or one with months, an infinite at, url or hmac arguments given to another scheme or missing for theirs, a missing method for hubspot; 22004 a NULL argument or NULL secret.';
COMMENT ON FUNCTION @extschema@.webhook_verify_detail(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text, text) IS
  'webhook_dedup.webhook_verify_detail(same arguments as webhook_verify) -> one row (valid boolean, reason text, secret_index integer, signed_at timestamptz). reason: ok, missing_header, malformed_header, unsupported_version, no_matching_signature, timestamp_too_old, timestamp_too_new. secret_index: 1-based position in secrets of the secret that matched (to know when an old secret can be retired). signed_at: the signed timestamp, for stripe, slack, standard and paddle. Errors as webhook_verify.';
COMMENT ON FUNCTION @extschema@.webhook_sign(text, bytea, text, timestamptz, text, text, text, text, text, text, text) IS
  'webhook_dedup.webhook_sign(scheme, payload, secret, at => now(), msg_id => NULL, url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL, method => NULL) -> jsonb: the headers a sender would send, for tests and for sending webhooks (for example Standard Webhooks). msg_id is required for standard and twitch (and is the token for mailgun, whose result is the signature member to merge into the body), url for twilio, square and hubspot, method for hubspot, signature_header for hmac (22004/22023 otherwise); schemes signed with a private key (discord, sendgrid, standard with a whpk_ key) cannot be signed here (22023). Secret rules as webhook_verify.';

-- Comments that described 0.1.0's per-key advisory lock.
COMMENT ON FUNCTION @extschema@.webhook_next(text, interval, integer) IS
  'webhook_dedup.webhook_next(source => NULL, lease => NULL, batch => 1) -> rows (source, idem_key, claim_token, attempt, payload, event_type, last_step, headers): up to batch due keys (pending, expired leases, due retries), oldest first, each leased to the caller; a key due again with no attempts left is dead-lettered instead. Keys another worker or a claim holds are skipped, never waited for (FOR NO KEY UPDATE SKIP LOCKED), so two workers never get the same key and a worker cannot deadlock with a claim. Finish each with webhook_complete or webhook_fail. Errors: 22004 NULL batch; 22023 batch outside 1..1000, a bad source or lease; 40001 under REPEATABLE READ when a key changed after the snapshot.';

-- Every function callers call moves from the schema the extension was
-- created in (@extschema@, usually public) into schema webhook_dedup, which
-- the extension owns and nobody else may write to. In public, a database
-- owner who is not superuser could create overloads of them (varchar
-- parameters are a better match than text for a driver that binds varchar)
-- that a superuser's or a receiver's unqualified call would run instead
-- (issue 24; docs/security.md, "Where the functions live"). Callers must
-- name them schema-qualified from now on: webhook_dedup.webhook_claim(...).
-- Triggers that use webhook_monotonic_guard keep working (they refer to
-- the function itself, not to its name).
--
-- Each moved function leaves a stub of the same name and arguments (names
-- and defaults included) in the schema it left, owned by the extension: an
-- old receiver's unqualified call gets a clear error (42883, naming the new
-- place) instead of nothing, and the signature stays taken, so that a
-- database owner cannot put a function of exactly that signature there
-- for such calls to run (issue 24's review). The stubs do nothing else.
DO $$
DECLARE
  f record;
BEGIN
  FOR f IN SELECT p.oid::pg_catalog.regprocedure AS fn, p.proname AS name, n.nspname AS schema,
                  pg_catalog.pg_get_function_arguments(p.oid) AS arguments,
                  pg_catalog.pg_get_function_identity_arguments(p.oid) AS identity
             FROM pg_catalog.pg_proc AS p
             JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
             JOIN pg_catalog.pg_depend AS d
               ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
              AND d.objid OPERATOR(pg_catalog.=) p.oid AND d.deptype OPERATOR(pg_catalog.=) 'e'
             JOIN pg_catalog.pg_extension AS e
               ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
              AND d.refobjid OPERATOR(pg_catalog.=) e.oid AND e.extname OPERATOR(pg_catalog.=) 'webhook_dedup'
            WHERE p.pronamespace OPERATOR(pg_catalog.<>) 'webhook_dedup'::pg_catalog.regnamespace
  LOOP
    EXECUTE pg_catalog.format('ALTER FUNCTION %s SET SCHEMA webhook_dedup', f.fn);
    EXECUTE pg_catalog.format(
      'CREATE FUNCTION %I.%I(%s) RETURNS void LANGUAGE plpgsql AS %L',
      f.schema, f.name, f.arguments,
      pg_catalog.format('BEGIN RAISE EXCEPTION %L USING ERRCODE = %L, HINT = %L; END',
                        pg_catalog.format('%s() moved to schema webhook_dedup in webhook_dedup 0.2.0', f.name),
                        '42883',
                        pg_catalog.format('Call webhook_dedup.%s(...) (docs/operations.md, "Upgrades").', f.name)));
    EXECUTE pg_catalog.format(
      'COMMENT ON FUNCTION %I.%I(%s) IS %L', f.schema, f.name, f.identity,
      pg_catalog.format('Moved to webhook_dedup.%s in 0.2.0: this stub only raises 42883 for an unqualified call, and keeps the signature from being taken by another role''s function.', f.name));
  END LOOP;
END
$$;
-- The HTTP answer to a delivery, as data (issue 25; webhook_receive
-- returns the same with its rows).
CREATE FUNCTION webhook_dedup."http_answer"(
	"outcome" TEXT, /* Option < & str > */
	"scheme" TEXT DEFAULT NULL, /* Option < & str > */
	"result" jsonb DEFAULT NULL, /* Option < Jsonb > */
	"retry_after" interval DEFAULT NULL, /* Option < Interval > */
	"mode" TEXT DEFAULT 'claim' /* Option < & str > */
) RETURNS TABLE (
	"http_status" INT,  /* i32 */
	"http_headers" jsonb,  /* Jsonb */
	"response" jsonb  /* Option < Jsonb > */
)
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'http_answer_wrapper';
COMMENT ON FUNCTION webhook_dedup.http_answer(text, text, jsonb, interval, text) IS
  'webhook_dedup.http_answer(outcome, scheme => NULL, result => NULL, retry_after => NULL, mode => ''claim'') -> one row (http_status integer, http_headers jsonb, response jsonb): the HTTP answer webhook_receive returns with its rows, for an outcome named by the caller: any outcome of webhook_claim, webhook_receive or webhook_enqueue; rejected (a signature that did not verify: 401), missing_event_id and refused_handshake (400, or the provider''s stop signal: Mailgun 406, Slack X-Slack-No-Retry: 1, Svix webhook-delivery: abort-message); completed (webhook_complete returned true: 200 with result); lease_lost (webhook_complete or webhook_checkpoint returned false: 503); error (the database could not be asked: 500). Success is always 200 (Mailgun, Paddle, Linear, X and Intercom count only 200); duplicate, conflict, unknown_outcome and dead_lettered are 200 (a 409 or 422 makes some providers drop the event and counts toward disabling the endpoint at others); in_progress, retry_later and lease_lost are 503 with Retry-After (retry_after rounded up to whole seconds, at least 1; none when NULL). http_headers always has Content-Type: application/json; response is result (duplicate, completed, handshake) or {"status": outcome}, {"error": ...}, NULL for claimed and reclaimed. The rules and their sources: docs/providers.md. Changes nothing; every role may call it. Errors: 22004 NULL outcome or mode; 22023 an unknown outcome, scheme or mode, an outcome the mode never ends in, a negative retry_after or one with months.';

-- Their comments as in a fresh install (they name the functions
-- schema-qualified now, and say what changed).
COMMENT ON FUNCTION webhook_dedup.webhook_verify(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text, text) IS
  'webhook_dedup.webhook_verify(scheme, payload, headers, secrets, tolerance => NULL, at => now(), url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL, method => NULL) -> boolean. True when payload (the raw body) carries a valid signature of scheme under any of secrets (rotation). Schemes: github, stripe, shopify, slack, standard (aliases svix, clerk, resend; v1a with whpk_ Ed25519 public keys), paddle, twilio, zoom, twitter (X), square, hubspot, twitch, intercom, typeform, calendly, discord (Ed25519 public key), sendgrid (ECDSA P-256 public key), mailgun (signature in the body), linear, hmac; each one''s rule, window and source are in docs/signatures.md (and the profiles in webhook_dedup.providers). url is the request URL (twilio, square and hubspot sign it), method the request method (hubspot signs it; ignored by the others); hmac is the generic scheme (signature_header, signature_prefix, algorithm sha1/sha256/sha512, encoding hex/base64). Windows are symmetric and inclusive; tolerance NULL = the provider''s default. False for any signature that does not verify. Errors: 22023 unknown scheme, no secrets, an empty, whitespace-padded or (standard) undecodable secret, or a public key that is no key of its kind (named by position, never echoed), headers not a JSON object of strings or arrays of strings, a negative tolerance or one with months, an infinite at, url or hmac arguments given to another scheme or missing for theirs, a missing method for hubspot; 22004 a NULL argument or NULL secret.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_detail(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text, text, text) IS
  'webhook_dedup.webhook_verify_detail(same arguments as webhook_verify) -> one row (valid boolean, reason text, secret_index integer, signed_at timestamptz). reason: ok, missing_header, malformed_header, unsupported_version, no_matching_signature, timestamp_too_old, timestamp_too_new. secret_index: 1-based position in secrets of the secret that matched (to know when an old secret can be retired). signed_at: the signed timestamp, for stripe, slack, standard and paddle. Errors as webhook_verify.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_github(bytea, text, text) IS
  'webhook_dedup.webhook_verify_github(payload, signature_header, secret) -> boolean: the X-Hub-Signature-256 value (sha256=<hex>) over the raw body. NULL signature_header is false; NULL payload or secret 22004.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_stripe(bytea, text, text, interval, timestamptz) IS
  'webhook_dedup.webhook_verify_stripe(payload, signature_header, secret, tolerance => NULL (300 s), at => now()) -> boolean: the Stripe-Signature value (t=<unix>,v1=<hex>), key = the whole whsec_ string.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_shopify(bytea, text, text) IS
  'webhook_dedup.webhook_verify_shopify(payload, hmac_header, secret) -> boolean: the X-Shopify-Hmac-Sha256 value (canonical base64) over the raw body.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_slack(bytea, text, text, text, interval, timestamptz) IS
  'webhook_dedup.webhook_verify_slack(payload, timestamp_header, signature_header, secret, tolerance => NULL (300 s), at => now()) -> boolean: X-Slack-Request-Timestamp and X-Slack-Signature (v0=<hex> over v0:{ts}:{body}).';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_standard(bytea, text, text, text, text, interval, timestamptz) IS
  'webhook_dedup.webhook_verify_standard(payload, msg_id, msg_timestamp, signature_header, secret, tolerance => NULL (300 s), at => now()) -> boolean: Standard Webhooks / Svix (webhook-id, webhook-timestamp, webhook-signature v1,<base64> list); secret whsec_<base64>, undecodable is 22023.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_paddle(bytea, text, text, interval, timestamptz) IS
  'webhook_dedup.webhook_verify_paddle(payload, signature_header, secret, tolerance => NULL (5 s), at => now()) -> boolean: the Paddle-Signature value (ts=<unix>;h1=<hex>[;h1=...]) over {ts}:{body}.';
COMMENT ON FUNCTION webhook_dedup.webhook_verify_twilio(text, bytea, text, text) IS
  'webhook_dedup.webhook_verify_twilio(url, payload, signature_header, auth_token) -> boolean: X-Twilio-Signature (base64 HMAC-SHA1) over the full URL plus sorted form parameters, or for JSON bodies the URL carrying bodySHA256; the URL is tried with and without its default port.';
COMMENT ON FUNCTION webhook_dedup.webhook_hmac(bytea, bytea, text) IS
  'webhook_dedup.webhook_hmac(payload, secret, algorithm => ''sha256'') -> bytea: the raw HMAC (RFC 2104) with sha1, sha256 or sha512. Strict. Errors: 22023 empty secret or unknown algorithm.';
COMMENT ON FUNCTION webhook_dedup.webhook_sign(text, bytea, text, timestamptz, text, text, text, text, text, text, text) IS
  'webhook_dedup.webhook_sign(scheme, payload, secret, at => now(), msg_id => NULL, url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL, method => NULL) -> jsonb: the headers a sender would send, for tests and for sending webhooks (for example Standard Webhooks). msg_id is required for standard and twitch (and is the token for mailgun, whose result is the signature member to merge into the body), url for twilio, square and hubspot, method for hubspot, signature_header for hmac (22004/22023 otherwise); schemes signed with a private key (discord, sendgrid, standard with a whpk_ key) cannot be signed here (22023). Secret rules as webhook_verify.';
COMMENT ON FUNCTION webhook_dedup.webhook_key(text, text, text, text, text) IS
  'webhook_dedup.webhook_key(source, event_id, environment => NULL, account => NULL, operation => NULL) -> text. Scoped, injective idempotency key: source:event_id, or source:environment:account:event_id:operation when an optional part is given; parts escaped (% -> %25, : -> %3A); at most 255 characters (longer forms end in %h and a SHA-256). Errors: 22004 NULL source or event_id; 22023 empty part.';
COMMENT ON FUNCTION webhook_dedup.webhook_claim(text, text, bytea, interval, text) IS
  'webhook_dedup.webhook_claim(source, idem_key, payload => NULL, lease => NULL, event_type => NULL) -> one row (outcome, claim_token, attempt, state, result, last_step, first_seen_at, lease_expires_at). outcome: claimed or reclaimed (process it; claim_token set; resume from last_step), in_progress (someone holds a live lease), duplicate (result: what the first completion stored), conflict (same key, different payload; recorded in webhook_dedup.conflicts; result and last_step withheld), retry_later (a failure not due yet), unknown_outcome and dead_lettered (an operator decides). The HTTP answer of each: webhook_dedup.http_answer(outcome, scheme, result). lease NULL = the source''s lease in webhook_dedup.sources, else webhook_dedup.default_lease. Atomic: the primary key arbitrates a new key, the row lock every later write; runs in the caller''s transaction. Errors: 22004 NULL source/idem_key; 22023 empty or over 255 characters, a lease that is not positive, over 365 days or has months; 40001 under REPEATABLE READ/SERIALIZABLE when a concurrent transaction changed the key after the snapshot.';
COMMENT ON FUNCTION webhook_dedup.webhook_complete(text, text, uuid, jsonb) IS
  'webhook_dedup.webhook_complete(source, idem_key, claim_token, result => NULL) -> boolean. True when claim_token holds the key''s lease: the key becomes completed and result is returned to later duplicates. False (nothing changed; counted as a stale completion) when the token is stale. Errors: P0002 unknown key; 22004 NULL argument.';
COMMENT ON FUNCTION webhook_dedup.webhook_fail(text, text, uuid, text, boolean, interval) IS
  'webhook_dedup.webhook_fail(source, idem_key, claim_token, error, retryable => true, retry_after => NULL) -> text: the new state. failed (due again after retry_after, else after min(30 s * 2^(attempt-1), 1 h)) while retryable and attempt < max_attempts (webhook_dedup.sources, else webhook_dedup.max_attempts); otherwise dead_lettered. NULL when claim_token is stale (nothing changes; counted as stale_tokens). error is stored as last_error. Errors: P0002 unknown key; 22004 NULL claim_token or retryable; 22023 a retry_after outside 0..365 days or with months.';
COMMENT ON FUNCTION webhook_dedup.webhook_mark_unknown(text, text, uuid, text) IS
  'webhook_dedup.webhook_mark_unknown(source, idem_key, claim_token, detail => NULL) -> boolean. The holder may have acted on an external system and lost the answer: the key becomes unknown_outcome (detail in last_error) and nothing processes it until webhook_resolve. False when claim_token is stale. Errors: P0002 unknown key; 22004 NULL source, idem_key or claim_token.';
COMMENT ON FUNCTION webhook_dedup.webhook_checkpoint(text, text, uuid, text) IS
  'webhook_dedup.webhook_checkpoint(source, idem_key, claim_token, step) -> boolean. Records the last completed step; a delivery that reclaims the key after a crash gets it as last_step and resumes there. Checkpoint in the same transaction as the step''s own writes. False when claim_token is stale. Errors: P0002 unknown key; 22004/22023 NULL or empty step.';
COMMENT ON FUNCTION webhook_dedup.webhook_extend_lease(text, text, uuid, interval) IS
  'webhook_dedup.webhook_extend_lease(source, idem_key, claim_token, lease) -> timestamptz: the new lease expiry (now + lease), or NULL when claim_token is stale (the lease was reclaimed: stop working). Errors: P0002 unknown key; 22023 a lease that is not positive, over 365 days or has months.';
COMMENT ON FUNCTION webhook_dedup.webhook_resolve(text, text, text, jsonb) IS
  'webhook_dedup.webhook_resolve(source, idem_key, new_state, result => NULL) -> text: the previous state. For operators and reconciliation jobs, from any state to completed (result stored when given), failed (retry now), dead_lettered or pending (hand it to the queue again); a processing key''s holder is fenced out. Errors: P0002 unknown key; 22023 another new_state.';
COMMENT ON FUNCTION webhook_dedup.webhook_forget(text, text) IS
  'webhook_dedup.webhook_forget(source, idem_key) -> boolean: removes the key so that a deliberate replay is processed again; true when it existed. For operators; counted as forgotten in the metrics.';
COMMENT ON FUNCTION webhook_dedup.webhook_enqueue(text, text, bytea, text, jsonb) IS
  'webhook_dedup.webhook_enqueue(source, idem_key, payload, event_type => NULL, headers => NULL) -> text: accepted (stored pending with its raw payload for webhook_next), duplicate (known in any state; nothing stored) or conflict (known with another payload; recorded in webhook_dedup.conflicts). Answer the provider 2xx for all three. Errors as webhook_claim; 22004 NULL payload.';
COMMENT ON FUNCTION webhook_dedup.webhook_next(text, interval, integer) IS
  'webhook_dedup.webhook_next(source => NULL, lease => NULL, batch => 1) -> rows (source, idem_key, claim_token, attempt, payload, event_type, last_step, headers): up to batch due keys (pending, expired leases, due retries), oldest first, each leased to the caller; a key due again with no attempts left is dead-lettered instead. Keys another worker or a claim holds are skipped, never waited for (FOR NO KEY UPDATE SKIP LOCKED), so two workers never get the same key and a worker cannot deadlock with a claim. Finish each with webhook_complete or webhook_fail. Errors: 22004 NULL batch; 22023 batch outside 1..1000, a bad source or lease; 40001 under REPEATABLE READ when a key changed after the snapshot.';
COMMENT ON FUNCTION webhook_dedup.webhook_claim_many(text, text[], interval, text) IS
  'webhook_dedup.webhook_claim_many(source, idem_keys, lease => NULL, event_type => NULL) -> one row per distinct key (idem_key, then the columns of webhook_claim). The keys are claimed one by one in sorted order, so transactions claiming overlapping keys in any order never deadlock: the second waits for the first and then sees its keys in_progress or completed. No payload fingerprints. Errors as webhook_claim; 22004 a NULL key.';
COMMENT ON FUNCTION webhook_dedup.webhook_body_key(text, bytea, text, text, text) IS
  'webhook_dedup.webhook_body_key(source, payload, environment => NULL, account => NULL, operation => NULL) -> text. The key of an event without an event id: SHA-256 over the raw payload (%b and 64 hex digits where the event id goes; never equal to a webhook_key), scoped like webhook_key. Wrong when two distinct events have byte-identical bodies (one key) or a provider re-serialises a retry (a new key). Errors: 22004 NULL source or payload; 22023 empty part.';
COMMENT ON FUNCTION webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean, interval, timestamptz, text, text, text, text, text, text, interval) IS
  'webhook_dedup.webhook_receive(scheme, payload, headers, secrets => NULL, source => NULL, environment => NULL, account => NULL, operation => NULL, mode => ''claim'', lease => NULL, body_key_fallback => false, tolerance => NULL, at => now(), url => NULL, signature_header => NULL, signature_prefix => NULL, algorithm => NULL, encoding => NULL, method => NULL, wait => NULL) -> one row (verified, reject_reason, idem_key, outcome, claim_token, attempt, result, event_type, event_time, last_step, response, secret_index, http_status, http_headers). Answer the provider with http_status, http_headers and response, for every outcome (webhook_dedup.http_answer: 200 for duplicates, conflicts and parked keys, 503 with Retry-After for in_progress and retry_later, 401 for a bad signature, 400 for what no retry can fix; for claimed and reclaimed, http_status and http_headers once the work committed, with your own result as the body). (1) Verifies with secrets, or with secrets NULL with the source''s keys in webhook_dedup.source_secrets valid at at (secret_index: the position of the secret that verified, or the key''s id), and writes nothing for a delivery that fails (verified false, reject_reason as webhook_verify_detail); stored keys verify only the scheme add_secret accepted them for. A scheme whose signature covers nothing of the body (mailgun) binds its signed token to the bytes it first arrived with (webhook_dedup.signature_tokens): the token on other bytes is refused (verified false, reject_reason token_reused), nothing else written. (2) Answers a provider handshake: outcome handshake, response = the JSON body to answer, nothing stored (slack url_verification, zoom endpoint.url_validation and the discord PING once verified; the unsigned twitter CRC, payload empty and the request URL in url, before verification with verified false); an answer that could sign a forged delivery is refused (reject_reason refused_handshake). (3) Reads the event id, type and time by the scheme''s profile (webhook_dedup.providers) with the source''s settings in its place (webhook_dedup.sources; source defaults to the scheme); an event type the source does not accept (accept_event_types) is outcome ignored, nothing stored. (4) A delivery without an event id gets reject_reason missing_event_id unless body_key_fallback (zoom and twitter, which send no id, are keyed on the body). url: Twilio, Square and HubSpot sign it, X''s CRC carries its token; ignored for a signed twitter delivery; method: HubSpot signs it. (5) With the source''s replay guard on (by default for github, shopify, linear and twilio, and for a source whose event_id_from is a header its scheme does not sign), a signed body (twilio: its canonical signed text) already received under another event id is answered from that key (duplicate, in_progress, unknown_outcome or dead_lettered; idem_key names it) and nothing is processed (webhook_dedup.replay_guards). (6) Claims (mode claim: outcome as webhook_claim) or stores for webhook_next (mode enqueue: accepted, duplicate, conflict), with the fingerprint of the source''s rule (fingerprint_pointers, else the profile''s: the raw body; for stripe the RFC 8785 canonical JSON of /type and /data, so that a retry Stripe re-rendered is no conflict; for twilio the signed URL and form parameters sorted by name). (7) In mode claim, before it writes anything, a delivery whose key another worker holds with a live lease (a claim would answer in_progress) waits for that holder, at most wait (NULL: the provider''s default_wait in webhook_dedup.providers; 0 turns it off): holding no lock, woken when the holder''s transaction commits a change of the key (else every 500 ms at most, 100 ms without the library preloaded, and at the lease''s expiry), it then claims as usual, so a holder that completed in time makes the answer a duplicate''s 200 with the stored result, an expired lease a reclaim; a cancel or statement_timeout ends it at once. Errors as webhook_verify and webhook_claim; 22023 another mode, a wait outside 0 to 60 seconds, a webhook_dedup.sources row whose intake settings do not check, or a stored key that cannot be a key of the scheme (named by id, never echoed); 55000 secrets NULL and no key of the source for the scheme valid at at; 25006 on a standby or in a read-only transaction, once it would write.';
COMMENT ON FUNCTION webhook_dedup.webhook_advance(text, text, timestamptz, text, bigint) IS
  'webhook_dedup.webhook_advance(source, entity_id, source_updated_at, event_id => NULL, sequence => NULL) -> boolean. The out-of-order guard: true when the event is newer than every event seen for (source, entity_id) (apply it; the watermark moves), false when it is older (skip it; nothing changed). Ties on source_updated_at: the same event_id is an idempotent re-apply (true); with both sequences given the greater wins; any other tie is refused (false). One atomic upsert on webhook_dedup.watermarks; concurrent advances end at the newest event in any order. Errors: 22004 NULL source, entity_id or source_updated_at; 22023 empty or over 255 characters, an infinite time. See docs/ordering.md.';
COMMENT ON FUNCTION webhook_dedup.webhook_monotonic_guard() IS
  'Trigger function for the caller''s own tables: CREATE TRIGGER ... BEFORE INSERT OR UPDATE ... FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard(''source_updated_at''). Skips an update whose new value of the named timestamptz/timestamp column is older than the stored one (the statement reports zero rows), also in INSERT ... ON CONFLICT DO UPDATE. Stored NULL: passes; incoming NULL over a stored value: skipped; equal: passes; inserts pass. Errors at trigger time: 22023 not exactly one argument; 42703 no such column; 42804 not a timestamp type; 39P01 not a BEFORE row trigger on INSERT or UPDATE, or called as a plain function (SELECT webhook_dedup.webhook_monotonic_guard()).';

-- The per-backend cache of per-source settings and its trigger.
CREATE FUNCTION webhook_dedup.sources_changed()
    RETURNS TRIGGER
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'sources_changed_wrapper';
-- Every backend caches per-source settings (src/store/sources.rs); a
-- change of webhook_dedup.sources empties those caches when it commits.
CREATE TRIGGER sources_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_dedup.sources
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_dedup.sources_changed();

-- How webhook_receive reads a source's deliveries where its provider
-- profile does not (src/intake.rs).
ALTER TABLE webhook_dedup.sources
    ADD COLUMN event_id_from        text,
    ADD COLUMN event_type_from      text,
    ADD COLUMN event_time_from      text,
    ADD COLUMN event_time_format    text,
    ADD COLUMN fingerprint_pointers text[],
    ADD COLUMN replay_guard         boolean,
    ADD COLUMN accept_event_types   text[];
COMMENT ON COLUMN webhook_dedup.sources.event_id_from IS 'Where webhook_receive reads the event id (what the idempotency key is built from): header:<name> (an HTTP field name, RFC 9110 section 5.1, any case) or a JSON pointer into the body (RFC 6901, e.g. /data/id). A string or number value; empty or absent is missing_event_id. NULL: the provider profile''s (webhook_dedup.providers). 22023 when invalid.';
COMMENT ON COLUMN webhook_dedup.sources.event_type_from IS 'Where webhook_receive reads the event type, as event_id_from. NULL: the provider profile''s.';
COMMENT ON COLUMN webhook_dedup.sources.event_time_from IS 'Where webhook_receive reads the event time (what webhook_advance orders by), as event_id_from; set together with event_time_format. NULL: the provider profile''s.';
COMMENT ON COLUMN webhook_dedup.sources.event_time_format IS 'How the event time is written: unix_seconds, unix_milliseconds (digits, a JSON number or string) or rfc3339. Set exactly when event_time_from is.';
COMMENT ON COLUMN webhook_dedup.sources.fingerprint_pointers IS 'What the key''s fingerprint covers (a later delivery of the key with another fingerprint is a conflict): JSON pointers (RFC 6901; at most 64) whose values are hashed as one RFC 8785 canonical JSON object, so that what the provider changes between attempts (attempt counters, delivery metadata) is left out; an empty array: the raw body bytes. NULL: the provider profile''s rule (webhook_dedup.providers.fingerprint), else the raw body.';
COMMENT ON COLUMN webhook_dedup.sources.replay_guard IS 'Whether webhook_receive claims a replay guard per delivery (webhook_dedup.replay_guards): a signed body already received under another event id is answered duplicate instead of being processed again. For sources whose event id the signature does not cover. NULL: on for github, shopify, linear and twilio (their ids are in headers they do not sign) and for a source whose event_id_from is a header its scheme does not sign (a generic hmac source), else off.';
COMMENT ON COLUMN webhook_dedup.sources.accept_event_types IS 'The event types the source wants (at most 1000 entries; an entry ending in * matches every type starting with what precedes it, e.g. invoice.*). Other verified deliveries, and deliveries without an event type, are answered outcome ignored: nothing stored, counted as ignored. NULL: every type.';
COMMENT ON TABLE webhook_dedup.sources IS
  'Per-source settings: lease (the lease a claim or webhook_next gives when the call passes none; else webhook_dedup.default_lease), max_attempts (after which webhook_fail dead-letters; else webhook_dedup.max_attempts), retention (else webhook_dedup.retention), tolerance (webhook_receive''s replay window; else the provider''s default), provider (the profile for retention_warnings), and how webhook_receive reads the source''s deliveries: event_id_from, event_type_from, event_time_from and event_time_format, fingerprint_pointers, replay_guard, accept_event_types (docs/providers.md, "Custom sources"). NULL columns fall back to the settings and the provider profile.';

CREATE FUNCTION webhook_dedup."source_intake_valid"(
	"source" TEXT, /* Option < & str > */
	"event_id_from" TEXT, /* Option < & str > */
	"event_type_from" TEXT, /* Option < & str > */
	"event_time_from" TEXT, /* Option < & str > */
	"event_time_format" TEXT, /* Option < & str > */
	"fingerprint_pointers" TEXT[], /* :: std :: option :: Option < Array < '_, & str > > */
	"accept_event_types" TEXT[] /* :: std :: option :: Option < Array < '_, & str > > */
) RETURNS bool /* bool */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'source_intake_valid_wrapper';
-- A source's intake settings are checked when written, by the parser
-- webhook_receive uses (src/intake.rs): an invalid one is 22023 naming the
-- column, not a delivery that fails later.
ALTER TABLE webhook_dedup.sources ADD CONSTRAINT sources_intake
  CHECK (webhook_dedup.source_intake_valid(source, event_id_from, event_type_from, event_time_from,
                                           event_time_format, fingerprint_pointers, accept_event_types));
COMMENT ON FUNCTION webhook_dedup.source_intake_valid(text, text, text, text, text, text[], text[]) IS
  'source_intake_valid(source, event_id_from, event_type_from, event_time_from, event_time_format, fingerprint_pointers, accept_event_types) -> true, or 22023 naming the column and the problem (never false): the check constraint sources_intake of webhook_dedup.sources. Locations are header:<name> (RFC 9110 field name) or a JSON pointer (RFC 6901); event_time_format unix_seconds, unix_milliseconds or rfc3339, set exactly with event_time_from; fingerprint_pointers at most 64 JSON pointers (empty: the raw body); accept_event_types 1 to 1000 entries of 1 to 255 characters, * only at the end.';

-- Verification keys kept in the database (src/api/secrets.rs).
CREATE FUNCTION webhook_dedup."add_secret"(
	"source" TEXT,
	"secret" TEXT,
	"not_before" timestamp with time zone DEFAULT now(),
	"not_after" timestamp with time zone DEFAULT NULL,
	"note" TEXT DEFAULT NULL
) RETURNS INT
VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'add_secret_wrapper';
CREATE FUNCTION webhook_dedup."retire_secret"(
	"source" TEXT,
	"key_id" INT,
	"not_after" timestamp with time zone DEFAULT now()
) RETURNS timestamp with time zone
VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'retire_secret_wrapper';
CREATE FUNCTION webhook_dedup."list_secrets"(
	"source" TEXT DEFAULT NULL
) RETURNS TABLE (
	"id" INT, 
	"source" TEXT, 
	"not_before" timestamp with time zone, 
	"not_after" timestamp with time zone, 
	"created_at" timestamp with time zone, 
	"valid_now" bool, 
	"fingerprint" TEXT, 
	"note" TEXT, 
	"scheme" TEXT 
)
STABLE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'list_secrets_wrapper';
-- and caches their keys (src/store/secrets.rs) the same way.
CREATE TRIGGER source_secrets_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_dedup.source_secrets
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_dedup.sources_changed();
-- Only the extension's own triggers call it (a trigger fires whatever
-- EXECUTE says): nobody else may attach it to a table, where each statement
-- would empty every backend's caches of settings and keys.
REVOKE ALL ON FUNCTION webhook_dedup.sources_changed() FROM PUBLIC;
COMMENT ON FUNCTION webhook_dedup.sources_changed() IS
  'Trigger function of sources_changed on webhook_dedup.sources and source_secrets_changed on webhook_dedup.source_secrets: sends a relation cache invalidation of the table, which empties every backend''s cache of per-source settings and keys when the change commits. 39P01 when called other than by a trigger.';
COMMENT ON FUNCTION webhook_dedup.add_secret(text, text, timestamptz, timestamptz, text) IS
  'add_secret(source, secret, not_before => now(), not_after => NULL, note => NULL) -> integer: stores a verification key of source (a provider''s secret, or an asymmetric scheme''s public key) valid from not_before (inclusive) until not_after (exclusive; NULL: no end) and returns its id. webhook_dedup.webhook_receive(..., secrets => NULL) verifies with the source''s keys valid at the delivery''s time. The secret is never returned or echoed. Executable by webhook_dedup_operator. Errors: 22004 NULL source, secret or not_before; 22023 a source of 0 or over 255 characters, an empty or whitespace-padded secret, a secret that is no key of the source''s scheme (its provider in webhook_dedup.sources, else its name, when that is a scheme: a Standard Webhooks whsec_ secret in canonical base64, an Ed25519 or P-256 public key), infinite times, not_after not after not_before. The key is stored with that scheme (source_secrets.scheme) and verifies only it, whatever the source''s provider says later.';
COMMENT ON FUNCTION webhook_dedup.retire_secret(text, integer, timestamptz) IS
  'retire_secret(source, key_id, not_after => now()) -> timestamptz: ends the key''s validity at not_after (exclusive) and returns it; deliveries at or after it no longer verify with the key. Rotation: add_secret the new key, then retire the old one once the provider signs with the new one (a 24-hour overlap is usual). Executable by webhook_dedup_operator. Errors: 22004 NULL argument; P0002 no such key of the source; 22023 not_after not after the key''s not_before, or infinite.';
COMMENT ON FUNCTION webhook_dedup.list_secrets(text) IS
  'list_secrets(source => NULL) -> rows (id, source, not_before, not_after, created_at, valid_now, fingerprint, note, scheme): the keys of source (NULL: every source) without their values; fingerprint is sha256: and the first 8 hex digits of the secret''s SHA-256 (32 bits: enough to tell keys apart); scheme is the scheme add_secret accepted the key for, the only one it verifies (NULL: the source named no scheme then; any). Executable by webhook_dedup_operator.';


-- Three counters more: ignored (accept_event_types), replayed (the replay
-- guard) and rejected_token_reused (signature_tokens); the views over the
-- counters come back with them.
DROP VIEW webhook_dedup.duplicate_metrics_by_minute, webhook_dedup.duplicate_metrics,
          webhook_dedup.metrics_buckets, webhook_dedup.counters;
ALTER TABLE webhook_dedup.claim_counts
    ADD COLUMN ignored                        bigint NOT NULL DEFAULT 0,
    ADD COLUMN replayed                       bigint NOT NULL DEFAULT 0,
    ADD COLUMN rejected_token_reused          bigint NOT NULL DEFAULT 0;
-- A source is an opaque identifier compared byte for byte, as in the key
-- tables, and one collation of it lets Citus co-locate every per-source
-- table (webhook_dedup.distribute()). The primary keys are rebuilt.
ALTER TABLE webhook_dedup.claim_counts ALTER COLUMN source TYPE text COLLATE "C";
ALTER TABLE webhook_dedup.watermarks ALTER COLUMN source TYPE text COLLATE "C";
COMMENT ON COLUMN webhook_dedup.claim_counts.ignored IS 'webhook_receive deliveries that verified but whose event type the source does not accept (webhook_dedup.sources.accept_event_types; answered ignored, nothing stored).';
COMMENT ON COLUMN webhook_dedup.claim_counts.replayed IS 'webhook_receive deliveries whose signed body the replay guard found under another event id (webhook_dedup.replay_guards; answered from that key, nothing processed). Not counted as deliveries or duplicates: a provider''s retries carry the same id.';
COMMENT ON COLUMN webhook_dedup.claim_counts.rejected_token_reused IS 'webhook_receive deliveries whose signature verified but whose signed token had come before with other content (schemes whose signature covers nothing of the body: mailgun; webhook_dedup.signature_tokens): a copied signature block, refused (verified false, reject_reason token_reused), nothing written. Part of signature_rejections.';

-- The live counters of every node of a distributed install (each node
-- counts the calls it ran, in its own shared memory; docs/distributed.md),
-- else of this server: metrics_live() run on each node through Citus's
-- run_command_on_all_nodes. SECURITY DEFINER: Citus connects to the nodes
-- as the current user, and the command is fixed.
CREATE FUNCTION webhook_dedup.metrics_live_cluster()
RETURNS TABLE (bucket timestamptz, minute boolean, source text, event_type text, counts bigint[])
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  node record;
  distributed boolean := false;
BEGIN
  -- (each statement is parsed when it runs: Citus's catalog is read only
  -- where it exists)
  IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    distributed := EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS p
                            WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'webhook_dedup.claim_counts'::pg_catalog.regclass);
  END IF;
  IF NOT distributed THEN
    RETURN QUERY SELECT l.bucket, l.minute, l.source, l.event_type, l.counts FROM webhook_dedup.metrics_live() AS l;
    RETURN;
  END IF;
  FOR node IN SELECT r.nodeid, r.success, r.result FROM pg_catalog.run_command_on_all_nodes(
      'SELECT COALESCE(pg_catalog.json_agg(l), ''[]'') FROM webhook_dedup.metrics_live() AS l') AS r
  LOOP
    IF NOT node.success THEN
      RAISE WARNING 'webhook_dedup: the live counters of Citus node % could not be read (the flushed ones are in webhook_dedup.claim_counts): %',
        node.nodeid, node.result;
      CONTINUE;
    END IF;
    RETURN QUERY SELECT l.bucket, l.minute, l.source, l.event_type, l.counts
      FROM pg_catalog.json_to_recordset(node.result::pg_catalog.json)
           AS l(bucket timestamptz, minute boolean, source text, event_type text, counts bigint[]);
  END LOOP;
END
$fn$;
COMMENT ON FUNCTION webhook_dedup.metrics_live_cluster() IS
  'The live (not yet flushed) counters as webhook_dedup.metrics_live() returns them, of every node when webhook_dedup is distributed on Citus (webhook_dedup.distribute(); run on each node with run_command_on_all_nodes; a node that does not answer is left out with a WARNING), else of this server. The views over the counters read it.';

-- Metrics: the flushed counters plus the live ones in shared memory, in
-- the column order of src/metrics.rs (Counter::ALL; a pg_test checks it).
CREATE VIEW webhook_dedup.counters AS
SELECT c.bucket, c.source, c.event_type, c.bucket_width, c.deliveries, c.first_claims, c.reclaims,
       c.duplicates_of_completed, c.duplicates_in_progress, c.conflicts, c.retry_later,
       c.unknown_outcome, c.dead_lettered, c.completions, c.stale_completions, c.retries_scheduled,
       c.dead_letters, c.marked_unknown, c.enqueued, c.drained, c.forgotten, c.resolved,
       c.stale_tokens, c.expired_leases, c.rejected_missing_header, c.rejected_malformed_header,
       c.rejected_unsupported_version, c.rejected_no_matching_signature,
       c.rejected_timestamp_too_old, c.rejected_timestamp_too_new, c.missing_event_ids, c.ignored, c.replayed,
       c.rejected_token_reused
  FROM webhook_dedup.claim_counts AS c
UNION ALL
SELECT l.bucket, l.source, l.event_type,
       CASE WHEN l.minute THEN '1 minute'::interval ELSE '1 hour'::interval END, l.counts[1],
       l.counts[2], l.counts[3], l.counts[4], l.counts[5], l.counts[6], l.counts[7], l.counts[8],
       l.counts[9], l.counts[10], l.counts[11], l.counts[12], l.counts[13], l.counts[14],
       l.counts[15], l.counts[16], l.counts[17], l.counts[18], l.counts[19], l.counts[20],
       l.counts[21], l.counts[22], l.counts[23], l.counts[24], l.counts[25], l.counts[26],
       l.counts[27], l.counts[28], l.counts[29], l.counts[30]
  FROM webhook_dedup.metrics_live_cluster() AS l;
COMMENT ON VIEW webhook_dedup.counters IS
  'Every counter per bucket (bucket_width 1 hour: per source and event type; 1 minute: per source, event_type ''''), flushed (webhook_dedup.claim_counts) and live (shared memory, not flushed yet) as separate rows: sum them within one bucket_width (the minute rows count the last two hours again). Columns as webhook_dedup.claim_counts. Read webhook_dedup.duplicate_metrics or duplicate_metrics_by_minute instead unless you need event types.';

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
       END AS duplicate_ratio
  FROM webhook_dedup.counters AS a
 GROUP BY a.source, a.bucket, a.bucket_width;
COMMENT ON VIEW webhook_dedup.metrics_buckets IS
  'webhook_dedup.counters summed per source, bucket and bucket_width over event types, flushed and live together, with duplicates, signature_rejections and duplicate_ratio. Filter on bucket_width (hour and minute rows count the same deliveries); duplicate_metrics and duplicate_metrics_by_minute are this view for one width.';

CREATE VIEW webhook_dedup.duplicate_metrics AS
SELECT m.source, m.bucket, m.deliveries, m.first_claims, m.reclaims, m.duplicates, m.duplicates_of_completed,
       m.duplicates_in_progress, m.conflicts, m.completions, m.stale_completions, m.retry_later,
       m.unknown_outcome, m.dead_lettered, m.retries_scheduled, m.dead_letters, m.marked_unknown, m.enqueued,
       m.drained, m.forgotten, m.resolved, m.stale_tokens, m.expired_leases, m.signature_rejections,
       m.rejected_missing_header, m.rejected_malformed_header, m.rejected_unsupported_version,
       m.rejected_no_matching_signature, m.rejected_timestamp_too_old, m.rejected_timestamp_too_new,
       m.rejected_token_reused,
       m.missing_event_ids, m.ignored, m.replayed, m.duplicate_ratio
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
       m.missing_event_ids, m.ignored, m.replayed, m.duplicate_ratio
  FROM webhook_dedup.metrics_buckets AS m
 WHERE m.bucket_width OPERATOR(pg_catalog.=) '1 minute'::interval
   AND m.bucket OPERATOR(pg_catalog.>=)
       pg_catalog.date_trunc('minute', pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval, 'UTC');

COMMENT ON VIEW webhook_dedup.duplicate_metrics IS
  'Counts per source and hour (bucket, UTC-aligned), flushed plus live: deliveries (webhook_claim and webhook_enqueue calls), first_claims, reclaims (after an expired lease or a due retry, by a claim or webhook_next), duplicates (= duplicates_of_completed + duplicates_in_progress), conflicts (same key, different payload), completions, stale_completions, retry_later, unknown_outcome and dead_lettered (claims answered so), retries_scheduled, dead_letters (keys that became dead_lettered), marked_unknown, enqueued, drained, forgotten, resolved, stale_tokens, expired_leases (swept by maintenance), signature_rejections (webhook_receive deliveries that did not verify, = the sum of the rejected_<reason> columns; rejected_token_reused: a signed token seen before with other content, mailgun), missing_event_ids, ignored (event types the source does not accept), replayed (signed bodies re-sent under another event id, refused by the replay guard), and duplicate_ratio = duplicates / deliveries (NULL without deliveries). What a crash can lose: docs/metrics.md. Empty without shared_preload_libraries. Filter on bucket: the condition reaches the index of webhook_dedup.claim_counts.';
COMMENT ON VIEW webhook_dedup.duplicate_metrics_by_minute IS
  'The columns of webhook_dedup.duplicate_metrics per source and minute, for the last hour (per-minute counts are kept two hours).';

-- Opting in to dumps of the verification keys (they are left out by
-- default, docs/operations.md "Backups"). pg_extension_config_dump works
-- only inside an extension script, so this edits the registration it
-- writes (pg_extension.extconfig and extcondition, parallel arrays).
CREATE FUNCTION webhook_dedup.dump_secrets(include boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  rel pg_catalog.oid := 'webhook_dedup.source_secrets'::pg_catalog.regclass;
  seq pg_catalog.oid := 'webhook_dedup.source_secrets_id_seq'::pg_catalog.regclass;
  ext pg_catalog.oid;
  config pg_catalog.oid[];
  conditions text[];
BEGIN
  IF include IS NULL THEN
    RAISE EXCEPTION 'include must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  SELECT e.oid INTO ext FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'webhook_dedup';
  -- every entry but the keys' table and sequence, in order
  SELECT COALESCE(pg_catalog.array_agg(c.oid ORDER BY c.n), '{}'), COALESCE(pg_catalog.array_agg(c.cond ORDER BY c.n), '{}')
    INTO config, conditions
    FROM pg_catalog.pg_extension AS e,
         LATERAL ROWS FROM (pg_catalog.unnest(e.extconfig), pg_catalog.unnest(e.extcondition))
           WITH ORDINALITY AS c(oid, cond, n)
   WHERE e.oid OPERATOR(pg_catalog.=) ext AND c.oid OPERATOR(pg_catalog.<>) ALL (ARRAY[rel, seq]);
  IF include THEN
    config := config OPERATOR(pg_catalog.||) ARRAY[rel, seq];
    conditions := conditions OPERATOR(pg_catalog.||) ARRAY['', ''];
  END IF;
  UPDATE pg_catalog.pg_extension AS e
     SET extconfig = CASE WHEN pg_catalog.cardinality(config) OPERATOR(pg_catalog.=) 0 THEN NULL ELSE config END,
         extcondition = CASE WHEN pg_catalog.cardinality(conditions) OPERATOR(pg_catalog.=) 0 THEN NULL ELSE conditions END
   WHERE e.oid OPERATOR(pg_catalog.=) ext;
  RETURN include;
END
$$;
COMMENT ON FUNCTION webhook_dedup.dump_secrets(boolean) IS
  'dump_secrets(include) -> boolean: whether pg_dump dumps the rows of webhook_dedup.source_secrets (the verification keys) with the other tables; false by default, so that dumps, which often travel further than the database, hold no secret. Returns include. Executable by webhook_dedup_operator. Errors: 22004 NULL.';

-- As in src/sql/finalize.sql:
-- Privileges (docs/security.md). The functions are the only way in: no
-- role but the extension's owner holds a privilege on a table (the one
-- exception: the operator role configures webhook_dedup.sources). Every
-- function that changes state runs as SECURITY DEFINER, owned by the
-- extension's owner, with search_path pinned to pg_catalog, pg_temp (its
-- statements name every object schema-qualified as well), and is executable
-- only by the role for its job:
--   webhook_dedup_receiver  claim, complete, fail, checkpoint, extend, mark
--                           unknown, receive, enqueue, next, advance;
--   webhook_dedup_operator  resolve, forget, run_maintenance, flush_metrics,
--                           the rows of webhook_dedup.sources, the keys of
--                           webhook_dedup.source_secrets (add, retire, list:
--                           never their values); reads as below;
--   webhook_dedup_reader    the views and read-only functions (also granted
--                           to pg_monitor, for exporters).
-- The roles are cluster-wide NOLOGIN group roles, created here when
-- missing (every database of the cluster shares them; DROP EXTENSION
-- leaves them); grant them to your login roles. Signature verification,
-- key derivation and signing change nothing and stay executable by PUBLIC.
DO $$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['webhook_dedup_receiver', 'webhook_dedup_operator', 'webhook_dedup_reader'] LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles AS x WHERE x.rolname OPERATOR(pg_catalog.=) r) THEN
      EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
    -- a role made beforehand by someone else (CREATEROLE) must not be a
    -- way in: it may neither log in nor be administered by a non-superuser
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_roles AS x
                   WHERE x.rolname OPERATOR(pg_catalog.=) r AND (x.rolcanlogin OR x.rolsuper OR x.rolcreaterole
                                                                 OR x.rolbypassrls))
       OR EXISTS (SELECT FROM pg_catalog.pg_auth_members AS m
                    JOIN pg_catalog.pg_roles AS x ON x.oid OPERATOR(pg_catalog.=) m.roleid
                    JOIN pg_catalog.pg_roles AS holder ON holder.oid OPERATOR(pg_catalog.=) m.member
                   WHERE x.rolname OPERATOR(pg_catalog.=) r AND m.admin_option AND NOT holder.rolsuper) THEN
      RAISE EXCEPTION 'webhook_dedup: role % exists and can log in, is privileged, or is administered by a role that is not superuser', r
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'The extension grants this role what receivers or operators may do. Drop it, or make it NOLOGIN NOSUPERUSER NOCREATEROLE NOBYPASSRLS without ADMIN holders, and try again.';
    END IF;
  END LOOP;
END
$$;
COMMENT ON ROLE webhook_dedup_receiver IS
  'webhook_dedup: may claim, complete, fail, checkpoint, extend and mark keys unknown, receive, enqueue, take (webhook_next) and advance watermarks, through the functions only. Grant it to a receiver''s login role.';
COMMENT ON ROLE webhook_dedup_operator IS
  'webhook_dedup: may resolve and forget keys, run maintenance, flush the counters and configure webhook_dedup.sources; reads what webhook_dedup_reader reads.';
COMMENT ON ROLE webhook_dedup_reader IS
  'webhook_dedup: may read the views of schema webhook_dedup (no payload, header or claim token is in any) and call its read-only functions.';
GRANT webhook_dedup_reader TO webhook_dedup_operator;

-- Nothing but what follows: every privilege on the schema's relations,
-- whoever it was granted to (PUBLIC, default privileges of the installing
-- role, an earlier version), is revoked first. (The update grants back the
-- table privileges a DBA gave on 0.1.0's tables, at its end.)
DO $$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT DISTINCT c.oid::pg_catalog.regclass AS rel, c.relkind, a.grantee
             FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
            WHERE c.relnamespace OPERATOR(pg_catalog.=) 'webhook_dedup'::pg_catalog.regnamespace
              AND a.grantee OPERATOR(pg_catalog.<>) c.relowner LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s',
                              CASE WHEN g.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, g.rel,
                              CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                   ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END);
  END LOOP;
END
$$;
-- Every role may look names up in the schema: the functions that change
-- nothing (verification, key derivation, signing, the trigger for your own
-- tables) live here and are PUBLIC's, as they were in the extension's
-- schema before. USAGE grants no access to a table, view or function:
-- those are granted one by one below (and EXECUTE on every function that
-- changes state is revoked from PUBLIC).
GRANT USAGE ON SCHEMA webhook_dedup TO PUBLIC;

-- Each function that changes state, with the role that may call it.
DO $$
DECLARE
  f record;
  g pg_catalog.oid;
BEGIN
  FOR f IN SELECT x.signature::pg_catalog.regprocedure AS fn, x.role FROM (VALUES
      ('webhook_dedup.webhook_claim(text, text, bytea, interval, text)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_claim_many(text, text[], interval, text)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_complete(text, text, uuid, jsonb)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_fail(text, text, uuid, text, boolean, interval)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_mark_unknown(text, text, uuid, text)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_checkpoint(text, text, uuid, text)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_extend_lease(text, text, uuid, interval)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean, interval,'
       ' timestamptz, text, text, text, text, text, text, interval)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_enqueue(text, text, bytea, text, jsonb)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_next(text, interval, integer)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_advance(text, text, timestamptz, text, bigint)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_resolve(text, text, text, jsonb)', 'webhook_dedup_operator'),
      ('webhook_dedup.webhook_forget(text, text)', 'webhook_dedup_operator'),
      ('webhook_dedup.run_maintenance()', 'webhook_dedup_operator'),
      ('webhook_dedup.flush_metrics()', 'webhook_dedup_operator'),
      ('webhook_dedup.add_secret(text, text, timestamptz, timestamptz, text)', 'webhook_dedup_operator'),
      ('webhook_dedup.retire_secret(text, integer, timestamptz)', 'webhook_dedup_operator'),
      ('webhook_dedup.list_secrets(text)', 'webhook_dedup_operator'),
      ('webhook_dedup.dump_secrets(boolean)', 'webhook_dedup_operator')) AS x(signature, role)
  LOOP
    EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f.fn);
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.fn);
    -- and from anyone else (default privileges, grants made on 0.1.0, where
    -- EXECUTE alone changed nothing): under SECURITY DEFINER it would
    FOR g IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
              WHERE p.oid OPERATOR(pg_catalog.=) f.fn AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
                AND a.grantee OPERATOR(pg_catalog.<>) 0 LOOP
      EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %I', f.fn, pg_catalog.pg_get_userbyid(g));
    END LOOP;
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f.fn, f.role);
  END LOOP;
END
$$;
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_dedup.sources TO webhook_dedup_operator;

-- Reading: the views run with their owner's rights, so no access to
-- webhook_dedup.keys (payloads, headers, tokens) is needed.
REVOKE ALL ON FUNCTION webhook_dedup.duplicate_rate_alerts(double precision, interval), webhook_dedup.metrics_live(),
                       webhook_dedup.metrics_live_cluster(), webhook_dedup.provider_profiles(),
                       webhook_dedup.default_retention(), webhook_dedup.source_has_history(text)
  FROM PUBLIC;
-- The two that run as their owner, from anyone else too (default
-- privileges of the installing role).
DO $$
DECLARE
  f pg_catalog.regprocedure;
  g pg_catalog.oid;
BEGIN
  FOREACH f IN ARRAY ARRAY['webhook_dedup.metrics_live_cluster()', 'webhook_dedup.source_has_history(text)']::pg_catalog.regprocedure[]
  LOOP
    FOR g IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
              WHERE p.oid OPERATOR(pg_catalog.=) f AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
                AND a.grantee OPERATOR(pg_catalog.<>) 0 LOOP
      EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %I', f, pg_catalog.pg_get_userbyid(g));
    END LOOP;
  END LOOP;
END
$$;
GRANT SELECT ON webhook_dedup.counters, webhook_dedup.metrics_buckets,
                webhook_dedup.duplicate_metrics, webhook_dedup.duplicate_metrics_by_minute,
                webhook_dedup.key_states, webhook_dedup.stuck_claims, webhook_dedup.dead_letters,
                webhook_dedup.unknown_outcomes, webhook_dedup.conflicts, webhook_dedup.key_history,
                webhook_dedup.lapsed_leases, webhook_dedup.queue_backlog,
                webhook_dedup.retention_warnings, webhook_dedup.providers, webhook_dedup.maintenance_runs
  TO webhook_dedup_reader, pg_monitor;
GRANT EXECUTE ON FUNCTION webhook_dedup.duplicate_rate_alerts(double precision, interval),
                          webhook_dedup.metrics_live(), webhook_dedup.metrics_live_cluster(),
                          webhook_dedup.provider_profiles(), webhook_dedup.default_retention(),
                          webhook_dedup.source_has_history(text)
  TO webhook_dedup_reader, pg_monitor;

-- 0.1.0's receivers called the functions with table privileges of their
-- own; the roles that held them keep working: a role that could insert or
-- update keys (or watermarks, for webhook_advance) becomes a
-- webhook_dedup_receiver, one that could delete keys
-- (webhook_forget) also a webhook_dedup_operator, one that could only read
-- them a webhook_dedup_reader. Their table privileges are kept too (below);
-- revoke them once nothing reads the tables directly (docs/security.md).
DO $$
DECLARE
  r pg_catalog.jsonb;
  role_name text;
BEGIN
  FOR r IN SELECT * FROM pg_catalog.jsonb_array_elements(
             pg_catalog.current_setting('webhook_dedup_upgrade.grants')::pg_catalog.jsonb -> 'relations') LOOP
    CONTINUE WHEN (r ->> 0) OPERATOR(pg_catalog.<>) ALL (ARRAY['keys', 'watermarks'])
               OR (r ->> 2)::pg_catalog.oid OPERATOR(pg_catalog.=) 0
               OR ((r ->> 0) OPERATOR(pg_catalog.=) 'watermarks'
                   AND (r ->> 3) OPERATOR(pg_catalog.<>) ALL (ARRAY['INSERT', 'UPDATE']));
    role_name := pg_catalog.quote_ident(pg_catalog.pg_get_userbyid((r ->> 2)::pg_catalog.oid));
    EXECUTE pg_catalog.format('GRANT %s TO %s',
      CASE r ->> 3 WHEN 'INSERT' THEN 'webhook_dedup_receiver' WHEN 'UPDATE' THEN 'webhook_dedup_receiver'
                   WHEN 'DELETE' THEN 'webhook_dedup_operator' ELSE 'webhook_dedup_reader' END,
      role_name);
    RAISE NOTICE 'webhook_dedup: role % held % on webhook_dedup.%; it is now a member of the role for that job, and keeps the privilege until you revoke it',
      role_name, r ->> 3, r ->> 0;
  END LOOP;
END
$$;

-- pg_dump dumps the rows of every table callers write (0.1.0 registered
-- none, so its dumps held no keys); as in src/sql/finalize.sql.
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.keys', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.payloads', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.sources', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.watermarks', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.replay_guards', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.signature_tokens', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.conflict_log', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.conflict_log_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.claim_counts', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.maintenance_runs', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.maintenance_runs_id_seq', '');

-- The table privileges kept at the start, granted again on the rebuilt
-- objects (a grant already there is a no-op), except PUBLIC's: 0.2.0 gives
-- PUBLIC nothing that changes state.
DO $$
DECLARE
  r pg_catalog.jsonb;
  target text;
BEGIN
  FOR r IN SELECT * FROM pg_catalog.jsonb_array_elements(
             pg_catalog.current_setting('webhook_dedup_upgrade.grants')::pg_catalog.jsonb -> 'relations') LOOP
    CONTINUE WHEN (r ->> 2)::pg_catalog.oid OPERATOR(pg_catalog.=) 0;
    FOREACH target IN ARRAY CASE WHEN (r ->> 0) OPERATOR(pg_catalog.=) 'keys' THEN ARRAY['keys', 'payloads']
                                 ELSE ARRAY[r ->> 0] END LOOP
      IF pg_catalog.to_regclass(pg_catalog.format('webhook_dedup.%I', target)) IS NOT NULL THEN
        EXECUTE pg_catalog.format('GRANT %s ON %s webhook_dedup.%I TO %I%s', r ->> 3,
                                  CASE WHEN (r ->> 1) OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                                  target, pg_catalog.pg_get_userbyid((r ->> 2)::pg_catalog.oid),
                                  CASE WHEN (r ->> 4)::boolean THEN ' WITH GRANT OPTION' ELSE '' END);
      END IF;
    END LOOP;
  END LOOP;
END
$$;


-- webhook_dedup.distribute() (src/sql/distribute.sql, unchanged).
-- Distributed mode on Citus (docs/distributed.md): webhook_dedup.distribute().
--
-- A source is the unit of distribution: every table that holds per-source
-- state is hash-distributed by its `source` column and co-located with the
-- keys, so one source's keys, payloads, replay guards, watermarks,
-- conflicts and counts live in one shard, and every single-key function
-- (all of them take the source as an argument) runs where that shard is.
-- The per-source settings and keys are reference tables (a copy on every
-- node). Maintenance runs stay per node (webhook_dedup.maintenance_runs is
-- left local).

CREATE FUNCTION webhook_dedup.distribute(shard_count integer DEFAULT NULL)
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
                last_step, last_error, deliveries, conflicts, result, first_seen_at, last_seen_at, completed_at)
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
REVOKE ALL ON FUNCTION webhook_dedup.distribute(integer) FROM PUBLIC;
COMMENT ON FUNCTION webhook_dedup.distribute(integer) IS
  'distribute(shard_count => NULL) -> text. Citus only, on the coordinator, as a superuser: makes webhook_dedup distributed by source. keys, payloads, replay_guards, signature_tokens, conflict_log (primary key (id, source)), watermarks and claim_counts become hash-distributed tables co-located on source; sources and source_secrets reference tables; the single-key functions (webhook_claim, webhook_receive, webhook_complete, webhook_fail, ...) are delegated by their source argument (webhook_receive''s NULL source by its scheme''s name), so a call outside a transaction block runs on the node that holds the source in one round trip; webhook_dedup_reader and pg_monitor may read the columns the views show (Citus checks a view''s shards with the reader''s rights). Idempotent. shard_count: citus.shard_count for the new tables (NULL: the setting''s value). Errors: 55000 without Citus, off the coordinator, or when a node does not preload webhook_dedup; 22023 shard_count outside 1..64000. docs/distributed.md.';
