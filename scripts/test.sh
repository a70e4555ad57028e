#!/usr/bin/env bash
# The whole test suite: unit, CLI and live tests under ASan + UBSan, the live
# daemon tests in the release build (what ships), every parser's fuzzer for a bounded time, a smoke run
# of the benchmark, the Debian packages (built, lintian-checked, and installed
# in the VM), and the system tests inside the project's VM harness
# (real systemd, real cgroup v2 memory controller, the test DRM driver) on
# Debian's 6.12 (whole), 6.1 and 7.x (the kernel-facing suites) kernels.
# Needs root (mknod'ed device nodes, PID namespaces, QEMU's 9p export of /).
#   FUZZ_SECONDS=6 per fuzzer (default: a regression smoke within CI's 45
#   minutes; longer runs: FUZZ_SECONDS=600 scripts/test.sh, or a fuzzer by hand)
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-6}
jobs=$(nproc)

scripts/install-deps.sh

# The VM phase's guests (docs/vm-harness.md): three kernels and their test
# drivers (7.x's built in a trixie chroot) and the trixie root for Slurm 24.11.
# On a fresh machine that is mostly downloading and unpacking (1.1 GB cached here), which
# waited for the builds before: prepared in the background beside them now
# (each step still one after another, as vm/run.sh's cache wants), waited for
# and checked before the first VM boots.
vmprep=$(mktemp -d /tmp/tally-vm-prep.XXXXXX)
(
  set -e
  for kernel in 6.12 6.1 7; do
    vm/build-testdrm.sh "$(vm/fetch-kernel.sh "$kernel")" >/dev/null
  done
  vm/debian-slurm.sh trixie 24.11 >"$vmprep/slurm-trixie"
  vm/debian-slurm.sh sid 26.05 >"$vmprep/slurm-sid"
) >"$vmprep/log" 2>&1 &
vmprep_pid=$!

# Each step says how long the one before it took: CI has 45 minutes.
laststep=$SECONDS
step() { echo; echo "==== $* ==== (previous step: $((SECONDS - laststep)) s; total $((SECONDS / 60)) min)"; laststep=$SECONDS; }

step "format: the tree matches .clang-format (scripts/format.sh --fix rewrites it)"
scripts/format.sh

# The release build is what operators run, what the packages carry, and what
# the VM suite and the plain live daemon tests run; the unit and CLI tests run
# under ASan + UBSan below. One optimised build serves all three (a separate
# -O0 build for the VM cost CI six minutes and tested a binary nobody ships).
# The SPANK plugin is built against every Slurm release sites run (Debian 12's
# 22.05 installed here, Debian 13's 24.11 and sid's 26.05 fetched by
# scripts/slurm-headers.sh): SPANK loads only a plugin of its own major.minor.
# Its -g1 (CMakePresets.json) keeps the line tables and function names a
# backtrace or perf needs; full -g cost a third more compile time (27.7 s
# against 19.1 s for tests/unit/daemon/service_test.cpp), and the packages
# strip it either way (scripts/build-deb.sh).
step "build: release, what ships and what the VM suite runs, the plugin for each Slurm (warnings are errors)"
cmake --preset release -DTALLY_SLURM_HEADERS="$(scripts/slurm-headers.sh)" >/dev/null
cmake --build --preset release -j "$jobs" --target tally_installable tally_vm_tests tally_live_daemon_tests tally_doc_transcripts \
  tally_bench tally_bench_synth tally_daemon_load tally_spank_all

