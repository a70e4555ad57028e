#!/usr/bin/env bash
# Fetch and prepare a guest kernel for the VM harness, cached by version.
#
#   vm/fetch-kernel.sh [SERIES]      SERIES: 6.12 (default), 6.1, 7
#
# Debian's own kernels: bookworm's 6.1, bookworm-backports' 6.12, and the newest
# 7.x in trixie-backports (a meta package over linux-binary-*, linux-modules-* and
# linux-base-*, laid out under /usr/lib/modules). Modules are trimmed to what a
# headless test guest loads. For 6.x the matching headers and kbuild come too
# (the test DRM driver builds against them on this host); 7.x's kbuild needs
# trixie's libc, so its driver is built in a trixie chroot (vm/build-testdrm.sh).
# Downloads go through a private apt configuration under the cache directory:
# /etc/apt is never touched.
#
# Prints the prepared kernel directory on stdout: version, series, vmlinuz,
# modules (the module tree), root/ (the unpacked packages).
set -euo pipefail

series=${1:-${TALLY_VM_KERNEL:-6.12}}
case "$series" in
  6.1|6.12|7) ;;
  *) echo "vm: unknown kernel series '$series' (6.1, 6.12 or 7)" >&2; exit 2 ;;
esac

cache="${TALLY_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tally-vm}"
mkdir -p "$cache/apt/lists/partial" "$cache/apt/archives/partial" "$cache/apt/etc/sources.list.d"

# A prepared kernel of this series that is already cached is used as is: no network.
if [[ -z "${TALLY_VM_REFRESH:-}" ]]; then
  for done in "$cache"/kernel-*/.ready; do
    [[ -e "$done" ]] || continue
    dir=$(dirname "$done")
    [[ "$(cat "$dir/series" 2>/dev/null || echo 6.12)" == "$series" ]] || continue
    # Kernels cached before the matrix lack the links the harness now uses.
    kv=$(cat "$dir/version")
    [[ -e "$dir/vmlinuz" ]] || ln -s "root/boot/vmlinuz-$kv" "$dir/vmlinuz"
    [[ -e "$dir/modules" ]] || ln -s "root/lib/modules/$kv" "$dir/modules"
    echo "$dir"
    exit 0
  done
fi

mirror_of() { # the machine's configured Debian mirror, so no new host is contacted
  local uri
  uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | grep -v security | head -n1 | awk '{print $2}')
  echo "${uri:-http://deb.debian.org/debian}"
}
mirror=$(mirror_of)
security=${mirror%/debian}/debian-security
key=/usr/share/keyrings/debian-archive-keyring.gpg

cat > "$cache/apt/etc/sources.list" <<LIST
deb [signed-by=$key] $mirror bookworm main
deb [signed-by=$key] $security bookworm-security main
deb [signed-by=$key] $mirror bookworm-backports main
deb [signed-by=$key] $mirror trixie-backports main
LIST
cat > "$cache/apt/apt.conf" <<CONF
Dir::Etc::sourcelist "$cache/apt/etc/sources.list";
Dir::Etc::sourceparts "$cache/apt/etc/sources.list.d";
Dir::State::Lists "$cache/apt/lists";
Dir::State::status "/var/lib/dpkg/status";
Dir::Cache "$cache/apt";
Dir::Cache::Archives "$cache/apt/archives";
APT::Sandbox::User "root";
CONF
export APT_CONFIG="$cache/apt/apt.conf"

echo "vm: fetching the Debian kernel index" >&2
apt-get -q update >&2

newest() { # the newest amd64 image package matching a pattern
  apt-cache search --names-only "$1" | awk '{print $1}' | grep -v -- '-dbg$' \
    | grep -v cloud | grep -v rt-amd64 | sort -V | tail -n1
}
case "$series" in
  6.1)  pkg=$(newest '^linux-image-6\.1\.0-[0-9]+-amd64$') ;;
  6.12) pkg=$(newest '^linux-image-6\.12\.[0-9.+~a-z-]*-amd64$') ;;
  7)    pkg=$(newest '^linux-image-7\.[0-9.]+\+deb13-amd64$') ;;
esac
[[ -n "$pkg" ]] || { echo "vm: no $series kernel image in Debian's archive" >&2; exit 3; }
kver=${pkg#linux-image-}
out="$cache/kernel-$kver"
if [[ -e "$out/.ready" ]]; then echo "$out"; exit 0; fi

if [[ "$series" == 7 ]]; then
  # The image is a meta package; the kernel, modules and System.map are in these.
  debs=("linux-binary-$kver" "linux-modules-$kver" "linux-base-$kver")
else
  headers="linux-headers-$kver"
  common=$(apt-cache depends "$headers" | awk '/Depends: linux-headers-.*-common/{print $2; exit}')
  kbuild=$(apt-cache depends "$headers" | awk '/Depends: linux-kbuild-/{print $2; exit}')
  debs=("$pkg" "$headers" "$common" "$kbuild")
fi

work="$cache/download-$kver"
rm -rf "$work" && mkdir -p "$work"
(cd "$work" && apt-get -q download "${debs[@]}" >&2)

rm -rf "$out.tmp" && mkdir -p "$out.tmp/root"
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$out.tmp/root"; done

root="$out.tmp/root"
# One layout for both: modules where depmod and modprobe -d look (lib/modules).
if [[ -d "$root/usr/lib/modules/$kver" && ! -e "$root/lib/modules" ]]; then
  mkdir -p "$root/lib" && ln -s ../usr/lib/modules "$root/lib/modules"
fi
moddir="$root/lib/modules/$kver/kernel"
# Keep only what a headless guest with virtio, 9p, overlay and DRM needs.
find "$moddir" -mindepth 1 -maxdepth 1 ! -name drivers ! -name fs ! -name net ! -name lib \
     ! -name crypto ! -name mm ! -name kernel -exec rm -rf {} +
find "$moddir/drivers" -mindepth 1 -maxdepth 1 ! -name gpu ! -name virtio ! -name dma-buf \
     ! -name video ! -name i2c ! -name char -exec rm -rf {} +
find "$moddir/drivers/gpu/drm" -mindepth 1 -maxdepth 1 -type d ! -name vgem ! -name virtio \
     ! -name ttm ! -name display -exec rm -rf {} + 2>/dev/null || true
find "$moddir/net" -mindepth 1 -maxdepth 1 ! -name 9p -exec rm -rf {} +
find "$moddir/fs" -mindepth 1 -maxdepth 1 ! -name 9p ! -name overlayfs ! -name netfs ! -name fscache \
     ! -name fuse -exec rm -rf {} +
depmod -b "$root" "$kver"

if [[ "$series" != 7 ]]; then
  # The headers' Makefile includes the common tree by absolute path: point it here.
  hdr="$root/usr/src/linux-headers-$kver"
  sed -i "s|include /usr/src/|include $out/root/usr/src/|" "$hdr/Makefile"
fi
if [[ -e "$root/boot/vmlinuz-$kver" ]]; then
  ln -s "root/boot/vmlinuz-$kver" "$out.tmp/vmlinuz"
else
  ln -s "root/lib/modules/$kver/vmlinuz" "$out.tmp/vmlinuz"
fi
ln -s "root/lib/modules/$kver" "$out.tmp/modules"

echo "$kver" > "$out.tmp/version"
echo "$series" > "$out.tmp/series"
mv "$out.tmp" "$out"
touch "$out/.ready"
rm -rf "$work"
echo "$out"
