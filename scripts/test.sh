#!/usr/bin/env bash
# Every test of webhook_dedup, each layer for what it can prove:
#   1. lint: rustfmt and clippy (warnings are errors), a type-check
#      against PostgreSQL 13..18 (scripts/check-versions.sh), the Grafana
#      dashboard's queries against the exporter's metrics, and the scripts'
#      own functions with fake tools (pytest: tests/contrib, tests/scripts);
#   2. unit: the pure Rust modules (cargo test, no PostgreSQL);
#   3. pg_test: the SQL functions in one session (cargo pgrx test);
#   4. isolation: races between sessions (pg_isolation_regress) on a real cluster;
#   5. cluster: many connections, killed backends, a crashed server, the
#      background worker and deletes of expired keys under load (pytest; the
#      worker and retention tests start clusters of their own);
#   6. end-to-end: the demo's receiver, every example receiver (FastAPI,
#      Express, Sinatra: receiver and worker) and the SQL walk-through, with
#      real signed deliveries (pytest);
#   7. upgrade: 0.1.0 and 0.2.0 built from their commits, filled, updated to this version
#      (pytest; after the shared cluster stopped, since it installs other
#      builds of the library);
#   8. package: scripts/package.sh builds the .deb and the source tarball;
#      META.json against the PGXN Meta Spec (pgxn_meta); the .deb's fields
#      and files, and a server run from them; a second build byte-identical
#      (the install script in canonical order); then the .deb installed with
#      apt-get, a cluster claiming with it, and its removal (pytest); the
#      development build is installed again afterwards;
#   9. distributed: a Citus coordinator and two workers on loopback, each a
#      cluster of its own (pytest, tests/citus): the extension on every node,
#      the workers active. When Citus is not installed it is built from
#      ../shared/citus (or WEBHOOK_DEDUP_CITUS_SOURCE) when that is there;
#      otherwise the layer is skipped, and the summary says so.
# Installs whatever is missing first (see scripts/lib.sh). Exits non-zero on
# the first failing layer; prints each runner's summary line.
source "$(dirname "$0")/lib.sh"
need_root "$@"
setup_all
cd "$ROOT"

summary=()
WORK=$(mktemp -d /tmp/webhook_dedup_test.XXXXXX)
chown "$PG_OS_USER" "$WORK"
cleanup() { cluster_stop; rm -rf "$WORK"; }
trap cleanup EXIT

log "1/9 lint: cargo fmt --check, cargo clippy -D warnings, type-check for PostgreSQL 13..18, the Grafana dashboard, scripts/lib.sh"
cargo fmt --check
cargo clippy --quiet --no-default-features --features "pg$PG_MAJOR pg_test" --all-targets -- -D warnings
"$ROOT/scripts/check-versions.sh"
# the Grafana dashboard against the postgres_exporter query file (no database)
"$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/contrib 2>&1 | tee "$WORK/contrib.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || die "the Grafana dashboard does not match the exporter's metrics"
# scripts/lib.sh's functions against fake cargo and pg_config (no build)
"$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/scripts 2>&1 | tee "$WORK/scripts.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || die "the scripts' tests failed"
summary+=("lint: ok (rustfmt, clippy, builds for pg13..pg18; dashboard: $(tail -1 "$WORK/contrib.log"); scripts: $(tail -1 "$WORK/scripts.log"))")

log "2/9 unit tests (pure Rust)"
cargo test --quiet --lib --no-default-features --features "pg$PG_MAJOR" 2>&1 | tee "$WORK/unit.log"
summary+=("unit: $(grep '^test result:' "$WORK/unit.log" | tail -1)")

log "3/9 #[pg_test] (cargo pgrx test pg$PG_MAJOR api::tests: the pg_tests only, the unit tests ran above)"
# One test at a time: several pg_tests delete keys of the shared keys table
# and take the maintenance lock, which concurrent tests (separate backends)
# would contend for.
RUST_TEST_THREADS=1 cargo pgrx test "pg$PG_MAJOR" api::tests --runas "$PG_OS_USER" --pgdata "$WORK/pgrx-data" 2>&1 | tee "$WORK/pgtest.log" \
    | grep -E '^test |^test result:|panicked|FAILED' || true
