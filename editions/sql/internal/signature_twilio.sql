-- Twilio (crates/webhook-dedup-core/src/signature/twilio.rs): form
-- decoding, the URLs it signs and its verification. Internal: the owner's
-- alone (each REVOKE below).

-- A byte string as Rust's String::from_utf8_lossy makes it text, returned
-- as that text's UTF-8 bytes: each maximal prefix of a valid sequence that
-- cannot be completed (Unicode's "substitution of maximal subparts", which
-- Rust follows) becomes one U+FFFD (EF BF BD). The second byte's ranges
-- are those of RFC 3629's grammar (E0 A0-BF, ED 80-9F, F0 90-BF, F4 80-8F).
CREATE FUNCTION webhook_dedup._utf8_lossy(b bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  n integer := pg_catalog.length(b);
  i integer := 0;
  c integer;
  width integer;
  k integer;
  next integer;
  lo integer;
  hi integer;
  valid boolean;
  out pg_catalog.bytea := ''::pg_catalog.bytea;
BEGIN
  -- the escape form writes every byte from 0x80 as \2xx or \3xx
  IF pg_catalog.encode(b, 'escape') OPERATOR(pg_catalog.!~) '\\[23][0-7][0-7]' THEN
    RETURN b;
  END IF;
  WHILE i OPERATOR(pg_catalog.<) n LOOP
    c := pg_catalog.get_byte(b, i);
    width := CASE WHEN c OPERATOR(pg_catalog.<) 128 THEN 1
                  WHEN c OPERATOR(pg_catalog.>=) 194 AND c OPERATOR(pg_catalog.<=) 223 THEN 2
                  WHEN c OPERATOR(pg_catalog.>=) 224 AND c OPERATOR(pg_catalog.<=) 239 THEN 3
                  WHEN c OPERATOR(pg_catalog.>=) 240 AND c OPERATOR(pg_catalog.<=) 244 THEN 4
                  ELSE 0 END;
    IF width OPERATOR(pg_catalog.=) 0 THEN
      out := out OPERATOR(pg_catalog.||) '\xefbfbd'::pg_catalog.bytea;
      i := i OPERATOR(pg_catalog.+) 1;
      CONTINUE;
    END IF;
    valid := true;
    k := 1;
    WHILE k OPERATOR(pg_catalog.<) width LOOP
      IF i OPERATOR(pg_catalog.+) k OPERATOR(pg_catalog.>=) n THEN
        valid := false;
        EXIT;
      END IF;
      next := pg_catalog.get_byte(b, i OPERATOR(pg_catalog.+) k);
      lo := 128;
      hi := 191;
      IF k OPERATOR(pg_catalog.=) 1 THEN
        lo := CASE WHEN c OPERATOR(pg_catalog.=) 224 THEN 160 WHEN c OPERATOR(pg_catalog.=) 240 THEN 144 ELSE 128 END;
        hi := CASE WHEN c OPERATOR(pg_catalog.=) 237 THEN 159 WHEN c OPERATOR(pg_catalog.=) 244 THEN 143 ELSE 191 END;
      END IF;
      IF next OPERATOR(pg_catalog.<) lo OR next OPERATOR(pg_catalog.>) hi THEN
        valid := false;
        EXIT;
      END IF;
      k := k OPERATOR(pg_catalog.+) 1;
    END LOOP;
    IF valid THEN
      out := out OPERATOR(pg_catalog.||) pg_catalog.substr(b, i OPERATOR(pg_catalog.+) 1, width);
      i := i OPERATOR(pg_catalog.+) width;
    ELSE
      out := out OPERATOR(pg_catalog.||) '\xefbfbd'::pg_catalog.bytea;
      i := i OPERATOR(pg_catalog.+) k;
    END IF;
  END LOOP;
  RETURN out;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._utf8_lossy(bytea) FROM PUBLIC;

-- One name or value of an application/x-www-form-urlencoded string, given
-- in bytea's escape form (encode(..., 'escape'): the separators & = + %
-- and the hex digits stay themselves), decoded as the form_urlencoded
-- crate decodes it: '+' is a space, then each '%' followed by two hex
-- digits (either case) is that byte, any other '%' stays; the bytes are
-- then made text as _utf8_lossy makes them. Returns the text's bytes.
CREATE FUNCTION webhook_dedup._form_decode(escaped text) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  parts pg_catalog.text[] := pg_catalog.string_to_array(pg_catalog.replace(escaped, '+', ' '), '%');
  out pg_catalog.text := COALESCE(parts[1], ''); -- string_to_array('', ...) is empty
  part pg_catalog.text;
  b integer;
  i integer;
