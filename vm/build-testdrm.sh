#!/usr/bin/env bash
# Build the test DRM driver against the cached guest kernel's headers; cached by the
# kernel version and the driver's source. Prints the path of tally_testdrm.ko.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kdir=${1:-$("$here/fetch-kernel.sh")}
kver=$(cat "$kdir/version")
src="$here/testdrm"
hash=$(cat "$src/Kbuild" "$src"/*.c "$src"/*.h | sha256sum | cut -c1-16)
out="$kdir/testdrm-$hash"
if [[ ! -e "$out/tally_testdrm.ko" ]]; then
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  cp "$src/Kbuild" "$src"/*.c "$src"/*.h "$out.tmp/"
  make -s -C "$kdir/root/usr/src/linux-headers-$kver" M="$out.tmp" \
       CONFIG_DEBUG_INFO_BTF_MODULES= modules >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out/tally_testdrm.ko"
