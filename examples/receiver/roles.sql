-- The example receiver's login role, as a DBA would set one up: it may call
-- the receiver functions (webhook_dedup_receiver) and owns the schema of
-- its own side effects, and nothing else: no privilege on any table of
-- webhook_dedup (docs/operations.md, "Privileges"). Run as a superuser in
-- the receiver's database, after CREATE EXTENSION webhook_dedup.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'demo_receiver') THEN
    CREATE ROLE demo_receiver LOGIN;
  END IF;
END
$$;
GRANT webhook_dedup_receiver TO demo_receiver;
CREATE SCHEMA IF NOT EXISTS demo AUTHORIZATION demo_receiver;
