-- Twitch EventSub (crates/webhook-dedup-core/src/signature/twitch.rs): the
-- RFC 3339 time it signs and its verification. Internal: the owner's alone.

-- Unix nanoseconds of an RFC 3339 time, or NULL when it is not one, as
-- twitch.rs's parse_timestamp reads it (the time crate 0.3's
-- OffsetDateTime::parse with Rfc3339): YYYY-MM-DD, any one byte (an ASCII
-- character: a longer one is several bytes), hh:mm:ss, an optional '.' with
-- one or more digits (those after the ninth ignored), then 'Z' or 'z' or
-- +hh:mm / -hh:mm (hours at most 23, minutes at most 59). The date must
-- exist (year 0000 to 9999, proleptic Gregorian), hh <= 23, mm <= 59,
-- ss <= 59 or 60; a 60 stands for 59.999999999 and only where that is the
-- last nanosecond of a month in UTC. Days are counted on a date 400 years
-- later (a 400-year cycle has 146097 days), where PostgreSQL has every year.
CREATE FUNCTION webhook_dedup._rfc3339_ns(text text) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  p pg_catalog.text[];
  y integer;
  mo integer;
  d integer;
  h integer;
  mi integer;
  s integer;
  nanos numeric := 0;
  offset_s integer := 0;
  month_days integer;
  utc_s numeric;
  utc_day numeric;
  next_day pg_catalog.date;
BEGIN
  p := pg_catalog.regexp_match(text, '^([0-9]{4})-([0-9]{2})-([0-9]{2})[\x01-\x7f]([0-9]{2}):([0-9]{2}):([0-9]{2})'
                                     '(\.[0-9]+)?([Zz]|([+-])([0-9]{2}):([0-9]{2}))$');
  IF p IS NULL THEN
    RETURN NULL;
  END IF;
  y := p[1]::integer;
  mo := p[2]::integer;
  d := p[3]::integer;
  h := p[4]::integer;
  mi := p[5]::integer;
  s := p[6]::integer;
  IF p[7] IS NOT NULL THEN
    nanos := pg_catalog.rpad(pg_catalog.left(pg_catalog.substr(p[7], 2), 9), 9, '0')::numeric;
  END IF;
  IF p[9] IS NOT NULL THEN
    IF p[10]::integer OPERATOR(pg_catalog.>) 23 OR p[11]::integer OPERATOR(pg_catalog.>) 59 THEN
      RETURN NULL;
    END IF;
    -- every OPERATOR(...) form has one precedence: parenthesised
    offset_s := ((p[10]::integer OPERATOR(pg_catalog.*) 3600) OPERATOR(pg_catalog.+) (p[11]::integer OPERATOR(pg_catalog.*) 60))
                OPERATOR(pg_catalog.*) CASE WHEN p[9] OPERATOR(pg_catalog.=) '-' THEN -1 ELSE 1 END;
  END IF;
  IF mo OPERATOR(pg_catalog.<) 1 OR mo OPERATOR(pg_catalog.>) 12 OR d OPERATOR(pg_catalog.<) 1 THEN
    RETURN NULL;
  END IF;
  month_days := CASE WHEN mo OPERATOR(pg_catalog.=) 2 THEN
                       CASE WHEN y OPERATOR(pg_catalog.%) 4 OPERATOR(pg_catalog.=) 0
                                 AND (y OPERATOR(pg_catalog.%) 100 OPERATOR(pg_catalog.<>) 0
                                      OR y OPERATOR(pg_catalog.%) 400 OPERATOR(pg_catalog.=) 0) THEN 29 ELSE 28 END
                     WHEN mo OPERATOR(pg_catalog.=) ANY (ARRAY[4, 6, 9, 11]) THEN 30 ELSE 31 END;
  IF d OPERATOR(pg_catalog.>) month_days OR h OPERATOR(pg_catalog.>) 23 OR mi OPERATOR(pg_catalog.>) 59
     OR s OPERATOR(pg_catalog.>) 60 THEN
    RETURN NULL;
  END IF;
  IF s OPERATOR(pg_catalog.=) 60 THEN
    s := 59;
    nanos := 999999999;
  END IF;
  utc_s := ((pg_catalog.make_date(y OPERATOR(pg_catalog.+) 400, mo, d) OPERATOR(pg_catalog.-) DATE '1970-01-01')
            OPERATOR(pg_catalog.-) 146097)::numeric OPERATOR(pg_catalog.*) 86400;
  utc_s := utc_s OPERATOR(pg_catalog.+) (h OPERATOR(pg_catalog.*) 3600) OPERATOR(pg_catalog.+) (mi OPERATOR(pg_catalog.*) 60)
           OPERATOR(pg_catalog.+) s OPERATOR(pg_catalog.-) offset_s;
  IF p[6] OPERATOR(pg_catalog.=) '60' THEN
    -- the stand-in is valid at 23:59:59 UTC of a month's last day
    utc_day := pg_catalog.div(utc_s, 86400)
               OPERATOR(pg_catalog.-) CASE WHEN pg_catalog.mod(utc_s, 86400) OPERATOR(pg_catalog.<) 0 THEN 1 ELSE 0 END;
    next_day := DATE '1970-01-01' OPERATOR(pg_catalog.+) (utc_day OPERATOR(pg_catalog.+) 146097 OPERATOR(pg_catalog.+) 1)::integer;
    IF utc_s OPERATOR(pg_catalog.-) (utc_day OPERATOR(pg_catalog.*) 86400) OPERATOR(pg_catalog.<>) 86399
       OR pg_catalog.date_part('day', next_day) OPERATOR(pg_catalog.<>) 1 THEN
      RETURN NULL;
    END IF;
  END IF;
  RETURN (utc_s OPERATOR(pg_catalog.*) 1000000000) OPERATOR(pg_catalog.+) nanos;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._rfc3339_ns(text) FROM PUBLIC;

