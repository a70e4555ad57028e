#!/usr/bin/env bash
# Times tally's scanners against the syscall floor and a naive reader, in one
# run, on (1) a live workload of N processes x M fds and (2) a synthetic tree,
# and prints the ratios recorded in docs/PERFORMANCE.md.
#   scripts/bench.sh            N=1000 M=20, synthetic DRM every K=10 processes
#   N=200 M=10 REPS=3 scripts/bench.sh   (a quick run)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000} M=${M:-20} K=${K:-10} REPS=${REPS:-5}

cmake --preset release >/dev/null
cmake --build --preset release --target tally_bench tally_bench_workload tally_bench_synth >/dev/null
bin=build/release/bench
work=$(mktemp -d /tmp/tally-bench.XXXXXX)
cleanup() { exec 3>&- 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
bench_args=(--benchmark_repetitions="$REPS" --benchmark_enable_random_interleaving=true
            --benchmark_report_aggregates_only=true --benchmark_color=false)

echo "== live: $N processes x $M fds on this host's /proc (no DRM devices here) =="
mkfifo "$work/stdin"
"$bin/tally_bench_workload" "$N" "$M" <"$work/stdin" >"$work/ready" &
exec 3>"$work/stdin"
until grep -q ready "$work/ready" 2>/dev/null; do sleep 0.2; done
cat "$work/ready"
TALLY_BENCH_PROC=/proc TALLY_BENCH_SYS=/sys \
  "$bin/tally_bench" --benchmark_filter='BM_(Floor|TallyHostScan|Naive)' "${bench_args[@]}"
exec 3>&-
wait

echo
echo "== synthetic: $N processes x $M fds, 2 DRM clients in every ${K}th process; lease = 20 processes =="
"$bin/tally_bench_synth" "$work/tree" "$N" "$M" "$K"
TALLY_BENCH_PROC="$work/tree/proc" TALLY_BENCH_SYS="$work/tree/sys" \
TALLY_BENCH_CGROUP="$work/tree/cgroup" TALLY_BENCH_LEASE=/lease.scope \
  "$bin/tally_bench" "${bench_args[@]}"
