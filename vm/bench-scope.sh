#!/bin/sh
# Runs inside the VM (vm/run.sh): the cost of starting a lease, as ratios to a
# bare `systemd-run --scope true`, interleaved so drift hits every variant alike.
#   usage: vm/bench-scope.sh TALLY_BINARY [ROUNDS]
tally=$1
rounds=${2:-15}
state=/tmp/bench-state
ms() { echo $(( $(date +%s%N) / 1000000 )); }
time_one() { s=$(ms); "$@" >/dev/null 2>&1; echo $(( $(ms) - s )); }
: > /tmp/a; : > /tmp/b; : > /tmp/c; : > /tmp/d
# One warm-up of each, not counted (dbus activation, page cache).
systemd-run --scope --quiet true; "$tally" run --state-dir $state -- true 2>/dev/null
i=0
while [ $i -lt "$rounds" ]; do
  time_one true >> /tmp/d
  time_one systemd-run --scope --quiet true >> /tmp/a
  time_one "$tally" run --state-dir $state -- true >> /tmp/b
  time_one "$tally" run --state-dir $state --memory-max 64M --memory-high 48M -- true >> /tmp/c
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
a=$(median /tmp/a); b=$(median /tmp/b); c=$(median /tmp/c); d=$(median /tmp/d)
echo "rounds=$rounds (medians, ms, under QEMU TCG)"
echo "bare fork+exec of true:                         $d"
echo "systemd-run --scope true:                       $a"
echo "tally run -- true:                              $b"
echo "tally run --memory-max 64M --memory-high 48M:   $c"
awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { printf "ratio tally/systemd-run: %.2f (no limits), %.2f (limits)\n", b/a, c/a }'
