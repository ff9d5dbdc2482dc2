#!/usr/bin/env bash
# The pure core stays pure: crates/webhook-dedup-core may depend on no pgrx
# crate (and so on no PostgreSQL), in any of its dependency kinds. Run by the
# lint layer of the test command (scripts/test.sh); docs/design.md, "Layout".
set -euo pipefail
cd "$(dirname "$0")/.."
# --target all: the dependencies of every platform, not only this one's
tree=$(cargo tree --quiet -p webhook-dedup-core --all-features --target all -e normal,build,dev --prefix none)
if [ -z "$tree" ]; then
    echo "check-core: cargo tree printed nothing for webhook-dedup-core" >&2
    exit 1
fi
# pgrx and its crates, and any PostgreSQL client or binding (postgres,
# tokio-postgres, sqlx-postgres, pq-sys, libpq)
if grep -Ei '^[a-z0-9_-]*(pgrx|pg[_-]sys|postgres|pq-sys|libpq)[a-z0-9_-]* v' <<<"$tree"; then
    echo "check-core: crates/webhook-dedup-core depends on the crates above; the core must build and test without PostgreSQL" >&2
    exit 1
fi
# no source of the core may name pgrx either (a path dependency added later
# would show above; a stray `use pgrx` would not compile, but say why)
if grep -rnE '\bpgrx\b|\bpg_sys\b' crates/webhook-dedup-core/src crates/webhook-dedup-core/Cargo.toml | grep -vE '^\S+:[0-9]+:\s*//'; then
    echo "check-core: the core's code names pgrx (above)" >&2
    exit 1
fi
echo "check-core: webhook-dedup-core depends on $(sort -u <<<"$tree" | wc -l) crates, none of them pgrx"
