-- RFC 8785 (JSON Canonicalization Scheme) in SQL, for the fingerprint of
-- a source's covered JSON values (crates/webhook-dedup-core/src/profile.rs,
-- canonical_values, which serde_json_canonicalizer writes). Internal: the
-- owner's alone. Being built with webhook_receive (issue 43).

-- The shortest decimal digits of a nonzero finite double that read back
-- as it, the fewest of them where several lengths would (ECMA-262's
-- NumberToString step 5 and the ryu crate alike): `sign` '-' or '',
-- `digits` without leading or trailing zeros, and `n`, where the decimal
-- point goes (the value is 0.<digits> x 10^n). From PostgreSQL's shortest
-- float8 output (extra_float_digits = 1, pinned here), which leaves out
-- a value exactly halfway between two doubles that reads back as this one
-- (1e23 is written 9.999999999999999e+22): each shorter rounding is
-- tried, fewest digits first. NULL for a NaN or an infinity.
CREATE FUNCTION webhook_dedup._shortest_digits(value double precision, OUT sign text, OUT digits text, OUT n integer)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET extra_float_digits = 1
AS $$
DECLARE
  parts pg_catalog.text[];
  k integer;
  lead integer;
  mant numeric;
  kp integer;
  rounded numeric;
  candidate pg_catalog.text;
  cn integer;
BEGIN
  parts := pg_catalog.regexp_match(value::pg_catalog.text, '^(-?)([0-9]+)(?:\.([0-9]+))?(?:e([-+][0-9]+))?$');
  IF parts IS NULL OR value OPERATOR(pg_catalog.=) 0 THEN
    RETURN; -- NaN, Infinity, zero
  END IF;
  sign := parts[1];
  digits := parts[2] OPERATOR(pg_catalog.||) COALESCE(parts[3], '');
  n := pg_catalog.length(parts[2]) OPERATOR(pg_catalog.+) COALESCE(parts[4]::integer, 0);
  -- leading zeros (0.001) move the point; trailing zeros are not digits
  lead := pg_catalog.length(digits) OPERATOR(pg_catalog.-) pg_catalog.length(pg_catalog.ltrim(digits, '0'));
  digits := pg_catalog.rtrim(pg_catalog.ltrim(digits, '0'), '0');
  n := n OPERATOR(pg_catalog.-) lead;
  k := pg_catalog.length(digits);
  mant := ('0.' OPERATOR(pg_catalog.||) digits)::numeric;
  FOR kp IN 1 .. k OPERATOR(pg_catalog.-) 1 LOOP
    rounded := pg_catalog.round(mant, kp);
    IF rounded OPERATOR(pg_catalog.=) 1 THEN
      candidate := '1';
      cn := n OPERATOR(pg_catalog.+) 1;
    ELSE
      candidate := pg_catalog.rtrim(pg_catalog.substr(rounded::pg_catalog.text, 3), '0');
      cn := n;
    END IF;
    -- (a rounding past the largest double reads as no double at all)
    CONTINUE WHEN ('0.' OPERATOR(pg_catalog.||) candidate OPERATOR(pg_catalog.||) 'e' OPERATOR(pg_catalog.||) cn::pg_catalog.text)::numeric
                  OPERATOR(pg_catalog.>) 1.7976931348623157e308;
    IF (parts[1] OPERATOR(pg_catalog.||) '0.' OPERATOR(pg_catalog.||) candidate OPERATOR(pg_catalog.||) 'e'
        OPERATOR(pg_catalog.||) cn::pg_catalog.text)::double precision OPERATOR(pg_catalog.=) value THEN
      digits := candidate;
      n := cn;
      EXIT;
    END IF;
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._shortest_digits(double precision) FROM PUBLIC;

-- A double as RFC 8785 section 3.2.2.3 writes a JSON number: ECMAScript's
-- Number.prototype.toString (ECMA-262, 7.1.12.1 NumberToString): the
-- shortest digits (_shortest_digits), then k digits and the decimal
-- point's position n laid out as integer digits (k <= n <= 21), a
-- fraction (0 < n <= 21, or -6 < n <= 0 with leading zeros), or else
-- d.ddde+/-x; 0 and -0 as 0. NULL for a NaN or an infinity (no JSON
-- number is one).
CREATE FUNCTION webhook_dedup._es_number(value double precision) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  s record;
  k integer;
  e integer;
  out pg_catalog.text;
