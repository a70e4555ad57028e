#!/bin/sh
# Make the VM guest a one-node Slurm cluster (Debian 12's Slurm 22.05): munge,
# slurmctld and slurmd under the guest's systemd, cgroup/v2, a count-only
# `tallymem` GRES of 1 GiB, and PLUGSTACK as plugstack.conf's only line.
# Run as root inside vm/run.sh (the guest's /etc is a throw-away overlay).
#
#   vm/slurm-node.sh 'optional /path/tally_spank.so socket=/tmp/t/tally.sock'
#
# Slurm resolves its own node by name, and glibc's AI_ADDRCONFIG ignores
# 127.0.0.0/8: a documentation-range address (192.0.2.1/32) on lo is the node's
# address. The guest has no network. Prints the node name; exits non-zero with
# the daemons' journal when the node does not come up idle.
set -eu
plugstack=${1?usage: vm/slurm-node.sh PLUGSTACK_LINE (may be empty)}
gres_count=${TALLY_SLURM_TALLYMEM:-1G}
node=$(hostname -s)
ip addr show dev lo | grep -q '192.0.2.1/32' || ip addr add 192.0.2.1/32 dev lo
grep -q "^192.0.2.1 $node\$" /etc/hosts || echo "192.0.2.1 $node" >> /etc/hosts
mkdir -p /etc/slurm /var/spool/slurmd /var/spool/slurmctld /var/log/slurm
chown slurm /var/spool/slurmctld /var/log/slurm
# RealMemory 512 MiB + the 1 GiB GRES (GTT: host RAM) within the guest's 2 GiB:
# Slurm never places the same RAM twice (tally doctor --slurm checks it).
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=tally
SlurmctldHost=$node
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SlurmUser=slurm
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SelectType=select/cons_tres
SchedulerParameters=sched_interval=1
# A time limit's SIGKILL 2 s after its SIGTERM (default 30 s): the tests wait less.
KillWait=2
GresTypes=tallymem
NodeName=$node NodeAddr=192.0.2.1 CPUs=$(nproc) RealMemory=512 Gres=tallymem:$gres_count State=UNKNOWN
PartitionName=gpu Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
echo "CgroupPlugin=cgroup/v2" > /etc/slurm/cgroup.conf
echo "NodeName=$node Name=tallymem Count=$gres_count" > /etc/slurm/gres.conf
echo "$plugstack" > /etc/slurm/plugstack.conf
systemctl start munge
systemctl start slurmctld slurmd
for _ in $(seq 1 60); do
  if [ "$(timeout 5 sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]; then
    echo "$node"
    exit 0
  fi
  sleep 0.5
done
echo "vm/slurm-node.sh: node $node did not come up idle" >&2
journalctl --no-pager -u munge -u slurmctld -u slurmd | tail -40 >&2
exit 1
