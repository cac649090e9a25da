#!/usr/bin/env bash
# Bounded fuzzing of input parsing and option handling (no GPU needed):
#   scripts/fuzz.sh [SECONDS] [SEED]
# Prints the number of executions and findings; inputs that panic are saved as
# fuzz-finding-N.npy in the repository root, and the exit code is 1 when there are any.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release --quiet --example fuzz_inputs -- "${1:-60}" "${2:-1}"
