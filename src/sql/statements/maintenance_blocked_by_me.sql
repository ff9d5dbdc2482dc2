-- Whether any other backend is waiting for a lock this one holds.
SELECT EXISTS (
  SELECT FROM pg_catalog.pg_locks AS l
   WHERE NOT l.granted
     AND pg_catalog.pg_backend_pid() OPERATOR(pg_catalog.=) ANY (pg_catalog.pg_blocking_pids(l.pid)))