BEGIN
  IF value OPERATOR(pg_catalog.=) 0 THEN
    RETURN '0';
  END IF;
  s := webhook_dedup._shortest_digits(value);
  IF s.digits IS NULL THEN
    RETURN NULL;
  END IF;
  k := pg_catalog.length(s.digits);
  IF k OPERATOR(pg_catalog.<=) s.n AND s.n OPERATOR(pg_catalog.<=) 21 THEN
    out := s.digits OPERATOR(pg_catalog.||) pg_catalog.repeat('0', s.n OPERATOR(pg_catalog.-) k);
  ELSIF 0 OPERATOR(pg_catalog.<) s.n AND s.n OPERATOR(pg_catalog.<=) 21 THEN
    out := pg_catalog.left(s.digits, s.n) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.substr(s.digits, s.n OPERATOR(pg_catalog.+) 1);
  ELSIF -6 OPERATOR(pg_catalog.<) s.n AND s.n OPERATOR(pg_catalog.<=) 0 THEN
    out := '0.' OPERATOR(pg_catalog.||) pg_catalog.repeat('0', OPERATOR(pg_catalog.-) s.n) OPERATOR(pg_catalog.||) s.digits;
  ELSE
    e := s.n OPERATOR(pg_catalog.-) 1;
    out := pg_catalog.left(s.digits, 1)
           OPERATOR(pg_catalog.||) CASE WHEN k OPERATOR(pg_catalog.>) 1 THEN '.' OPERATOR(pg_catalog.||) pg_catalog.substr(s.digits, 2) ELSE '' END
           OPERATOR(pg_catalog.||) 'e' OPERATOR(pg_catalog.||) CASE WHEN e OPERATOR(pg_catalog.>=) 0 THEN '+' ELSE '-' END
           OPERATOR(pg_catalog.||) pg_catalog.abs(e)::pg_catalog.text;
  END IF;
  RETURN s.sign OPERATOR(pg_catalog.||) out;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._es_number(double precision) FROM PUBLIC;

-- A double as serde_json writes a float (the ryu crate's format_finite,
-- ryu 1.0 src/pretty/mod.rs format64): the shortest digits
-- (_shortest_digits) as integer digits with '.0' (k <= n <= 16), a
-- fraction (0 < n <= 16, or -5 < n <= 0 with leading zeros), else
-- d.ddde<x> (no '+'); 0 as 0.0, -0 as -0.0. NULL for a NaN or an
-- infinity.
CREATE FUNCTION webhook_dedup._ryu_number(value double precision) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  s record;
  k integer;
  out pg_catalog.text;
BEGIN
  IF value OPERATOR(pg_catalog.=) 0 THEN
    -- the sign of a zero: only its text tells
    RETURN CASE WHEN pg_catalog.starts_with(value::pg_catalog.text, '-') THEN '-0.0' ELSE '0.0' END;
  END IF;
  s := webhook_dedup._shortest_digits(value);
  IF s.digits IS NULL THEN
    RETURN NULL;
  END IF;
  k := pg_catalog.length(s.digits);
  IF k OPERATOR(pg_catalog.<=) s.n AND s.n OPERATOR(pg_catalog.<=) 16 THEN
    out := s.digits OPERATOR(pg_catalog.||) pg_catalog.repeat('0', s.n OPERATOR(pg_catalog.-) k) OPERATOR(pg_catalog.||) '.0';
  ELSIF 0 OPERATOR(pg_catalog.<) s.n AND s.n OPERATOR(pg_catalog.<=) 16 THEN
    out := pg_catalog.left(s.digits, s.n) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.substr(s.digits, s.n OPERATOR(pg_catalog.+) 1);
  ELSIF -5 OPERATOR(pg_catalog.<) s.n AND s.n OPERATOR(pg_catalog.<=) 0 THEN
    out := '0.' OPERATOR(pg_catalog.||) pg_catalog.repeat('0', OPERATOR(pg_catalog.-) s.n) OPERATOR(pg_catalog.||) s.digits;
  ELSE
    out := pg_catalog.left(s.digits, 1)
           OPERATOR(pg_catalog.||) CASE WHEN k OPERATOR(pg_catalog.>) 1 THEN '.' OPERATOR(pg_catalog.||) pg_catalog.substr(s.digits, 2) ELSE '' END
           OPERATOR(pg_catalog.||) 'e' OPERATOR(pg_catalog.||) (s.n OPERATOR(pg_catalog.-) 1)::pg_catalog.text;
  END IF;
  RETURN s.sign OPERATOR(pg_catalog.||) out;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._ryu_number(double precision) FROM PUBLIC;

