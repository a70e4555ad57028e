#!/usr/bin/env bash
# Build an out-of-tree module for a trixie(-backports) kernel in a minimal trixie
# chroot with that kernel's own headers package: the toolchain (gcc 14) and kbuild
# the kernel was built with. The chroot is made once with debootstrap and cached
# beside the kernels; each kernel version's headers are added to it once.
#
#   vm/trixie-builder.sh KVER MODULE_DIR      (MODULE_DIR holds Kbuild and sources)
#
# Needs root (debootstrap, chroot, a /proc mount inside the chroot) and Debian's
# archive. The module is left in MODULE_DIR.
set -euo pipefail
kver=$1
moddir=$(cd "$2" && pwd)
cache="${TALLY_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tally-vm}"
chroot_dir="$cache/builder-trixie"
command -v debootstrap >/dev/null || { echo "vm: debootstrap missing; run scripts/install-deps.sh" >&2; exit 3; }

mirror=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
         | grep -v security | head -n1 | awk '{print $2}' || true)
mirror=${mirror:-http://deb.debian.org/debian}

if [[ ! -e "$chroot_dir/.ready" ]]; then
  echo "vm: making a trixie build chroot (once; about 500 MB)" >&2
  rm -rf "$chroot_dir.tmp"
  debootstrap --variant=minbase --include=gcc-14,make,libc6-dev trixie "$chroot_dir.tmp" "$mirror" >&2
  echo "deb $mirror trixie-backports main" > "$chroot_dir.tmp/etc/apt/sources.list.d/backports.list"
  rm -rf "$chroot_dir" && mv "$chroot_dir.tmp" "$chroot_dir"
  touch "$chroot_dir/.ready"
fi

headers="linux-headers-$kver"
if [[ ! -d "$chroot_dir/usr/src/$headers" ]]; then
  chroot "$chroot_dir" apt-get -q update >&2
  DEBIAN_FRONTEND=noninteractive chroot "$chroot_dir" \
    apt-get install -y -q --no-install-recommends "$headers" >&2
  chroot "$chroot_dir" apt-get clean
fi

build=$(mktemp -d "$chroot_dir/tmp/module.XXXXXX")
trap 'umount "$chroot_dir/proc" 2>/dev/null || true; rm -rf "$build"' EXIT
cp "$moddir"/* "$build/"
# objtool reads /proc/self/limits.
mount -t proc proc "$chroot_dir/proc"
chroot "$chroot_dir" make -s -C "/usr/src/$headers" M="/tmp/$(basename "$build")" modules >&2
cp "$build"/*.ko "$moddir/"