# One sanitizer build (clang, ASan + UBSan) links the unit, CLI and live
# suites and the fuzzers: the fuzzers' coverage instrumentation costs the
# tests little, and the sources compile once under sanitizers instead of
# twice (g++ for the tests, clang for the fuzzers: 1,645 + 660 s of compiler
# CPU in CI, 2026-12-05). At -O0: -O1 took twice the compile time
# (tests/unit/daemon/service_test.cpp 28.9 s against 14.6 s, src/cli/cmd_client.cpp as it
# was before it became one file per client command, 20.9 against 12.8) for tests that run
# in about a minute either way; the fuzzers make fewer runs in their seconds, which a smoke
# run can spare.
fuzzers=(fdinfo proc_status proc_cgroup proc_stat meminfo mountinfo sysfs_value cgroup_path cgroup_memory units dmem slurm_gres rpc config
         http_head request container_inspect ledger_head clean_text gpu_ioctl slurm_node
         plugin_version)
# The asan build (clang) precompiles the heavy headers (TALLY_PCH, on without
# ccache; the top CMakeLists.txt): its compiler CPU went from 1,721 s to 1,228 s
# (0.71x, 2026-12-06; docs/PERFORMANCE.md, "CI time"). The release build (g++
# -O2) goes without: one gained it nothing measurable (tests/vm/daemon_test.cpp
# 34.5 s of CPU with it, 33.7 s without, plus 9.2 s for the suite's PCH).
step "build: asan + ubsan (clang): the unit, cli and live suites and the fuzzers"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs" --target tally_unit_tests tally_cli_tests tally_live_tests \
  tally_live_lease_tests tally_live_daemon_tests "${fuzzers[@]/#/fuzz_}"

step "fuzz: ${FUZZ_SECONDS}s per parser, $jobs at a time, corpus seeded from the real samples"
fuzzwork=$(mktemp -d /tmp/tally-fuzz.XXXXXX)
trap 'rm -rf "$fuzzwork"' EXIT
fuzz_one() {  # target
  local target=$1 seeds=fuzz/corpus/$1
  [ "$target" = fdinfo ] && seeds=tests/fixtures/fdinfo
  mkdir -p "$fuzzwork/$target"
  if ! build/asan/fuzz/fuzz_$target -max_total_time="$FUZZ_SECONDS" -max_len=16384 -print_final_stats=0 \
       -artifact_prefix="$fuzzwork/$target-" "$fuzzwork/$target" "$seeds" >"$fuzzwork/$target.log" 2>&1; then
    tail -40 "$fuzzwork/$target.log"
    echo "fuzz_$target FAILED (crash input kept as $fuzzwork/$target-*)"
    return 255  # xargs stops
  fi
  echo "fuzz_$target: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$fuzzwork/$target.log"), no crash"
}
export -f fuzz_one
export fuzzwork FUZZ_SECONDS
if ! printf '%s\n' "${fuzzers[@]}" | xargs -P "$jobs" -I{} bash -c 'fuzz_one {}'; then
  trap - EXIT
  exit 1
fi

step "bench smoke: the benchmark runs (numbers: scripts/bench.sh, docs/PERFORMANCE.md)"
smoke=$(mktemp -d /tmp/tally-smoke.XXXXXX)
build/release/bench/tally_bench_synth "$smoke/tree" 50 5 5 >/dev/null
TALLY_BENCH_PROC="$smoke/tree/proc" TALLY_BENCH_SYS="$smoke/tree/sys" TALLY_BENCH_CGROUP="$smoke/tree/cgroup" \
  TALLY_BENCH_LEASE=/lease.scope build/release/bench/tally_bench --benchmark_min_time=0.01 | grep ratio
rm -rf "$smoke"

step "package: the Debian packages from the release build, lintian clean (scripts/build-deb.sh; the VM installs them)"
scripts/build-deb.sh

# Each suite binary once, $jobs at a time, longest first: ctest --preset asan
# runs the same tests one process each, and 422 ASan process starts cost
# CI four minutes more (344 s against 104 s here).
step "tests: asan + ubsan (unit, cli, live)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
testlogs=$(mktemp -d /tmp/tally-tests.XXXXXX)
run_suite() {  # binary log
  if "$1" >"$2" 2>&1; then
    echo "$(basename "$1"): $(grep -E '^\[  PASSED' "$2")"
  else
    tail -80 "$2"
    echo "$(basename "$1") FAILED (its whole log: $2)"
    return 255  # xargs stops
  fi
}
export -f run_suite
printf '%s\n' tally_cli_tests tally_live_daemon_tests tally_unit_tests tally_live_lease_tests tally_live_tests |
  xargs -P "$jobs" -I{} bash -c 'run_suite build/asan/tests/{} "$0/{}.log"' "$testlogs"
