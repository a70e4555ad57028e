#!/bin/sh
# Runs inside the VM (vm/run.sh): how soon the daemon kills an attached lease
# that jumps over its gpu_memory_max, with sample_interval = 1s: the time from
# the moment the workload's buffer existed (CLOCK_REALTIME, written by the
# workload) to the daemon's kill event. The lease first sits within
# near_bound_margin of its bound, as a model does while it loads.
# Then the daemon's CPU with one lease far from its bound, near-bound sampling
# on and off, interleaved.
#   usage: vm/bench-reaction.sh TALLY WORKLOAD [RUNS]   (the driver: $TALLY_TESTDRM_KO)
set -eu
tally=$1
workload=$2
runs=${3:-11}
ko=$TALLY_TESTDRM_KO
dir=/tmp/bench-reaction
mkdir -p $dir
[ -e /sys/module/tally_testdrm ] || { modprobe drm; insmod "$ko"; }
config() {  # MARGIN
  cat > $dir/tally.toml <<CONF
[daemon]
socket = "$dir/tally.sock"
state_dir = "$dir/state"
sample_interval = "1s"
near_bound_margin = $1
[pools.gpu]
capacity = 4
CONF
}
start() { config "$1"; systemd-run --quiet --unit=tally-reaction -p Type=notify "$tally" daemon --config $dir/tally.toml; }
stop() { systemctl stop tally-reaction; }
export TALLY_SOCKET=$dir/tally.sock
# One series of RUNS with near-bound sampling at MARGIN percent (0: off).
reaction() {  # MARGIN OUT
  start "$1"
  : > "$2"
  i=0
  while [ $i -lt "$runs" ]; do
    rm -f $dir/ready $dir/go $dir/crossed
    unit=reaction-$1-$i.service
    systemd-run --quiet --unit=$unit -p Type=exec "$workload" step gtt 60 16 $dir/ready $dir/go $dir/crossed 60000
    while [ ! -e $dir/ready ]; do sleep 0.05; done
    lease=$("$tally" attach --unit $unit --pool gpu --gpu-memory-max 64M --name reaction-$i 2>/dev/null)
    sleep 1.5   # the lease settles: near its bound (60 of 64 MiB)
    touch $dir/go
    while [ ! -e $dir/crossed ]; do sleep 0.01; done
    crossed=$(cat $dir/crossed)
    killed=
    for _ in $(seq 1 100); do
      killed=$("$tally" ledger export --config $dir/tally.toml |
               jq -r --arg l "$lease" '[.[] | select(.lease == $l and .kind == "outcome")][0].body.gpu.bound.events[-1].at_ns // empty')
      [ -n "$killed" ] && break
      sleep 0.1
    done
    echo $(( (killed - crossed) / 1000000 )) >> "$2"
    systemctl reset-failed $unit 2>/dev/null || true
    i=$((i + 1))
  done
  stop
}
median() { sort -n "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
reaction 10 $dir/near
reaction 0 $dir/fixed
echo "crossing -> kill, $runs runs each (ms), sample_interval 1s, gpu_over_samples 2:"
echo "  near-bound sampling (50 ms within 10 %): $(sort -n $dir/near | tr '\n' ' ')"
echo "  fixed cadence (near_bound_margin = 0):   $(sort -n $dir/fixed | tr '\n' ' ')"
n=$(median $dir/near); f=$(median $dir/fixed)
echo "median $n ms (max $(sort -n $dir/near | tail -1)) against $f ms (max $(sort -n $dir/fixed | tail -1))"
awk -v n="$n" -v f="$f" 'BEGIN { printf "ratio fixed/near: %.1f\n", f/n }'

# CPU with one lease far from its bound (4 of 64 MiB), near-bound sampling on (10 %) and off (0).
cpu() {  # SECONDS -> % of one core of the daemon
  pid=$(systemctl show -P MainPID tally-reaction)
  a=$(cut -d' ' -f1 /proc/$pid/schedstat); sleep "$1"; b=$(cut -d' ' -f1 /proc/$pid/schedstat)
  awk -v a="$a" -v b="$b" -v s="$1" 'BEGIN { printf "%.4f", (b - a) / 1e9 / s * 100 }'
}
systemd-run --quiet --unit=far.service -p Type=exec "$workload" gpu gtt 4 1 600000
: > $dir/on; : > $dir/off
for round in 1 2 3; do
  for margin in 10 0; do
    start $margin
    far=$("$tally" attach --unit far.service --pool gpu --gpu-memory-max 64M 2>/dev/null)
    sleep 2
    if [ $margin = 10 ]; then cpu 15 >> $dir/on; echo >> $dir/on; else cpu 15 >> $dir/off; echo >> $dir/off; fi
    "$tally" lease release "$far" >/dev/null 2>&1  # or the next daemon re-adopts it
    stop
  done
done
on=$(median $dir/on); off=$(median $dir/off)
echo "daemon CPU, one lease far from its bound, 3 x 15 s each (% of one core): near-bound sampling on $on, off $off"
awk -v a="$on" -v b="$off" 'BEGIN { printf "ratio on/off: %.2f\n", a/b }'
