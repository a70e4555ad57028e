#!/bin/sh
# Runs inside the VM (vm/run.sh), for the Slurm benches (vm/bench-slurm.sh,
# vm/bench-slurm-phases.sh): a tally daemon under systemd with a `slurm` pool
# of 1 GiB, its socket DIR/tally.sock, then the one-node cluster of
# vm/slurm-node.sh with an empty plugstack.conf (each bench writes its own).
#   usage: vm/slurm-bench-node.sh TALLY_BINARY DIR UNIT
set -eu
tally=$1
dir=$2
unit=$3
mkdir -p "$dir"
cat > "$dir/tally.toml" <<CONF
[daemon]
socket = "$dir/tally.sock"
state_dir = "$dir/state"
[pools.slurm]
capacity = 8
gpu_memory_budget = "1GiB"
CONF
systemd-run --quiet --unit="$unit" -p Type=notify "$tally" daemon --config "$dir/tally.toml"
"$(cd "$(dirname "$0")" && pwd)/slurm-node.sh" "" >/dev/null
