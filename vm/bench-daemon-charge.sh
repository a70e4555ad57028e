#!/bin/sh
# Runs inside the VM (vm/run.sh): the daemon's CPU at 8 leases x 16
# processes sampled at 1 Hz (bench/daemon_load.cpp), with the in-kernel
# charge off (the procfs meter) and on, alternating in one boot so drift hits
# both alike; with a second daemon binary, that one too with the charge on.
#   usage: vm/bench-daemon-charge.sh TALLY_BINARY [PAIRS] [SECONDS] [OTHER_TALLY_BINARY]
tally=$1
pairs=${2:-3}
secs=${3:-30}
other=$4
load=$(dirname "$tally")/../bench/tally_daemon_load
[ -x "$load" ] || { echo "no $load: build the tally_daemon_load target"; exit 1; }
# The test driver makes the daemon load its programs (a DRM device to charge).
[ -d /sys/module/tally_testdrm ] || { modprobe drm && insmod "$TALLY_TESTDRM_KO"; } || exit 1
one() {  # label binary kernel_charge
  echo "== $1 (kernel_charge = $3)"
  TALLY_LOAD_KERNEL_CHARGE=$3 "$load" "$2" "$secs" 1000 64 500 16 |
    grep -E "CPU idle|CPU with 8 leases at|GPU source"
}
i=1
while [ $i -le "$pairs" ]; do
  one "pair $i" "$tally" off
  one "pair $i" "$tally" on
  [ -n "$other" ] && one "pair $i, $other" "$other" on
  i=$((i + 1))
done
