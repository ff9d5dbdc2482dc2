-- webhook_dedup: roles, grants and revokes (run after every object they
-- name exists: the views, the PL/pgSQL functions and the generated ones).

-- Privileges (docs/security.md). The functions are the only way in: no
-- role but the extension's owner holds a privilege on a table (the one
-- exception: the operator role configures webhook_dedup.sources). Every
-- function that changes state runs as SECURITY DEFINER, owned by the
-- extension's owner, with search_path pinned to pg_catalog, pg_temp (its
-- statements name every object schema-qualified as well), and is executable
-- only by the role for its job:
--   webhook_dedup_receiver  claim, complete, fail, checkpoint, extend, mark
--                           unknown, receive, enqueue, reconcile, next, advance;
--   webhook_dedup_operator  resolve, forget, pause, resume, redact, export, redrive and
--                           its cancel, run_maintenance,
--                           flush_metrics,
--                           the rows of webhook_dedup.sources, the keys of
--                           webhook_dedup.source_secrets (add, retire, list:
--                           never their values); reads as below;
--   webhook_dedup_reader    the views and read-only functions (also granted
--                           to pg_monitor, for exporters), unseen (which
--                           reads keys as the owner, and only says which
--                           ids have none).
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
      ('webhook_dedup.webhook_outbox_put(text, text, uuid, text, text, jsonb, integer, text, boolean)',
       'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_next(text, interval, integer)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_ack(bigint, uuid, jsonb)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_fail(bigint, uuid, text, boolean, interval)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_unknown(bigint, uuid, text)', 'webhook_dedup_receiver'),
      ('webhook_dedup.webhook_outbox_resolve(bigint, text, jsonb)', 'webhook_dedup_operator'),
      ('webhook_dedup.webhook_resolve(text, text, text, jsonb)', 'webhook_dedup_operator'),
      ('webhook_dedup.webhook_forget(text, text)', 'webhook_dedup_operator'),
      ('webhook_dedup.pause(text, text)', 'webhook_dedup_operator'),
      ('webhook_dedup.resume(text)', 'webhook_dedup_operator'),
      ('webhook_dedup.redact(text, text, timestamptz, text)', 'webhook_dedup_operator'),
      ('webhook_dedup.purge_redactions(boolean)', 'webhook_dedup_operator'),
      ('webhook_dedup.unseen(text, text[], text, text, text)', 'webhook_dedup_reader'),
      ('webhook_dedup.export_deliveries(text, timestamptz, timestamptz, text[], text[], boolean, integer)',
       'webhook_dedup_operator'),
      ('webhook_dedup.redrive(text, text[], timestamptz, timestamptz, text[], bigint, boolean)',
       'webhook_dedup_operator'),
      ('webhook_dedup.cancel_redrive(bigint)', 'webhook_dedup_operator'),
      ('webhook_dedup.reconcile(text, text, bytea, text, jsonb, text, text, text)', 'webhook_dedup_receiver'),
      ('webhook_dedup.run_maintenance()', 'webhook_dedup_operator'),
      ('webhook_dedup.flush_metrics()', 'webhook_dedup_operator'),
      ('webhook_dedup.add_secret(text, text, timestamptz, timestamptz, text)', 'webhook_dedup_operator'),
      ('webhook_dedup.retire_secret(text, integer, timestamptz)', 'webhook_dedup_operator'),
      ('webhook_dedup.list_secrets(text)', 'webhook_dedup_operator'),
      ('webhook_dedup.dump_secrets(boolean)', 'webhook_dedup_operator'),
      ('webhook_dedup.source_node(text)', 'webhook_dedup_receiver')) AS x(signature, role)
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
-- Which node holds a source: receivers route by it, operators and readers
-- look (EXECUTE for webhook_dedup_receiver above).
GRANT EXECUTE ON FUNCTION webhook_dedup.source_node(text) TO webhook_dedup_operator, webhook_dedup_reader;
-- Operators configure sources with SQL, all but the pause: paused_at,
-- paused_by and pause_reason are written by pause() and resume() only,
-- which park and unpark the source's keys with them.
GRANT SELECT, DELETE ON webhook_dedup.sources TO webhook_dedup_operator;
GRANT INSERT (source, lease, max_attempts, retention, tolerance, provider, note, event_id_from, event_type_from,
              event_time_from, event_time_format, fingerprint_pointers, replay_guard, accept_event_types,
              keep_payload, payload_retention),
      UPDATE (source, lease, max_attempts, retention, tolerance, provider, note, event_id_from, event_type_from,
              event_time_from, event_time_format, fingerprint_pointers, replay_guard, accept_event_types,
              keep_payload, payload_retention)
  ON webhook_dedup.sources TO webhook_dedup_operator;
-- Operators read what became of each key of a bulk redrive (outcome:
-- moved, or skipped as changed, gone or no_payload).
GRANT SELECT ON webhook_dedup.redrive_keys TO webhook_dedup_operator;
-- and the record of redactions (who erased how much, and whether it is
-- purged from the data files); DELETE to clear it.
GRANT SELECT, DELETE ON webhook_dedup.redactions TO webhook_dedup_operator;
-- The outbox: nobody but its owner at the table level (an explicit ACL,
-- as an update that revokes what default privileges gave leaves it).
-- Operators reconcile outbox intents with their downstream: they read each
-- intent's request and response (never its lease token).
REVOKE ALL ON webhook_dedup.outbox, webhook_dedup.outbox_id_seq FROM PUBLIC;
GRANT SELECT (id, source, idem_key, operation, target, request, downstream_key, downstream_idempotent, key_attempt,
              state, attempt, lease_expires_at, next_attempt_at, due_at, response, last_error, created_at, leased_at,
              delivered_at, updated_at)
  ON webhook_dedup.outbox TO webhook_dedup_operator;

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
                webhook_dedup.retention_warnings, webhook_dedup.providers, webhook_dedup.maintenance_runs,
                webhook_dedup.outbox_backlog, webhook_dedup.outbox_dead_letters,
                webhook_dedup.outbox_unknown_outcomes, webhook_dedup.downstream_key_limits,
                webhook_dedup.redrive_runs
  TO webhook_dedup_reader, pg_monitor;
GRANT EXECUTE ON FUNCTION webhook_dedup.duplicate_rate_alerts(double precision, interval),
                          webhook_dedup.metrics_live(), webhook_dedup.metrics_live_cluster(),
                          webhook_dedup.provider_profiles(), webhook_dedup.default_retention(),
                          webhook_dedup.source_has_history(text)
  TO webhook_dedup_reader, pg_monitor;
-- Only the extension's own triggers call it (a trigger fires whatever
-- EXECUTE says): nobody else may attach it to a table, where each statement
-- would empty every backend's caches of settings and keys.
REVOKE ALL ON FUNCTION webhook_dedup.sources_changed() FROM PUBLIC;
