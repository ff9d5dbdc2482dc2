-- Persist-then-process (src/api/queue.rs): webhook_enqueue stores a
-- delivery for the workers, webhook_next leases due keys to one of them
-- (src/engine/queue.rs, next and take_one), over the native store's
-- statements.

--@ webhook_dedup.webhook_enqueue
BEGIN
  PERFORM webhook_dedup._check_key(source, idem_key);
  IF payload IS NULL THEN
    RAISE EXCEPTION 'payload must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN webhook_dedup._enqueue(source, idem_key, payload, pg_catalog.sha256(payload), NULL, event_type, headers, false,
                                NULL, NULL, false);
END

--@ webhook_dedup.webhook_next sql
-- SQL, not PL/pgSQL: the argument source and the column source share a
-- name, which PL/pgSQL refuses; the work is _next's
SELECT * FROM webhook_dedup._next($1, $2, $3)
