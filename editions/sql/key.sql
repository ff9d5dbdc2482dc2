-- The keys: webhook_key, webhook_body_key, webhook_operation_key (src/api/key.rs;
-- the rules of crates/webhook-dedup-core/src/key.rs and operation_key.rs).
-- downstream_key_limits_rows is written from the core's presets
-- (crates/webhook-dedup-sql-edition/src/data.rs).

--@ webhook_dedup.webhook_key
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF event_id IS NULL THEN
    RAISE EXCEPTION 'event_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN webhook_dedup._key_derive(source, event_id, webhook_dedup._key_escape(event_id), environment, account, operation);
END

--@ webhook_dedup.webhook_body_key
DECLARE
  field pg_catalog.text;
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF payload IS NULL THEN
    RAISE EXCEPTION 'payload must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  field := '%b' OPERATOR(pg_catalog.||) pg_catalog.encode(pg_catalog.sha256(payload), 'hex');
  RETURN webhook_dedup._key_derive(source, field, field, environment, account, operation);
END

--@ webhook_dedup.webhook_operation_key
DECLARE
  limit_chars integer;
  preset integer;
  part record;
  op pg_catalog.text;
  plain pg_catalog.text;
  digest pg_catalog.text;
  prefix pg_catalog.text;
  cut integer;
BEGIN
  FOR part IN SELECT * FROM (VALUES ('source', source), ('idem_key', idem_key), ('operation', operation))
                AS p(name, value) LOOP
    IF part.value IS NULL THEN
      RAISE EXCEPTION '% must not be NULL', part.name USING ERRCODE = 'null_value_not_allowed';
    END IF;
  END LOOP;
  IF max_length IS NULL THEN
    RAISE EXCEPTION 'max_length must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  -- the limit (operation_key.rs, limit)
  IF max_length OPERATOR(pg_catalog.<) 0 THEN
    RAISE EXCEPTION 'max_length must be between 32 and 255, not %', max_length USING ERRCODE = 'invalid_parameter_value';
  END IF;
  limit_chars := max_length;
  IF downstream IS NOT NULL THEN
    SELECT d.max_length INTO preset FROM webhook_dedup.downstream_key_limits_rows() AS d
     WHERE d.downstream OPERATOR(pg_catalog.=) webhook_operation_key.downstream;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'unknown downstream "%": one of %', downstream,
        (SELECT pg_catalog.string_agg(d.downstream, ', ') FROM webhook_dedup.downstream_key_limits_rows() AS d)
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_length OPERATOR(pg_catalog.<>) 255 AND max_length OPERATOR(pg_catalog.<>) preset THEN
      RAISE EXCEPTION 'max_length % contradicts downstream "%", whose keys are at most % characters: give one of them',
        max_length, downstream, preset USING ERRCODE = 'invalid_parameter_value';
    END IF;
    limit_chars := preset;
  END IF;
  -- the key (operation_key.rs, operation_key)
  FOR part IN SELECT * FROM (VALUES ('source', source), ('idem_key', idem_key), ('operation', operation))
                AS p(name, value) LOOP
    IF part.value OPERATOR(pg_catalog.=) '' THEN
      RAISE EXCEPTION '% must not be empty', part.name USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.char_length(part.value) OPERATOR(pg_catalog.>) 255 THEN
      RAISE EXCEPTION '% must be at most 255 characters', part.name USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END LOOP;
  IF limit_chars OPERATOR(pg_catalog.<) 32 OR limit_chars OPERATOR(pg_catalog.>) 255 THEN
    RAISE EXCEPTION 'max_length must be between 32 (a digest''s 32 hex digits) and 255'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  op := webhook_dedup._operation_key_encode(operation);
  plain := op OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) webhook_dedup._operation_key_encode(source)
           OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) webhook_dedup._operation_key_encode(idem_key);
  IF pg_catalog.octet_length(plain) OPERATOR(pg_catalog.<=) limit_chars THEN
    RETURN plain;
  END IF;
  digest := pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(plain, 'UTF8')), 'hex'), 32);
  -- as much of the operation as fits before '-<digest>', never cutting a
  -- %XX escape in two
  prefix := CASE WHEN limit_chars OPERATOR(pg_catalog.-) 32 OPERATOR(pg_catalog.>) 1
                 THEN pg_catalog.left(op, limit_chars OPERATOR(pg_catalog.-) 33) ELSE '' END;
  cut := pg_catalog.length(prefix) OPERATOR(pg_catalog.-) pg_catalog.strpos(pg_catalog.reverse(prefix), '%')
         OPERATOR(pg_catalog.+) 1;
  IF pg_catalog.strpos(prefix, '%') OPERATOR(pg_catalog.>) 0
     AND cut OPERATOR(pg_catalog.+) 2 OPERATOR(pg_catalog.>) pg_catalog.length(prefix) THEN
    prefix := pg_catalog.left(prefix, cut OPERATOR(pg_catalog.-) 1);
  END IF;
  RETURN CASE WHEN prefix OPERATOR(pg_catalog.=) '' THEN digest
              ELSE prefix OPERATOR(pg_catalog.||) '-' OPERATOR(pg_catalog.||) digest END;
END
