#!/bin/sh
# Add a second node to vm/slurm-node.sh's one-node cluster, in the same guest:
# a second slurmd (`slurmd -N NAME`, unit slurmd-NAME) with its own port, spool
# directory and pid file, at the same address, and NAME's own tallymem GRES.
# Each slurmd puts its steps in its own systemd scope (NAME_slurmstepd.scope),
# so the two nodes' jobs are two cgroup trees under one tally daemon, as two
# hosts' would be under two. `--remove` takes it out again.
#
#   vm/slurm-second-node.sh NAME GRES_COUNT     e.g. vm2 512M
#   vm/slurm-second-node.sh --remove NAME
set -eu
conf=/etc/slurm/slurm.conf
if [ "$1" = --remove ]; then
  name=$2
  systemctl stop "slurmd-$name" 2>/dev/null || true
  rm -rf "/run/systemd/system/slurmd-$name.service" "/run/systemd/system/slurmd-$name.service.d"
  systemctl daemon-reload
  sed -i "/^NodeName=$name /d; s/^\(PartitionName=gpu Nodes=[^ ]*\),$name /\1 /" $conf
  sed -i "/^NodeName=$name /d" /etc/slurm/gres.conf
  systemctl restart slurmctld slurmd
  exit 0
fi
name=$1; count=$2
first=$(hostname -s)
grep -q '^SlurmdPidFile=' $conf ||
  sed -i 's|^SlurmdSpoolDir=.*|SlurmdSpoolDir=/var/spool/slurmd/%n\nSlurmdPidFile=/run/slurmd-%n.pid|' $conf
grep -q "^NodeName=$first .* Port=" $conf || sed -i "s/^NodeName=$first .*/& Port=6818/" $conf
grep -q "^NodeName=$name " $conf ||
  echo "NodeName=$name NodeAddr=192.0.2.1 NodeHostname=$first Port=6819 CPUs=$(nproc) RealMemory=512 Gres=tallymem:$count State=UNKNOWN" >> $conf
sed -i "s/^PartitionName=gpu Nodes=$first /PartitionName=gpu Nodes=$first,$name /" $conf
grep -q "^NodeName=$name " /etc/slurm/gres.conf || echo "NodeName=$name Name=tallymem Count=$count" >> /etc/slurm/gres.conf
mkdir -p "/var/spool/slurmd/$first" "/var/spool/slurmd/$name"
sed "s|^ExecStart=.*|ExecStart=/usr/sbin/slurmd -D -s -N $name|; s|^PIDFile=.*|PIDFile=/run/slurmd-$name.pid|" \
  /lib/systemd/system/slurmd.service > "/run/systemd/system/slurmd-$name.service"
if [ -n "${TALLY_SLURM_ROOT:-}" ]; then  # the trixie root's slurmd (vm/slurm-node.sh)
  mkdir -p "/run/systemd/system/slurmd-$name.service.d"
  cp /run/systemd/system/slurmd.service.d/trixie.conf "/run/systemd/system/slurmd-$name.service.d/"
fi
systemctl daemon-reload
systemctl restart slurmctld slurmd "slurmd-$name"
for _ in $(seq 1 60); do
  [ "$(timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$')" = 2 ] && exit 0
  sleep 0.5
done
echo "vm/slurm-second-node.sh: nodes $first and $name did not both come up idle" >&2
sinfo -N >&2 || true
journalctl --no-pager -u "slurmd-$name" | tail -20 >&2
exit 1
