-- The webhook_dedup.* settings a call reads (src/guc.rs in the native
-- edition, which defines them as PostgreSQL settings; their names,
-- defaults and bounds are webhook_dedup_core::settings, written here as
-- _setting_rules() by crates/webhook-dedup-sql-edition/src/data.rs).
-- Without a library nothing defines them: a value set with SET, ALTER
-- DATABASE or ALTER ROLE is a placeholder string, read and checked here
-- when a call uses it. Internal: the owner's alone.

-- A setting's value: its default when unset or empty; else an integer,
-- for a setting in seconds with an optional unit (ms, s, min, h, d), read
-- as PostgreSQL's parse_int reads one (a fraction or an exponent as a
-- double, the unit converted, rounded half to even), within its bounds.
-- 22023 otherwise, with PostgreSQL's own messages. (parse_int also reads
-- an integer in hex or octal, 0x10 or 010: not here.)
CREATE FUNCTION webhook_dedup._setting(setting text) RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
  rule record;
  raw pg_catalog.text := pg_catalog.current_setting(setting, true);
  parts pg_catalog.text[];
  unit pg_catalog.text;
  value numeric;
BEGIN
  -- unset, the common case: the default without a query (every claim
  -- reads four settings)
  IF (raw IS NULL OR raw OPERATOR(pg_catalog.=) '') AND webhook_dedup._setting_default(setting) IS NOT NULL THEN
    RETURN webhook_dedup._setting_default(setting);
  END IF;
  SELECT * INTO STRICT rule FROM webhook_dedup._setting_rules() AS r WHERE r.name OPERATOR(pg_catalog.=) setting;
  IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
    RETURN rule.default_value;
  END IF;
  parts := pg_catalog.regexp_match(raw, '^\s*([-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?)\s*'
                                        OPERATOR(pg_catalog.||) CASE WHEN rule.seconds THEN '(ms|s|min|h|d)?' ELSE '()' END
                                        OPERATOR(pg_catalog.||) '\s*$');
  IF parts IS NULL THEN
    RAISE EXCEPTION 'invalid value for parameter "%": "%"', setting, raw USING ERRCODE = 'invalid_parameter_value',
      HINT = CASE WHEN rule.seconds THEN 'Valid units for this parameter are "ms", "s", "min", "h", and "d".' END;
  END IF;
  -- as a double, each unit converted, then rint (round half to even):
  -- guc.c, parse_int and convert_to_base_unit
  unit := COALESCE(parts[4], '');
  value := pg_catalog.round(
    CASE WHEN unit OPERATOR(pg_catalog.=) 'ms' THEN parts[1]::double precision OPERATOR(pg_catalog./) 1000
         WHEN unit OPERATOR(pg_catalog.=) ANY (ARRAY['s', '']) THEN parts[1]::double precision
         WHEN unit OPERATOR(pg_catalog.=) 'min' THEN parts[1]::double precision OPERATOR(pg_catalog.*) 60
         WHEN unit OPERATOR(pg_catalog.=) 'h' THEN parts[1]::double precision OPERATOR(pg_catalog.*) 3600
         ELSE parts[1]::double precision OPERATOR(pg_catalog.*) 86400 END)::numeric;
  IF value OPERATOR(pg_catalog.<) rule.min_value OR value OPERATOR(pg_catalog.>) rule.max_value THEN
    RAISE EXCEPTION '% % is outside the valid range for parameter "%" (% .. %)', value,
      CASE WHEN rule.seconds THEN 's' ELSE '' END, setting, rule.min_value, rule.max_value
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN value::integer;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._setting(text) FROM PUBLIC;