-- A string as RFC 8785 section 3.2.2.2 writes it: in double quotes, '"'
-- and '\' escaped, the control characters below U+0020 as \b \t \n \f \r
-- or \u00xx (lower-case hex), everything else as itself (UTF-8).
CREATE FUNCTION webhook_dedup._jcs_string(value text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN '"' OPERATOR(pg_catalog.||) COALESCE((
  SELECT pg_catalog.string_agg(CASE
           WHEN c.ch OPERATOR(pg_catalog.=) '"' THEN '\"'
           WHEN c.ch OPERATOR(pg_catalog.=) '\' THEN '\\'
           WHEN c.ch OPERATOR(pg_catalog.=) E'\b' THEN '\b'
           WHEN c.ch OPERATOR(pg_catalog.=) E'\t' THEN '\t'
           WHEN c.ch OPERATOR(pg_catalog.=) E'\n' THEN '\n'
           WHEN c.ch OPERATOR(pg_catalog.=) E'\f' THEN '\f'
           WHEN c.ch OPERATOR(pg_catalog.=) E'\r' THEN '\r'
           WHEN pg_catalog.ascii(c.ch) OPERATOR(pg_catalog.<) 32
             THEN '\u' OPERATOR(pg_catalog.||) pg_catalog.lpad(pg_catalog.to_hex(pg_catalog.ascii(c.ch)), 4, '0')
           ELSE c.ch END, '' ORDER BY c.i)
    FROM pg_catalog.regexp_split_to_table(value, '') WITH ORDINALITY AS c(ch, i)
   WHERE c.ch OPERATOR(pg_catalog.<>) ''), '')
  OPERATOR(pg_catalog.||) '"';
REVOKE ALL ON FUNCTION webhook_dedup._jcs_string(text) FROM PUBLIC;

-- A member name's sort key (RFC 8785 section 3.2.3: names compared as
-- arrays of UTF-16 code units): each character's code units, big-endian,
-- a character past U+FFFF as its surrogate pair, so that bytea order is
-- code-unit order.
CREATE FUNCTION webhook_dedup._utf16_key(value text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN COALESCE((
  SELECT pg_catalog.string_agg(CASE WHEN c.cp OPERATOR(pg_catalog.<) 65536
                                    THEN pg_catalog.decode(pg_catalog.lpad(pg_catalog.to_hex(c.cp), 4, '0'), 'hex')
                                    ELSE pg_catalog.decode(
                                           pg_catalog.to_hex(55296 OPERATOR(pg_catalog.+) ((c.cp OPERATOR(pg_catalog.-) 65536) OPERATOR(pg_catalog./) 1024))
                                           OPERATOR(pg_catalog.||)
                                           pg_catalog.to_hex(56320 OPERATOR(pg_catalog.+) ((c.cp OPERATOR(pg_catalog.-) 65536) OPERATOR(pg_catalog.%) 1024)),
                                           'hex') END, ''::pg_catalog.bytea ORDER BY c.i)
    FROM (SELECT pg_catalog.ascii(x.ch) AS cp, x.i
            FROM pg_catalog.regexp_split_to_table(value, '') WITH ORDINALITY AS x(ch, i)
           WHERE x.ch OPERATOR(pg_catalog.<>) '') AS c), ''::pg_catalog.bytea);
REVOKE ALL ON FUNCTION webhook_dedup._utf16_key(text) FROM PUBLIC;

-- A JSON value as RFC 8785 writes it (serde_json_canonicalizer, over the
-- value serde_json reads): members once each (the last of a repeated
-- name, as serde_json keeps it), in UTF-16 order, no whitespace; numbers
-- as doubles (_es_number). A number serde_json reads as an integer
-- (no '.', 'e' or 'E', within u64 or i64) beyond 2^53 in magnitude would lose digits
-- (profile.rs, exact_as_double), and one past the doubles' range is no
-- JSON to serde_json: both raise 22003, which _canonical_values turns
-- into "hash the raw body".
CREATE FUNCTION webhook_dedup._jcs_value(v json) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  number pg_catalog.text;
BEGIN
  CASE WHEN pg_catalog.json_typeof(v) OPERATOR(pg_catalog.=) 'object' THEN
    RETURN '{' OPERATOR(pg_catalog.||) COALESCE((
      SELECT pg_catalog.string_agg(webhook_dedup._jcs_string(m.key) OPERATOR(pg_catalog.||) ':'
                                   OPERATOR(pg_catalog.||) webhook_dedup._jcs_value(m.value), ','
                                   ORDER BY webhook_dedup._utf16_key(m.key))
        FROM (SELECT DISTINCT ON (e.key) e.key, e.value
                FROM pg_catalog.json_each(v) WITH ORDINALITY AS e(key, value, i)
               ORDER BY e.key, e.i DESC) AS m), '') OPERATOR(pg_catalog.||) '}';
  WHEN pg_catalog.json_typeof(v) OPERATOR(pg_catalog.=) 'array' THEN
    RETURN '[' OPERATOR(pg_catalog.||) COALESCE((
      SELECT pg_catalog.string_agg(webhook_dedup._jcs_value(e.value), ',' ORDER BY e.i)
        FROM pg_catalog.json_array_elements(v) WITH ORDINALITY AS e(value, i)), '') OPERATOR(pg_catalog.||) ']';
  WHEN pg_catalog.json_typeof(v) OPERATOR(pg_catalog.=) 'string' THEN
    RETURN webhook_dedup._jcs_string(v OPERATOR(pg_catalog.#>>) '{}');
  WHEN pg_catalog.json_typeof(v) OPERATOR(pg_catalog.=) 'number' THEN
    number := v::pg_catalog.text;
    -- (an integer too large for u64, or below i64, serde_json reads as a
    -- double: that one is kept, as written by the double)
    IF number OPERATOR(pg_catalog.!~) '[.eE]'
       AND pg_catalog.abs(number::numeric) OPERATOR(pg_catalog.>) 9007199254740992
       AND number::numeric OPERATOR(pg_catalog.<=) 18446744073709551615
       AND number::numeric OPERATOR(pg_catalog.>=) -9223372036854775808 THEN
      RAISE EXCEPTION 'an integer past 2^53 in a covered value' USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    -- below half the least double, serde_json reads 0 (PostgreSQL's float8
    -- input refuses it)
    IF number::numeric OPERATOR(pg_catalog.<>) 0
       AND pg_catalog.abs(number::numeric) OPERATOR(pg_catalog.<=) 2.4703282292062327e-324 THEN
      RETURN '0';
    END IF;
    RETURN webhook_dedup._es_number(number::numeric::double precision);
  WHEN pg_catalog.json_typeof(v) OPERATOR(pg_catalog.=) 'boolean' THEN
    RETURN v::pg_catalog.text;
  ELSE
    RETURN 'null';
  END CASE;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._jcs_value(json) FROM PUBLIC;

-- The value at a JSON pointer (RFC 6901) as serde_json's Value::pointer
-- finds it: '' is the whole value; else '/'-separated tokens, each with
-- ~1 read as '/' and then ~0 as '~'; an object's member of that name (the
-- last, if repeated), an array's element at a decimal index without a
-- sign or a leading zero. NULL when it resolves to nothing.
CREATE FUNCTION webhook_dedup._json_pointer(v json, pointer text) RETURNS json
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  token pg_catalog.text;
  target pg_catalog.json := v;
  tokens pg_catalog.text[];
  i integer;
BEGIN
  IF pointer OPERATOR(pg_catalog.=) '' THEN
    RETURN v;
  END IF;
  IF NOT pg_catalog.starts_with(pointer, '/') THEN
    RETURN NULL;
  END IF;
  tokens := pg_catalog.string_to_array(pg_catalog.substr(pointer, 2), '/');
  IF pointer OPERATOR(pg_catalog.=) '/' THEN
    tokens := ARRAY[''];
  END IF;
  FOR i IN 1 .. pg_catalog.cardinality(tokens) LOOP
    token := pg_catalog.replace(pg_catalog.replace(tokens[i], '~1', '/'), '~0', '~');
    CASE WHEN pg_catalog.json_typeof(target) OPERATOR(pg_catalog.=) 'object' THEN
      SELECT e.value INTO target FROM pg_catalog.json_each(target) WITH ORDINALITY AS e(key, value, n)
       WHERE e.key OPERATOR(pg_catalog.=) token ORDER BY e.n DESC LIMIT 1;
      IF NOT FOUND THEN
        RETURN NULL;
      END IF;
    WHEN pg_catalog.json_typeof(target) OPERATOR(pg_catalog.=) 'array' THEN
      IF token OPERATOR(pg_catalog.!~) '^(0|[1-9][0-9]{0,17})$'
         OR token::bigint OPERATOR(pg_catalog.>=) pg_catalog.json_array_length(target) THEN
        RETURN NULL;
      END IF;
      target := target OPERATOR(pg_catalog.->) token::integer;
    ELSE
      RETURN NULL;
    END CASE;
  END LOOP;
  RETURN target;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._json_pointer(json, text) FROM PUBLIC;

-- The body as serde_json reads it (profile.rs, Body::pg_catalog.json): UTF-8 JSON
-- nested at most 127 deep (serde_json's recursion limit: 128 levels
-- fail) whose numbers all fit a double; NULL otherwise. The last of a
-- repeated member is the one a pointer finds (_json_pointer). A \u0000
-- escape, which PostgreSQL's json cannot un-escape, is read as \u0001
-- (docs/sql-edition.md, "Differences"): the body stays JSON, as it is to
-- serde_json.
CREATE FUNCTION webhook_dedup._body_json(body bytea) RETURNS json
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  doc pg_catalog.json;
BEGIN
  -- an escape is a backslash after an even run of backslashes
  doc := pg_catalog.regexp_replace(pg_catalog.convert_from(body, 'UTF8'), '(?<!\\)((?:\\\\)*)\\u0000',
                                   '\1\\u0001', 'g')::pg_catalog.json;
  IF EXISTS (WITH RECURSIVE walk(v, depth) AS (
               SELECT doc, 1
               UNION ALL
               SELECT e.v, w.depth OPERATOR(pg_catalog.+) 1 FROM walk AS w,
                      LATERAL (SELECT o.value FROM pg_catalog.json_each(
                                 CASE WHEN pg_catalog.json_typeof(w.v) OPERATOR(pg_catalog.=) 'object' THEN w.v
                                      ELSE '{}'::pg_catalog.json END) AS o
                               UNION ALL
                               SELECT a.value FROM pg_catalog.json_array_elements(
                                 CASE WHEN pg_catalog.json_typeof(w.v) OPERATOR(pg_catalog.=) 'array' THEN w.v
                                      ELSE '[]'::pg_catalog.json END) AS a) AS e(v)
                WHERE w.depth OPERATOR(pg_catalog.<) 128)
             SELECT FROM walk AS x
              WHERE (pg_catalog.json_typeof(x.v) OPERATOR(pg_catalog.=) 'number'
                     AND pg_catalog.abs(x.v::pg_catalog.text::numeric) OPERATOR(pg_catalog.>) 1.7976931348623157e308)
                 OR (x.depth OPERATOR(pg_catalog.>=) 128
                     AND pg_catalog.json_typeof(x.v) OPERATOR(pg_catalog.=) ANY (ARRAY['object', 'array']))) THEN
    RETURN NULL;
  END IF;
  RETURN doc;
EXCEPTION WHEN data_exception OR invalid_text_representation OR character_not_in_repertoire
               OR untranslatable_character OR statement_too_complex THEN
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._body_json(bytea) FROM PUBLIC;

-- The canonical text of `body`'s values at `pointers` (profile.rs,
-- canonical_values): one JSON object from each pointer that resolves to
-- its value, in RFC 8785's form; NULL when the body is no JSON serde_json
-- reads (not UTF-8, not JSON, a number past the doubles' range) or a
-- covered integer would lose digits: the raw body is hashed then.
CREATE FUNCTION webhook_dedup._canonical_values(body bytea, pointers text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  doc pg_catalog.json;
  out pg_catalog.text;
BEGIN
  doc := webhook_dedup._body_json(body);
  IF doc IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT '{' OPERATOR(pg_catalog.||) COALESCE(pg_catalog.string_agg(
           webhook_dedup._jcs_string(k.p) OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) webhook_dedup._jcs_value(k.v), ','
           ORDER BY webhook_dedup._utf16_key(k.p)), '') OPERATOR(pg_catalog.||) '}'
    INTO out
    FROM (SELECT d.p, webhook_dedup._json_pointer(doc, d.p) AS v
            FROM (SELECT DISTINCT p FROM pg_catalog.unnest(pointers) AS p) AS d) AS k
   WHERE k.v IS NOT NULL;
  RETURN out;
EXCEPTION WHEN data_exception OR invalid_text_representation OR character_not_in_repertoire
               OR untranslatable_character THEN
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._canonical_values(bytea, text[]) FROM PUBLIC;
