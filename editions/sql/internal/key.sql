-- Helpers of the keys (editions/sql/key.sql), the rules of
-- crates/webhook-dedup-core/src/key.rs and operation_key.rs. Internal: the
-- owner's alone (each REVOKE below), called by the API's functions.

-- A key's part as a field (key.rs, push_escaped): '%' -> '%25' first, then
-- ':' -> '%3A' (the order keeps an escaped ':' from being escaped again).
CREATE FUNCTION webhook_dedup._key_escape(part text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.replace(pg_catalog.replace(part, '%', '%25'), ':', '%3A');
REVOKE ALL ON FUNCTION webhook_dedup._key_escape(text) FROM PUBLIC;

-- A readable key bounded to 255 characters (key.rs, bound: MAX_KEY_CHARS
-- 255; a longer one keeps its first 189 characters, then '%h' and the 64
-- hex digits of SHA-256 over the whole readable form, as UTF-8).
CREATE FUNCTION webhook_dedup._key_bound(readable text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
  RETURN CASE WHEN pg_catalog.char_length(readable) OPERATOR(pg_catalog.<=) 255 THEN readable
              ELSE pg_catalog.left(readable, 189) OPERATOR(pg_catalog.||) '%h' OPERATOR(pg_catalog.||)
                   pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(readable, 'UTF8')), 'hex') END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._key_bound(text) FROM PUBLIC;

-- The key of (source, event_id, environment, account, operation) (key.rs,
-- derive): 22004 for a NULL source or event id, 22023 for an empty part;
-- event_field is the event id's field as it goes in the key (escaped, or a
-- body key's '%b<hex>' as it is).
CREATE FUNCTION webhook_dedup._key_derive(source text, event_id text, event_field text, environment text,
                                          account text, operation text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  part record;
BEGIN
  FOR part IN SELECT * FROM (VALUES ('source', source), ('event_id', event_id), ('environment', environment),
                                    ('account', account), ('operation', operation)) AS p(name, value) LOOP
    IF part.value OPERATOR(pg_catalog.=) '' THEN
      RAISE EXCEPTION '% must not be empty', part.name USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END LOOP;
  IF environment IS NULL AND account IS NULL AND operation IS NULL THEN
    RETURN webhook_dedup._key_bound(webhook_dedup._key_escape(source) OPERATOR(pg_catalog.||) ':'
                                    OPERATOR(pg_catalog.||) event_field);
  END IF;
  RETURN webhook_dedup._key_bound(pg_catalog.concat_ws(':', webhook_dedup._key_escape(source),
                                                       COALESCE(webhook_dedup._key_escape(environment), ''),
                                                       COALESCE(webhook_dedup._key_escape(account), ''),
                                                       event_field,
                                                       COALESCE(webhook_dedup._key_escape(operation), '')));
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._key_derive(text, text, text, text, text, text) FROM PUBLIC;

-- A part of a downstream key, percent-encoded (operation_key.rs, encode:
-- every byte of its UTF-8 outside A-Z a-z 0-9 - . _ as %XX, upper-case).
CREATE FUNCTION webhook_dedup._operation_key_encode(part text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (SELECT pg_catalog.string_agg(CASE WHEN b.byte OPERATOR(pg_catalog.>=) 48 AND b.byte OPERATOR(pg_catalog.<=) 57
                                           OR b.byte OPERATOR(pg_catalog.>=) 65 AND b.byte OPERATOR(pg_catalog.<=) 90
                                           OR b.byte OPERATOR(pg_catalog.>=) 97 AND b.byte OPERATOR(pg_catalog.<=) 122
                                           OR b.byte OPERATOR(pg_catalog.=) ANY (ARRAY[45, 46, 95])
                                         THEN pg_catalog.chr(b.byte)
                                         ELSE '%' OPERATOR(pg_catalog.||) pg_catalog.upper(pg_catalog.lpad(pg_catalog.to_hex(b.byte), 2, '0')) END,
                                     '' ORDER BY b.i)
          FROM (SELECT i, pg_catalog.get_byte(pg_catalog.convert_to(part, 'UTF8'), i) AS byte
                  FROM pg_catalog.generate_series(0, pg_catalog.octet_length(part) OPERATOR(pg_catalog.-) 1) AS i) AS b);
REVOKE ALL ON FUNCTION webhook_dedup._operation_key_encode(text) FROM PUBLIC;
