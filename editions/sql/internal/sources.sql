-- Helpers of the sources (src/store/sources.rs, src/core key.rs).
-- Internal: the owner's alone.

-- A source's settings, as the native store reads them
-- (src/sql/statements/sources_settings.sql, one row whether or not the
-- source is configured).
CREATE FUNCTION webhook_dedup._source_settings(source text,
  OUT lease interval, OUT max_attempts integer, OUT retention interval, OUT tolerance interval, OUT sources oid,
  OUT configured boolean, OUT event_id_from text, OUT event_type_from text, OUT event_time_from text,
  OUT event_time_format text, OUT fingerprint_pointers text[], OUT replay_guard boolean, OUT accept_event_types text[],
  OUT provider text, OUT paused boolean, OUT keep_payload boolean, OUT payload_retention interval)
LANGUAGE sql STABLE
AS $$
  SELECT * FROM webhook_dedup._s_sources_settings(source) AS s(
    lease interval, max_attempts integer, retention interval, tolerance interval, sources oid, configured boolean,
    event_id_from text, event_type_from text, event_time_from text, event_time_format text,
    fingerprint_pointers text[], replay_guard boolean, accept_event_types text[], provider text, paused boolean,
    keep_payload boolean, payload_retention interval)
$$;
REVOKE ALL ON FUNCTION webhook_dedup._source_settings(text) FROM PUBLIC;

-- A source given to the functions (key.rs, check_source and
-- check_bounded): not empty, at most 255 characters, not the reserved
-- "(overflow)" the metrics count past a database's share under. 22023.
CREATE FUNCTION webhook_dedup._check_source(source text) RETURNS void
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
  IF source OPERATOR(pg_catalog.=) '' THEN
    RAISE EXCEPTION 'source must not be empty' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF pg_catalog.char_length(source) OPERATOR(pg_catalog.>) 255 THEN
    RAISE EXCEPTION 'source is % characters long; the limit is 255', pg_catalog.char_length(source)
      USING ERRCODE = 'invalid_parameter_value', HINT = 'Derive keys with webhook_dedup.webhook_key(), which bounds them.';
  END IF;
  IF source OPERATOR(pg_catalog.=) '(overflow)' THEN
    RAISE EXCEPTION 'source "(overflow)" is reserved: the metrics report the counts of sources past a database''s share under it'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._check_source(text) FROM PUBLIC;
