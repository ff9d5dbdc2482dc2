-- The webhook_dedup.* settings a call reads (src/guc.rs in the native
-- edition, which defines them as PostgreSQL settings; their names,
-- defaults and bounds are webhook_dedup_core::settings, written here as
-- _setting_rules() by crates/webhook-dedup-sql-edition/src/data.rs).
-- Without a library nothing defines them: a value set with SET, ALTER
-- DATABASE or ALTER ROLE is a placeholder string, read and checked here
-- when a call uses it. Internal: the owner's alone.

-- A setting's value: its default when unset or empty; else an integer,
-- for a setting in seconds with an optional unit (ms, s, min, h, d; a
-- fraction rounded to the second, as PostgreSQL's GUC_UNIT_S reads it),
-- within its bounds. 22023 otherwise, with PostgreSQL's own messages.
CREATE FUNCTION webhook_dedup._setting(setting text) RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
  rule record;
  raw text := pg_catalog.current_setting(setting, true);
  parts text[];
  value numeric;
BEGIN
  SELECT * INTO STRICT rule FROM webhook_dedup._setting_rules() AS r WHERE r.name OPERATOR(pg_catalog.=) setting;
  IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
    RETURN rule.default_value;
  END IF;
  parts := pg_catalog.regexp_match(raw, CASE WHEN rule.seconds
                                             THEN '^\s*([-+]?[0-9]+(\.[0-9]*)?)\s*(ms|s|min|h|d)?\s*$'
                                             ELSE '^\s*([-+]?[0-9]+)\s*$' END);
  IF parts IS NULL THEN
    RAISE EXCEPTION 'invalid value for parameter "%": "%"', setting, raw USING ERRCODE = 'invalid_parameter_value',
      HINT = CASE WHEN rule.seconds THEN 'Valid units for this parameter are "ms", "s", "min", "h", and "d".' END;
  END IF;
  value := parts[1]::numeric OPERATOR(pg_catalog.*) CASE COALESCE(parts[3], 's') WHEN 'ms' THEN 0.001 WHEN 's' THEN 1
                                                     WHEN 'min' THEN 60 WHEN 'h' THEN 3600 ELSE 86400 END;
  value := pg_catalog.round(value);
  IF value OPERATOR(pg_catalog.<) rule.min_value OR value OPERATOR(pg_catalog.>) rule.max_value THEN
    RAISE EXCEPTION '% % is outside the valid range for parameter "%" (% .. %)', value,
      CASE WHEN rule.seconds THEN 's' ELSE '' END, setting, rule.min_value, rule.max_value
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN value::integer;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._setting(text) FROM PUBLIC;
