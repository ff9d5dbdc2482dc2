-- Who may run which helper (src/sql/privileges.sql is the API's; this
-- file is assembled after every other helper file, whose functions it
-- names). Every helper is the owner's alone (each file revokes it from
-- PUBLIC), but for those below.
--
-- The API functions that run as their caller (not SECURITY DEFINER:
-- verification, key derivation, signing, webhook_hmac, http_answer, the
-- intake check of webhook_dedup.sources, default_retention, metrics_live)
-- are executable by PUBLIC or by the readers in the native edition, where
-- they are compiled code. Here they call helpers, which their callers
-- must be able to run: these are pure computations over their arguments,
-- the settings and the rules written from the core; they read no relation
-- and change nothing, so any role may run them, as it may write the same
-- SQL itself (tests/sql_edition/test_schema.py checks that none names a
-- relation; test_privileges.py calls each API function above as a login
-- without any of the extension's roles).
-- First, nothing on the edition's own objects but what this file grants:
-- what default privileges of the installing role gave (ALTER DEFAULT
-- PRIVILEGES ... GRANT ALL ON TABLES, EXECUTE ON FUNCTIONS) is revoked, as
-- src/sql/privileges.sql does for the schema's relations and the API's
-- functions, which existed before these (tests/cluster/test_security.py,
-- test_default_privileges_give_nothing, run against this edition).
DO $$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT DISTINCT 'TABLE' AS kind, c.oid::pg_catalog.regclass::pg_catalog.text AS name, a.grantee
             FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
            WHERE c.relnamespace OPERATOR(pg_catalog.=) 'webhook_dedup'::pg_catalog.regnamespace
              AND pg_catalog.starts_with(c.relname::pg_catalog.text, '_')
              AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
           UNION ALL
           SELECT DISTINCT 'FUNCTION', p.oid::pg_catalog.regprocedure::pg_catalog.text, a.grantee
             FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
            WHERE p.pronamespace OPERATOR(pg_catalog.=) 'webhook_dedup'::pg_catalog.regnamespace
              AND pg_catalog.starts_with(p.proname::pg_catalog.text, '_')
              AND a.grantee OPERATOR(pg_catalog.<>) p.proowner LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s', g.kind, g.name,
                              CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                   ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END);
  END LOOP;
END
$$;

GRANT EXECUTE ON FUNCTION
  webhook_dedup._aggregate_counts(webhook_dedup._count_log[]),
  webhook_dedup._answers(),
  webhook_dedup._check_at(timestamptz),
  webhook_dedup._check_secrets(text[]),
  webhook_dedup._ct_equal(bytea,bytea),
  webhook_dedup._decode_base64(text,integer),
  webhook_dedup._decode_hex(text,integer),
  webhook_dedup._first_match(bytea[],bytea[],bytea,text),
  webhook_dedup._form_decode(text),
  webhook_dedup._form_pairs(bytea),
  webhook_dedup._header_once(jsonb,text),
  webhook_dedup._header_pairs(text[]),
  webhook_dedup._headers(jsonb),
  webhook_dedup._hmac(text,bytea,bytea),
  webhook_dedup._hmac_sha2(text,bytea,bytea),
  webhook_dedup._hmac_spec(text,text,text,text,text),
  webhook_dedup._hubspot_signed_uri(text),
  webhook_dedup._intake_limits(),
  webhook_dedup._is_json_pointer(text),
  webhook_dedup._key_bound(text),
  webhook_dedup._key_derive(text,text,text,text,text,text),
  webhook_dedup._key_escape(text),
  webhook_dedup._linear_timestamp_ms(bytea),
  webhook_dedup._metrics_rules(),
  webhook_dedup._operation_key_encode(text),
  webhook_dedup._outcome_names(),
  webhook_dedup._place_problem(text),
  webhook_dedup._query_parameter(text,text),
  webhook_dedup._reply(text,text,text,numeric,jsonb,jsonb),
  webhook_dedup._rfc3339_ns(text),
  webhook_dedup._scheme_keys(text,text[]),
  webhook_dedup._scheme_parse(text),
  webhook_dedup._schemes(),
  webhook_dedup._setting(text),
  webhook_dedup._setting_default(text),
  webhook_dedup._setting_rules(),
  webhook_dedup._sign_headers(),
  webhook_dedup._signing_scheme(text,bytea),
  webhook_dedup._tagged_frames(),
  webhook_dedup._timestamp_header(jsonb,text),
  webhook_dedup._timestamped_frames(),
  webhook_dedup._trim(text),
  webhook_dedup._twilio_body_hash(text),
  webhook_dedup._twilio_form_suffix(bytea),
  webhook_dedup._twilio_url_variants(text),
  webhook_dedup._us_interval(bigint),
  webhook_dedup._utf8_lossy(bytea),
  webhook_dedup._verify(text,bytea,jsonb,text[],interval,timestamp with time zone,text,text,text,text,text,text,boolean),
  webhook_dedup._verify_hubspot(text,text,bytea,jsonb,bytea[],numeric,numeric),
  webhook_dedup._verify_linear(bytea,jsonb,bytea[],numeric,numeric),
  webhook_dedup._verify_mailgun(bytea,bytea[],numeric,numeric),
  webhook_dedup._verify_standard(bytea,jsonb,bytea[],numeric,numeric),
  webhook_dedup._verify_tagged(text,text,text,text,text,boolean,bytea,jsonb,bytea[],bytea),
  webhook_dedup._verify_timestamped(text,text,text,text,text,text,bytea,jsonb,bytea[],numeric,numeric),
  webhook_dedup._verify_twilio(text,bytea,jsonb,bytea[]),
  webhook_dedup._verify_twitch(bytea,jsonb,bytea[],numeric,numeric),
  webhook_dedup._verify_v0(text,text,bytea,jsonb,bytea[],numeric,numeric),
  webhook_dedup._waiting_counts(),
  webhook_dedup._whitespace(),
  webhook_dedup._window(bigint,numeric,numeric)
  TO PUBLIC;

-- metrics_live runs as its caller (a reader, through the views over
-- claim_counts): the count log it adds is the owner's, read as the owner
-- by _logged_counts for those metrics_live is granted to.
GRANT EXECUTE ON FUNCTION webhook_dedup._logged_counts() TO webhook_dedup_reader, pg_monitor;
