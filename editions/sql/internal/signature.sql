-- Helpers of signature verification (editions/sql/verify.sql), the rules of
-- crates/webhook-dedup-core/src/signature/ (mod.rs, ct.rs, headers.rs,
-- frame.rs). Internal: the owner's alone (each REVOKE below).

-- HMAC (RFC 2104) over PostgreSQL's own SHA-2 functions (sha256 and sha512,
-- core since PostgreSQL 11: no pgcrypto needed, and the PyPI builds of 16
-- and 18 have none): H((K xor opad) || H((K xor ipad) || message)), the
-- key hashed first when longer than the block (64 bytes for SHA-256, 128
-- for SHA-512), then padded with zeros to the block. The pads are XORed as
-- bit strings and read back in 64-bit words.
CREATE FUNCTION webhook_dedup._hmac_sha2(algorithm text, key bytea, message bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  block integer := CASE WHEN algorithm OPERATOR(pg_catalog.=) 'sha256' THEN 64 WHEN algorithm OPERATOR(pg_catalog.=) 'sha512' THEN 128 END;
  k pg_catalog.bytea := key;
  kbits bit varying;
  ipad pg_catalog.bytea;
  opad pg_catalog.bytea;
BEGIN
  IF pg_catalog.length(k) OPERATOR(pg_catalog.>) block THEN
    k := CASE WHEN algorithm OPERATOR(pg_catalog.=) 'sha256' THEN pg_catalog.sha256(k) ELSE pg_catalog.sha512(k) END;
  END IF;
  k := k OPERATOR(pg_catalog.||) pg_catalog.decode(pg_catalog.repeat('00', block OPERATOR(pg_catalog.-) pg_catalog.length(k)), 'hex');
  -- the key XOR 0x36.. and 0x5c.., as bit strings: varbit_send writes a
  -- bit string as its length (4 bytes) and then its bytes
  kbits := ('x' OPERATOR(pg_catalog.||) pg_catalog.encode(k, 'hex'))::bit varying;
  ipad := pg_catalog.substr(pg_catalog.varbit_send(
            kbits OPERATOR(pg_catalog.#) ('x' OPERATOR(pg_catalog.||) pg_catalog.repeat('36', block))::bit varying), 5);
  opad := pg_catalog.substr(pg_catalog.varbit_send(
            kbits OPERATOR(pg_catalog.#) ('x' OPERATOR(pg_catalog.||) pg_catalog.repeat('5c', block))::bit varying), 5);
  IF algorithm OPERATOR(pg_catalog.=) 'sha256' THEN
    RETURN pg_catalog.sha256(opad OPERATOR(pg_catalog.||) pg_catalog.sha256(ipad OPERATOR(pg_catalog.||) message));
  END IF;
  RETURN pg_catalog.sha512(opad OPERATOR(pg_catalog.||) pg_catalog.sha512(ipad OPERATOR(pg_catalog.||) message));
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._hmac_sha2(text, bytea, bytea) FROM PUBLIC;

-- Whether two byte strings are equal, in time that depends on their
-- lengths only (ct.rs, equal; the lengths are public: a scheme fixes its
-- signature's). PL/pgSQL compares bytea with memcmp, which stops at the
-- first differing byte; so each side is first put through HMAC-SHA256
-- under 16 fresh random bytes (the double-HMAC pattern): the compared
-- values are unknown to the caller, and how far memcmp gets tells nothing
-- about the secret MAC (docs/security.md, "Constant-time comparison").
CREATE FUNCTION webhook_dedup._ct_equal(expected bytea, presented bytea) RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL SAFE
AS $$
DECLARE
  r pg_catalog.bytea := pg_catalog.uuid_send(pg_catalog.gen_random_uuid());
BEGIN
  RETURN pg_catalog.length(expected) OPERATOR(pg_catalog.=) pg_catalog.length(presented)
     AND webhook_dedup._hmac_sha2('sha256', r, expected)
         OPERATOR(pg_catalog.=) webhook_dedup._hmac_sha2('sha256', r, presented);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._ct_equal(bytea, bytea) FROM PUBLIC;

-- Hex to bytes, exactly `len` of them, or NULL (ct.rs, decode_hex: digits
-- of either case, an even number, nothing else; PostgreSQL's own decode
-- would skip whitespace).
CREATE FUNCTION webhook_dedup._decode_hex(text text, len integer) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
  RETURN CASE WHEN text OPERATOR(pg_catalog.~) '^[0-9A-Fa-f]*$'
               AND pg_catalog.length(text) OPERATOR(pg_catalog.=) (2 OPERATOR(pg_catalog.*) len)
              THEN pg_catalog.decode(text, 'hex') END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._decode_hex(text, integer) FROM PUBLIC;

-- Canonical padded standard base64 to bytes, exactly `len` of them (any
-- length when NULL), or NULL (ct.rs, decode_base64: RFC 4648 section 4,
-- padded, no whitespace, zero trailing bits: re-encoding gives it back).
CREATE FUNCTION webhook_dedup._decode_base64(text text, len integer) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  bytes pg_catalog.bytea;
BEGIN
  IF text IS NULL OR text OPERATOR(pg_catalog.!~) '^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$' THEN
    RETURN NULL;
  END IF;
  bytes := pg_catalog.decode(text, 'base64');
  IF pg_catalog.translate(pg_catalog.encode(bytes, 'base64'), E'\n', '') OPERATOR(pg_catalog.<>) text
     OR (len IS NOT NULL AND pg_catalog.length(bytes) OPERATOR(pg_catalog.<>) len) THEN
    RETURN NULL;
  END IF;
  RETURN bytes;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._decode_base64(text, integer) FROM PUBLIC;

-- The request headers of a call, as the verifier reads them (headers.rs,
-- Headers::from_members, and the extension's jsonb.rs, string_members): a
-- JSON object of names and a string or an array of strings each; names
-- folded to lower case (ASCII letters only), the values of names that fold
-- alike joined in the object's order, a name with no value left out.
-- Returns a JSON object of lower-case name to array of values. 22004 NULL;
-- 22023 not an object, or a member not a string or an array of strings
-- (the first such member by name, byte for byte).
CREATE FUNCTION webhook_dedup._headers(headers jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  kinds CONSTANT pg_catalog.jsonb := '{"object": "an object", "array": "an array", "string": "a string",
                            "number": "a number", "boolean": "a boolean", "null": "null"}';
  bad record;
  member record;
  name pg_catalog.text;
  vals pg_catalog.jsonb;
  folded pg_catalog.jsonb := '{}';
  n integer := 0;
BEGIN
  IF headers IS NULL THEN
    RAISE EXCEPTION 'headers must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) 'object' THEN
    RAISE EXCEPTION 'headers must be a JSON object of header names to values, not %',
      kinds OPERATOR(pg_catalog.->>) pg_catalog.jsonb_typeof(headers) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- each member in the object's order, its values appended to its folded
  -- name's: a loop for a request's usual few dozen headers; past 64, where
  -- copying the growing object at each member would be quadratic (a
  -- million headers: tests/cluster/test_security.py), one aggregate
  -- (a sort: n log n) of the same rule
  FOR member IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(headers) AS e LOOP
    n := n OPERATOR(pg_catalog.+) 1;
    IF n OPERATOR(pg_catalog.>) 64 THEN
      SELECT pg_catalog.jsonb_object_agg(g.name, g.vals) INTO folded
        FROM (SELECT pg_catalog.translate(m.key, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') AS name,
                     pg_catalog.jsonb_agg(a.v ORDER BY m.n, a.i) AS vals
                FROM pg_catalog.jsonb_each(headers) WITH ORDINALITY AS m(key, value, n)
                CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(
                  CASE WHEN pg_catalog.jsonb_typeof(m.value) OPERATOR(pg_catalog.=) 'string' THEN pg_catalog.jsonb_build_array(m.value)
                                                       WHEN pg_catalog.jsonb_typeof(m.value) OPERATOR(pg_catalog.=) 'array' THEN m.value END) WITH ORDINALITY AS a(v, i)
               GROUP BY 1) AS g;
      IF NOT EXISTS (SELECT FROM pg_catalog.jsonb_each(headers) AS m
                      WHERE pg_catalog.jsonb_typeof(m.value) OPERATOR(pg_catalog.<>) 'string'
                        AND (pg_catalog.jsonb_typeof(m.value) OPERATOR(pg_catalog.<>) 'array'
                             OR EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(m.value) AS e(value)
                                         WHERE pg_catalog.jsonb_typeof(e.value) OPERATOR(pg_catalog.<>) 'string'))) THEN
        RETURN COALESCE(folded, '{}');
      END IF;
      folded := NULL;
      EXIT;
    END IF;
    IF pg_catalog.jsonb_typeof(member.value) OPERATOR(pg_catalog.=) 'string' THEN
      vals := pg_catalog.jsonb_build_array(member.value);
    ELSIF pg_catalog.jsonb_typeof(member.value) OPERATOR(pg_catalog.=) 'array'
          AND NOT EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(member.value) AS x(v)
                           WHERE pg_catalog.jsonb_typeof(x.v) OPERATOR(pg_catalog.<>) 'string') THEN
      vals := member.value;
      CONTINUE WHEN pg_catalog.jsonb_array_length(vals) OPERATOR(pg_catalog.=) 0;
    ELSE
      folded := NULL;
      EXIT;
    END IF;
    name := pg_catalog.translate(member.key, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
    folded := folded OPERATOR(pg_catalog.||)
              pg_catalog.jsonb_build_object(name, COALESCE(folded OPERATOR(pg_catalog.->) name, '[]') OPERATOR(pg_catalog.||) vals);
  END LOOP;
  IF folded IS NOT NULL THEN
    RETURN folded;
  END IF;
  -- a member that is no string or array of strings: the first by name, byte for byte
  SELECT m.key, CASE WHEN pg_catalog.jsonb_typeof(m.value) OPERATOR(pg_catalog.=) 'array' THEN (SELECT kinds OPERATOR(pg_catalog.->>) pg_catalog.jsonb_typeof(e.value)
                                       FROM pg_catalog.jsonb_array_elements(m.value) WITH ORDINALITY AS e(value, n)
                                      WHERE pg_catalog.jsonb_typeof(e.value) OPERATOR(pg_catalog.<>) 'string'
                                      ORDER BY e.n LIMIT 1)
                  ELSE kinds OPERATOR(pg_catalog.->>) pg_catalog.jsonb_typeof(m.value) END AS kind
    INTO bad
    FROM pg_catalog.jsonb_each(headers) AS m
   WHERE pg_catalog.jsonb_typeof(m.value) OPERATOR(pg_catalog.<>) 'string'
     AND (pg_catalog.jsonb_typeof(m.value) OPERATOR(pg_catalog.<>) 'array'
          OR EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(m.value) AS e(value)
                      WHERE pg_catalog.jsonb_typeof(e.value) OPERATOR(pg_catalog.<>) 'string'))
   ORDER BY m.key COLLATE "C" LIMIT 1;
  RAISE EXCEPTION 'header "%" must be a string or an array of strings, not %', bad.key, bad.kind
    USING ERRCODE = 'invalid_parameter_value';
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._headers(jsonb) FROM PUBLIC;

-- Unicode-whitespace trim, as Rust's str::trim (the characters: _whitespace()).
-- (Not STRICT, so that the planner inlines it: btrim of NULL is NULL.)
CREATE FUNCTION webhook_dedup._trim(text text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pg_catalog.btrim(text, webhook_dedup._whitespace());
REVOKE ALL ON FUNCTION webhook_dedup._trim(text) FROM PUBLIC;

-- The secrets a call gives (signature/mod.rs, check_secrets): at least
-- one (22023), none NULL (22004), none empty or with leading or trailing
-- whitespace (22023 naming its position, never its value).
CREATE FUNCTION webhook_dedup._check_secrets(secrets text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  n integer := pg_catalog.cardinality(secrets);
  i integer;
  value pg_catalog.text;
BEGIN
  IF n IS NULL OR n OPERATOR(pg_catalog.=) 0 THEN
    RAISE EXCEPTION 'secrets must hold at least one secret' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  i := 0;
  FOR value IN SELECT s FROM pg_catalog.unnest(secrets) AS s LOOP
    i := i OPERATOR(pg_catalog.+) 1;
    IF value IS NULL THEN
      RAISE EXCEPTION 'every element of secrets must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    ELSIF value OPERATOR(pg_catalog.=) '' THEN
      RAISE EXCEPTION 'secret % of % is empty', i, n USING ERRCODE = 'invalid_parameter_value';
    ELSIF webhook_dedup._trim(value) OPERATOR(pg_catalog.<>) value THEN
      RAISE EXCEPTION 'secret % of % has leading or trailing whitespace', i, n USING ERRCODE = 'invalid_parameter_value',
        HINT = 'Secrets are used byte for byte; a trailing newline copied from a file is the usual cause.';
    END IF;
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._check_secrets(text[]) FROM PUBLIC;

-- The generic scheme's header description (src/api/args.rs,
-- HmacArgs::spec): signature_header and the rest apply only to scheme
-- hmac (22023); the algorithm (sha1, sha256 by default, sha512) and the
-- encoding (hex by default, base64), case-insensitive, else 22023.
-- NULLs unless scheme hmac with a signature_header.
CREATE FUNCTION webhook_dedup._hmac_spec(scheme_name text, signature_header text, signature_prefix text, algorithm text,
                                         encoding text, OUT algorithm_name text, OUT encoding_name text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
  IF scheme_name OPERATOR(pg_catalog.<>) 'hmac'
     AND (signature_header IS NOT NULL OR signature_prefix IS NOT NULL OR algorithm IS NOT NULL OR encoding IS NOT NULL) THEN
    RAISE EXCEPTION 'signature_header, signature_prefix, algorithm and encoding apply only to scheme hmac, not %', scheme_name
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF scheme_name OPERATOR(pg_catalog.=) 'hmac' AND signature_header IS NOT NULL THEN
    algorithm_name := pg_catalog.translate(COALESCE(algorithm, 'sha256'), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
    IF algorithm_name OPERATOR(pg_catalog.<>) ALL (ARRAY['sha1', 'sha256', 'sha512']) THEN
      RAISE EXCEPTION 'unknown HMAC algorithm "%" (sha1, sha256 or sha512)', algorithm USING ERRCODE = 'invalid_parameter_value';
    END IF;
    encoding_name := pg_catalog.translate(COALESCE(encoding, 'hex'), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
    IF encoding_name OPERATOR(pg_catalog.<>) ALL (ARRAY['hex', 'base64']) THEN
      RAISE EXCEPTION 'unknown encoding "%" (hex or base64)', encoding USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._hmac_spec(text, text, text, text, text) FROM PUBLIC;

-- The arguments every signing call (webhook_verify, webhook_sign,
-- webhook_receive) checks first, in the native edition's order
-- (src/api/verify.rs): scheme (22004 when NULL, 22023 when unknown), then
-- payload (22004 when NULL). Returns the scheme's canonical name.
CREATE FUNCTION webhook_dedup._signing_scheme(scheme text, payload bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
  IF scheme IS NULL THEN
    RAISE EXCEPTION 'scheme must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  scheme := webhook_dedup._scheme_parse(scheme);
  IF payload IS NULL THEN
    RAISE EXCEPTION 'payload must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN scheme;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._signing_scheme(text, bytea) FROM PUBLIC;

-- The signing calls' `at` (the time a signature is checked or made at):
-- 22004 when NULL, 22023 when infinite (src/api/verify.rs).
CREATE FUNCTION webhook_dedup._check_at(at timestamptz) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
  IF at IS NULL THEN
    RAISE EXCEPTION 'at must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF NOT pg_catalog.isfinite(at) THEN
    RAISE EXCEPTION 'at must be a finite timestamp' USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._check_at(timestamptz) FROM PUBLIC;

-- One verification (src/api/verify.rs, verify_sql, and signature/mod.rs,
-- verify), after the caller read `headers` (_headers) and `secrets`: the
-- checks of the arguments in the native edition's order, then the scheme's
-- rule. Returns valid, reason, secret_index (1-based), signed_at.
CREATE FUNCTION webhook_dedup._verify(scheme text, payload bytea, headers jsonb, secrets text[], tolerance interval,
                                      at timestamptz, url text, method text, signature_header text,
                                      signature_prefix text, algorithm text, encoding text, checked boolean DEFAULT false,
                                      OUT valid boolean, OUT reason text, OUT secret_index integer,
                                      OUT signed_at timestamptz)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  scheme_name pg_catalog.text := scheme;
  tolerance_us numeric;
  signs_url boolean;
  default_tolerance_s bigint;
  now_us numeric;
  keys pg_catalog.bytea[];
  verdict record;
  hmac_algorithm pg_catalog.text;
  hmac_encoding pg_catalog.text;
BEGIN
  -- `checked`: webhook_receive checked the arguments (its scheme is a
  -- canonical name, its secrets checked, its tolerance read) in its order
  IF NOT checked THEN
    scheme_name := webhook_dedup._signing_scheme(scheme, payload);
    PERFORM webhook_dedup._check_at(at);
  END IF;
  IF tolerance IS NOT NULL THEN
    IF pg_catalog.date_part('month', tolerance) OPERATOR(pg_catalog.<>) 0
       OR pg_catalog.date_part('year', tolerance) OPERATOR(pg_catalog.<>) 0 THEN
      RAISE EXCEPTION 'tolerance must not have a month or year part (use days, e.g. ''30 days'')'
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- time.rs, duration_us: days of 24 h and the time part, in an i64 of
    -- microseconds
    IF pg_catalog.abs(pg_catalog.date_part('day', tolerance)::numeric OPERATOR(pg_catalog.*) 86400000000)
         OPERATOR(pg_catalog.>) 9223372036854775807
       OR pg_catalog.abs(EXTRACT(epoch FROM tolerance) OPERATOR(pg_catalog.*) 1000000)
         OPERATOR(pg_catalog.>) 9223372036854775807 THEN
      RAISE EXCEPTION 'tolerance is out of range' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    tolerance_us := EXTRACT(epoch FROM tolerance) OPERATOR(pg_catalog.*) 1000000;
  END IF;
  IF NOT checked THEN
    PERFORM webhook_dedup._check_secrets(secrets);
  END IF;
  SELECT h.algorithm_name, h.encoding_name INTO hmac_algorithm, hmac_encoding
    FROM webhook_dedup._hmac_spec(scheme_name, signature_header, signature_prefix, algorithm, encoding) AS h;
  IF scheme_name OPERATOR(pg_catalog.=) ANY (ARRAY['discord', 'sendgrid']) THEN
    RAISE EXCEPTION 'scheme % signs with a public key (%), which the SQL edition cannot verify: use the native edition',
      scheme_name, CASE WHEN scheme_name OPERATOR(pg_catalog.=) 'discord' THEN 'Ed25519' ELSE 'ECDSA P-256' END
      USING ERRCODE = 'feature_not_supported',
            HINT = 'pgcrypto and PostgreSQL have no Ed25519 or ECDSA verification (docs/sql-edition.md, "Differences").';
  END IF;
  -- signature::verify
  IF tolerance_us OPERATOR(pg_catalog.<) 0 THEN
    RAISE EXCEPTION 'tolerance must not be negative' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF tolerance_us OPERATOR(pg_catalog.>) (365::numeric OPERATOR(pg_catalog.*) 86400000000) THEN
    RAISE EXCEPTION 'tolerance must be at most 365 days' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT s.signs_url, s.default_tolerance_s INTO signs_url, default_tolerance_s
    FROM webhook_dedup._schemes() AS s WHERE s.name OPERATOR(pg_catalog.=) scheme_name;
  IF url IS NOT NULL AND NOT signs_url THEN
    RAISE EXCEPTION 'url applies only to schemes twilio, square and hubspot, not %', scheme_name
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  keys := webhook_dedup._scheme_keys(scheme_name, secrets);
  tolerance_us := COALESCE(tolerance_us, default_tolerance_s::numeric OPERATOR(pg_catalog.*) 1000000, 0);
  now_us := EXTRACT(epoch FROM at) OPERATOR(pg_catalog.*) 1000000;
  IF scheme_name OPERATOR(pg_catalog.=) ANY (ARRAY['square', 'hubspot', 'twilio']) AND url IS NULL THEN
    RAISE EXCEPTION 'scheme % needs the request url (argument url)', scheme_name USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF scheme_name OPERATOR(pg_catalog.=) 'hubspot' AND COALESCE(method, '') OPERATOR(pg_catalog.=) '' THEN
    RAISE EXCEPTION 'scheme hubspot needs the request method (argument method)' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF scheme_name OPERATOR(pg_catalog.=) ANY (ARRAY['github', 'shopify', 'typeform', 'twitter', 'intercom', 'square']) THEN
    SELECT v.* INTO verdict
      FROM webhook_dedup._tagged_frames() AS f,
           LATERAL webhook_dedup._verify_tagged(f.header, f.tag, f.other, f.encoding, f.algorithm,
                                                f.scheme OPERATOR(pg_catalog.=) 'twitter', payload, headers, keys,
                                                pg_catalog.convert_to(CASE WHEN scheme_name OPERATOR(pg_catalog.=) 'square' THEN url END, 'UTF8')) AS v
     WHERE f.scheme OPERATOR(pg_catalog.=) scheme_name;
  ELSIF scheme_name OPERATOR(pg_catalog.=) 'hmac' THEN
    IF signature_header IS NULL THEN
      RAISE EXCEPTION 'scheme hmac needs signature_header (and optionally signature_prefix, algorithm, encoding)'
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    verdict := webhook_dedup._verify_tagged(pg_catalog.translate(signature_header, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
                                                                 'abcdefghijklmnopqrstuvwxyz'),
                                            COALESCE(signature_prefix, ''), 'always', hmac_encoding, hmac_algorithm, false,
                                            payload, headers, keys, NULL);
  ELSIF scheme_name OPERATOR(pg_catalog.=) 'mailgun' THEN
    verdict := webhook_dedup._verify_mailgun(payload, keys, tolerance_us, now_us);
  ELSIF scheme_name OPERATOR(pg_catalog.=) 'linear' THEN
    verdict := webhook_dedup._verify_linear(payload, headers, keys, tolerance_us, now_us);
  ELSIF scheme_name OPERATOR(pg_catalog.=) 'hubspot' THEN
    verdict := webhook_dedup._verify_hubspot(method, url, payload, headers, keys, tolerance_us, now_us);
  ELSIF scheme_name OPERATOR(pg_catalog.=) 'slack' THEN
    verdict := webhook_dedup._verify_v0('x-slack-signature', 'x-slack-request-timestamp', payload,
                                        headers, keys, tolerance_us, now_us);
  ELSIF scheme_name OPERATOR(pg_catalog.=) 'zoom' THEN
    verdict := webhook_dedup._verify_v0('x-zm-signature', 'x-zm-request-timestamp', payload,
                                        headers, keys, tolerance_us, now_us);
  ELSIF scheme_name OPERATOR(pg_catalog.=) 'twitch' THEN
    verdict := webhook_dedup._verify_twitch(payload, headers, keys, tolerance_us, now_us);
  ELSIF scheme_name OPERATOR(pg_catalog.=) 'twilio' THEN
    verdict := webhook_dedup._verify_twilio(url, payload, headers, keys);
  ELSIF scheme_name OPERATOR(pg_catalog.=) 'standard' THEN
    verdict := webhook_dedup._verify_standard(payload, headers, keys, tolerance_us, now_us);
  ELSE
    SELECT * INTO verdict
      FROM webhook_dedup._timestamped_frames() AS f,
           LATERAL webhook_dedup._verify_timestamped(f.header, f.separator, f.timestamp_key, f.signature_key, f.joiner,
                                                     f.encoding, payload, headers, keys, tolerance_us, now_us) AS v
     WHERE f.scheme OPERATOR(pg_catalog.=) scheme_name;
  END IF;
  valid := verdict.reason OPERATOR(pg_catalog.=) 'ok';
  reason := verdict.reason;
  secret_index := verdict.secret_index;
  signed_at := pg_catalog.to_timestamp(verdict.signed_at_s::double precision);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify(text, bytea, jsonb, text[], interval, timestamptz, text, text, text, text,
                                             text, text, boolean) FROM PUBLIC;

-- The signature header of a scheme, present and sent once (mod.rs,
-- signature_header and single): its value, or NULL with the reason
-- (missing_header, or malformed_header when sent more than once).
CREATE FUNCTION webhook_dedup._header_once(headers jsonb, name text, OUT value text, OUT reason text)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  v pg_catalog.jsonb := headers OPERATOR(pg_catalog.->) name;
BEGIN
  IF v IS NULL THEN
    reason := 'missing_header';
  ELSIF pg_catalog.jsonb_array_length(v) OPERATOR(pg_catalog.>) 1 THEN
    reason := 'malformed_header';
  ELSE
    value := v OPERATOR(pg_catalog.->>) 0;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._header_once(jsonb, text) FROM PUBLIC;

-- The first of `keys` (1-based) whose HMAC (`algorithm`) over `message` is one
-- of `candidates` (ct.rs, first_match: every secret against every
-- signature, each compared in constant time), or NULL.
CREATE FUNCTION webhook_dedup._first_match(keys bytea[], candidates bytea[], message bytea,
                                           algorithm text DEFAULT 'sha256') RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  key pg_catalog.bytea;
  candidate pg_catalog.bytea;
  mac pg_catalog.bytea;
  i integer := 0;
BEGIN
  FOREACH key IN ARRAY keys LOOP
    i := i OPERATOR(pg_catalog.+) 1;
    mac := webhook_dedup._hmac(algorithm, key, message);
    FOREACH candidate IN ARRAY candidates LOOP
      IF webhook_dedup._ct_equal(mac, candidate) THEN
        RETURN i;
      END IF;
    END LOOP;
  END LOOP;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._first_match(bytea[], bytea[], bytea, text) FROM PUBLIC;

-- HMAC under `algorithm` (ct.rs, hmac): sha256 and sha512 over
-- PostgreSQL's own functions (_hmac_sha2); sha1, which PostgreSQL lacks,
-- through pgcrypto's hmac() wherever pgcrypto is installed (intercom,
-- twilio, the generic scheme's sha1): without pgcrypto those are 0A000.
CREATE FUNCTION webhook_dedup._hmac(algorithm text, key bytea, message bytea) RETURNS bytea
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  crypto pg_catalog.name;
  mac pg_catalog.bytea;
BEGIN
  IF algorithm OPERATOR(pg_catalog.<>) 'sha1' THEN
    RETURN webhook_dedup._hmac_sha2(algorithm, key, message);
  END IF;
  SELECT n.nspname INTO crypto FROM pg_catalog.pg_extension AS e
    JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
   WHERE e.extname OPERATOR(pg_catalog.=) 'pgcrypto';
  IF crypto IS NULL THEN
    RAISE EXCEPTION 'HMAC-SHA1 needs pgcrypto in the SQL edition' USING ERRCODE = 'feature_not_supported',
      HINT = 'CREATE EXTENSION pgcrypto (every managed platform has it), or use the native edition.';
  END IF;
  EXECUTE pg_catalog.format('SELECT %I.hmac($1, $2, %L)', crypto, 'sha1') INTO mac USING message, key;
  RETURN mac;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._hmac(text, bytea, bytea) FROM PUBLIC;

-- A scheme of one tagged header (frame.rs, TaggedHeader): the header
-- sent once, its value trimmed, the tag stripped, the rest trimmed and
-- decoded (`encoding`, the MAC's length of `algorithm`). A value without
-- the tag names another version (unsupported_version rather than
-- malformed_header): when it holds '=' (`other` = 'tag', mod.rs,
-- names_a_tag), never ('never'), or always ('always': the generic
-- scheme). The MAC covers `prefix` (Square's URL) and the raw body; with
-- `body_is_object`, only a body whose first non-whitespace byte is '{'
-- (X's, twitter.rs) can match.
CREATE FUNCTION webhook_dedup._verify_tagged(header text, tag text, other text, encoding text, algorithm text,
                                             body_is_object boolean, payload bytea, headers jsonb, keys bytea[],
                                             prefix bytea,
                                             OUT reason text, OUT secret_index integer, OUT signed_at_s bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  len integer := CASE WHEN algorithm OPERATOR(pg_catalog.=) 'sha1' THEN 20 WHEN algorithm OPERATOR(pg_catalog.=) 'sha256' THEN 32 ELSE 64 END;
  sent record;
  value pg_catalog.text;
  encoded pg_catalog.text;
  candidate pg_catalog.bytea;
BEGIN
  sent := webhook_dedup._header_once(headers, header);
  IF sent.reason IS NOT NULL THEN
    reason := sent.reason;
    RETURN;
  END IF;
  value := webhook_dedup._trim(sent.value);
  IF pg_catalog.starts_with(value, tag) THEN
    encoded := webhook_dedup._trim(pg_catalog.substr(value, pg_catalog.length(tag) OPERATOR(pg_catalog.+) 1));
    candidate := CASE WHEN encoding OPERATOR(pg_catalog.=) 'hex' THEN webhook_dedup._decode_hex(encoded, len)
                               ELSE webhook_dedup._decode_base64(encoded, len) END;
  END IF;
  IF candidate IS NULL THEN
    reason := CASE WHEN NOT pg_catalog.starts_with(value, tag)
                        AND (other OPERATOR(pg_catalog.=) 'always'
                             OR (other OPERATOR(pg_catalog.=) 'tag' AND pg_catalog.strpos(value, '=') OPERATOR(pg_catalog.>) 0))
                   THEN 'unsupported_version' ELSE 'malformed_header' END;
    RETURN;
  END IF;
  IF body_is_object
     AND pg_catalog.substr(pg_catalog.ltrim(payload, '\x20090a0c0d'::pg_catalog.bytea), 1, 1) OPERATOR(pg_catalog.<>) '\x7b'::pg_catalog.bytea THEN
    reason := 'no_matching_signature';
    RETURN;
  END IF;
  secret_index := webhook_dedup._first_match(keys, ARRAY[candidate], COALESCE(prefix, ''::pg_catalog.bytea) OPERATOR(pg_catalog.||) payload,
                                             algorithm);
  reason := CASE WHEN secret_index IS NULL THEN 'no_matching_signature' ELSE 'ok' END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify_tagged(text, text, text, text, text, boolean, bytea, jsonb, bytea[], bytea)
  FROM PUBLIC;

-- A scheme of one timestamped header (frame.rs, TimestampedHeader: stripe,
-- paddle, calendly, their fields from _timestamped_frames): the header
-- sent once; its elements split at `separator`, each trimmed and split at
-- its first '=' (one without is skipped), key and value trimmed; the time
-- under `timestamp_key`, once, 1 to 12 ASCII digits (else the whole header
-- is malformed_header); each signature under `signature_key` decoded to 32
-- bytes (else skipped); any other key is another version. A signature
-- matching some secret's HMAC-SHA256 of `<time as sent><joiner><body>`,
-- then the window: |now - time| <= tolerance (microseconds, inclusive;
-- mod.rs, window).
CREATE FUNCTION webhook_dedup._verify_timestamped(header text, separator text, timestamp_key text, signature_key text,
                                                  joiner text, encoding text, payload bytea, headers jsonb,
                                                  keys bytea[], tolerance_us numeric, now_us numeric,
                                                  OUT reason text, OUT secret_index integer, OUT signed_at_s bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  sent record;
  element pg_catalog.text;
  key pg_catalog.text;
  val pg_catalog.text;
  at_text pg_catalog.text;
  signatures pg_catalog.bytea[] := '{}';
  other_tags boolean := false;
  decoded pg_catalog.bytea;
BEGIN
  sent := webhook_dedup._header_once(headers, header);
  IF sent.reason IS NOT NULL THEN
    reason := sent.reason;
    RETURN;
  END IF;
  FOREACH element IN ARRAY pg_catalog.string_to_array(sent.value, separator) LOOP
    element := webhook_dedup._trim(element);
    CONTINUE WHEN pg_catalog.strpos(element, '=') OPERATOR(pg_catalog.=) 0;
    key := webhook_dedup._trim(pg_catalog.split_part(element, '=', 1));
    val := webhook_dedup._trim(pg_catalog.substr(element, pg_catalog.strpos(element, '=') OPERATOR(pg_catalog.+) 1));
    IF key OPERATOR(pg_catalog.=) timestamp_key THEN
      IF at_text IS NOT NULL OR val OPERATOR(pg_catalog.!~) '^[0-9]{1,12}$' THEN
        reason := 'malformed_header';
        RETURN;
      END IF;
      at_text := val;
    ELSIF key OPERATOR(pg_catalog.=) signature_key THEN
      decoded := CASE WHEN encoding OPERATOR(pg_catalog.=) 'hex' THEN webhook_dedup._decode_hex(val, 32)
                               ELSE webhook_dedup._decode_base64(val, 32) END;
      IF decoded IS NOT NULL THEN
        signatures := signatures OPERATOR(pg_catalog.||) decoded;
      END IF;
    ELSE
      other_tags := true;
    END IF;
  END LOOP;
  IF at_text IS NULL THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  signed_at_s := at_text::bigint;
  IF pg_catalog.cardinality(signatures) OPERATOR(pg_catalog.=) 0 THEN
    reason := CASE WHEN other_tags THEN 'unsupported_version' ELSE 'malformed_header' END;
    RETURN;
  END IF;
  secret_index := webhook_dedup._first_match(keys, signatures,
                                             pg_catalog.convert_to(at_text OPERATOR(pg_catalog.||) joiner, 'UTF8')
                                               OPERATOR(pg_catalog.||) payload);
  IF secret_index IS NULL THEN
    reason := 'no_matching_signature';
    RETURN;
  END IF;
  reason := webhook_dedup._window(signed_at_s, now_us, tolerance_us);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify_timestamped(text, text, text, text, text, text, bytea, jsonb, bytea[],
                                                         numeric, numeric) FROM PUBLIC;

-- The replay window (mod.rs, window): |now - signed| <= tolerance passes,
-- in microseconds, exactly; older is timestamp_too_old, newer
-- timestamp_too_new.
CREATE FUNCTION webhook_dedup._window(signed_at_s bigint, now_us numeric, tolerance_us numeric) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (SELECT CASE WHEN a.age OPERATOR(pg_catalog.>) tolerance_us THEN 'timestamp_too_old'
                    WHEN a.age OPERATOR(pg_catalog.<) (OPERATOR(pg_catalog.-) tolerance_us) THEN 'timestamp_too_new'
                    ELSE 'ok' END
          FROM (SELECT now_us OPERATOR(pg_catalog.-) (signed_at_s::numeric OPERATOR(pg_catalog.*) 1000000) AS age) AS a);
REVOKE ALL ON FUNCTION webhook_dedup._window(bigint, numeric, numeric) FROM PUBLIC;

-- The key of each secret under a scheme (mod.rs, keys, and each scheme's
-- key): its UTF-8 bytes, but for standard `whsec_<base64>` or bare base64
-- (standard.rs, key). 22023 names the secret that cannot be a key; a
-- public key (Ed25519 `whpk_`) is 0A000: the SQL edition has no Ed25519.
CREATE FUNCTION webhook_dedup._scheme_keys(scheme text, secrets text[]) RETURNS bytea[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  n integer := pg_catalog.cardinality(secrets);
  i integer := 0;
  secret pg_catalog.text;
  key pg_catalog.bytea;
  keys pg_catalog.bytea[] := '{}';
BEGIN
  FOREACH secret IN ARRAY secrets LOOP
    i := i OPERATOR(pg_catalog.+) 1;
    IF scheme OPERATOR(pg_catalog.<>) 'standard' THEN
      key := pg_catalog.convert_to(secret, 'UTF8');
    ELSIF pg_catalog.starts_with(secret, 'whpk_') THEN
      IF webhook_dedup._decode_base64(pg_catalog.substr(secret, 6), NULL) IS NULL THEN
        RAISE EXCEPTION 'secret % of % is not canonical base64 after its whpk_ prefix', i, n
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      RAISE EXCEPTION 'secret % of % is a whpk_ public key: Ed25519 signatures (v1a) are verified by the native edition only', i, n
        USING ERRCODE = 'feature_not_supported', HINT = 'Use the sender''s whsec_ secret (v1), or the native edition.';
    ELSIF pg_catalog.starts_with(secret, 'whsk_') THEN
      RAISE EXCEPTION 'secret % of % is a whsk_ private key: configure the sender''s whpk_ public key instead', i, n
        USING ERRCODE = 'invalid_parameter_value';
    ELSE
      key := webhook_dedup._decode_base64(CASE WHEN pg_catalog.starts_with(secret, 'whsec_') THEN pg_catalog.substr(secret, 7)
                                               ELSE secret END, NULL);
      IF key IS NULL THEN
        RAISE EXCEPTION 'secret % of % is not canonical base64 after its optional whsec_ prefix', i, n
          USING ERRCODE = 'invalid_parameter_value';
      ELSIF pg_catalog.length(key) OPERATOR(pg_catalog.=) 0 THEN
        RAISE EXCEPTION 'secret % of % decodes to an empty key', i, n USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END IF;
    keys := keys OPERATOR(pg_catalog.||) key;
  END LOOP;
  RETURN keys;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._scheme_keys(text, text[]) FROM PUBLIC;

-- A signed Unix time header (mod.rs, timestamp_header): present once,
-- trimmed, 1 to 12 ASCII digits; else NULL with the reason.
CREATE FUNCTION webhook_dedup._timestamp_header(headers jsonb, name text, OUT text_sent text, OUT seconds bigint,
                                                OUT reason text)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  sent record;
BEGIN
  sent := webhook_dedup._header_once(headers, name);
  IF sent.reason IS NOT NULL THEN
    reason := sent.reason;
    RETURN;
  END IF;
  text_sent := webhook_dedup._trim(sent.value);
  IF text_sent OPERATOR(pg_catalog.!~) '^[0-9]{1,12}$' THEN
    text_sent := NULL;
    reason := 'malformed_header';
    RETURN;
  END IF;
  seconds := text_sent::bigint;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._timestamp_header(jsonb, text) FROM PUBLIC;

-- Slack's v0 (slack.rs, verify_v0; Zoom's is the same with its headers):
-- the time header first, then the signature header once, `v0=<hex>`, an
-- HMAC-SHA256 of `v0:<time as sent>:<body>`; then the window.
CREATE FUNCTION webhook_dedup._verify_v0(signature_header text, timestamp_header text, payload bytea, headers jsonb,
                                         keys bytea[], tolerance_us numeric, now_us numeric,
                                         OUT reason text, OUT secret_index integer, OUT signed_at_s bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  ts record;
  sent record;
  value pg_catalog.text;
  candidate pg_catalog.bytea;
BEGIN
  ts := webhook_dedup._timestamp_header(headers, timestamp_header);
  IF ts.reason IS NOT NULL THEN
    reason := ts.reason;
    RETURN;
  END IF;
  signed_at_s := ts.seconds;
  sent := webhook_dedup._header_once(headers, signature_header);
  IF sent.reason IS NOT NULL THEN
    reason := sent.reason;
    RETURN;
  END IF;
  value := webhook_dedup._trim(sent.value);
  IF pg_catalog.starts_with(value, 'v0=') THEN
    candidate := webhook_dedup._decode_hex(webhook_dedup._trim(pg_catalog.substr(value, 4)), 32);
  END IF;
  IF candidate IS NULL THEN
    reason := CASE WHEN NOT pg_catalog.starts_with(value, 'v0=') AND pg_catalog.strpos(value, '=') OPERATOR(pg_catalog.>) 0
                   THEN 'unsupported_version' ELSE 'malformed_header' END;
    RETURN;
  END IF;
  secret_index := webhook_dedup._first_match(keys, ARRAY[candidate],
                                             pg_catalog.convert_to('v0:' OPERATOR(pg_catalog.||) ts.text_sent
                                                                   OPERATOR(pg_catalog.||) ':', 'UTF8')
                                               OPERATOR(pg_catalog.||) payload);
  reason := CASE WHEN secret_index IS NULL THEN 'no_matching_signature'
                 ELSE webhook_dedup._window(signed_at_s, now_us, tolerance_us) END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify_v0(text, text, bytea, jsonb, bytea[], numeric, numeric) FROM PUBLIC;

-- Standard Webhooks, HMAC (standard.rs, check): the webhook-* headers, or
-- svix-* when no webhook-* header was sent; the id (once, trimmed), the
-- time, then the signature header once: entries separated by ASCII
-- whitespace, each `<version>,<signature>`; `v1` a base64 HMAC-SHA256 of
-- `<id>.<time as sent>.<body>` (32 bytes); any other version (v1a among
-- them: every key here is a MAC key) is another version.
CREATE FUNCTION webhook_dedup._verify_standard(payload bytea, headers jsonb, keys bytea[], tolerance_us numeric,
                                               now_us numeric,
                                               OUT reason text, OUT secret_index integer, OUT signed_at_s bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  prefix pg_catalog.text := CASE WHEN headers OPERATOR(pg_catalog.?|) ARRAY['webhook-id', 'webhook-timestamp', 'webhook-signature']
                      THEN 'webhook-' ELSE 'svix-' END;
  id record;
  ts record;
  sent record;
  entry pg_catalog.text;
  macs pg_catalog.bytea[] := '{}';
  other_version boolean := false;
  decoded pg_catalog.bytea;
BEGIN
  id := webhook_dedup._header_once(headers, prefix OPERATOR(pg_catalog.||) 'id');
  IF id.reason IS NOT NULL THEN
    reason := id.reason;
    RETURN;
  END IF;
  ts := webhook_dedup._timestamp_header(headers, prefix OPERATOR(pg_catalog.||) 'timestamp');
  IF ts.reason IS NOT NULL THEN
    reason := ts.reason;
    RETURN;
  END IF;
  signed_at_s := ts.seconds;
  sent := webhook_dedup._header_once(headers, prefix OPERATOR(pg_catalog.||) 'signature');
  IF sent.reason IS NOT NULL THEN
    reason := sent.reason;
    RETURN;
  END IF;
  FOR entry IN SELECT e FROM pg_catalog.regexp_split_to_table(sent.value, '[ \t\n\f\r]+') AS e
                WHERE e OPERATOR(pg_catalog.<>) '' LOOP
    CONTINUE WHEN pg_catalog.strpos(entry, ',') OPERATOR(pg_catalog.=) 0;
    IF pg_catalog.split_part(entry, ',', 1) OPERATOR(pg_catalog.=) 'v1' THEN
      decoded := webhook_dedup._decode_base64(pg_catalog.substr(entry, 4), 32);
      IF decoded IS NOT NULL THEN
        macs := macs OPERATOR(pg_catalog.||) decoded;
      END IF;
    ELSE
      other_version := true;
    END IF;
  END LOOP;
  IF pg_catalog.cardinality(macs) OPERATOR(pg_catalog.=) 0 THEN
    reason := CASE WHEN other_version THEN 'unsupported_version' ELSE 'malformed_header' END;
    RETURN;
  END IF;
  secret_index := webhook_dedup._first_match(keys, macs,
                                             pg_catalog.convert_to(webhook_dedup._trim(id.value) OPERATOR(pg_catalog.||) '.'
                                                                   OPERATOR(pg_catalog.||) ts.text_sent
                                                                   OPERATOR(pg_catalog.||) '.', 'UTF8')
                                               OPERATOR(pg_catalog.||) payload);
  reason := CASE WHEN secret_index IS NULL THEN 'no_matching_signature'
                 ELSE webhook_dedup._window(signed_at_s, now_us, tolerance_us) END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify_standard(bytea, jsonb, bytea[], numeric, numeric) FROM PUBLIC;

-- The headers of a typed convenience (verify.rs, typed): name, value,
-- name, value, ...; a NULL value is an absent header. Returns what
-- _headers returns.
CREATE FUNCTION webhook_dedup._header_pairs(VARIADIC pairs text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (SELECT COALESCE(pg_catalog.jsonb_object_agg(
                          pg_catalog.translate(pairs[i], 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
                          pg_catalog.jsonb_build_array(pairs[i OPERATOR(pg_catalog.+) 1])), '{}')
          FROM pg_catalog.generate_series(1, pg_catalog.cardinality(pairs), 2) AS i
         WHERE pairs[i OPERATOR(pg_catalog.+) 1] IS NOT NULL);
REVOKE ALL ON FUNCTION webhook_dedup._header_pairs(text[]) FROM PUBLIC;

-- The URI HubSpot signs (hubspot.rs, signed_uri): the request URI with the
-- percent-escapes of : / ? @ ! $ ' ( ) * , ; decoded (hex digits of
-- either case), every other byte as received. A decoded character is never
-- '%', so decoding each escape everywhere is the one left-to-right pass.
CREATE FUNCTION webhook_dedup._hubspot_signed_uri(uri text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  c pg_catalog.text;
  out pg_catalog.text := uri;
BEGIN
  FOREACH c IN ARRAY ARRAY[':', '/', '?', '@', '!', '$', '''', '(', ')', '*', ',', ';'] LOOP
    out := pg_catalog.regexp_replace(out, '%' OPERATOR(pg_catalog.||) pg_catalog.to_hex(pg_catalog.ascii(c)), c, 'gi');
  END LOOP;
  RETURN out;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._hubspot_signed_uri(text) FROM PUBLIC;

-- HubSpot's v3 (hubspot.rs, verify): the time header (Unix milliseconds, 1
-- to 15 ASCII digits, trimmed), the signature header once, base64 of an
-- HMAC-SHA256 of method, signed URI, body and the time as sent; the window
-- in milliseconds.
CREATE FUNCTION webhook_dedup._verify_hubspot(method text, url text, payload bytea, headers jsonb, keys bytea[],
                                              tolerance_us numeric, now_us numeric,
                                              OUT reason text, OUT secret_index integer, OUT signed_at_s bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  ts record;
  ts_text pg_catalog.text;
  ts_ms bigint;
  sent record;
  candidate pg_catalog.bytea;
  age numeric;
BEGIN
  ts := webhook_dedup._header_once(headers, 'x-hubspot-request-timestamp');
  IF ts.reason IS NOT NULL THEN
    reason := ts.reason;
    RETURN;
  END IF;
  ts_text := webhook_dedup._trim(ts.value);
  IF ts_text OPERATOR(pg_catalog.!~) '^[0-9]{1,15}$' THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  ts_ms := ts_text::bigint;
  signed_at_s := ts_ms OPERATOR(pg_catalog./) 1000;
  sent := webhook_dedup._header_once(headers, 'x-hubspot-signature-v3');
  IF sent.reason IS NOT NULL THEN
    reason := sent.reason;
    RETURN;
  END IF;
  candidate := webhook_dedup._decode_base64(webhook_dedup._trim(sent.value), 32);
  IF candidate IS NULL THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  secret_index := webhook_dedup._first_match(keys, ARRAY[candidate],
                                             pg_catalog.convert_to(method OPERATOR(pg_catalog.||)
                                                                   webhook_dedup._hubspot_signed_uri(url), 'UTF8')
                                               OPERATOR(pg_catalog.||) payload
                                               OPERATOR(pg_catalog.||) pg_catalog.convert_to(ts_text, 'UTF8'));
  IF secret_index IS NULL THEN
    reason := 'no_matching_signature';
    RETURN;
  END IF;
  age := now_us OPERATOR(pg_catalog.-) (ts_ms::numeric OPERATOR(pg_catalog.*) 1000);
  reason := CASE WHEN age OPERATOR(pg_catalog.>) tolerance_us THEN 'timestamp_too_old'
                 WHEN age OPERATOR(pg_catalog.<) (OPERATOR(pg_catalog.-) tolerance_us) THEN 'timestamp_too_new'
                 ELSE 'ok' END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify_hubspot(text, text, bytea, jsonb, bytea[], numeric, numeric) FROM PUBLIC;

-- The Unix milliseconds of Linear's body (linear.rs, timestamp_ms): the
-- body a JSON object (json, not jsonb: the number as written, the last of
-- a repeated member, as serde_json reads it), its webhookTimestamp a whole
-- non-negative number of at most 999,999,999,999,999; else NULL.
CREATE FUNCTION webhook_dedup._linear_timestamp_ms(payload bytea) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  body pg_catalog.json;
  member pg_catalog.json;
  written pg_catalog.text;
BEGIN
  -- not JSON as serde_json reads it (_body_json: not UTF-8, a number past
  -- the doubles' range, nesting past its limit): no timestamp
  body := webhook_dedup._body_json(payload);
  IF body IS NULL OR pg_catalog.json_typeof(body) OPERATOR(pg_catalog.<>) 'object' THEN
    RETURN NULL;
  END IF;
  member := body OPERATOR(pg_catalog.->) 'webhookTimestamp';
  IF member IS NULL OR pg_catalog.json_typeof(member) OPERATOR(pg_catalog.<>) 'number' THEN
    RETURN NULL;
  END IF;
  written := member::pg_catalog.text;
  IF written OPERATOR(pg_catalog.!~) '^[0-9]{1,15}$' THEN
    RETURN NULL;
  END IF;
  RETURN written::bigint;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._linear_timestamp_ms(bytea) FROM PUBLIC;

-- Linear (linear.rs, verify): the signature header once, hex (trimmed),
-- an HMAC-SHA256 of the body; then the body's webhookTimestamp
-- (milliseconds) in the window.
CREATE FUNCTION webhook_dedup._verify_linear(payload bytea, headers jsonb, keys bytea[], tolerance_us numeric,
                                             now_us numeric,
                                             OUT reason text, OUT secret_index integer, OUT signed_at_s bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  sent record;
  candidate pg_catalog.bytea;
  ms bigint;
  age numeric;
BEGIN
  sent := webhook_dedup._header_once(headers, 'linear-signature');
  IF sent.reason IS NOT NULL THEN
    reason := sent.reason;
    RETURN;
  END IF;
  candidate := webhook_dedup._decode_hex(webhook_dedup._trim(sent.value), 32);
  IF candidate IS NULL THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  secret_index := webhook_dedup._first_match(keys, ARRAY[candidate], payload);
  IF secret_index IS NULL THEN
    reason := 'no_matching_signature';
    RETURN;
  END IF;
  ms := webhook_dedup._linear_timestamp_ms(payload);
  IF ms IS NULL THEN
    secret_index := NULL;
    reason := 'malformed_header';
    RETURN;
  END IF;
  signed_at_s := ms OPERATOR(pg_catalog./) 1000;
  age := now_us OPERATOR(pg_catalog.-) (ms::numeric OPERATOR(pg_catalog.*) 1000);
  reason := CASE WHEN age OPERATOR(pg_catalog.>) tolerance_us THEN 'timestamp_too_old'
                 WHEN age OPERATOR(pg_catalog.<) (OPERATOR(pg_catalog.-) tolerance_us) THEN 'timestamp_too_new'
                 ELSE 'ok' END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify_linear(bytea, jsonb, bytea[], numeric, numeric) FROM PUBLIC;

-- Mailgun (mailgun.rs, check): the body's "signature" object, read as
-- serde_json reads it (json: numbers as written, the last of a repeated
-- member); its timestamp a string or a whole non-negative number, 1 to 12
-- digits; its token a non-empty string; "signature" and "parent-signature"
-- hex strings of an HMAC-SHA256 of `<timestamp><token>`; then the window.
-- A \u0000 in the body is read as \u0001 (PostgreSQL's json holds none):
-- a token holding U+0000 does not verify here (docs/sql-edition.md).
CREATE FUNCTION webhook_dedup._verify_mailgun(payload bytea, keys bytea[], tolerance_us numeric, now_us numeric,
                                              OUT reason text, OUT secret_index integer, OUT signed_at_s bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  body pg_catalog.json;
  block pg_catalog.json;
  member pg_catalog.json;
  ts_text pg_catalog.text;
  token pg_catalog.text;
  candidates pg_catalog.bytea[] := '{}';
  presented boolean := false;
  decoded pg_catalog.bytea;
  m pg_catalog.text;
BEGIN
  -- the body as serde_json reads it (a number past the doubles' range or
  -- nesting past its limit: no JSON), \u0000 read as \u0001
  body := webhook_dedup._body_json(payload);
  IF body IS NULL OR pg_catalog.json_typeof(body) OPERATOR(pg_catalog.<>) 'object' THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  block := webhook_dedup._json_pointer(body, '/signature');
  IF block IS NULL THEN
    reason := 'missing_header';
    RETURN;
  END IF;
  IF pg_catalog.json_typeof(block) OPERATOR(pg_catalog.<>) 'object' THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  member := block OPERATOR(pg_catalog.->) 'timestamp';
  IF member IS NULL THEN
    reason := 'missing_header';
    RETURN;
  END IF;
  ts_text := CASE WHEN pg_catalog.json_typeof(member) OPERATOR(pg_catalog.=) 'string' THEN block OPERATOR(pg_catalog.->>) 'timestamp'
               WHEN pg_catalog.json_typeof(member) OPERATOR(pg_catalog.=) 'number' THEN CASE WHEN member::pg_catalog.text OPERATOR(pg_catalog.~) '^[0-9]+$' THEN member::pg_catalog.text END
             END;
  IF ts_text IS NULL OR ts_text OPERATOR(pg_catalog.!~) '^[0-9]{1,12}$' THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  signed_at_s := ts_text::bigint;
  member := block OPERATOR(pg_catalog.->) 'token';
  IF member IS NULL THEN
    reason := 'missing_header';
    RETURN;
  END IF;
  IF pg_catalog.json_typeof(member) OPERATOR(pg_catalog.<>) 'string'
     OR (block OPERATOR(pg_catalog.->>) 'token') OPERATOR(pg_catalog.=) '' THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  token := block OPERATOR(pg_catalog.->>) 'token';
  FOREACH m IN ARRAY ARRAY['signature', 'parent-signature'] LOOP
    member := block OPERATOR(pg_catalog.->) m;
    CONTINUE WHEN member IS NULL;
    presented := true;
    IF pg_catalog.json_typeof(member) OPERATOR(pg_catalog.=) 'string' THEN
      decoded := webhook_dedup._decode_hex(block OPERATOR(pg_catalog.->>) m, 32);
      IF decoded IS NOT NULL THEN
        candidates := candidates OPERATOR(pg_catalog.||) decoded;
      END IF;
    END IF;
  END LOOP;
  IF NOT presented THEN
    reason := 'missing_header';
    RETURN;
  END IF;
  IF pg_catalog.cardinality(candidates) OPERATOR(pg_catalog.=) 0 THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  secret_index := webhook_dedup._first_match(keys, candidates, pg_catalog.convert_to(ts_text OPERATOR(pg_catalog.||) token, 'UTF8'));
  reason := CASE WHEN secret_index IS NULL THEN 'no_matching_signature'
                 ELSE webhook_dedup._window(signed_at_s, now_us, tolerance_us) END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify_mailgun(bytea, bytea[], numeric, numeric) FROM PUBLIC;
