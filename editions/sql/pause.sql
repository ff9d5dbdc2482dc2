-- Pausing a source's queue (src/api/pause.rs): pause records who paused it
-- and parks its waiting keys; resume clears the pause and puts them back,
-- over the native store's statements. Single-server in both editions.

--@ webhook_dedup.pause
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM webhook_dedup._check_source(source);
  PERFORM FROM webhook_dedup._s_sources_pause(source, pg_catalog.clock_timestamp(), SESSION_USER, reason)
    AS p(paused_at pg_catalog.timestamptz);
  RETURN (SELECT p.count FROM webhook_dedup._s_queue_park(source) AS p(count bigint));
END

--@ webhook_dedup.resume
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM webhook_dedup._check_source(source);
  PERFORM webhook_dedup._s_sources_resume(source);
  RETURN (SELECT p.count FROM webhook_dedup._s_queue_unpark(source) AS p(count bigint));
END