BEGIN
  FOR i IN 2 .. COALESCE(pg_catalog.cardinality(parts), 0) LOOP
    part := parts[i];
    IF part OPERATOR(pg_catalog.~) '^[0-9A-Fa-f]{2}' THEN
      b := pg_catalog.get_byte(pg_catalog.decode(pg_catalog.left(part, 2), 'hex'), 0);
      out := out OPERATOR(pg_catalog.||) pg_catalog.format('\%s%s%s', b OPERATOR(pg_catalog./) 64,
                                                           (b OPERATOR(pg_catalog./) 8) OPERATOR(pg_catalog.%) 8,
                                                           b OPERATOR(pg_catalog.%) 8)
             OPERATOR(pg_catalog.||) pg_catalog.substr(part, 3);
    ELSE
      out := out OPERATOR(pg_catalog.||) '%' OPERATOR(pg_catalog.||) part;
    END IF;
  END LOOP;
  RETURN webhook_dedup._utf8_lossy(pg_catalog.decode(out, 'escape'));
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._form_decode(text) FROM PUBLIC;

-- The pairs of an application/x-www-form-urlencoded byte string, in order
-- (the form_urlencoded crate's parse): split at '&', empty pieces skipped,
-- each split at its first '=' (none: the value is empty), both decoded
-- (_form_decode). Returns (n, name, value), n from 1.
CREATE FUNCTION webhook_dedup._form_pairs(input bytea) RETURNS TABLE (n bigint, name bytea, value bytea)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
  SELECT pg_catalog.row_number() OVER (ORDER BY p.i),
         webhook_dedup._form_decode(CASE WHEN pg_catalog.strpos(p.piece, '=') OPERATOR(pg_catalog.>) 0
                                         THEN pg_catalog.split_part(p.piece, '=', 1) ELSE p.piece END),
         webhook_dedup._form_decode(CASE WHEN pg_catalog.strpos(p.piece, '=') OPERATOR(pg_catalog.>) 0
                                         THEN pg_catalog.substr(p.piece, pg_catalog.strpos(p.piece, '=') OPERATOR(pg_catalog.+) 1)
                                         ELSE '' END)
    FROM pg_catalog.unnest(pg_catalog.string_to_array(pg_catalog.encode(input, 'escape'), '&')) WITH ORDINALITY AS p(piece, i)
   WHERE p.piece OPERATOR(pg_catalog.<>) ''
$$;
REVOKE ALL ON FUNCTION webhook_dedup._form_pairs(bytea) FROM PUBLIC;

-- The URLs Twilio may have signed for `url` (twilio.rs, url_variants): as
-- given without its port, and with it (the scheme's default, 443 for a
-- URL starting https:// in any case of ASCII, else 80, when it has none);
-- one when both are the same. A URL without `scheme://` is itself. The
-- port is the last ':' of the authority's host part (after any '@' and
-- any ']'), to the authority's end (the first '/', '?' or '#').
CREATE FUNCTION webhook_dedup._twilio_url_variants(url text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  authority_start integer := pg_catalog.strpos(url, '://');
  rest pg_catalog.text;
  authority pg_catalog.text;
  host_port pg_catalog.text;
  host_start integer;
  search_from integer;
  port_len integer;
  head pg_catalog.text;
  port pg_catalog.text;
  tail pg_catalog.text;
  without pg_catalog.text;
  with_port pg_catalog.text;
BEGIN
  IF authority_start OPERATOR(pg_catalog.=) 0 THEN
    RETURN ARRAY[url];
  END IF;
  authority_start := authority_start OPERATOR(pg_catalog.+) 3; -- 1-based: the authority's first character
  rest := pg_catalog.substr(url, authority_start);
  authority := pg_catalog.substring(rest, '^[^/?#]*');
  host_start := COALESCE(pg_catalog.length(pg_catalog.substring(authority, '^.*@')), 0);
  host_port := pg_catalog.substr(authority, host_start OPERATOR(pg_catalog.+) 1);
  search_from := COALESCE(pg_catalog.length(pg_catalog.substring(host_port, '^.*\]')), 0);
  port_len := COALESCE(pg_catalog.length(pg_catalog.substring(pg_catalog.substr(host_port, search_from OPERATOR(pg_catalog.+) 1),
                                                              ':[^:]*$')), 0);
  head := pg_catalog.left(url, authority_start OPERATOR(pg_catalog.+) pg_catalog.length(authority)
                               OPERATOR(pg_catalog.-) port_len OPERATOR(pg_catalog.-) 1);
  port := pg_catalog.right(pg_catalog.left(url, authority_start OPERATOR(pg_catalog.+) pg_catalog.length(authority)
                                                OPERATOR(pg_catalog.-) 1), port_len);
  tail := pg_catalog.substr(url, authority_start OPERATOR(pg_catalog.+) pg_catalog.length(authority));
  without := head OPERATOR(pg_catalog.||) tail;
  IF port OPERATOR(pg_catalog.=) '' THEN
    with_port := head OPERATOR(pg_catalog.||) ':'
                 OPERATOR(pg_catalog.||) CASE WHEN pg_catalog.translate(pg_catalog.left(head, 8), 'HTPS', 'htps')
                                                     OPERATOR(pg_catalog.=) 'https://' THEN '443' ELSE '80' END
                 OPERATOR(pg_catalog.||) tail;
  ELSE
    with_port := url;
  END IF;
  IF without OPERATOR(pg_catalog.=) with_port THEN
    RETURN ARRAY[without];
  END IF;
  RETURN ARRAY[without, with_port];
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._twilio_url_variants(text) FROM PUBLIC;

-- The value of query parameter `name` in `url` (mod.rs, query_parameter):
-- the first pair of that name in the query (after the first '?', before
-- any '#'), form-decoded, as bytes; NULL without one.
CREATE FUNCTION webhook_dedup._query_parameter(url text, name text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (SELECT p.value
          FROM webhook_dedup._form_pairs(pg_catalog.convert_to(pg_catalog.split_part(
                 pg_catalog.substr(url, pg_catalog.strpos(url, '?') OPERATOR(pg_catalog.+) 1), '#', 1), 'UTF8')) AS p
         WHERE pg_catalog.strpos(url, '?') OPERATOR(pg_catalog.>) 0
           AND p.name OPERATOR(pg_catalog.=) pg_catalog.convert_to(_query_parameter.name, 'UTF8')
         ORDER BY p.n LIMIT 1);
REVOKE ALL ON FUNCTION webhook_dedup._query_parameter(text, text) FROM PUBLIC;

-- The bodySHA256 query parameter of a Twilio URL (twilio.rs,
-- BODY_HASH_PARAM): decoded, NULL without one.
CREATE FUNCTION webhook_dedup._twilio_body_hash(url text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN webhook_dedup._query_parameter(url, 'bodySHA256');
REVOKE ALL ON FUNCTION webhook_dedup._twilio_body_hash(text) FROM PUBLIC;

-- What Twilio appends to the URL it signs for a form body (twilio.rs,
-- form_suffix): each distinct pair, sorted by name then value, byte for
-- byte, as name then value.
CREATE FUNCTION webhook_dedup._twilio_form_suffix(payload bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (SELECT COALESCE(pg_catalog.string_agg(d.name OPERATOR(pg_catalog.||) d.value, ''::pg_catalog.bytea ORDER BY d.name, d.value),
                        ''::pg_catalog.bytea)
          FROM (SELECT DISTINCT p.name, p.value FROM webhook_dedup._form_pairs(payload) AS p) AS d);
REVOKE ALL ON FUNCTION webhook_dedup._twilio_form_suffix(bytea) FROM PUBLIC;

-- Twilio (twilio.rs, verify): the signature header once, its trimmed value
-- canonical base64 of 20 bytes (else malformed_header). With a
-- bodySHA256 query parameter in the URL (the first pair of that name in
-- the query, mod.rs query_parameter), the body's SHA-256 must be its 64
-- hex digits, else no_matching_signature, and the URL alone is signed;
-- without it, the form's pairs (more than 10,000: no_matching_signature)
-- are appended sorted by name, then value, byte for byte, each distinct
-- pair once, as name then value. Each URL of _twilio_url_variants is tried
-- in order with HMAC-SHA1 (pgcrypto's).
CREATE FUNCTION webhook_dedup._verify_twilio(url text, payload bytea, headers jsonb, keys bytea[],
                                             OUT reason text, OUT secret_index integer, OUT signed_at_s bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  sent record;
  candidate pg_catalog.bytea;
  body_hash pg_catalog.bytea;
  suffix pg_catalog.bytea := ''::pg_catalog.bytea;
  pairs integer;
  variant pg_catalog.text;
BEGIN
  sent := webhook_dedup._header_once(headers, 'x-twilio-signature');
  IF sent.reason IS NOT NULL THEN
    reason := sent.reason;
    RETURN;
  END IF;
  candidate := webhook_dedup._decode_base64(webhook_dedup._trim(sent.value), 20);
  IF candidate IS NULL THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  body_hash := webhook_dedup._twilio_body_hash(url);
  IF body_hash IS NOT NULL THEN
    IF pg_catalog.encode(body_hash, 'escape') OPERATOR(pg_catalog.!~) '^[0-9A-Fa-f]{64}$'
       OR NOT webhook_dedup._ct_equal(pg_catalog.sha256(payload), pg_catalog.decode(pg_catalog.encode(body_hash, 'escape'), 'hex')) THEN
      reason := 'no_matching_signature';
      RETURN;
    END IF;
  ELSE
    SELECT pg_catalog.count(*) INTO pairs
      FROM pg_catalog.unnest(pg_catalog.string_to_array(pg_catalog.encode(payload, 'escape'), '&')) AS piece
     WHERE piece OPERATOR(pg_catalog.<>) '';
    IF pairs OPERATOR(pg_catalog.>) 10000 THEN
      reason := 'no_matching_signature';
      RETURN;
    END IF;
    suffix := webhook_dedup._twilio_form_suffix(payload);
  END IF;
  FOREACH variant IN ARRAY webhook_dedup._twilio_url_variants(url) LOOP
    secret_index := webhook_dedup._first_match(keys, ARRAY[candidate],
                                               pg_catalog.convert_to(variant, 'UTF8') OPERATOR(pg_catalog.||) suffix, 'sha1');
    IF secret_index IS NOT NULL THEN
      reason := 'ok';
      RETURN;
    END IF;
  END LOOP;
  reason := 'no_matching_signature';
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify_twilio(text, bytea, jsonb, bytea[]) FROM PUBLIC;

-- What Twilio's signature covers, in one canonical form (twilio.rs,
-- signed_text): the first of _twilio_url_variants (the URL without its
-- port), then, unless the URL carries bodySHA256, the form's pairs as
-- _twilio_form_suffix appends them. NULL past 10,000 pairs (such a
-- request does not verify).
CREATE FUNCTION webhook_dedup._twilio_signed_text(url text, payload bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  text_signed pg_catalog.bytea := pg_catalog.convert_to((webhook_dedup._twilio_url_variants(url))[1], 'UTF8');
BEGIN
  IF webhook_dedup._twilio_body_hash(url) IS NOT NULL THEN
    RETURN text_signed;
  END IF;
  IF (SELECT pg_catalog.count(*) FROM webhook_dedup._form_pairs(payload)) OPERATOR(pg_catalog.>) 10000 THEN
    RETURN NULL;
  END IF;
  RETURN text_signed OPERATOR(pg_catalog.||) webhook_dedup._twilio_form_suffix(payload);
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._twilio_signed_text(text, bytea) FROM PUBLIC;
