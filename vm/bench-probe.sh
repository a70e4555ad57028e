#!/bin/sh
# Runs inside the VM (vm/run.sh): what the active GTT -> memcg probe adds to
# `tally doctor`, as a ratio, the two interleaved so drift hits both alike.
#   usage: vm/bench-probe.sh TALLY_BINARY [ROUNDS]
tally=$1
rounds=${2:-10}
[ -d /sys/module/tally_testdrm ] || { modprobe drm && insmod "$TALLY_TESTDRM_KO"; } || exit 1
ms() { echo $(( $(date +%s%N) / 1000000 )); }
time_one() { s=$(ms); "$@" >/dev/null 2>&1; echo $(( $(ms) - s )); }
"$tally" doctor --active >/dev/null 2>&1  # warm-up, not counted
plain=0; active=0; i=0
while [ $i -lt "$rounds" ]; do
  plain=$(( plain + $(time_one "$tally" doctor) ))
  active=$(( active + $(time_one "$tally" doctor --active) ))
  i=$(( i + 1 ))
done
echo "doctor:          $(( plain / rounds )) ms per run ($rounds rounds)"
echo "doctor --active: $(( active / rounds )) ms per run (64 MiB of GTT through the test driver)"
echo "ratio active/plain: $(( active * 1000 / plain ))/1000"