-- Twitch EventSub (twitch.rs, verify): the message id header once
-- (trimmed), the timestamp header once (trimmed, RFC 3339, _rfc3339_ns;
-- else malformed_header), then the signature header once, `sha256=<hex>`
-- (32 bytes), an HMAC-SHA256 of `<id><timestamp as sent><body>`; then the
-- window, to the nanosecond (mod.rs, window_ns). signed_at is the signed
-- time's whole second (floor), with every verdict after the timestamp.
CREATE FUNCTION webhook_dedup._verify_twitch(payload bytea, headers jsonb, keys bytea[], tolerance_us numeric,
                                             now_us numeric, OUT reason text, OUT secret_index integer,
                                             OUT signed_at_s bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
  id record;
  ts record;
  ts_text pg_catalog.text;
  ts_ns numeric;
  sent record;
  value pg_catalog.text;
  candidate pg_catalog.bytea;
  age numeric;
BEGIN
  id := webhook_dedup._header_once(headers, 'twitch-eventsub-message-id');
  IF id.reason IS NOT NULL THEN
    reason := id.reason;
    RETURN;
  END IF;
  ts := webhook_dedup._header_once(headers, 'twitch-eventsub-message-timestamp');
  IF ts.reason IS NOT NULL THEN
    reason := ts.reason;
    RETURN;
  END IF;
  ts_text := webhook_dedup._trim(ts.value);
  ts_ns := webhook_dedup._rfc3339_ns(ts_text);
  IF ts_ns IS NULL THEN
    reason := 'malformed_header';
    RETURN;
  END IF;
  -- the whole second, floored exactly (numeric division rounds)
  signed_at_s := (pg_catalog.div(ts_ns, 1000000000)
                  OPERATOR(pg_catalog.-) CASE WHEN pg_catalog.mod(ts_ns, 1000000000) OPERATOR(pg_catalog.<) 0 THEN 1 ELSE 0 END)::bigint;
  sent := webhook_dedup._header_once(headers, 'twitch-eventsub-message-signature');
  IF sent.reason IS NOT NULL THEN
    reason := sent.reason;
    RETURN;
  END IF;
  value := webhook_dedup._trim(sent.value);
  IF pg_catalog.starts_with(value, 'sha256=') THEN
    candidate := webhook_dedup._decode_hex(webhook_dedup._trim(pg_catalog.substr(value, 8)), 32);
  END IF;
  IF candidate IS NULL THEN
    reason := CASE WHEN NOT pg_catalog.starts_with(value, 'sha256=') AND pg_catalog.strpos(value, '=') OPERATOR(pg_catalog.>) 0
                   THEN 'unsupported_version' ELSE 'malformed_header' END;
    RETURN;
  END IF;
  secret_index := webhook_dedup._first_match(keys, ARRAY[candidate],
                                             pg_catalog.convert_to(webhook_dedup._trim(id.value) OPERATOR(pg_catalog.||) ts_text,
                                                                   'UTF8') OPERATOR(pg_catalog.||) payload);
  IF secret_index IS NULL THEN
    reason := 'no_matching_signature';
    RETURN;
  END IF;
  age := now_us OPERATOR(pg_catalog.*) 1000 OPERATOR(pg_catalog.-) ts_ns;
  reason := CASE WHEN age OPERATOR(pg_catalog.>) (tolerance_us OPERATOR(pg_catalog.*) 1000) THEN 'timestamp_too_old'
                 WHEN (OPERATOR(pg_catalog.-) age) OPERATOR(pg_catalog.>) (tolerance_us OPERATOR(pg_catalog.*) 1000)
                   THEN 'timestamp_too_new'
                 ELSE 'ok' END;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._verify_twitch(bytea, jsonb, bytea[], numeric, numeric) FROM PUBLIC;
