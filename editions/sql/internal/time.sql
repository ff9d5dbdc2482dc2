-- Times and durations (src/time.rs). Internal: the owner's alone.

-- An interval as microseconds (time.rs, duration_us): no month or year
-- part (22023 "<what> must not have a month or year part"), days of 24
-- hours plus the time part, within a bigint (22023 "<what> is out of
-- range"). Negative intervals are the caller's to refuse.
CREATE FUNCTION webhook_dedup._duration_us(value interval, what text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  -- without months, the epoch of an interval is its days of 86,400 s plus
  -- its time part, exactly (a numeric); each check one expression (every
  -- claim given a lease runs them)
  total numeric := EXTRACT(epoch FROM value) OPERATOR(pg_catalog.*) 1000000;
BEGIN
  IF EXTRACT(month FROM value) OPERATOR(pg_catalog.<>) 0 OR EXTRACT(year FROM value) OPERATOR(pg_catalog.<>) 0 THEN
    RAISE EXCEPTION '% must not have a month or year part (use days, e.g. ''30 days'')', what
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- the days in microseconds, then their sum with the time part, within
  -- a bigint (time.rs: checked_mul, then checked_add)
  IF pg_catalog.abs(EXTRACT(day FROM value) OPERATOR(pg_catalog.*) 86400000000) OPERATOR(pg_catalog.>) 9223372036854775807
     OR total OPERATOR(pg_catalog.>) 9223372036854775807 OR total OPERATOR(pg_catalog.<) -9223372036854775808 THEN
    RAISE EXCEPTION '% is out of range', what USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN total::bigint;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._duration_us(interval, text) FROM PUBLIC;

-- Microseconds as an interval of days and the time part, as pgrx's
-- Interval::new(0, days, micros) makes it (time.rs).
CREATE FUNCTION webhook_dedup._us_interval(us bigint) RETURNS interval
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.make_interval(days => (us OPERATOR(pg_catalog./) 86400000000)::integer,
                                secs => (us OPERATOR(pg_catalog.%) 86400000000)::numeric OPERATOR(pg_catalog./) 1000000);
REVOKE ALL ON FUNCTION webhook_dedup._us_interval(bigint) FROM PUBLIC;

-- A time plus microseconds (the time part of an interval alone: no day
-- arithmetic in the session's time zone). STABLE as timestamptz plus
-- interval is, so that the planner inlines it into the calling
-- statement (an IMMUTABLE body over a STABLE operator is not inlined).
CREATE FUNCTION webhook_dedup._plus_us(at timestamptz, us bigint) RETURNS timestamptz
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN at OPERATOR(pg_catalog.+) (us OPERATOR(pg_catalog.*) INTERVAL '1 microsecond');
REVOKE ALL ON FUNCTION webhook_dedup._plus_us(timestamptz, bigint) FROM PUBLIC;

-- Microseconds as an interval of the time part alone, as pgrx's
-- Interval::from_micros makes it (no days: added to a time, exactly that
-- many microseconds whatever the time zone's calendar).
CREATE FUNCTION webhook_dedup._us_time_interval(us bigint) RETURNS interval
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.make_interval(secs => us::numeric OPERATOR(pg_catalog./) 1000000);
REVOKE ALL ON FUNCTION webhook_dedup._us_time_interval(bigint) FROM PUBLIC;
