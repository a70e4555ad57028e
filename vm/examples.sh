#!/bin/sh
# Runs inside the VM (vm/run.sh): produces the examples quoted in docs/run.md.
#   usage: vm/examples.sh TALLY_BINARY WORKLOAD_BINARY
T=$1; W=$2
export TALLY_STATE_DIR=/tmp/examples-state
show() { echo; echo "\$ $*" | sed "s|$T|tally|; s|$W|tally_vm_workload|g"; "$@"; echo "[exit status $?]"; }
modprobe drm; insmod "$TALLY_TESTDRM_KO"
show "$T" run --name hog --memory-max 64M -- "$W" hog 200
show "$T" run --name fits --memory-max 64M -- "$W" hog 16 300
show "$T" run -- sh -c 'exit 3'
show "$T" run -- sh -c 'kill -USR1 $$'
show "$T" run -- /nonexistent/command
show "$T" run --slice 'a--b.slice' -- true
echo; echo '$ XDG_RUNTIME_DIR=/run/user/0 tally run --user -- true'; XDG_RUNTIME_DIR=/run/user/0 "$T" run --user -- true; echo "[exit status $?]"
show "$T" run --name gpu --sample-interval 100ms --gpu-memory-max 32M -- "$W" gpu gtt 16 3 1500
# Its SIGTERM once its workload runs (a barrier, not a clock).
(until pgrep -fx 'sleep 60' >/dev/null; do sleep 0.1; done; pkill -TERM -f 'tally run --name sleeper') &
show "$T" run --name sleeper -- sleep 60
mkdir -p /sys/fs/cgroup/deleg; echo +memory > /sys/fs/cgroup/deleg/cgroup.subtree_control
show "$T" run --cgroupfs --cgroup-parent /deleg --memory-max 64M -- "$W" hog 200
echo; echo '$ tally run --json --memory-max 64M -- tally_vm_workload hog 200'
"$T" run --json --memory-max 64M -- "$W" hog 200 2>/dev/null
show "$T" ledger
show "$T" ledger --outcome oom-killed
