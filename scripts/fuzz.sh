#!/usr/bin/env bash
# Fuzz the core's parsers (crates/webhook-dedup-core), each for a bounded
# time; not part of the test command (the lint layer only builds the targets).
#
#   1. cargo fuzz (libFuzzer, coverage-guided), one target per parser
#      (fuzz/fuzz_targets/): signature_headers (every scheme's verifier and
#      header parsers), key_derivation, intake_pointers, handshakes; each runs
#      FUZZ_SECONDS (default 60) from its corpus in fuzz/corpus/<target>
#      (kept between runs, not committed). A failure leaves its input in
#      fuzz/artifacts/<target>/; `cargo fuzz fmt <target> <file>` prints it.
#   2. the proptest fuzz of the signature parsers with hostile, format-shaped
#      inputs (PROPTEST_CASES, default 200000).
#
# Usage: scripts/fuzz.sh [target ...]   (no target: all of them, then step 2)
#
# --sanitizer none: cargo fuzz's AddressSanitizer needs a nightly toolchain,
# and this one is stable (Rust 1.95). The core holds no unsafe code outside a
# test helper, so what fuzzing can find here is a panic, an assertion of a
# target, an endless loop or unbounded memory: libFuzzer reports all of them
# without a sanitizer (-timeout, -rss_limit_mb).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
CARGO_FUZZ_VERSION=0.13.2
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
export PROPTEST_CASES=${PROPTEST_CASES:-200000}
TARGETS=(signature_headers key_derivation intake_pointers handshakes)

if [ "$(cargo fuzz --version 2>/dev/null | awk '{print $2}')" != "$CARGO_FUZZ_VERSION" ]; then
    echo "installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install --quiet --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi

selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${TARGETS[@]}")
for target in "${selected[@]}"; do
    echo "==> fuzzing $target for $FUZZ_SECONDS s"
    mkdir -p "fuzz/corpus/$target"
    log=$(mktemp)
    if ! (cd fuzz && cargo fuzz run --sanitizer none "$target" "corpus/$target" -- \
            -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1) > "$log" 2>&1; then
        grep -E -A30 'panicked|ERROR|SUMMARY|Failing input' "$log" | head -60 || tail -40 "$log"
        echo "fuzz target $target failed (its input is in fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
    rm -f "$log"
done

if [ $# -eq 0 ]; then
    echo "==> the proptest fuzz of the signature parsers with $PROPTEST_CASES cases"
    cargo test --release -p webhook-dedup-core --lib signature::properties::fuzz_parsers -- --ignored --nocapture
fi
