-- webhook_dedup: what the tables of schema.sql get once the generated
-- functions exist: their registration for pg_dump, the triggers on
-- webhook_dedup.sources and source_secrets, and the check of a source's
-- intake settings.

-- Every row of these tables is written by callers, not by CREATE
-- EXTENSION: they are the record of what was processed, so pg_dump must
-- dump them (it skips extension members' rows unless registered here), and
-- the identity sequences' positions with them. CREATE EXTENSION, run first
-- by pg_restore, creates them empty; the dump's rows then fill them.
-- Tested by tests/cluster/test_backup.py (dump, restore, every row and
-- every claim's answer compared).
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.keys', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.payloads', '');
-- (the archive's day partitions are made by maintenance, not by CREATE
-- EXTENSION: pg_dump dumps them, and their rows, as it does any table)
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.archive_default', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redrives', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redrives_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redrive_keys', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.outbox_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.sources', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.watermarks', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.replay_guards', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.signature_tokens', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.conflict_log', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.conflict_log_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.claim_counts', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.maintenance_runs', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redactions', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.redactions_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.maintenance_runs_id_seq', '');

-- Every backend caches per-source settings (src/store/sources.rs); a
-- change of webhook_dedup.sources empties those caches when it commits.
CREATE TRIGGER sources_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_dedup.sources
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_dedup.sources_changed();
-- and caches their keys (src/store/secrets.rs) the same way.
CREATE TRIGGER source_secrets_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_dedup.source_secrets
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_dedup.sources_changed();

-- A source's intake settings are checked when written, by the parser
-- webhook_receive uses (crates/webhook-dedup-core/src/intake.rs): an invalid one is 22023 naming the
-- column, not a delivery that fails later.
ALTER TABLE webhook_dedup.sources ADD CONSTRAINT sources_intake
  CHECK (webhook_dedup.source_intake_valid(source, event_id_from, event_type_from, event_time_from,
                                           event_time_format, fingerprint_pointers, accept_event_types));
