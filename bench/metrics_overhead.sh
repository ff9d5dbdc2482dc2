#!/usr/bin/env bash
# What the shared-memory counters cost a claim: pgbench runs of
# webhook_claim with the library preloaded (metrics on: every claim counts
# its delivery and outcome, per hour and per minute) and not preloaded
# (metrics off: nothing is counted), alternating on one cluster so both see
# the same disk and cache. Prints every run and the ratio of the median
# throughputs; the metrics issue's target is on/off >= 0.95. A benchmark,
# not a test: it asserts nothing, it reports.
#
#   ./bench/metrics_overhead.sh            # 3 rounds of 15 s, 2 clients
#   ROUNDS=5 SECONDS_PER_RUN=30 CLIENTS=4 ./bench/metrics_overhead.sh
source "$(dirname "$0")/../scripts/lib.sh"
need_root "$@"
setup_all
cd "$ROOT"
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-15}
CLIENTS=${CLIENTS:-2}
trap 'tail -n 5 "$CLUSTER_DIR/server.log" >&2; cluster_stop' EXIT
# No maintenance passes during the runs: the worker would flush (and its
# writes would land in one configuration only).
cluster_start "webhook_dedup.maintenance_interval = 0" "synchronous_commit = off" "shared_preload_libraries = ''"
psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION webhook_dedup'
script=$CLUSTER_DIR/claim.sql
cat > "$script" <<'SQL'
\set k random(1, 2000000)
SELECT outcome FROM webhook_dedup.webhook_claim('bench', 'k' || :k, lease => '1 minute', event_type => 'e');
SQL
chown "$PG_OS_USER" "$script"

# $1: webhook_dedup (preloaded) or nothing (postgresql.conf's empty list).
restart_with() {
    if [ -n "$1" ]; then
        psql -X -q -c "ALTER SYSTEM SET shared_preload_libraries = '$1'"
    else
        psql -X -q -c "ALTER SYSTEM RESET shared_preload_libraries"
    fi
    runuser -u "$PG_OS_USER" -- "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" \
        -m fast -w restart >/dev/null
}

tps() {
    runuser -u "$PG_OS_USER" -- "$PG_BIN/pgbench" -h "$PGHOST" -p "$PGPORT" -U postgres -n \
        -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" -f "$script" postgres 2>/dev/null |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

on=() off=()
log "warm-up (not counted)"
restart_with webhook_dedup; tps >/dev/null
for round in $(seq "$ROUNDS"); do
    restart_with webhook_dedup
    counted=$(psql -XAtq -c "SELECT count(*) FROM webhook_dedup.metrics_live()")
    on+=("$(tps)")
    live=$(psql -XAtq -c "SELECT coalesce(sum(counts[1]), 0) FROM webhook_dedup.metrics_live() WHERE NOT minute")
    restart_with ''
    off+=("$(tps)")
    echo "round $round: metrics on ${on[-1]} tps ($live deliveries counted), metrics off ${off[-1]} tps"
    [ "$counted" = 0 ] || die "counters were not empty after the restart"
    [ "$live" -gt 0 ] || die "metrics on counted nothing: is the library preloaded?"
done
m_on=$(printf '%s\n' "${on[@]}" | median)
m_off=$(printf '%s\n' "${off[@]}" | median)
awk -v on="$m_on" -v off="$m_off" -v c="$CLIENTS" -v s="$SECONDS_PER_RUN" -v r="$ROUNDS" 'BEGIN {
    printf "claims/s, median of %d runs of %d s with %d clients: metrics on %.0f, off %.0f; on/off = %.3f (target >= 0.95)\n",
           r, s, c, on, off, on / off }'
