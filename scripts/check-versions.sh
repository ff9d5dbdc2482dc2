#!/usr/bin/env bash
# Type-check the extension against every PostgreSQL major version pgrx
# supports (13..18), without their headers: pgrx-pg-sys ships pre-generated
# bindings for each version, which it uses under `--cfg docsrs` with
# DOCS_RS=1 (as docs.rs builds it). That cfg is set for pgrx-pg-sys alone
# (profile rustflags, a Cargo feature that needs RUSTC_BOOTSTRAP on
# stable); the other crates build normally. Only PostgreSQL 15 is run by
# the tests; this proves the code compiles for the others.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
for v in 13 14 15 16 17 18; do
    printf 'cargo check --features pg%s ... ' "$v"
    RUSTC_BOOTSTRAP=1 DOCS_RS=1 CARGO_TARGET_DIR=target/check-versions \
        cargo -Z profile-rustflags \
        --config 'profile.dev.package.pgrx-pg-sys.rustflags=["--cfg","docsrs"]' \
        check --quiet --no-default-features --features "pg$v"
    echo ok
done
