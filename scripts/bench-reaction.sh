#!/usr/bin/env bash
# The GPU bound's reaction time with near-bound sampling, measured inside the VM
# harness (docs/PERFORMANCE.md): crossing -> kill for a lease near its bound,
# and the daemon's CPU with near-bound sampling on and off.
#   RUNS=11 (default)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target tally >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default --target tally_vm_workload >/dev/null
vm/run.sh --timeout 1200 -- sh vm/bench-reaction.sh "$PWD/build/release/src/tally" \
  "$PWD/build/default/tests/tally_vm_workload" "${RUNS:-11}"
