#!/usr/bin/env bash
# Fetch and prepare the guest kernel for the VM harness, cached by version.
#
# Debian's bookworm-backports 6.12 kernel (DRM fdinfo helpers need >= 6.5), its
# modules trimmed to what a headless test guest loads, and the matching headers +
# kbuild for building the test DRM driver. Downloads go through a private apt
# configuration under the cache directory: /etc/apt is never touched.
#
# Prints the prepared kernel directory on stdout.
set -euo pipefail

cache="${TALLY_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tally-vm}"
mkdir -p "$cache/apt/lists/partial" "$cache/apt/archives/partial" "$cache/apt/etc/sources.list.d"

mirror_of() { # the machine's configured Debian mirror, so no new host is contacted
  local uri
  uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | grep -v security | head -n1 | awk '{print $2}')
  echo "${uri:-http://deb.debian.org/debian}"
}
mirror=$(mirror_of)
security=${mirror%/debian}/debian-security

cat > "$cache/apt/etc/sources.list" <<LIST
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $security bookworm-security main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm-backports main
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

# A prepared kernel that is already cached is used as is: no network at all.
if [[ -z "${TALLY_VM_REFRESH:-}" ]]; then
  for done in "$cache"/kernel-*/.ready; do
    [[ -e "$done" ]] && { dirname "$done"; exit 0; }
  done
fi

echo "vm: fetching the bookworm-backports kernel index" >&2
apt-get -q update >&2
pkg=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9.+~a-z-]*-amd64$' \
      | awk '{print $1}' | grep -v -- '-dbg$' | grep -v cloud | grep -v rt-amd64 | sort -V | tail -n1)
[[ -n "$pkg" ]] || { echo "vm: no linux-image-6.12.*-amd64 in bookworm-backports" >&2; exit 3; }
kver=${pkg#linux-image-}                       # 6.12.x+bpo-amd64
out="$cache/kernel-$kver"
if [[ -e "$out/.ready" ]]; then echo "$out"; exit 0; fi

base=${kver%-amd64}                            # 6.12.x+bpo
headers="linux-headers-$kver"
common=$(apt-cache depends "$headers" | awk '/Depends: linux-headers-.*-common/{print $2; exit}')
kbuild=$(apt-cache depends "$headers" | awk '/Depends: linux-kbuild-/{print $2; exit}')

work="$cache/download-$kver"
rm -rf "$work" && mkdir -p "$work"
(cd "$work" && apt-get -q download "$pkg" "$headers" "$common" "$kbuild" >&2)

rm -rf "$out.tmp" && mkdir -p "$out.tmp/root"
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$out.tmp/root"; done

root="$out.tmp/root"
moddir="$root/lib/modules/$kver/kernel"
# Keep only what a headless guest with 9p, overlay and DRM needs.
find "$moddir" -mindepth 1 -maxdepth 1 ! -name drivers ! -name fs ! -name net ! -name lib \
     ! -name crypto ! -name mm ! -name kernel -exec rm -rf {} +
find "$moddir/drivers" -mindepth 1 -maxdepth 1 ! -name gpu ! -name virtio ! -name dma-buf \
     ! -name video ! -name i2c ! -name char -exec rm -rf {} +
find "$moddir/drivers/gpu/drm" -mindepth 1 -maxdepth 1 -type d ! -name vgem ! -name virtio \
     ! -name ttm ! -name display -exec rm -rf {} + 2>/dev/null || true
find "$moddir/net" -mindepth 1 -maxdepth 1 ! -name 9p -exec rm -rf {} +
find "$moddir/fs" -mindepth 1 -maxdepth 1 ! -name 9p ! -name overlayfs ! -name netfs ! -name fuse -exec rm -rf {} +
depmod -b "$root" "$kver"

# The headers' Makefile includes the common tree by absolute path: point it here.
hdr="$root/usr/src/$headers"
sed -i "s|include /usr/src/|include $out/root/usr/src/|" "$hdr/Makefile"

echo "$kver" > "$out.tmp/version"
mv "$out.tmp" "$out"
touch "$out/.ready"
rm -rf "$work"
echo "$out"
