-- A source's own settings (src/store/sources.rs caches them per backend):
-- no row, or NULL columns, fall back to the webhook_dedup.* settings and
-- the provider profile. $1 source. paused: webhook_dedup.pause;
-- keep_payload, payload_retention: the payload archive. Also returns the
-- table's oid, whose invalidation clears the cache.
SELECT s.lease, s.max_attempts, s.retention, s.tolerance,
       'webhook_dedup.sources'::pg_catalog.regclass::pg_catalog.oid AS sources,
       s.source IS NOT NULL AS configured,
       s.event_id_from, s.event_type_from, s.event_time_from, s.event_time_format,
       s.fingerprint_pointers, s.replay_guard, s.accept_event_types, s.provider,
       s.paused_at IS NOT NULL AS paused,
       COALESCE(s.keep_payload, false) AS keep_payload, s.payload_retention
  FROM (SELECT) AS one
  LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) $1
