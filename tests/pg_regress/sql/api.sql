-- api.sql: the whole SQL surface as the catalog sees it, so that a change
-- to it shows here: every function of schema webhook_dedup with its
-- arguments, result, volatility, whether it runs as its owner (SECURITY
-- DEFINER) and who may execute it; every view and table with who may do
-- what on it; the settings. docs/sql-reference.md describes each; README.md
-- lists them.
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;

-- Functions, one a line (fields separated by |). executable_by lists the
-- roles granted EXECUTE besides the owner (PUBLIC: every role).
\pset format unaligned
SELECT p.proname AS function,
       pg_get_function_identity_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS returns,
       CASE p.provolatile WHEN 'i' THEN 'immutable' WHEN 's' THEN 'stable' ELSE 'volatile' END AS volatility,
       CASE WHEN p.prosecdef THEN 'security definer' ELSE 'invoker' END AS runs_as,
       coalesce((SELECT string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END, ', '
                                   ORDER BY 1)
                   FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS a
                  WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner), '') AS executable_by
  FROM pg_proc AS p
 WHERE p.pronamespace = 'webhook_dedup'::regnamespace
 ORDER BY p.proname, pg_get_function_identity_arguments(p.oid);
-- The defaults a call may leave out, for the functions receivers call most.
SELECT p.proname AS function, pg_get_function_arguments(p.oid) AS arguments
  FROM pg_proc AS p
 WHERE p.pronamespace = 'webhook_dedup'::regnamespace
   AND p.proname IN ('webhook_claim', 'webhook_receive', 'webhook_next', 'http_answer', 'webhook_fail',
                     'webhook_outbox_put')
 ORDER BY p.proname;
\pset format aligned

-- Views and tables, with the privileges granted on them besides the
-- owner's (a = INSERT, r = SELECT, w = UPDATE, d = DELETE, as in \dp).
SELECT c.relname AS relation,
       CASE c.relkind WHEN 'v' THEN 'view' WHEN 'r' THEN 'table' WHEN 'p' THEN 'partitioned table' END AS kind,
       coalesce((SELECT string_agg(g.grantee || '=' || g.privileges, ' ' ORDER BY g.grantee)
                   FROM (SELECT a.grantee::regrole::text AS grantee,
                                string_agg(CASE a.privilege_type WHEN 'INSERT' THEN 'a' WHEN 'SELECT' THEN 'r'
                                                                 WHEN 'UPDATE' THEN 'w' WHEN 'DELETE' THEN 'd'
                                                                 ELSE lower(a.privilege_type) END, ''
                                           ORDER BY a.privilege_type) AS privileges
                           FROM aclexplode(c.relacl) AS a
                          WHERE a.grantee <> c.relowner
                          GROUP BY a.grantee) AS g), '') AS granted
  FROM pg_class AS c
 WHERE c.relnamespace = 'webhook_dedup'::regnamespace AND c.relkind IN ('v', 'r', 'p') AND NOT c.relispartition
 ORDER BY kind DESC, c.relname;
-- Privileges granted on single columns (the operator reads the outbox but
-- its lease tokens, and writes webhook_dedup.sources but its pause).
SELECT c.relname AS relation, g.grantee::regrole AS role, g.privilege_type AS privilege,
       string_agg(a.attname, ', ' ORDER BY a.attnum) AS columns
  FROM pg_class AS c
  JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped,
       aclexplode(a.attacl) AS g
 WHERE c.relnamespace = 'webhook_dedup'::regnamespace AND NOT c.relispartition AND g.grantee <> c.relowner
 GROUP BY c.relname, g.grantee, g.privilege_type
 ORDER BY 1, 2, 3;

-- The settings (GUCs) the library defines, with their defaults and when a
-- change takes effect (the library is loaded by the first call). One more,
-- webhook_dedup.database (the background worker's database, default
-- postgres, context postmaster), exists only when the library is preloaded.
SELECT webhook_dedup.webhook_key('api', 'load') IS NOT NULL AS loaded;
SELECT name, setting, unit, context FROM pg_settings
 WHERE name LIKE 'webhook\_dedup.%' AND name <> 'webhook_dedup.database' ORDER BY name;
