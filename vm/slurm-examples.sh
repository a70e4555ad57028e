#!/bin/sh
# Runs inside the VM on the Slurm suite's one-node cluster (VmSlurm's fixture:
# vm/slurm-node.sh, its daemon at SOCKET; VmSlurm.TheSlurmPageQuotes… runs
# it): the output docs/slurm.md quotes, from `srun --help` to a batch job's
# ledger rows. plugstack.conf says `required` while it runs, as the page
# advises, and is put back after.
#   usage: vm/slurm-examples.sh TALLY_BINARY PLUGIN WORKLOAD_BINARY SOCKET CONFIG DAEMON_UNIT
T=$1; P=$2; W=$3; S=$4; C=$5; U=$6
D=/tmp/slurm-examples; rm -rf "$D"; mkdir -m 755 "$D"
export TALLY_SOCKET=$S
show() { echo; echo "\$ $*" | sed "s|$T|tally|g; s|$W|python3|g"; "$@" 2>&1; rc=$?; [ $rc = 0 ] || echo "[exit status $rc]"; }
show_as() { d=$1; shift; echo; echo "\$ $d"; "$@" 2>&1; rc=$?; [ $rc = 0 ] || echo "[exit status $rc]"; }  # DISPLAY CMD...
until_true() { i=0; until "$@"; do i=$((i + 1)); [ $i -lt 300 ] || { echo "gave up waiting: $*"; break; }; sleep 0.1; done; }
# Every lease ended, so its ledger row is in (a job's lease ends after its steps').
no_leases() { [ "$("$T" leases --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null)" = 0 ]; }
plugstack=$(cat /etc/slurm/plugstack.conf)
echo "required${plugstack#optional}" > /etc/slurm/plugstack.conf

show "$T" doctor --slurm
show sinfo -o "%N %G"
echo; echo '$ srun --help | grep -A1 -E "gpu-memory|tally-"'
srun --help | grep -A1 -E "gpu-memory|tally-"

# A step within its bound, while it runs (the workload holds 64 MiB of GTT
# until $D/release appears), then the daemon's view of it.
echo; echo '$ srun --gres=tallymem:256M --tally-attr=model=llama-70b python3 serve.py &'
srun --gres=tallymem:256M --tally-attr=model=llama-70b "$W" gpu gtt 64 1 60000 "$D/ready" "$D/release" &
until_true test -e "$D/ready"
sampled() { "$T" leases --json | python3 -c 'import json,sys; l=json.load(sys.stdin); sys.exit(0 if len(l) == 2 and all((x.get("gpu") or {}).get("current_bytes") for x in l) else 1)'; }
until_true sampled
show "$T" leases
echo; echo '$ tally metrics | grep declared_info'
"$T" metrics | grep declared_info
touch "$D/release"; wait

# A step past its GRES: the kernel refuses the crossing allocation.
show_as 'srun --gres=tallymem:64M python3 train.py' \
  srun --gres=tallymem:64M sh -c "echo \$SLURM_JOB_ID > $D/job; exec $W gpu gtt 128 1 100"
job=$(cat "$D/job")
journalctl --sync  # the job lease's last line is in before it is read
until_true no_leases
show "$T" ledger --config "$C" --last 4
show journalctl -t tally "TALLY_ATTR_SLURM_JOB_ID=$job" -o cat
echo; echo "\$ scontrol show job $job | grep -o 'AdminComment=.*'"
scontrol show job "$job" | grep -o 'AdminComment=.*'

# A typo, under required.
show srun --gpu-memory-max=lots true

# The daemon stopped: no step starts on a managed node (no_gres=refuse makes
# every job a lease), with or without the GRES.
show systemctl stop "$U"
show srun --gres=tallymem:64M touch "$D/ran"
show ls "$D/ran"
show srun touch "$D/ran"
# The suite's daemon is a transient unit (tests/vm/slurm_fixture.h): started as it starts it.
systemctl reset-failed "$U" 2>/dev/null
systemd-run --quiet --unit="$U" -p Type=notify "$T" daemon --config "$C"


echo "$plugstack" > /etc/slurm/plugstack.conf
rm -rf "$D"
