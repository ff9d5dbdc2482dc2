-- Where a source's keys live on a distributed install (src/api/routing.rs).
-- The SQL edition runs on one server (Citus loads a library of its own:
-- a distributed install is the native edition's): no placement.

--@ webhook_dedup.source_node
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM webhook_dedup._check_source(source);
END
