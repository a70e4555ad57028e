#!/bin/sh
# Runs inside the VM (vm/run.sh): the output quoted in docs/slurm.md "What it
# looks like".
#   usage: vm/slurm-examples.sh TALLY_BINARY PLUGIN WORKLOAD_BINARY
T=$1
P=$2
W=$3
D=/tmp/doc; mkdir -p $D
modprobe drm; insmod "$TALLY_TESTDRM_KO"
cat > $D/tally.toml <<CONF
[daemon]
socket = "$D/tally.sock"
state_dir = "$D/state"
sample_interval = "200ms"
[pools.slurm]
capacity = 8
gpu_memory_budget = "1GiB"
CONF
systemd-run --quiet --unit=tally-doc -p Type=notify $T daemon --config $D/tally.toml
"$(dirname "$0")/slurm-node.sh" "optional $P socket=$D/tally.sock end_wait=20s" >/dev/null || exit 1
export TALLY_SOCKET=$D/tally.sock
show() { echo "\$ $*"; "$@"; }
show sinfo -o "%N %G"
echo "---"
srun --gres=tallymem:256M --tally-attr=model=llama-70b $W gpu gtt 64 1 60000 $D/ready $D/release &
while [ ! -e $D/ready ]; do sleep 0.2; done
sleep 1
show $T leases
echo '$ tally metrics | grep declared_info'
$T metrics | grep declared_info
touch $D/release; wait
echo "---"
echo "\$ srun --gres=tallymem:64M ..."; srun --gres=tallymem:64M $W gpu gtt 128 1 100; rc=$?
echo "\$ echo \$?"; echo $rc
show $T ledger --config $D/tally.toml
show journalctl -t tally TALLY_ATTR_SLURM_JOB_ID=2 -o cat
show scontrol show job 2
