#!/usr/bin/env bash
# A Debian 13 (trixie) root with its own Slurm (24.11: slurmctld, slurmd, the
# clients) and munge, for the VM's Slurm tests on the release Debian 13 sites
# run (vm/slurm-node.sh runs the daemons and clients from it with
# TALLY_SLURM_ROOT). Made once with debootstrap and apt from Debian's archive,
# cached beside the kernels; prints the root's path.
#
#   vm/trixie-slurm.sh
#
# Needs root (debootstrap, chroot).
set -euo pipefail
cache="${TALLY_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tally-vm}"
root="$cache/slurm-trixie"
if [[ ! -e "$root/.ready" ]]; then
  command -v debootstrap >/dev/null || { echo "vm: debootstrap missing; run scripts/install-deps.sh" >&2; exit 3; }
  mirror=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
           | grep -v security | head -n1 | awk '{print $2}' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "vm: making a trixie root with Slurm 24.11 (once; about 300 MB)" >&2
  rm -rf "$root.tmp"
  debootstrap --variant=minbase trixie "$root.tmp" "$mirror" >&2
  # Packages' scripts must not start services in the chroot.
  printf '#!/bin/sh\nexit 101\n' > "$root.tmp/usr/sbin/policy-rc.d"
  chmod +x "$root.tmp/usr/sbin/policy-rc.d"
  mount -t proc proc "$root.tmp/proc"
  trap 'umount "$root.tmp/proc" 2>/dev/null || true' EXIT
  DEBIAN_FRONTEND=noninteractive chroot "$root.tmp" apt-get install -y -q --no-install-recommends \
    slurmctld slurmd slurm-client munge >&2
  chroot "$root.tmp" apt-get clean
  umount "$root.tmp/proc"
  trap - EXIT
  chroot "$root.tmp" slurmd -V | grep -q ' 24\.11\.' ||
    { echo "vm: trixie's slurmd is not 24.11: $(chroot "$root.tmp" slurmd -V)" >&2; exit 1; }
  rm -rf "$root" && mv "$root.tmp" "$root"
  touch "$root/.ready"
fi
echo "$root"
