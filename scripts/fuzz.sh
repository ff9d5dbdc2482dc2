#!/usr/bin/env bash
# Fuzz every signature parser and verifier with many random and
# format-shaped hostile inputs (a proptest run; not part of the test
# command because it takes minutes). PROPTEST_CASES sets the number of
# cases (default 200000). A failure prints the minimal input that panicked.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
export PROPTEST_CASES=${PROPTEST_CASES:-200000}
echo "fuzzing the signature parsers with $PROPTEST_CASES cases"
cargo test --release --lib signature::properties::fuzz_parsers -- --ignored --nocapture