rm -rf "$testlogs"
unset ASAN_OPTIONS UBSAN_OPTIONS

# Resident-set bounds mean something only without ASan's quarantine and shadow.
step "tests: the live daemon tests in the release build (resident-set bounds checked)"
build/release/tests/tally_live_daemon_tests

# The VM suite on each kernel of the matrix (docs/vm-harness.md): Debian 12's
# backports 6.12, the whole suite (with the observability live tests again,
# where journald listens: on the host their lifecycle lines go to stderr);
# Debian 12's own 6.1 and trixie-backports' 7.x, the suites that meet the
# kernel (cgroup v2 and memcg, procfs handles, the DRM driver's fdinfo,
# pidfds and inotify under the daemon, the kernel charge). The packages
# (dpkg, systemd-analyze, the guide) and Slurm's userspace are the same on
# every kernel and run once, on 6.12 (Slurm in a VM of its own). Last, one boot whose lsm= leaves bpf
# out: what tally does where the BPF LSM is off. And the Slurm suite again on
# sid's Slurm 26.05 and (its release-facing tests) Debian 13's 24.11, each run
# from a Debian root of its own (vm/debian-slurm.sh) with the plugin built for it.
#
# Two VMs at a time, each on one host thread (TCG thread=single): a VM keeps
# about one core busy (216 s of CPU in a 216 s run of the 6.1 suite), so two
# side by side cost little more than one, and single-threaded TCG also
# executes the kernel's live text patching (BPF trampolines attached while
# other vCPUs run the patched call sites) as the hardware does; QEMU's
# multi-threaded TCG crashed on it (an int3 Oops at the fentry site) in 3 of
# 4 runs of the charge benchmark.
step "vm: system tests on Debian's 6.12 (whole), 6.1 and 7.x (kernel-facing) kernels, a boot without the BPF LSM, Slurm 22.05 and 26.05 (whole) and 24.11 (release-facing), two VMs at a time (QEMU TCG; vm/run.sh)"
export TALLY_VM_TCG_THREAD=single
# The kernels, their test drivers and the trixie root, prepared since the start.
if ! wait "$vmprep_pid"; then
  tail -60 "$vmprep/log"
  echo "vm: preparing the kernels, test drivers and trixie root FAILED (its whole log: $vmprep/log)"
  exit 1
