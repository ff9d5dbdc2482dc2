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

-- The counts waiting in this session, as rows of the log. The setting is
-- the session's, which its role may set to anything: only entries _count
-- could have made are kept (a known counter, a source of 1 to 255
-- characters, a count from 1 to a million, a minute from a day ago to
-- now), so that a forged one can neither take counts away nor add a
-- counter of its own; text that is no JSON object fails the session's
-- own calls (22P02), nobody else's.
CREATE FUNCTION webhook_dedup._waiting_counts() RETURNS SETOF webhook_dedup._count_log
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT w.at, w.source, w.event_type, w.counter, w.delivery, w.n
    FROM (SELECT pg_catalog.to_timestamp((e.key::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 0)::double precision) AS at,
                 e.key::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 1 AS source, e.key::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 2 AS event_type,
                 e.key::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 3 AS counter,
                 (e.key::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 4)::boolean AS delivery, e.value::bigint AS n
            FROM pg_catalog.current_setting('webhook_dedup.unwritten_counts', true) AS s(raw),
                 pg_catalog.jsonb_each_text(CASE WHEN s.raw OPERATOR(pg_catalog.<>) ''
                                                 THEN s.raw::pg_catalog.jsonb OPERATOR(pg_catalog.->) 'n' END) AS e) AS w
   WHERE w.counter OPERATOR(pg_catalog.=) ANY ((webhook_dedup._metrics_rules()).counters)
     AND pg_catalog.char_length(w.source) OPERATOR(pg_catalog.>=) 1
     AND pg_catalog.char_length(w.source) OPERATOR(pg_catalog.<=) 255
     AND w.n OPERATOR(pg_catalog.>=) 1 AND w.n OPERATOR(pg_catalog.<=) 1000000
     AND w.at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()
     AND w.at OPERATOR(pg_catalog.>) (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) '1 day'::interval)
$$;
REVOKE ALL ON FUNCTION webhook_dedup._waiting_counts() FROM PUBLIC;

-- The rows of the count log, read as its owner: for metrics_live, which
-- runs as its caller (a reader), executable by those metrics_live is
-- granted to (editions/sql/internal/privileges.sql).
CREATE FUNCTION webhook_dedup._logged_counts() RETURNS SETOF webhook_dedup._count_log
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT c.at, c.source, c.event_type, c.counter, c.delivery, c.n FROM webhook_dedup._count_log AS c
$$;
REVOKE ALL ON FUNCTION webhook_dedup._logged_counts() FROM PUBLIC;

-- Append the counts waiting in the session, if any.
CREATE FUNCTION webhook_dedup._write_counts() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  raw pg_catalog.text := pg_catalog.current_setting('webhook_dedup.unwritten_counts', true);
BEGIN
  IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
    RETURN;
  END IF;
  INSERT INTO webhook_dedup._count_log SELECT * FROM webhook_dedup._waiting_counts();
  PERFORM pg_catalog.set_config('webhook_dedup.unwritten_counts', '', false);
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
  now pg_catalog.timestamptz := pg_catalog.clock_timestamp();
  minute bigint := pg_catalog.floor(EXTRACT(epoch FROM now) OPERATOR(pg_catalog./) 60)::bigint OPERATOR(pg_catalog.*) 60;
  raw pg_catalog.text;
  waiting pg_catalog.jsonb;
  key pg_catalog.text;
BEGIN
  IF pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN
    IF pg_catalog.current_setting('webhook_dedup.unwritten_counts', true) OPERATOR(pg_catalog.<>) '' THEN
      PERFORM webhook_dedup._write_counts();
    END IF;
    INSERT INTO webhook_dedup._count_log (at, source, event_type, counter, delivery, n)
      VALUES (pg_catalog.to_timestamp(minute::double precision), source, event_type, counter, delivery, 1);
    RETURN;
  END IF;
  raw := pg_catalog.current_setting('webhook_dedup.unwritten_counts', true);
  waiting := CASE WHEN raw OPERATOR(pg_catalog.<>) '' THEN raw::pg_catalog.jsonb
                  ELSE pg_catalog.jsonb_build_object('since', EXTRACT(epoch FROM now), 'n', '{}'::pg_catalog.jsonb) END;
  key := pg_catalog.jsonb_build_array(minute, source, event_type, counter, delivery)::pg_catalog.text;
  waiting := pg_catalog.jsonb_set(waiting, ARRAY['n', key],
                                  pg_catalog.to_jsonb(COALESCE((waiting OPERATOR(pg_catalog.->) 'n'
                                                                OPERATOR(pg_catalog.->>) key)::bigint, 0)
                                                      OPERATOR(pg_catalog.+) 1));
  PERFORM pg_catalog.set_config('webhook_dedup.unwritten_counts', waiting::pg_catalog.text, false);
  -- (a read-only transaction, or a standby, cannot append: its counts wait
  -- for the session's next writable call)
  IF EXTRACT(epoch FROM now) OPERATOR(pg_catalog.-) (waiting OPERATOR(pg_catalog.->>) 'since')::numeric
       OPERATOR(pg_catalog.>=) 1
     AND pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off' THEN
    PERFORM webhook_dedup._write_counts();
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._count(text, text, text, boolean) FROM PUBLIC;
