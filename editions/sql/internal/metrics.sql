-- Counting without shared memory (the native edition counts in shared
-- memory, src/metrics.rs, and flushes into webhook_dedup.claim_counts).
-- Internal: the owner's alone.
--
-- A count is one row appended to _count_log, an UNLOGGED table without
-- an index: no WAL, no row any two receivers update, so no claim waits
-- for another's count (a counter row updated by every claim would hold
-- its lock until commit and serialise the claims of a source). The
-- append needs a transaction id, which every claim that writes its key
-- has anyway; a duplicate answered from the stored row writes nothing,
-- so its count waits in the session (the setting
-- webhook_dedup.unwritten_counts, a JSON object) until the session's next
-- call that writes, or until it is a second old (then that call takes a
-- transaction id to append it: under a retry storm one per second and
-- session). A session that ends, or a pooler's DISCARD ALL, loses what
-- waits (at most a second of its recent duplicates); a crash loses the
-- unlogged table's rows, as the native edition's shared memory is lost.
-- run_maintenance() moves the rows into webhook_dedup.claim_counts.

CREATE UNLOGGED TABLE webhook_dedup._count_log (
    at         timestamptz NOT NULL,
    source     text        COLLATE "C" NOT NULL,
    event_type text        COLLATE "C",
    counter    text        NOT NULL,
    delivery   boolean     NOT NULL,
    n          bigint      NOT NULL
);
REVOKE ALL ON webhook_dedup._count_log FROM PUBLIC;

-- Append the counts waiting in the session, if any.
CREATE FUNCTION webhook_dedup._write_counts() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  waiting jsonb := NULLIF(pg_catalog.current_setting('webhook_dedup.unwritten_counts', true), '')::jsonb;
BEGIN
  IF waiting IS NULL THEN
    RETURN;
  END IF;
  PERFORM pg_catalog.set_config('webhook_dedup.unwritten_counts', '', false);
  INSERT INTO webhook_dedup._count_log (at, source, event_type, counter, delivery, n)
  SELECT pg_catalog.to_timestamp((e.key::jsonb OPERATOR(pg_catalog.->>) 0)::double precision),
         e.key::jsonb OPERATOR(pg_catalog.->>) 1, e.key::jsonb OPERATOR(pg_catalog.->>) 2,
         e.key::jsonb OPERATOR(pg_catalog.->>) 3, (e.key::jsonb OPERATOR(pg_catalog.->>) 4)::boolean, e.value::bigint
    FROM pg_catalog.jsonb_each_text(waiting OPERATOR(pg_catalog.->) 'n') AS e;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._write_counts() FROM PUBLIC;

-- Count one event of `source` (labelled `event_type`) on `counter` (a
-- column of webhook_dedup.claim_counts); `delivery`: it is a delivery
-- (counted in deliveries too). Appended at once when the transaction has
-- an id, else kept in the session (see above), by the minute.
CREATE FUNCTION webhook_dedup._count(source text, event_type text, counter text, delivery boolean) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  now timestamptz := pg_catalog.clock_timestamp();
  minute bigint := pg_catalog.floor(EXTRACT(epoch FROM now) OPERATOR(pg_catalog./) 60)::bigint OPERATOR(pg_catalog.*) 60;
  waiting jsonb;
  key text;
BEGIN
  IF pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN
    PERFORM webhook_dedup._write_counts();
    INSERT INTO webhook_dedup._count_log (at, source, event_type, counter, delivery, n)
      VALUES (pg_catalog.to_timestamp(minute::double precision), source, event_type, counter, delivery, 1);
    RETURN;
  END IF;
  waiting := COALESCE(NULLIF(pg_catalog.current_setting('webhook_dedup.unwritten_counts', true), '')::jsonb,
                      pg_catalog.jsonb_build_object('since', EXTRACT(epoch FROM now), 'n', '{}'::jsonb));
  key := pg_catalog.jsonb_build_array(minute, source, event_type, counter, delivery)::text;
  waiting := pg_catalog.jsonb_set(waiting, ARRAY['n', key],
                                  pg_catalog.to_jsonb(COALESCE((waiting OPERATOR(pg_catalog.->) 'n'
                                                                OPERATOR(pg_catalog.->>) key)::bigint, 0)
                                                      OPERATOR(pg_catalog.+) 1));
  PERFORM pg_catalog.set_config('webhook_dedup.unwritten_counts', waiting::text, false);
  IF EXTRACT(epoch FROM now) OPERATOR(pg_catalog.-) (waiting OPERATOR(pg_catalog.->>) 'since')::numeric
       OPERATOR(pg_catalog.>=) 1 THEN
    PERFORM webhook_dedup._write_counts();
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._count(text, text, text, boolean) FROM PUBLIC;
