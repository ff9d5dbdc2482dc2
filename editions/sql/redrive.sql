-- Bulk redrive after a fix (src/api/redrive.rs): redrive records a run of
-- the keys it matches (redrive_match.sql, the native store's statement),
-- which run_maintenance() moves back to due in paced batches
-- (editions/sql/internal/maintenance.sql, _m_redrive); cancel_redrive stops
-- one. Single-server in both editions.

--@ webhook_dedup.redrive
DECLARE
  listed pg_catalog.text[];
  state pg_catalog.text;
  keeps boolean;
  m record;
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM webhook_dedup._check_source(source);
  IF states IS NULL THEN
    RAISE EXCEPTION 'states must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  listed := COALESCE(states, '{}');
  FOREACH state IN ARRAY listed LOOP
    IF state IS NULL THEN
      RAISE EXCEPTION 'an element of states must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
  END LOOP;
  IF pg_catalog.cardinality(listed) OPERATOR(pg_catalog.=) 0 THEN
    RAISE EXCEPTION 'states must name at least one state' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOREACH state IN ARRAY listed LOOP
    IF state OPERATOR(pg_catalog.<>) ALL (ARRAY['dead_lettered', 'failed', 'unknown_outcome', 'conflict']) THEN
      RAISE EXCEPTION 'a redrive cannot take keys in state "%" (one of dead_lettered, failed, unknown_outcome, conflict)',
        state USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END LOOP;
  IF since IS NOT NULL AND NOT pg_catalog.isfinite(since) THEN
    RAISE EXCEPTION 'since must be a finite timestamp' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF "until" IS NOT NULL AND NOT pg_catalog.isfinite("until") THEN
    RAISE EXCEPTION 'until must be a finite timestamp' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF since OPERATOR(pg_catalog.>=) "until" THEN
    RAISE EXCEPTION 'since must be before until' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF max OPERATOR(pg_catalog.<) 1 THEN
    RAISE EXCEPTION 'max must be at least 1' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF dry_run IS NULL THEN
    RAISE EXCEPTION 'dry_run must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  keeps := (webhook_dedup._source_settings(source)).keep_payload;
  SELECT * INTO m
    FROM webhook_dedup._s_redrive_match(source, ARRAY(SELECT s FROM pg_catalog.unnest(listed) AS s
                                                        WHERE s OPERATOR(pg_catalog.<>) 'conflict'),
                                        'conflict' OPERATOR(pg_catalog.=) ANY (listed), since, "until",
                                        CASE WHEN event_types IS NOT NULL
                                             THEN ARRAY(SELECT e FROM pg_catalog.unnest(event_types) AS e WHERE e IS NOT NULL) END,
                                        max, dry_run, pg_catalog.clock_timestamp(), SESSION_USER)
      AS r(run bigint, matched bigint, without_payload bigint);
  IF NOT keeps THEN
    RAISE NOTICE 'source "%" keeps no payloads (webhook_dedup.sources.keep_payload is not on)', source
      USING HINT = 'A key claimed without its body (webhook_claim, webhook_receive in claim mode) has nothing for '
                   'webhook_next to hand over unless its delivery was archived; only enqueued keys carry theirs. '
                   'Set keep_payload for the source (docs/operations.md, "The payload archive").';
  END IF;
  IF m.without_payload OPERATOR(pg_catalog.>) 0 THEN
    RAISE NOTICE '% of the % keys matched have no payload to redrive: the run will skip them as no_payload',
      m.without_payload, m.matched
      USING HINT = 'They were claimed without their body and not archived (or past payload_retention), or redacted. '
                   'See them, once the run reaches them, in webhook_dedup.redrive_keys (outcome no_payload); '
                   'docs/operations.md, "A dead letter without a payload".';
  END IF;
  run := m.run;
  matched := m.matched;
  RETURN NEXT;
END

--@ webhook_dedup.cancel_redrive
DECLARE
  c record;
BEGIN
  IF run IS NULL THEN
    RAISE EXCEPTION 'run must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  SELECT * INTO c FROM webhook_dedup._s_redrive_cancel(run, pg_catalog.clock_timestamp(), SESSION_USER)
    AS x(was pg_catalog.text, moved bigint);
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no bulk redrive %', run USING ERRCODE = 'no_data_found';
  END IF;
  RETURN c.moved;
END
