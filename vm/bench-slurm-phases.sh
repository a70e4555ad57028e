#!/bin/sh
# Runs inside the VM (vm/run.sh): where a job's first leased step spends the
# plugin's time, from slurmstepd's own debug2 journal lines (docs/PERFORMANCE.md).
# Per step: "starting 1 tasks" to "task_post_fork = 0" (the first task's
# attach: the prefetch's job record and job lease awaited, then the step's
# own attach) and "exited with exit code" to "task_exit = 0" (the step's end
# before srun is told: the daemon's answer and the job's AdminComment line).
# Inside those, the plugin's own "tally: timing PHASE N us" debug lines say
# what each call took (a plugin from before them prints none).
# With a second plugin the two alternate step by step, so drift hits both.
#   usage: vm/bench-slurm-phases.sh TALLY_BINARY PLUGIN [OTHER_PLUGIN] [STEPS]
set -eu
tally=$1
plugins="$2 ${3:-}"
steps=${4:-12}
dir=/tmp/bench-slurm-phases
"$(cd "$(dirname "$0")" && pwd)/slurm-bench-node.sh" "$tally" $dir tally-phases
sed -i 's/^SlurmdSyslogDebug=.*/SlurmdSyslogDebug=debug2\nSlurmdDebug=debug2/' /etc/slurm/slurm.conf
systemctl restart slurmd
t=0
until sinfo -h -o %T | grep -q idle; do
  t=$((t + 1)); [ $t -lt 120 ] || { echo "bench-slurm-phases: the node is not idle" >&2; exit 1; }
  sleep 0.5
done
plug() { echo "optional $1 socket=$dir/tally.sock" > /etc/slurm/plugstack.conf; }
for p in $plugins; do plug "$p"; srun --gres=tallymem:64M true; done  # warm-up, not counted
since=$(date +%s)
i=0
while [ $i -lt "$steps" ]; do
  for p in $plugins; do
    plug "$p"
    logger "bench-slurm-phases: plugin $p"
    srun --gres=tallymem:64M true >/dev/null
  done
  i=$((i + 1))
done
journalctl -o short-unix --no-pager --since "@$since" |
  awk '
    /bench-slurm-phases: plugin / { p = $NF; next }
    p == "" { next }
    /starting 1 tasks/ { start = $1 }
    /task_post_fork = 0/ && start { fork[p] = fork[p] " " int(($1 - start) * 1000); start = 0 }
    /exited with exit code/ { ex = $1 }
    /task_exit = 0/ && ex { exits[p] = exits[p] " " int(($1 - ex) * 1000); ex = 0 }
    / tally: timing / {
      for (i = 1; i < NF; i++) if ($i == "timing") break
      if (!((p, $(i + 1)) in phase)) names[p] = names[p] " " $(i + 1)
      phase[p, $(i + 1)] = phase[p, $(i + 1)] " " int($(i + 2) / 1000)
    }
    END {
      for (p in fork) {
        print p
        print "  first task start to post_fork done, ms:" fork[p]
        print "  last task exit to task_exit done, ms:  " exits[p]
        n = split(names[p], ph, " ")
        for (k = 1; k <= n; k++) printf "    tally: timing %s, ms:%s\n", ph[k], phase[p, ph[k]]
      }
    }' |
  while IFS= read -r line; do
    case $line in
      *ms:*) values=${line#*ms:}
        median=$(echo $values | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
        echo "${line%%ms:*}ms: median $median ($(echo $values | tr ' ' '\n' | sort -n | tr '\n' ' '))" ;;
      *) echo "$line" ;;
    esac
  done
