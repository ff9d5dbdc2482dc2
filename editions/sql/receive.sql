-- The whole intake of one delivery in one call (src/api/receive.rs):
-- webhook_receive's arguments checked in the native edition's order, then
-- _receive (editions/sql/internal/receive.sql) runs the pipeline of
-- src/engine/receive.rs.

--@ webhook_dedup.webhook_receive
DECLARE
  scheme_name pg_catalog.text;
  source_name pg_catalog.text;
  folded pg_catalog.jsonb;
  lease_us bigint;
  wait_us bigint;
BEGIN
  scheme_name := webhook_dedup._signing_scheme(scheme, payload);
  IF mode IS NULL THEN
    RAISE EXCEPTION 'mode must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF mode OPERATOR(pg_catalog.<>) ALL (ARRAY['claim', 'enqueue']) THEN
    RAISE EXCEPTION 'mode must be claim or enqueue, not "%"', mode USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF body_key_fallback IS NULL THEN
    RAISE EXCEPTION 'body_key_fallback must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  source_name := COALESCE(source, scheme_name);
  PERFORM webhook_dedup._check_source(source_name);
  folded := webhook_dedup._headers(headers);
  IF lease IS NOT NULL THEN
    lease_us := webhook_dedup._lease_us(lease);
  END IF;
  IF tolerance IS NOT NULL THEN
    PERFORM webhook_dedup._duration_us(tolerance, 'tolerance');
  END IF;
  PERFORM webhook_dedup._check_at(at);
  PERFORM webhook_dedup._hmac_spec(scheme_name, signature_header, signature_prefix, algorithm, encoding);
  IF wait IS NOT NULL THEN
    -- receive.rs, check_wait: no provider documents a longer response
    -- deadline, and each waiting call holds a connection
    wait_us := webhook_dedup._duration_us(wait, 'wait');
    IF wait_us OPERATOR(pg_catalog.<) 0 OR wait_us OPERATOR(pg_catalog.>) 60000000 THEN
      RAISE EXCEPTION 'wait must be between 0 and 60 seconds' USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END IF;
  RETURN webhook_dedup._receive(scheme_name, payload, folded, headers, secrets, source_name, environment, account,
                                operation, mode, lease_us, body_key_fallback, tolerance, at, url, signature_header,
                                signature_prefix, algorithm, encoding, method, wait_us);
END
