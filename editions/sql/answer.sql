-- The HTTP answer a receiver gives (src/api/answer.rs): http_answer, over
-- the answers written from the core (_answers) and the row as
-- src/api/rows.rs, http_row, builds it.

--@ webhook_dedup.http_answer
DECLARE
  a record;
  scheme_name text;
  seconds numeric;
  us numeric;
  status_body jsonb := pg_catalog.jsonb_build_object('status', outcome);
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
  SELECT * INTO a FROM webhook_dedup._answers() AS x
   WHERE x.outcome OPERATOR(pg_catalog.=) http_answer.outcome AND x.mode OPERATOR(pg_catalog.=) http_answer.mode
     AND x.scheme IS NOT DISTINCT FROM scheme_name;
  IF a.refused IS NOT NULL THEN
    RAISE EXCEPTION '%', a.refused USING ERRCODE = 'invalid_parameter_value';
  END IF;
  http_status := a.status;
  http_headers := a.headers;
  IF a.retry_after AND seconds IS NOT NULL THEN
    http_headers := http_headers OPERATOR(pg_catalog.||)
                    pg_catalog.jsonb_build_object('Retry-After', GREATEST(seconds, 1)::text);
  END IF;
  response := CASE a.body
                WHEN 'result' THEN CASE WHEN outcome OPERATOR(pg_catalog.=) ANY (ARRAY['claimed', 'reclaimed']) THEN NULL
                                        ELSE COALESCE(result, status_body) END
                WHEN 'status' THEN status_body
                WHEN 'error' THEN pg_catalog.jsonb_build_object('error', a.error)
                ELSE COALESCE(result, status_body) END;
  RETURN NEXT;
END
