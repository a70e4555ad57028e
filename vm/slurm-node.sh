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
#
# With TALLY_SLURM_ROOT (a Debian root from vm/debian-slurm.sh) the cluster
# is that root's Slurm 24.11: the same units run chrooted into it (drop-ins
# under /run/systemd/system), the clients are wrappers in /usr/local/bin that
# chroot, and the guest's /proc, /sys, /dev, /run, /tmp, the tree under test
# and /etc/slurm are bound inside it, so paths and the config read the same
# from either side.
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
# slurmstepd's messages (the plugin's, at a job's end too) in the journal: with
# slurmd -D and no SlurmdLogFile its syslog level is otherwise fatal.
SlurmdSyslogDebug=info
GresTypes=tallymem
NodeName=$node NodeAddr=192.0.2.1 CPUs=$(nproc) RealMemory=512 Gres=tallymem:$gres_count State=UNKNOWN
PartitionName=gpu Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
echo "CgroupPlugin=cgroup/v2" > /etc/slurm/cgroup.conf
echo "NodeName=$node Name=tallymem Count=$gres_count" > /etc/slurm/gres.conf
echo "$plugstack" > /etc/slurm/plugstack.conf
if [ -n "${TALLY_SLURM_ROOT:-}" ]; then
  R=$TALLY_SLURM_ROOT
  for d in /proc /sys /dev /run /tmp "/$(pwd | cut -d/ -f2)" /etc/slurm; do
    mkdir -p "$R$d"
    mountpoint -q "$R$d" || mount --rbind "$d" "$R$d"
  done
  [ -e "$R/etc/hosts" ] || : > "$R/etc/hosts"
  mountpoint -q "$R/etc/hosts" || mount --bind /etc/hosts "$R/etc/hosts"
  mkdir -p "$R/var/spool/slurmctld" "$R/var/spool/slurmd" "$R/var/log/slurm"
  chroot "$R" chown slurm /var/spool/slurmctld /var/log/slurm
  # munged runs as the guest's munge user (systemd resolves User= outside the root).
  [ -s "$R/etc/munge/munge.key" ] || chroot "$R" mungekey --create --force >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$R/etc/munge/munge.key" bs=1024 count=1 2>/dev/null
  chown -R munge:munge "$R/etc/munge" "$R/var/lib/munge" "$R/var/log/munge"
  chmod 0700 "$R/etc/munge"; chmod 0600 "$R/etc/munge/munge.key"
  for unit in munge slurmctld slurmd; do
    mkdir -p "/run/systemd/system/$unit.service.d"
    printf '[Service]\nRootDirectory=%s\n' "$R" > "/run/systemd/system/$unit.service.d/trixie.conf"
  done
  for cmd in srun sbatch salloc scontrol sinfo squeue sdiag scancel sacct sstat; do
    printf '#!/bin/sh\nexec chroot %s /bin/sh -c '"'"'cd "$1" && shift && exec "$@"'"'"' sh "$PWD" /usr/bin/%s "$@"\n' \
      "$R" "$cmd" > "/usr/local/bin/$cmd"
    chmod +x "/usr/local/bin/$cmd"
  done
  printf '#!/bin/sh\nexec chroot %s /usr/sbin/slurmd "$@"\n' "$R" > /usr/local/sbin/slurmd
  chmod +x /usr/local/sbin/slurmd
  systemctl daemon-reload
fi
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
