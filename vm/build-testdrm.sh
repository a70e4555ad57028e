#!/usr/bin/env bash
# Build the test DRM driver against a cached guest kernel; cached by the kernel
# version and the driver's source. Prints the path of tally_testdrm.ko.
#
#   vm/build-testdrm.sh [KERNEL_DIR]     (default: vm/fetch-kernel.sh's)
#
# 6.x kernels were built by bookworm's gcc 12: their headers and kbuild run here.
# A 7.x kernel comes from trixie, built by gcc 14, and its kbuild binaries need
# trixie's libc: the driver is built in a minimal trixie chroot with Debian's own
# headers package, as DKMS would on that system (vm/trixie-builder.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kdir=${1:-$("$here/fetch-kernel.sh")}
kver=$(cat "$kdir/version")
series=$(cat "$kdir/series" 2>/dev/null || echo 6.12)
src="$here/testdrm"
hash=$(cat "$src/Kbuild" "$src"/*.c "$src"/*.h | sha256sum | cut -c1-16)
out="$kdir/testdrm-$hash"
if [[ ! -e "$out/tally_testdrm.ko" ]]; then
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  cp "$src/Kbuild" "$src"/*.c "$src"/*.h "$out.tmp/"
  if [[ "$series" == 7 ]]; then
    "$here/trixie-builder.sh" "$kver" "$out.tmp" >&2
  else
    make -s -C "$kdir/root/usr/src/linux-headers-$kver" M="$out.tmp" \
         CONFIG_DEBUG_INFO_BTF_MODULES= modules >&2
  fi
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out/tally_testdrm.ko"
