-- The sources (src/api/sources.rs).

--@ webhook_dedup.sources_changed
-- The native edition empties each backend's cache of settings and keys
-- here; the SQL edition keeps no cache: every call reads the tables.
BEGIN
  RETURN NULL;
END

--@ webhook_dedup.source_intake_valid
-- The CHECK of webhook_dedup.sources' intake columns (intake.rs,
-- SourceIntake::parse): 22023 naming the column and the problem.
DECLARE
  limits record := webhook_dedup._intake_limits();
  problem pg_catalog.text;
  item pg_catalog.text;
  seen integer := 0;
BEGIN
  problem := webhook_dedup._place_problem(event_id_from);
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION 'webhook_dedup.sources.event_id_from % (source "%")', problem, COALESCE(source, '')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  problem := webhook_dedup._place_problem(event_type_from);
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION 'webhook_dedup.sources.event_type_from % (source "%")', problem, COALESCE(source, '')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  problem := webhook_dedup._place_problem(event_time_from);
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION 'webhook_dedup.sources.event_time_from % (source "%")', problem, COALESCE(source, '')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF event_time_from IS NOT NULL AND event_time_format IS NOT NULL
     AND event_time_format OPERATOR(pg_catalog.<>) ALL (limits.time_formats) THEN
    RAISE EXCEPTION 'webhook_dedup.sources.event_time_format "%" is not one of % (source "%")', event_time_format,
      pg_catalog.array_to_string(limits.time_formats, ', '), COALESCE(source, '') USING ERRCODE = 'invalid_parameter_value';
  ELSIF event_time_from IS NOT NULL AND event_time_format IS NULL THEN
    RAISE EXCEPTION 'webhook_dedup.sources.event_time_format must be set when event_time_from is (source "%")',
      COALESCE(source, '') USING ERRCODE = 'invalid_parameter_value';
  ELSIF event_time_from IS NULL AND event_time_format IS NOT NULL THEN
    RAISE EXCEPTION 'webhook_dedup.sources.event_time_format is set without event_time_from (source "%")',
      COALESCE(source, '') USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF fingerprint_pointers IS NOT NULL THEN
    IF pg_catalog.cardinality(fingerprint_pointers) OPERATOR(pg_catalog.>) limits.max_fingerprint_pointers THEN
      RAISE EXCEPTION 'webhook_dedup.sources.fingerprint_pointers has more than % pointers (source "%")',
        limits.max_fingerprint_pointers, COALESCE(source, '') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR item IN SELECT p FROM pg_catalog.unnest(fingerprint_pointers) AS p LOOP
      IF item IS NULL THEN
        RAISE EXCEPTION 'webhook_dedup.sources.fingerprint_pointers holds a NULL (source "%")', COALESCE(source, '')
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF pg_catalog.octet_length(item) OPERATOR(pg_catalog.>) limits.max_pointer_bytes
         OR NOT webhook_dedup._is_json_pointer(item) THEN
        RAISE EXCEPTION 'webhook_dedup.sources.fingerprint_pointers holds "%", which is no JSON pointer (RFC 6901) of at most % bytes (source "%")',
          item, limits.max_pointer_bytes, COALESCE(source, '') USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END LOOP;
  END IF;
  IF accept_event_types IS NOT NULL THEN
    IF pg_catalog.cardinality(accept_event_types) OPERATOR(pg_catalog.=) 0 THEN
      RAISE EXCEPTION 'webhook_dedup.sources.accept_event_types is empty (NULL accepts every event type) (source "%")',
        COALESCE(source, '') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(accept_event_types) OPERATOR(pg_catalog.>) limits.max_accepted_types THEN
      RAISE EXCEPTION 'webhook_dedup.sources.accept_event_types has more than % entries (source "%")',
        limits.max_accepted_types, COALESCE(source, '') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR item IN SELECT t FROM pg_catalog.unnest(accept_event_types) AS t LOOP
      IF item IS NULL THEN
        RAISE EXCEPTION 'webhook_dedup.sources.accept_event_types holds a NULL (source "%")', COALESCE(source, '')
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF pg_catalog.char_length(item) OPERATOR(pg_catalog.=) 0
         OR pg_catalog.char_length(item) OPERATOR(pg_catalog.>) limits.max_type_chars
         OR (pg_catalog.strpos(item, '*') OPERATOR(pg_catalog.>) 0
             AND pg_catalog.strpos(item, '*') OPERATOR(pg_catalog.<>) pg_catalog.length(item))
         OR item OPERATOR(pg_catalog.=) '*' THEN
        RAISE EXCEPTION 'webhook_dedup.sources.accept_event_types holds "%": an entry has 1 to % characters and at most one *, at its end after a prefix (source "%")',
          item, limits.max_type_chars, COALESCE(source, '') USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END LOOP;
  END IF;
  RETURN true;
END
