-- The HTTP answer a receiver gives (src/api/answer.rs): http_answer, over
-- _reply (editions/sql/internal/answer.sql), which webhook_receive's rows
-- use too.

--@ webhook_dedup.http_answer
DECLARE
  scheme_name pg_catalog.text;
  seconds numeric;
  us numeric;
BEGIN
  IF outcome IS NULL THEN
    RAISE EXCEPTION 'outcome must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF outcome OPERATOR(pg_catalog.<>) ALL (webhook_dedup._outcome_names()) THEN
    RAISE EXCEPTION 'unknown outcome "%": one of %', outcome, pg_catalog.array_to_string(webhook_dedup._outcome_names(), ', ')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF mode IS NULL THEN
    RAISE EXCEPTION 'mode must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF mode OPERATOR(pg_catalog.<>) ALL (ARRAY['claim', 'enqueue']) THEN
    RAISE EXCEPTION 'mode must be claim or enqueue, not "%"', mode USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF scheme IS NOT NULL THEN
    scheme_name := webhook_dedup._scheme_parse(scheme);
  END IF;
  IF retry_after IS NOT NULL THEN
    IF pg_catalog.date_part('month', retry_after) OPERATOR(pg_catalog.<>) 0
       OR pg_catalog.date_part('year', retry_after) OPERATOR(pg_catalog.<>) 0 THEN
      RAISE EXCEPTION 'retry_after must not have a month or year part (use days, e.g. ''30 days'')'
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    us := EXTRACT(epoch FROM retry_after) OPERATOR(pg_catalog.*) 1000000;
    IF us OPERATOR(pg_catalog.<) 0 THEN
      RAISE EXCEPTION 'retry_after must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- answer.rs, seconds_until: whole seconds, rounded up
    seconds := pg_catalog.div(us OPERATOR(pg_catalog.+) 999999, 1000000);
  END IF;
  SELECT * INTO http_status, http_headers, response
    FROM webhook_dedup._reply(outcome, mode, scheme_name, seconds, result, result);
  RETURN NEXT;
END
