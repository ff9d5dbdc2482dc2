-- Erasing payloads (src/api/archive.rs): redact, for one scope of a
-- source (a key, every key first seen before a time, or an account), over
-- the native store's statements (archive_redact_lock.sql, then
-- archive_redact.sql). Single-server in both editions.

--@ webhook_dedup.redact
DECLARE
  scopes integer;
  escaped pg_catalog.text;
  r record;
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM webhook_dedup._check_source(source);
  scopes := (idem_key IS NOT NULL)::integer OPERATOR(pg_catalog.+) (before IS NOT NULL)::integer
            OPERATOR(pg_catalog.+) (account IS NOT NULL)::integer;
  IF scopes OPERATOR(pg_catalog.<>) 1 THEN
    RAISE EXCEPTION 'redact takes exactly one of idem_key, before and account' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF idem_key IS NOT NULL THEN
    PERFORM webhook_dedup._check_bounded('idem_key', idem_key);
  END IF;
  IF before IS NOT NULL AND NOT pg_catalog.isfinite(before) THEN
    RAISE EXCEPTION 'before must be a finite timestamp' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF account IS NOT NULL THEN
    IF account OPERATOR(pg_catalog.=) '' THEN
      RAISE EXCEPTION 'account must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the account as it appears in a key (key.rs, escape_part)
    escaped := webhook_dedup._key_escape(account);
  END IF;
  PERFORM FROM webhook_dedup._s_archive_redact_lock(source, idem_key, before, escaped) AS l(locked bigint);
  SELECT * INTO r FROM webhook_dedup._s_archive_redact(source, idem_key, before, escaped, pg_catalog.clock_timestamp(),
                                                       SESSION_USER) AS x(keys bigint, deliveries bigint);
  keys := COALESCE(r.keys, 0);
  deliveries := COALESCE(r.deliveries, 0);
  RETURN NEXT;
END
