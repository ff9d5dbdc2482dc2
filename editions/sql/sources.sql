-- The sources (src/api/sources.rs).

--@ webhook_dedup.sources_changed
-- The native edition empties each backend's cache of settings and keys
-- here; the SQL edition keeps no cache: every call reads the tables.
BEGIN
  RETURN NULL;
END
