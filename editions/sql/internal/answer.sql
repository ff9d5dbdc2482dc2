-- The HTTP answer of an outcome (src/api/rows.rs, http_row, over the
-- answers written from the core, _answers): the row's http_status,
-- http_headers and response. Internal: the owner's alone.

-- The answer to `kind` (an outcome or a refusal: Kind's names) in `mode`
-- for `scheme` (NULL: none), with a Retry-After of `seconds` (whole
-- seconds, at least 1) where the answer carries one; `result` the stored
-- result a duplicate answers with, `handshake` a handshake's body. 22023
-- for an outcome that does not happen in the mode.
CREATE FUNCTION webhook_dedup._reply(kind text, mode text, scheme text, seconds numeric, result jsonb, handshake jsonb,
                                     OUT http_status integer, OUT http_headers jsonb, OUT response jsonb)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  a pg_catalog.jsonb := webhook_dedup._answers() OPERATOR(pg_catalog.->)
             (kind OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) mode OPERATOR(pg_catalog.||) '/'
              OPERATOR(pg_catalog.||) COALESCE(scheme, ''));
  status_body pg_catalog.jsonb := pg_catalog.jsonb_build_object('status', kind);
BEGIN
  IF a OPERATOR(pg_catalog.?) 'refused' THEN
    RAISE EXCEPTION '%', a OPERATOR(pg_catalog.->>) 'refused' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  http_status := (a OPERATOR(pg_catalog.->>) 'status')::integer;
  http_headers := a OPERATOR(pg_catalog.->) 'headers';
  IF (a OPERATOR(pg_catalog.->>) 'retry_after')::boolean AND seconds IS NOT NULL THEN
    http_headers := http_headers OPERATOR(pg_catalog.||)
                    pg_catalog.jsonb_build_object('Retry-After', GREATEST(seconds, 1)::pg_catalog.text);
  END IF;
  response := CASE WHEN (a OPERATOR(pg_catalog.->>) 'body') OPERATOR(pg_catalog.=) 'result' THEN CASE WHEN kind OPERATOR(pg_catalog.=) ANY (ARRAY['claimed', 'reclaimed']) THEN NULL
                                        ELSE COALESCE(result, status_body) END
                WHEN (a OPERATOR(pg_catalog.->>) 'body') OPERATOR(pg_catalog.=) 'status' THEN status_body
                WHEN (a OPERATOR(pg_catalog.->>) 'body') OPERATOR(pg_catalog.=) 'error' THEN pg_catalog.jsonb_build_object('error', a OPERATOR(pg_catalog.->>) 'error')
                WHEN (a OPERATOR(pg_catalog.->>) 'body') OPERATOR(pg_catalog.=) 'handshake' THEN COALESCE(handshake, status_body)
                ELSE COALESCE(result, status_body) END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._reply(text, text, text, numeric, jsonb, jsonb) FROM PUBLIC;