fi
slurm_trixie=$(cat "$vmprep/slurm-trixie")
slurm_sid=$(cat "$vmprep/slurm-sid")
rm -rf "$vmprep"
vmlogs=$(mktemp -d /tmp/tally-vm-logs.XXXXXX)
kernel_facing='VmSystem.*:VmCgroupfs.*:VmKernel.*:VmDaemon.*:VmProcHandles.*:VmCgroupHandle.*:VmKernelCharge.*:VmChargeProbe.*'
kernel_facing+=':VmRedTeam.TheHidingTricks*:VmRedTeam.Kill9*:VmRedTeam.ALeaseDeeper*:VmRedTeam.ReleaseAndAttach*'
kernel_facing+=':VmRedTeam.BuffersPassedOn*:VmRedTeam.AProcessMovedIn*'
vm_one() {  # name, then vm/run.sh's arguments
  local name=$1 start=$SECONDS rc=0
  shift
  vm/run.sh "$@" >"$vmlogs/$name.log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - start))" >"$vmlogs/$name.rc"
}
# The benchmark of the charge runs once, on 6.12 (89 s; docs/PERFORMANCE.md
# has its numbers per kernel, by hand). Slurm 22.05's suite boots its own
# 6.12 VM, so that the two lines of VMs take about as long (CI, 2026-12-05:
# 6.12 without Slurm about 800 s; 6.1 506 s; 7.x 685 s, where loading the
# programs costs each test 3-7 s more than on 6.1 under TCG; Slurm 22.05
# 338 s, 24.11 about 360 s; the boot without the BPF LSM 20 s). The load
# suite (VmLoad.*, issue 48's attacks with the watchdog armed) runs on the
# 6.12 line only, by its filter: 135-140 s more there on a quiet host, 181 s
# with a build beside it (2026-12-06: that line's tally_vm_tests without
# VmDeb took 1,054 s so, VmLoad included), so its timeout is 1500 s (a timeout, not an expected time).
# It is not kernel-facing (it stays out of $kernel_facing, CI's time).
# The packages' own suite (VmDeb.*, ~90 s: apt install, a member's lease, the
# plugin found by slurmd, purge) boots a VM of its own on Debian 12's own 6.1
# kernel, the kernel a fresh bookworm box installs them on. Its own boot, not
# the 6.1 suite's, because it leaves the packaged daemon's pins and units
# behind for whatever runs after it. The lines, as measured (CI 2026-12-06,
# a809774, 49 min in all): 6.12 799 s, 6.1 449 s, no BPF LSM 18 s, Slurm 24.11
# 82 s; 7.x 638 s, Slurm 22.05 with VmDeb 526 s (VmDeb about 150 s of it: 174 s
# alone on 6.1 under a build), 26.05 384 s. So now 6.12, 6.1, VmDeb and the boot
# without the BPF LSM; 7.x, Slurm 22.05, 26.05 without the time-limit test,
# 24.11: 1,653 s and 1,595 s in CI's run of 95b7d66 (a slower run throughout).
# The Slurm suites then grew (every job on a managed node leased, the no_gres
# and job-kill tests: 22.05's took 650 s here beside a build), so 24.11 moved
# to the first line: CI's run of d6d38d0, 1,529 s and 1,605 s (51 min in all).
kernel_facing+=':-VmKernelCharge.Bench*'
# Three tests of those suites assert what the daemon decides, not what the kernel does,
# and run once, on 6.12: the pool queue (VmDaemon.TwoRuns*: capacity 1, the second run
# waits, and its reason), the admission refusals' wording (VmDaemon.BudgetRefusals*), the
# ledger's rows (VmSystem.LedgerHoldsEveryOutcome). The scope, memory.peak and the samples
# they pass through are asserted on every kernel by the rest of VmSystem and VmDaemon
# (2026-12-06: 15 s of the 6.1 line, 23 s of the 7.x line).
kernel_facing+=':VmDaemon.TwoRunsOnACapacityOnePoolSerialise:VmDaemon.BudgetRefusalsSayWhatToDeclare'
kernel_facing+=':VmSystem.LedgerHoldsEveryOutcome'
# The Slurm suite runs whole on 22.05 (Debian 12's) and 26.05 (sid's, the
# supported release); on 24.11 (Debian 13's, past SchedMD's support) the
# tests that meet what differs per release: each call to slurmctld (the job's
# record, the step's request, AdminComment read and written), the plugin's
# init in every context, the version doctor checks. (2026-12-06: the whole
# suite took 367 s on 22.05 in the VM; CI has 45 minutes.)
slurm_release_facing='VmSlurm.AStepOverItsGres*:VmSlurm.AStepWithinItsBound*:VmSlurm.APlugstackTypo*'
slurm_release_facing+=':VmSlurm.AJobsStepsAskSlurmctld*:VmSlurm.DoctorSlurm*'
# slurmstepd's auth lock (23.02+) against the prefetch: tests/vm/spank_gate.cpp
slurm_release_facing+=':VmSlurm.AJobsFirstStep*'
# slurmdbd on MariaDB from the release's root (22.05 skips it: no slurmdbd installed)
slurm_release_facing+=':VmSlurm.Accounting*'
# The time-limit test waits out Slurm's one-minute minimum and slurmctld's
# 30 s background pass (114 s on each release, 2026-12-06); what it asserts
# is tally's ledger after the step's signal, the same plugin path on every
# release: it runs on 22.05 only.
# The page's transcript (VmSlurm.TheSlurmPageQuotes…) quotes 22.05's wording: 22.05 only.
slurm_2605='VmSlurm.*:-VmSlurm.ATimeLimitEndsTheJobsLeasesWithTheSignalInTheLedger:VmSlurm.TheSlurmPageQuotes*'
(
  vm_one 6.12 --kernel 6.12 --timeout 1500 --env TALLY_TEST_JOURNALD=required -- \
    sh -c 'build/release/tests/tally_vm_tests --gtest_filter="-VmSlurm.*:VmNoBpfLsm.*:VmDeb.*:VmDocs.*" && build/release/tests/tally_live_daemon_tests --gtest_filter="ObservabilityLive.*"'
  # The docs' quoted output against the binary (VmDocs: vm/guide-example.sh
  # and vm/examples.sh, which leave a daemon's units and pins behind): a boot
  # of its own, on 6.12 as the pages say.
  vm_one docs --kernel 6.12 --timeout 600 -- \
    build/release/tests/tally_vm_tests --gtest_filter='VmDocs.*'
  vm_one 6.1 --kernel 6.1 --timeout 1200 -- build/release/tests/tally_vm_tests --gtest_filter="$kernel_facing"
  vm_one no-bpf-lsm --kernel 6.12 --timeout 600 --append "lsm=capability,yama" -- \
    build/release/tests/tally_vm_tests --gtest_filter='VmNoBpfLsm.*'
  vm_one deb --kernel 6.1 --timeout 600 -- build/release/tests/tally_vm_tests --gtest_filter='VmDeb.*'
  vm_one slurm-24.11 --kernel 6.12 --timeout 1200 --env TALLY_SLURM_RELEASE=24.11 \
    --env "TALLY_SLURM_ROOT=$slurm_trixie" -- build/release/tests/tally_vm_tests --gtest_filter="$slurm_release_facing"
) &
(
  # 7.x took 638-853 s in CI's runs and passed 900 s with builds beside it
  # (2026-12-07, stopped in its last tests): 1200 s, a timeout like the
  # Slurm lines', not an expected time. 6.1 likewise.
  vm_one 7 --kernel 7 --timeout 1200 -- build/release/tests/tally_vm_tests --gtest_filter="$kernel_facing"
  vm_one slurm-22.05 --kernel 6.12 --timeout 1200 -- build/release/tests/tally_vm_tests --gtest_filter='VmSlurm.*'
  vm_one slurm-26.05 --kernel 6.12 --timeout 1200 --env TALLY_SLURM_RELEASE=26.05 \
    --env "TALLY_SLURM_ROOT=$slurm_sid" -- build/release/tests/tally_vm_tests --gtest_filter="$slurm_2605"
) &
wait
vmfailed=
for name in 6.12 docs 6.1 no-bpf-lsm deb 7 slurm-22.05 slurm-26.05 slurm-24.11; do
  read -r rc secs <"$vmlogs/$name.rc" || { rc=125; secs=?; }
  if [ "$rc" = 0 ]; then
    echo "vm $name: $(grep -E '^\[  PASSED' "$vmlogs/$name.log" | tr '\n' ' ')in $secs s"
    grep -E '^\[ bench \]' "$vmlogs/$name.log" || true
  else
    tail -120 "$vmlogs/$name.log"
    echo "vm $name FAILED (exit $rc after $secs s; its whole log: $vmlogs/$name.log)"
    vmfailed=1
  fi
done
[ -z "$vmfailed" ] || exit 1
rm -rf "$vmlogs"
step "done"
