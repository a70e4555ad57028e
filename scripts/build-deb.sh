#!/usr/bin/env bash
# Builds tally's Debian packages from this tree into build/deb/:
#   tally_<version>_<arch>.deb               the binary, units, sysusers.d/tmpfiles.d,
#                                            /etc/tally/tally.toml (a conffile), man
#                                            page, completions, docs
#   tally-slurm-plugin_<version>_<arch>.deb  tally_spank.so in Slurm's PluginDir
# from the release build scripts/setup.sh makes (the same `cmake --install`,
# with --prefix /usr), then checks both with lintian. Needs dpkg-dev, fakeroot
# and lintian (scripts/install-deps.sh).
#   sudo apt install ./build/deb/tally_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=$src/build/deb
arch=$(dpkg --print-architecture)
upstream=$(sed -n 's/^project(tally VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
version="$upstream-1"
# Reproducible: the date is the last commit's, not the build's.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

cmake --preset release >/dev/null
cmake --build --preset release --target tally_installable

rm -rf "$out/root"
mkdir -p "$out/root"

# One install, split by component: the Slurm plugin is its own package (a
# login node needs it without the daemon; its Slurm must match the one it was
# built against).
DESTDIR=$out/root/tally cmake --install build/release --prefix /usr --component Unspecified >/dev/null
have_plugin=0
if grep -q '^TALLY_SLURM_PLUGINDIR' build/release/CMakeCache.txt && [ -f build/release/src/tally_spank.so ]; then
  DESTDIR=$out/root/tally-slurm-plugin cmake --install build/release --prefix /usr --component slurm >/dev/null
  have_plugin=1
fi

# Debian's layout on top of cmake's: the conffile, compressed man page and
# changelog, the copyright, md5sums, no README.md duplication of the guide.
finish_doc() {  # package root
  local pkg=$1 root=$out/root/$1
  mkdir -p "$root/usr/share/doc/$pkg"
  install -m 0644 dist/debian/copyright "$root/usr/share/doc/$pkg/copyright"
  sed -e "s/@VERSION@/$version/" -e "s/@DATE@/$(date -R -u -d "@$SOURCE_DATE_EPOCH")/" \
    dist/debian/changelog | gzip -9n >"$root/usr/share/doc/$pkg/changelog.Debian.gz"
  chmod 0644 "$root/usr/share/doc/$pkg/changelog.Debian.gz"
  sed -e '/^#/d' -e "s/^/$pkg: /" dist/debian/lintian-overrides |
    install -D -m 0644 /dev/stdin "$root/usr/share/lintian/overrides/$pkg"
}
control() {  # package root, then control fields
  local root=$1
  shift
  mkdir -p "$root/DEBIAN"
  {
    printf '%s\n' "$@"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)"
  } >"$root/DEBIAN/control"
  (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
    xargs -0 md5sum >DEBIAN/md5sums)
  chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
}
shlibs() {  # binaries...: the Depends dpkg-shlibdeps derives from their NEEDED entries
  local tmp
  tmp=$(mktemp -d)
  mkdir -p "$tmp/debian"
  echo "Source: tally" >"$tmp/debian/control"
  (cd "$tmp" && dpkg-shlibdeps -O "$@" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
  rm -rf "$tmp"
}

description=(
  "Description: per-lease memory bounds and GPU memory meters for shared GPU boxes"
  " On AMD APUs most GPU memory is GTT, system RAM the kernel does not charge to"
  " a job's memory cgroup. tally gives every lease its own cgroup with declared,"
  " verified bounds, meters its GPU memory per lease from DRM fdinfo, bounds it,"
  " and records every outcome in a durable ledger. tally doctor says whether this"
  " kernel already charges GTT to the memory cgroup."
)

# -- tally
root=$out/root/tally
install -D -m 0644 dist/tally.toml "$root/etc/tally/tally.toml"
gzip -9n "$root/usr/share/man/man1/tally.1"
strip --remove-section=.comment --remove-section=.note "$root/usr/bin/tally"
finish_doc tally
mkdir -p "$root/DEBIAN"
install -m 0755 dist/debian/tally.postinst "$root/DEBIAN/postinst"
install -m 0755 dist/debian/tally.prerm "$root/DEBIAN/prerm"
install -m 0755 dist/debian/tally.postrm "$root/DEBIAN/postrm"
echo /etc/tally/tally.toml >"$root/DEBIAN/conffiles"
chmod 0644 "$root/DEBIAN/conffiles"
control "$root" \
  "Package: tally" "Version: $version" "Architecture: $arch" \
  "Maintainer: tally developers <tally@localhost>" \
  "Depends: $(shlibs "$root/usr/bin/tally"), systemd" \
  "Suggests: tally-slurm-plugin, prometheus-node-exporter" \
  "Section: admin" "Priority: optional" "${description[@]}"
fakeroot dpkg-deb --build --root-owner-group -Zxz "$root" "$out/tally_${version}_${arch}.deb" >/dev/null
debs=("$out/tally_${version}_${arch}.deb")

# -- tally-slurm-plugin
if [ "$have_plugin" = 1 ]; then
  root=$out/root/tally-slurm-plugin
  finish_doc tally-slurm-plugin
  plugin=$(find "$root" -name tally_spank.so)
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$plugin"
  chmod 0644 "$plugin"
  # Slurm loads a plugin only when built against its own major.minor.
  slurm=$(dpkg-query -W -f='${Version}' libslurm-dev)
  slurm_mm=$(echo "$slurm" | cut -d. -f1-2)
  slurm_next="${slurm_mm%.*}.$(printf '%02d' $((10#${slurm_mm#*.} + 1)))"
  control "$root" \
    "Package: tally-slurm-plugin" "Version: $version" "Architecture: $arch" \
    "Maintainer: tally developers <tally@localhost>" \
    "Depends: $(shlibs "$plugin"), slurm-wlm-basic-plugins (>= $slurm_mm), slurm-wlm-basic-plugins (<< $slurm_next)" \
    "Recommends: tally (= $version)" \
    "Section: admin" "Priority: optional" \
    "Description: Slurm SPANK plugin for tally: a step's GPU memory bounded per lease" \
    " Loaded through plugstack.conf (optional tally_spank.so socket=...), it turns a" \
    " step's tallymem GRES or --gpu-memory-max into a tally lease on the node: Slurm" \
    " places the job, tally meters and bounds its GPU memory and records the outcome" \
    " with the job's Slurm ids."
  fakeroot dpkg-deb --build --root-owner-group -Zxz "$root" "$out/tally-slurm-plugin_${version}_${arch}.deb" >/dev/null
  debs+=("$out/tally-slurm-plugin_${version}_${arch}.deb")
fi

# lintian: every tag it reports is fixed, or overridden inside the package
# (/usr/share/lintian/overrides) with the reason beside it.
lintian --fail-on error,warning --info "${debs[@]}"
printf '%s\n' "${debs[@]}"
