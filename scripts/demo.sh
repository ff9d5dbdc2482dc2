#!/usr/bin/env bash
# The main job: replay the 273 real GitHub payloads in tests/fixtures/github
# as signed deliveries, with the faults real providers produce (retries,
# concurrent copies, a handler that dies after claiming or after a
# checkpoint and is resumed from it, forged bodies),
# against the example receiver (examples/receiver) on a throwaway cluster
# with webhook_dedup preloaded. Prints the report of examples/replay and
# exits non-zero unless every valid event had exactly one side effect.
source "$(dirname "$0")/lib.sh"
need_root "$@"
setup_all
cd "$ROOT"

LEASE_SECONDS=2
SECRET=demo-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
RECEIVER_PID=
cleanup() {
    [ -n "$RECEIVER_PID" ] && kill "$RECEIVER_PID" 2>/dev/null && wait "$RECEIVER_PID" 2>/dev/null
    cluster_stop
}
trap cleanup EXIT

started=$(date +%s)
cluster_start
log "cluster at $PGHOST (socket only), shared_preload_libraries = 'webhook_dedup'"
psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION webhook_dedup'
# the receiver logs in as a role that may only call the receiver functions
psql -X -q -v ON_ERROR_STOP=1 -f examples/receiver/roles.sql

log "starting the example receiver (lease $LEASE_SECONDS s, fault injection on)"
coproc RECEIVER { exec "$VENV/bin/python" examples/receiver/receiver.py --port 0 --dsn "user=demo_receiver" \
    --lease "$LEASE_SECONDS seconds" --secret "$SECRET" --fault-injection 2>"$CLUSTER_DIR/receiver.log"; }
RECEIVER_PID=$RECEIVER_PID
read -r -t 30 line <&"${RECEIVER[0]}" || die "the receiver did not start: $(cat "$CLUSTER_DIR/receiver.log")"
URL=${line#listening on }/webhooks/github
log "receiver listening at $URL"

log "replaying real GitHub deliveries"
status=0
"$VENV/bin/python" examples/replay/replay.py --url "$URL" --fixtures tests/fixtures/github \
    --secret "$SECRET" --lease-seconds "$LEASE_SECONDS" || status=$?
log "demo finished in $(( $(date +%s) - started )) s after set-up (exit $status)"
exit $status
