-- The payload archive (src/engine/archive.rs, src/store/archive.rs).
-- Internal: the owner's alone.

-- Archive a delivery when its source keeps payloads (keep_payload): a
-- key's first delivery (conflict false) or a conflicting one (true), in
-- the caller's transaction (archive_insert.sql). `keep`: the source's
-- keep_payload when the caller read it already.
CREATE FUNCTION webhook_dedup._archive_keep(source text, idem_key text, received_at timestamptz, event_id text,
                                            event_type text, conflict boolean, payload bytea, headers jsonb,
                                            keep boolean DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  IF COALESCE(keep, (webhook_dedup._source_settings(source)).keep_payload) THEN
    PERFORM webhook_dedup._s_archive_insert(received_at, source, idem_key, event_id, event_type, conflict, payload,
                                            headers);
  END IF;
END
$$;
REVOKE ALL ON FUNCTION webhook_dedup._archive_keep(text, text, timestamptz, text, text, boolean, bytea, jsonb, boolean)
  FROM PUBLIC;
