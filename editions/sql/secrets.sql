-- Verification keys kept in the database, per source (src/api/secrets.rs):
-- add_secret, retire_secret, list_secrets, over the native store's
-- statements (secrets_add, secrets_retire, secrets_list).

--@ webhook_dedup.add_secret
DECLARE
  named pg_catalog.text;
  scheme pg_catalog.text;
  problem pg_catalog.text;
  id integer;
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM webhook_dedup._check_source(source);
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF secret OPERATOR(pg_catalog.=) '' THEN
    RAISE EXCEPTION 'the secret is empty' USING ERRCODE = 'invalid_parameter_value';
  ELSIF webhook_dedup._trim(secret) OPERATOR(pg_catalog.<>) secret THEN
    RAISE EXCEPTION 'the secret has leading or trailing whitespace' USING ERRCODE = 'invalid_parameter_value',
      HINT = 'Secrets are used byte for byte; a trailing newline copied from a file is the usual cause.';
  END IF;
  IF not_before IS NULL THEN
    RAISE EXCEPTION 'not_before must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF NOT pg_catalog.isfinite(not_before) THEN
    RAISE EXCEPTION 'not_before must be a finite timestamp' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF NOT pg_catalog.isfinite(not_after) THEN
    RAISE EXCEPTION 'not_after must be a finite timestamp' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF not_after OPERATOR(pg_catalog.<=) not_before THEN
    RAISE EXCEPTION 'not_after must be later than not_before' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- the source's scheme (its provider, else its name) when that is one:
  -- the secret must be a key of it, and is stored for it alone
  named := COALESCE((webhook_dedup._source_settings(source)).provider, source);
  BEGIN
    scheme := webhook_dedup._scheme_parse(named);
  EXCEPTION WHEN invalid_parameter_value THEN
    scheme := NULL;
  END;
  IF scheme OPERATOR(pg_catalog.=) ANY (ARRAY['discord', 'sendgrid']) THEN
    RAISE EXCEPTION 'scheme % signs with a public key (%), which the SQL edition cannot verify: use the native edition',
      scheme, CASE WHEN scheme OPERATOR(pg_catalog.=) 'discord' THEN 'Ed25519' ELSE 'ECDSA P-256' END
      USING ERRCODE = 'feature_not_supported';
  END IF;
  IF scheme IS NOT NULL THEN
    BEGIN
      PERFORM webhook_dedup._scheme_keys(scheme, ARRAY[secret]);
    EXCEPTION WHEN invalid_parameter_value THEN
      GET STACKED DIAGNOSTICS problem = MESSAGE_TEXT;
      RAISE EXCEPTION 'the secret is not a key of scheme %, the scheme of source "%": %', scheme, source, problem
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Use the secret (or public key) the provider shows for this endpoint; set '
                     'webhook_dedup.sources.provider if the source is verified with another scheme.';
    END;
  END IF;
  SELECT a.id INTO id
    FROM webhook_dedup._s_secrets_add(source, secret, not_before, not_after, note, pg_catalog.clock_timestamp(), scheme)
      AS a(id integer);
  RETURN id;
END

--@ webhook_dedup.retire_secret
DECLARE
  since pg_catalog.timestamptz;
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF key_id IS NULL THEN
    RAISE EXCEPTION 'key_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF not_after IS NULL THEN
    RAISE EXCEPTION 'not_after must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF NOT pg_catalog.isfinite(not_after) THEN
    RAISE EXCEPTION 'not_after must be a finite timestamp' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT r.not_before INTO since FROM webhook_dedup._s_secrets_retire(source, key_id, not_after) AS r(not_before pg_catalog.timestamptz);
  IF NOT FOUND THEN
    RAISE EXCEPTION 'source "%" has no key %', source, key_id USING ERRCODE = 'no_data_found';
  END IF;
  -- raised after the update: the error rolls it back
  IF not_after OPERATOR(pg_catalog.<=) since THEN
    RAISE EXCEPTION 'not_after must be later than not_before' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN not_after;
END

--@ webhook_dedup.list_secrets sql
-- (SQL, not PL/pgSQL: the argument and a column are both named source)
SELECT * FROM webhook_dedup._s_secrets_list($1, pg_catalog.clock_timestamp()) AS l(
  id integer, source pg_catalog.text, not_before pg_catalog.timestamptz, not_after pg_catalog.timestamptz, created_at pg_catalog.timestamptz, valid_now boolean,
  fingerprint pg_catalog.text, note pg_catalog.text, scheme pg_catalog.text)
