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
-- (PL/pgSQL, whose plans are kept for the session: an SQL function that
-- is not inlined is planned at each call)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
  SELECT * INTO lease, max_attempts, retention, tolerance, sources, configured, event_id_from, event_type_from,
                event_time_from, event_time_format, fingerprint_pointers, replay_guard, accept_event_types, provider,
                paused, keep_payload, payload_retention
    FROM webhook_dedup._s_sources_settings(source) AS s(
      lease interval, max_attempts integer, retention interval, tolerance interval, sources pg_catalog.oid, configured boolean,
      event_id_from pg_catalog.text, event_type_from pg_catalog.text, event_time_from pg_catalog.text, event_time_format pg_catalog.text,
      fingerprint_pointers pg_catalog.text[], replay_guard boolean, accept_event_types pg_catalog.text[], provider pg_catalog.text, paused boolean,
      keep_payload boolean, payload_retention interval);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._source_settings(text) FROM PUBLIC;

-- A source given to the functions (key.rs, check_source and
-- check_bounded): not empty, at most 255 characters, not the reserved
-- "(overflow)" the metrics count past a database's share under. 22023.
-- Returns true (see _check_bounded).
CREATE FUNCTION webhook_dedup._check_source(source text) RETURNS boolean
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
  RETURN true;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._check_source(text) FROM PUBLIC;

-- A JSON pointer (profile.rs, is_json_pointer): empty or starting with
-- '/', every '~' followed by 0 or 1.
CREATE FUNCTION webhook_dedup._is_json_pointer(text text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (text OPERATOR(pg_catalog.=) '' OR pg_catalog.starts_with(text, '/'))
   AND text OPERATOR(pg_catalog.!~) '~([^01]|$)';
REVOKE ALL ON FUNCTION webhook_dedup._is_json_pointer(text) FROM PUBLIC;

-- Where a source's rule reads a value (intake.rs, Place::parse): 'header:'
-- and a field name of RFC 9110's tchar, or a JSON pointer (RFC 6901, not
-- empty); at most max_pointer_bytes bytes. NULL when valid, else what is
-- wrong.
CREATE FUNCTION webhook_dedup._place_problem(text text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE
  WHEN pg_catalog.octet_length(text) OPERATOR(pg_catalog.>) (webhook_dedup._intake_limits()).max_pointer_bytes
    THEN pg_catalog.format('is longer than %s bytes', (webhook_dedup._intake_limits()).max_pointer_bytes)
  WHEN pg_catalog.starts_with(text, 'header:')
    THEN CASE WHEN pg_catalog.substr(text, 8) OPERATOR(pg_catalog.~) '^[A-Za-z0-9!#$%&''*+.^_`|~-]+$' THEN NULL
              ELSE pg_catalog.format('"%s" names no valid header field (RFC 9110 section 5.1: letters, digits and !#$%%&''*+-.^_`|~)', text) END
  WHEN text OPERATOR(pg_catalog.=) '' OR NOT webhook_dedup._is_json_pointer(text)
    THEN pg_catalog.format('"%s" is neither header:<name> nor a JSON pointer (RFC 6901: "/" followed by tokens in which "~" is followed by 0 or 1)', text)
END;
REVOKE ALL ON FUNCTION webhook_dedup._place_problem(text) FROM PUBLIC;

