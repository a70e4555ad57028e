#!/usr/bin/env bash
# The cost of starting a lease, measured inside the VM harness against a bare
# `systemd-run --scope true` in the same run (docs/PERFORMANCE.md).
#   ROUNDS=15 (default)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target tally >/dev/null
vm/run.sh --timeout 900 -- sh vm/bench-scope.sh build/release/src/tally "${ROUNDS:-15}"
