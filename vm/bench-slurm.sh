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
"$(cd "$(dirname "$0")" && pwd)/slurm-bench-node.sh" "$tally" $dir tally-bench
# TALLY_BENCH_CONTAIN=1 (CONTAIN=1 scripts/bench-slurm.sh): PrologFlags=Contain,
# which pam_slurm_adopt needs. Each job then starts with its extern step, with
# or without the plugin, and the plugin makes the job's lease there, before
# the job's first step.
contain=""
if [ "${TALLY_BENCH_CONTAIN:-}" = 1 ]; then
  contain=", PrologFlags=Contain"
  echo PrologFlags=Contain >> /etc/slurm/slurm.conf
  systemctl restart slurmctld slurmd
  t=0
  until sinfo -h -o %T | grep -q idle; do
    t=$((t + 1)); [ $t -lt 120 ] || { echo "bench-slurm: the node is not idle after the restart" >&2; exit 1; }
    sleep 0.5
  done
fi
with="optional $plugin socket=$dir/tally.sock"
old="optional $baseline socket=$dir/tally.sock"
# Loaded but idle (enforce=off): what dlopen of the plugin and its libraries costs alone.
idle="optional $plugin socket=$dir/tally.sock enforce=off"
ms() { echo $(( $(date +%s%N) / 1000000 )); }
time_one() { s=$(ms); "$@" >/dev/null 2>&1 || { echo "bench-slurm: '$*' failed" >&2; exit 1; }; echo $(( $(ms) - s )); }
plug() { echo "$1" > /etc/slurm/plugstack.conf; }
: > $dir/a; : > $dir/b; : > $dir/c; : > $dir/d; : > $dir/e; : > $dir/f; : > $dir/g
# One warm-up of each, not counted.
plug ""; srun true; srun --gres=tallymem:64M true
plug "$with"; srun true; srun --gres=tallymem:64M true
[ -z "$baseline" ] || { plug "$old"; srun true; srun --gres=tallymem:64M true; }
# Each variant is one letter (its file); a round runs them in order, the next
# round in reverse, so a variant's place in the round biases none.
a() { plug "";      time_one srun true >> $dir/a; }
b() { plug "$with"; time_one srun true >> $dir/b; }
g() { plug "$idle"; time_one srun true >> $dir/g; }
c() { plug "";      time_one srun --gres=tallymem:64M true >> $dir/c; }
d() { plug "$with"; time_one srun --gres=tallymem:64M true >> $dir/d; }
e() { plug "$old";  time_one srun true >> $dir/e; }
f() { plug "$old";  time_one srun --gres=tallymem:64M true >> $dir/f; }
rounds_of() {  # rounds_of "a b c": every round, alternating the order
  order=$1 reverse=$(echo "$1" | awk '{for (i = NF; i > 0; i--) printf "%s ", $i}')
  i=0
  while [ $i -lt "$rounds" ]; do
    if [ $((i % 2)) = 0 ]; then for v in $order; do $v; done; else for v in $reverse; do $v; done; fi
    i=$((i + 1))
  done
}
rounds_of "a b g c d${baseline:+ e f}"
# Steps of a running job (the usual case: a batch script's srun steps), after
# its first step: the plugin then reads the job's GRES from its record here
# (job_cache=) instead of asking slurmctld. One job without GRES and one with.
plug "$with"
# One CPU and a little memory each, so both run at once on the 2-CPU node.
j0=$(sbatch --parsable -c 1 --mem=16M --wrap 'sleep 3600')
j1=$(sbatch --parsable -c 1 --mem=16M --gres=tallymem:64M --wrap 'sleep 3600')
t=0
until [ "$(squeue -h -j "$j0,$j1" -t R | wc -l)" = 2 ]; do
  t=$((t + 1)); [ $t -lt 120 ] || { echo "bench-slurm: jobs $j0 $j1 never ran" >&2; squeue >&2; exit 1; }
  sleep 0.5
done
srun --jobid="$j0" --overlap true; srun --jobid="$j1" --overlap true
: > $dir/h; : > $dir/i; : > $dir/j; : > $dir/k
h() { plug "";      time_one srun --jobid="$j0" --overlap true >> $dir/h; }
i() { plug "$with"; time_one srun --jobid="$j0" --overlap true >> $dir/i; }
j() { plug "";      time_one srun --jobid="$j1" --overlap true >> $dir/j; }
k() { plug "$with"; time_one srun --jobid="$j1" --overlap true >> $dir/k; }
l() { plug "$old";  time_one srun --jobid="$j1" --overlap true >> $dir/l; }
: > $dir/l
rounds_of "h i j k${baseline:+ l}"
scancel "$j0" "$j1"
median() { sort -n "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
a=$(median $dir/a); b=$(median $dir/b); c=$(median $dir/c); d=$(median $dir/d); g=$(median $dir/g)
echo "rounds=$rounds (medians, ms, one-node Slurm 22.05 under QEMU TCG$contain)"
echo "srun true, no plugin:                                 $a"
echo "srun true, tally_spank.so (no GRES, no_gres=refuse): $b"
echo "srun true, tally_spank.so enforce=off (loaded, idle):   $g"
echo "srun --gres=tallymem:64M true, no plugin:               $c"
echo "srun --gres=tallymem:64M true, tally_spank.so (leased): $d"
awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v g="$g" 'BEGIN { printf "ratio with/without the plugin: %.2f (no GRES: no_gres=refuse), %.2f (a lease per step), %.2f (loaded, enforce=off)\n", b/a, d/c, g/a }'
h=$(median $dir/h); i=$(median $dir/i); j=$(median $dir/j); k=$(median $dir/k)
echo "a step of a running job, no plugin (job without GRES):  $h"
echo "a step of a running job, tally_spank.so (no GRES, leased at 0): $i"
echo "a step of a running job, no plugin (job with GRES):      $j"
echo "a step of a running job, tally_spank.so (leased child):  $k"
awk -v h="$h" -v i="$i" -v j="$j" -v k="$k" 'BEGIN { printf "ratio with/without the plugin, a running job'"'"'s step: %.2f (no GRES: no_gres=refuse), %.2f (leased)\n", i/h, k/j }'
if [ -n "$baseline" ]; then
  e=$(median $dir/e); f=$(median $dir/f)
  echo "srun true, baseline plugin:                           $e"
  echo "srun --gres=tallymem:64M true, baseline plugin:         $f"
  awk -v a="$a" -v c="$c" -v e="$e" -v f="$f" 'BEGIN { printf "ratio baseline/without: %.2f (no GRES), %.2f (a lease per step)\n", e/a, f/c }'
  l=$(median $dir/l)
  echo "a step of a running job, baseline plugin (leased child): $l"
  awk -v j="$j" -v l="$l" 'BEGIN { printf "ratio baseline/without, a running job'"'"'s leased step: %.2f\n", l/j }'
fi
"$tally" ledger --config $dir/tally.toml | tail -3
