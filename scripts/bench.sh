#!/usr/bin/env bash
# `make bench`: what a claim costs against the SQL it replaces. Installs
# what is missing (scripts/lib.sh), builds and installs the extension, starts
# a throwaway cluster with the library preloaded and every setting at its
# default, and runs bench/bench.py, which prints each ratio of
# docs/benchmarks.md (median, min and max over several rounds of
# alternating workloads) and the CPU time per call of one backend.
#
#   scripts/bench.sh                       # every scenario (about 30 minutes on 2 cores)
#   scripts/bench.sh sql_edition           # the SQL edition against the native one (issue 43)
#   scripts/bench.sh cpu claim             # some of them
#   ROUNDS=5 SECONDS_PER_RUN=20 CLIENTS=8 scripts/bench.sh
#   scripts/bench.sh --json /tmp/bench.json   # also keep the results as JSON
#
# Not part of the test command: it asserts nothing, it measures.
source "$(dirname "$0")/lib.sh"
need_root "$@"
setup_all
cd "$ROOT"
trap cluster_stop EXIT
cluster_start
export PG_BIN PG_OS_USER BENCH_SERVER_LOG=$CLUSTER_DIR/server.log BENCH_PGDATA=$CLUSTER_DIR/data
# the SQL edition beside it (scenario sql_edition), where pg_tle's source is
if [ -f "$PG_TLE_SOURCE/build.sh" ]; then
    build_sql_edition >/dev/null
    WEBHOOK_DEDUP_SQL_EDITION_PG_BIN=$(sql_edition_server "$PG_MAJOR")
    WEBHOOK_DEDUP_SQL_EDITION_TLE=$SQL_EDITION_DIR/webhook_dedup-tle--$(project_version).sql
    export WEBHOOK_DEDUP_SQL_EDITION_PG_BIN WEBHOOK_DEDUP_SQL_EDITION_TLE
fi
"$VENV/bin/python" bench/bench.py "$@"
