#!/usr/bin/env bash
# The Slurm plugin's cost per step start, measured inside the VM harness against
# `srun true` without it in the same run (docs/PERFORMANCE.md).
#   ROUNDS=15 (default); BASELINE=path/to/an/older/tally_spank.so times it in the same rounds;
#   CONTAIN=1 runs the node with PrologFlags=Contain (each job's extern step makes its lease)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target tally tally_spank >/dev/null
vm/run.sh --timeout 1200 ${CONTAIN:+--env TALLY_BENCH_CONTAIN=1} -- sh vm/bench-slurm.sh "$PWD/build/release/src/tally" \
  "$PWD/build/release/src/tally_spank.so" "${ROUNDS:-15}" ${BASELINE:+"$BASELINE"}
