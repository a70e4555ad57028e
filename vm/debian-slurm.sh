#!/usr/bin/env bash
# A Debian root with its own Slurm (slurmctld, slurmd, the clients) and munge,
# slurmdbd and MariaDB for the accounting test,
# for the VM's Slurm tests on a release other than Debian 12's 22.05: Debian
# 13's 24.11 (trixie), sid's 26.05 (vm/slurm-node.sh runs the daemons and
# clients from it with TALLY_SLURM_ROOT). Made once with debootstrap and apt
# from Debian's archive, cached beside the kernels; prints the root's path.
# The release is pinned: when the suite's Slurm moves on (sid's will), this
# fails naming what it found, rather than testing another release silently.
#
#   vm/debian-slurm.sh trixie 24.11
#   vm/debian-slurm.sh sid 26.05
#
# Needs root (debootstrap, chroot).
set -euo pipefail
suite=${1:?usage: vm/debian-slurm.sh SUITE RELEASE (trixie 24.11, sid 26.05)}
release=${2:?usage: vm/debian-slurm.sh SUITE RELEASE (trixie 24.11, sid 26.05)}
cache="${TALLY_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tally-vm}"
root="$cache/slurm-$suite"
if [[ ! -e "$root/.ready" ]]; then
  command -v debootstrap >/dev/null || { echo "vm: debootstrap missing; run scripts/install-deps.sh" >&2; exit 3; }
  mirror=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
           | grep -v security | head -n1 | awk '{print $2}' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "vm: making a $suite root with Slurm $release (once; about 700 MB)" >&2
  rm -rf "$root.tmp"
  debootstrap --variant=minbase "$suite" "$root.tmp" "$mirror" >&2
  # Packages' scripts must not start services in the chroot.
  printf '#!/bin/sh\nexit 101\n' > "$root.tmp/usr/sbin/policy-rc.d"
  chmod +x "$root.tmp/usr/sbin/policy-rc.d"
  mount -t proc proc "$root.tmp/proc"
  trap 'umount "$root.tmp/proc" 2>/dev/null || true' EXIT
  DEBIAN_FRONTEND=noninteractive chroot "$root.tmp" apt-get install -y -q --no-install-recommends \
    slurmctld slurmd slurm-client munge slurmdbd mariadb-server >&2
  chroot "$root.tmp" apt-get clean
  umount "$root.tmp/proc"
  trap - EXIT
  chroot "$root.tmp" slurmd -V | grep -q " ${release//./\\.}\\." ||
    { echo "vm: $suite's slurmd is not $release: $(chroot "$root.tmp" slurmd -V); pin the release this suite now carries" >&2; exit 1; }
  rm -rf "$root" && mv "$root.tmp" "$root"
  touch "$root/.ready"
fi
# slurmdbd and MariaDB (VmSlurm.AccountingSumsAndLimitsTheGres…), added to a
# root made before the accounting test was.
if [[ ! -x "$root/usr/sbin/slurmdbd" || ! -x "$root/usr/sbin/mariadbd" ]]; then
  echo "vm: adding slurmdbd and mariadb-server to the $suite root" >&2
  mount -t proc proc "$root/proc"
  trap 'umount "$root/proc" 2>/dev/null || true' EXIT
  # The root's package lists are as old as the root: the archive has moved on since.
  chroot "$root" apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends \
    slurmdbd mariadb-server >&2
  chroot "$root" apt-get clean
  umount "$root/proc"
  trap - EXIT
fi
chroot "$root" slurmd -V | grep -q " ${release//./\\.}\\." ||
  { echo "vm: the cached $suite root's slurmd is not $release: $(chroot "$root" slurmd -V)" >&2; exit 1; }
echo "$root"
