#!/usr/bin/env bash
# The scale run (docs/PERFORMANCE.md): the host-wide scan and a cgroup-scoped
# lease sample over 1,000 and 10,000 live processes x 20 fds, each against
# its syscall floor in the same run; the cost per process must stay flat.
#   SIZES="1000 10000" FDS=20 REPS=3 (defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-1000 10000} FDS=${FDS:-20} REPS=${REPS:-3}
cmake --preset release >/dev/null
cmake --build --preset release --target tally_bench tally_bench_workload >/dev/null
bin=build/release/bench
work=$(mktemp -d /tmp/tally-scale.XXXXXX)
cleanup() { exec 3>&- 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || true  # a meter holds two fds per process
for n in $SIZES; do
  echo "== $n processes x $FDS fds (live, this host's /proc) =="
  rm -f "$work/stdin" "$work/ready"
  mkfifo "$work/stdin"
  "$bin/tally_bench_workload" "$n" "$FDS" <"$work/stdin" >"$work/ready" &
  wpid=$!
  exec 3>"$work/stdin"
  until grep -q ready "$work/ready" 2>/dev/null; do sleep 0.2; done
  # The lease: a synthetic cgroup whose cgroup.procs lists the workload's processes.
  lease="$work/cgroup/scale.slice/lease.scope"
  rm -rf "$work/cgroup" && mkdir -p "$lease"
  pgrep -P "$wpid" > "$lease/cgroup.procs"
  echo "populated 1" > "$lease/cgroup.events"
  echo 104857600 > "$lease/memory.current"
  printf 'anon 104857600\nfile 0\n' > "$lease/memory.stat"
  echo "$(wc -l < "$lease/cgroup.procs") processes in the lease"
  TALLY_BENCH_PROC=/proc TALLY_BENCH_SYS=/sys TALLY_BENCH_CGROUP="$work/cgroup" \
    TALLY_BENCH_LEASE=/scale.slice/lease.scope \
    "$bin/tally_bench" --benchmark_filter='BM_(Floor|TallyHostScan|CgroupFloor|TallyCgroupScan|LeaseSample)/' \
      --benchmark_repetitions="$REPS" --benchmark_enable_random_interleaving=true \
      --benchmark_report_aggregates_only=true --benchmark_color=false 2>&1 |
    grep -E "median|ratio|per-process"
  exec 3>&-
  wait "$wpid" 2>/dev/null || true
done
