-- The partitions of webhook_dedup.archive (src/maintenance/archive.rs
-- reads the day partitions' days from their names, archive_YYYYMMDD).
SELECT c.relname::pg_catalog.text AS name
  FROM pg_catalog.pg_inherits AS i
  JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
 WHERE i.inhparent OPERATOR(pg_catalog.=) 'webhook_dedup.archive'::pg_catalog.regclass
