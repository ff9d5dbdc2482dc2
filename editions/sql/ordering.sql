-- Refusing stale out-of-order updates (src/api/ordering.rs):
-- webhook_advance over the watermarks (watermarks_advance.sql, the native
-- store's statement) and the trigger webhook_monotonic_guard.

--@ webhook_dedup.webhook_advance
DECLARE
  advanced boolean;
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF entity_id IS NULL THEN
    RAISE EXCEPTION 'entity_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM webhook_dedup._check_source(source);
  PERFORM webhook_dedup._check_bounded('entity_id', entity_id);
  IF source_updated_at IS NULL THEN
    RAISE EXCEPTION 'source_updated_at must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF NOT pg_catalog.isfinite(source_updated_at) THEN
    RAISE EXCEPTION 'source_updated_at must be a finite timestamp' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT a.advanced INTO advanced
    FROM webhook_dedup._s_watermarks_advance(source, entity_id, source_updated_at, event_id, sequence,
                                             pg_catalog.clock_timestamp()) AS a(advanced boolean);
  RETURN COALESCE(advanced, false);
END

--@ webhook_dedup.webhook_monotonic_guard
-- A BEFORE INSERT OR UPDATE ... FOR EACH ROW trigger whose one argument
-- names a timestamptz or timestamp column: an UPDATE whose value of it is
-- older than the stored one (or NULL over a stored one) is skipped; an
-- INSERT, or a row with nothing stored, goes through. Compared in the
-- column's own type.
DECLARE
  column_name pg_catalog.text;
  column_type pg_catalog.regtype;
  verdict record;
BEGIN
  IF TG_LEVEL OPERATOR(pg_catalog.<>) 'ROW' OR TG_WHEN OPERATOR(pg_catalog.<>) 'BEFORE' THEN
    RAISE EXCEPTION 'webhook_monotonic_guard must be a BEFORE ... FOR EACH ROW trigger'
      USING ERRCODE = 'trigger_protocol_violated';
  END IF;
  IF TG_NARGS OPERATOR(pg_catalog.<>) 1 THEN
    RAISE EXCEPTION 'webhook_monotonic_guard needs one argument, the column to guard, not %', TG_NARGS
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard(''source_updated_at'')';
  END IF;
  IF TG_OP OPERATOR(pg_catalog.<>) ALL (ARRAY['INSERT', 'UPDATE']) THEN
    RAISE EXCEPTION 'webhook_monotonic_guard fires on INSERT or UPDATE' USING ERRCODE = 'trigger_protocol_violated';
  END IF;
  column_name := TG_ARGV[0];
  SELECT a.atttypid::pg_catalog.regtype INTO column_type FROM pg_catalog.pg_attribute AS a
   WHERE a.attrelid OPERATOR(pg_catalog.=) TG_RELID AND a.attname OPERATOR(pg_catalog.=) column_name
     AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'column "%" of relation "%" does not exist', column_name, TG_TABLE_NAME
      USING ERRCODE = 'undefined_column';
  END IF;
  IF column_type OPERATOR(pg_catalog.<>) ALL (ARRAY['timestamptz'::pg_catalog.regtype, 'timestamp'::pg_catalog.regtype]) THEN
    RAISE EXCEPTION 'column "%" of relation "%" must be timestamptz or timestamp to be guarded', column_name,
      TG_TABLE_NAME USING ERRCODE = 'datatype_mismatch';
  END IF;
  IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
    RETURN NEW;
  END IF;
  EXECUTE pg_catalog.format('SELECT ($2).%1$I IS NULL AS no_stored, ($1).%1$I IS NULL AS no_incoming,'
                            ' ($1).%1$I OPERATOR(pg_catalog.>=) ($2).%1$I AS newer', column_name)
    INTO verdict USING NEW, OLD;
  IF verdict.no_stored OR (NOT verdict.no_incoming AND verdict.newer) THEN
    RETURN NEW;
  END IF;
  RETURN NULL;
END
