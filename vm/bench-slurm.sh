#!/bin/sh
# Runs inside the VM (vm/run.sh): what tally_spank.so adds to a step's start,
# as ratios to `srun true` on the same one-node cluster without the plugin,
# interleaved (plugstack.conf is re-read at every srun) so drift hits all alike.
# With BASELINE (an older build of the plugin), it is timed in the same rounds.
#   usage: vm/bench-slurm.sh TALLY_BINARY PLUGIN [ROUNDS] [BASELINE_PLUGIN]
set -eu
tally=$1
plugin=$2
rounds=${3:-15}
baseline=${4:-}
dir=/tmp/bench-slurm
mkdir -p $dir
cat > $dir/tally.toml <<CONF
[daemon]
socket = "$dir/tally.sock"
state_dir = "$dir/state"
[pools.slurm]
capacity = 8
gpu_memory_budget = "1GiB"
CONF
systemd-run --quiet --unit=tally-bench -p Type=notify "$tally" daemon --config $dir/tally.toml
here=$(cd "$(dirname "$0")" && pwd)
"$here/slurm-node.sh" "" >/dev/null
with="optional $plugin socket=$dir/tally.sock"
old="optional $baseline socket=$dir/tally.sock"
ms() { echo $(( $(date +%s%N) / 1000000 )); }
time_one() { s=$(ms); "$@" >/dev/null 2>&1 || { echo "bench-slurm: '$*' failed" >&2; exit 1; }; echo $(( $(ms) - s )); }
plug() { echo "$1" > /etc/slurm/plugstack.conf; }
: > $dir/a; : > $dir/b; : > $dir/c; : > $dir/d; : > $dir/e; : > $dir/f
# One warm-up of each, not counted.
plug ""; srun true; srun --gres=tallymem:64M true
plug "$with"; srun true; srun --gres=tallymem:64M true
[ -z "$baseline" ] || { plug "$old"; srun true; srun --gres=tallymem:64M true; }
i=0
while [ $i -lt "$rounds" ]; do
  plug "";      time_one srun true >> $dir/a
  plug "$with"; time_one srun true >> $dir/b
  plug "";      time_one srun --gres=tallymem:64M true >> $dir/c
  plug "$with"; time_one srun --gres=tallymem:64M true >> $dir/d
  if [ -n "$baseline" ]; then
    plug "$old"; time_one srun true >> $dir/e
    plug "$old"; time_one srun --gres=tallymem:64M true >> $dir/f
  fi
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
a=$(median $dir/a); b=$(median $dir/b); c=$(median $dir/c); d=$(median $dir/d)
echo "rounds=$rounds (medians, ms, one-node Slurm 22.05 under QEMU TCG)"
echo "srun true, no plugin:                                 $a"
echo "srun true, tally_spank.so (declares nothing):         $b"
echo "srun --gres=tallymem:64M true, no plugin:               $c"
echo "srun --gres=tallymem:64M true, tally_spank.so (leased): $d"
awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" 'BEGIN { printf "ratio with/without the plugin: %.2f (nothing declared), %.2f (a lease per step)\n", b/a, d/c }'
if [ -n "$baseline" ]; then
  e=$(median $dir/e); f=$(median $dir/f)
  echo "srun true, baseline plugin:                           $e"
  echo "srun --gres=tallymem:64M true, baseline plugin:         $f"
  awk -v a="$a" -v c="$c" -v e="$e" -v f="$f" 'BEGIN { printf "ratio baseline/without: %.2f (nothing declared), %.2f (a lease per step)\n", e/a, f/c }'
fi
"$tally" ledger --config $dir/tally.toml | tail -3