grep -q '^test result: ok' "$WORK/pgtest.log" && ! grep -q '^test result: FAILED' "$WORK/pgtest.log" \
    || die "cargo pgrx test failed (log: see above)"
summary+=("pg_test: $(grep '^test result:' "$WORK/pgtest.log" | head -1)")

# cargo pgrx test installed its own (pg_test) build; put the real one back.
install_extension
cluster_start

log "4/9 isolation specs (pg_isolation_regress)"
ISOLATION=$(dirname "$($PG_CONFIG --pgxs)")/../test/isolation/pg_isolation_regress
specs=$(cd tests/isolation/specs && ls ./*.spec | sed 's|^\./||; s|\.spec$||')
# shellcheck disable=SC2086
if ! "$ISOLATION" --host="$PGHOST" --port="$PGPORT" --user="$PGUSER" \
        --inputdir=tests/isolation --outputdir="$WORK/isolation" \
        --dbname=isolation_regression $specs > "$WORK/isolation.log" 2>&1; then
    cat "$WORK/isolation.log"
    cat "$WORK"/isolation/regression.diffs 2>/dev/null || true
    die "isolation specs failed"
fi
grep -E '^(ok|not ok|test) ' "$WORK/isolation.log" || true
summary+=("isolation: $(grep -cE '^(ok|test .*\.\.\. ok)' "$WORK/isolation.log") specs passed")

log "5/9 cluster tests (pytest: 32 connections on 1,000 keys, killed backends, a crashed server, the worker, deletes under load)"
psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION webhook_dedup'
export WEBHOOK_DEDUP_PGDATA=$CLUSTER_DIR/data WEBHOOK_DEDUP_PG_BIN=$PG_BIN WEBHOOK_DEDUP_PG_OS_USER=$PG_OS_USER
"$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/cluster 2>&1 | tee "$WORK/cluster.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || die "cluster tests failed"
summary+=("cluster: $(tail -1 "$WORK/cluster.log")")

log "6/9 end-to-end (pytest: the demo receiver, the FastAPI, Express and Sinatra examples, the SQL walk-through, real signed deliveries)"
"$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/e2e 2>&1 | tee "$WORK/e2e.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || die "end-to-end tests failed"
summary+=("e2e: $(tail -1 "$WORK/e2e.log")")

log "7/9 upgrade (pytest: 0.1.0 from commit 9f23a3f and 0.2.0 from 4604008, filled with keys in every state, ALTER EXTENSION UPDATE)"
cluster_stop
"$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/upgrade 2>&1 | tee "$WORK/upgrade.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || die "upgrade tests failed"
summary+=("upgrade: $(tail -1 "$WORK/upgrade.log")")

log "8/9 package (scripts/package.sh; META.json for PGXN; the .deb inspected, installed with apt-get, used, removed)"
ensure_pgxn_meta
"$ROOT/scripts/package.sh" --out "$WORK/package"
export WEBHOOK_DEDUP_DEB
WEBHOOK_DEDUP_DEB=$WORK/package/$(deb_package_name)_$(project_version)_$(dpkg --print-architecture).deb
package_status=0
"$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/package 2>&1 | tee "$WORK/package.log" || package_status=$?
# Removing the package deleted the installed library and scripts: put the
# development build back, whatever the tests did.
install_extension
[ "$package_status" -eq 0 ] || die "package tests failed"
summary+=("package: $(tail -1 "$WORK/package.log")")

log "9/9 distributed (Citus: a coordinator and two workers on loopback, each a cluster of its own; pytest)"
if ensure_citus; then
    export WEBHOOK_DEDUP_PG_BIN=$PG_BIN WEBHOOK_DEDUP_PG_OS_USER=$PG_OS_USER
    "$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/citus 2>&1 | tee "$WORK/citus.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || die "distributed tests failed"
    summary+=("distributed: $(tail -1 "$WORK/citus.log")")
else
    skipped="Citus is not installed and no source at $CITUS_SOURCE: the distributed layer is skipped"
    log "$skipped"
    summary+=("distributed: $skipped")
fi

log "all layers passed"
printf '  %s\n' "${summary[@]}"
