-- setup.sql: runs first, once, in the fresh database that
-- `cargo pgrx regress pgNN --resetdb` makes (scripts/test.sh runs the same
-- files with pg_regress on a throwaway cluster). It installs the extension;
-- every other file of tests/pg_regress/sql is one group of the SQL API, read
-- top to bottom: each call, then what it answers. The expected output in
-- tests/pg_regress/expected is the specification: the SQL edition of the API
-- is checked against the same files.
--
-- Conventions of every file:
--   * errors are shown by their SQLSTATE only (\set VERBOSITY sqlstate), so
--     an error reads "ERROR:  22023"; the comment above says why;
--   * times are fixed (at => ...), or shown as booleans against the clock;
--     claim tokens and ids are kept in psql variables (\gset), never shown;
--   * each file uses sources of its own (named after the file), so files do
--     not see each other's keys;
--   * output in UTC, ISO dates, PostgreSQL's interval style.
--
-- Every SQLSTATE docs/sql-reference.md (and README.md) documents, and the
-- file that shows it:
--   22004  null_value_not_allowed ........ every file of the API
--   22023  invalid_parameter_value ....... every file of the API; setup.sql
--   P0002  no_data_found ................. claim, outbox, operator,
--                                          sources_and_secrets
--   25006  read_only_sql_transaction ..... claim, receive
--   55000  object_not_in_prerequisite_state  claim (a published keys table
--                                          without replica identity),
--                                          receive and sources_and_secrets
--                                          (no verification key), operator
--                                          (purge_redactions, distribute)
--   42P10  invalid_column_reference ...... claim (a publication's column list)
--   57014  query_canceled ................ receive (statement_timeout in the wait)
--   39P01  trigger_protocol_violated ..... ordering, sources_and_secrets
--   42703, 42804 (the guard's column) .... ordering
--   42501  insufficient_privilege ........ privileges
--   2BP01  dependent_objects_still_exist . views (DROP EXTENSION)
--   42P06  duplicate_schema .............. setup.sql
--   23514  check_violation ............... sources_and_secrets (a setting of
--                                          webhook_dedup.sources out of range)
-- Not shown, since one session on one server cannot reach them: 40001
-- (another transaction changed the key after this one's snapshot), 55P03
-- (another transaction holds the row lock past the session's lock_timeout),
-- 0A000 (a distributed install on Citus), and the 55000 between a new
-- library and ALTER EXTENSION ... UPDATE. tests/isolation, tests/cluster,
-- tests/citus and tests/upgrade show those.
--
-- SQLSTATEs in this file:
--   42P06  CREATE EXTENSION while a schema webhook_dedup exists
--   22023  CREATE EXTENSION in a database whose encoding is not UTF8
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;

-- The extension creates its own schema, webhook_dedup, and refuses to
-- install into one that exists already (whoever made it could have put
-- functions there): 42P06.
CREATE SCHEMA webhook_dedup;
CREATE EXTENSION webhook_dedup;
DROP SCHEMA webhook_dedup;

-- It needs a UTF8 database: elsewhere CREATE EXTENSION refuses with 22023.
\set regress_db :DBNAME
DROP DATABASE IF EXISTS webhook_dedup_regress_latin1;
CREATE DATABASE webhook_dedup_regress_latin1 TEMPLATE template0 ENCODING 'LATIN1' LOCALE 'C';
\c webhook_dedup_regress_latin1
SET client_min_messages = warning;
CREATE EXTENSION webhook_dedup;
\c :regress_db
SET client_min_messages = warning;
DROP DATABASE webhook_dedup_regress_latin1;

-- The install itself.
CREATE EXTENSION webhook_dedup;
SELECT extname FROM pg_extension WHERE extname = 'webhook_dedup';
-- Every object lives in schema webhook_dedup; these are its group roles
-- (cluster-wide: they outlive the extension).
SELECT rolname FROM pg_roles WHERE rolname LIKE 'webhook\_dedup\_%' ORDER BY rolname;
