#!/usr/bin/env bash
# Load on tally daemon, as recorded in docs/PERFORMANCE.md ("Daemon"):
# round trips/s over the socket, and RSS / CPU with 8 leases sampled at 1 Hz
# on a host with 1,000 extra processes and with 10,000 queued requests (and hello latency then).
#   scripts/bench-daemon.sh                 SECS=60 PROCS=1000 QUEUED=10000 ROUNDTRIPS=2000 PER_LEASE=16
#   SECS=10 scripts/bench-daemon.sh      (a quick run)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target tally tally_daemon_load >/dev/null
exec build/release/bench/tally_daemon_load build/release/src/tally "${SECS:-60}" "${PROCS:-1000}" "${QUEUED:-10000}" "${ROUNDTRIPS:-2000}" "${PER_LEASE:-16}"
