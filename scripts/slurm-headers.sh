#!/usr/bin/env bash
# Fetch libslurm-dev of the Slurm releases sites run beside Debian 12's own
# 22.05 -- Debian 13's 24.11 and sid's 26.05 -- and unpack their headers, so
# the SPANK plugin is built against each (SPANK loads only a plugin built for
# its own major.minor). apt verifies the packages against Debian's keyring;
# nothing is installed. Prints the include directories, ';'-separated, for
# -DTALLY_SLURM_HEADERS=... Each suite's release is pinned: when an archive
# moves on (sid's will), this fails naming the release it found, and the pin
# here (and vm/debian-slurm.sh's) is changed on purpose, never silently.
#
#   scripts/slurm-headers.sh            # cached under ~/.cache/tally-slurm
set -euo pipefail
cache="${TALLY_SLURM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tally-slurm}"
mirror=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
         | grep -v security | head -n1 | awk '{print $2}' || true)
mirror=${mirror:-http://deb.debian.org/debian}
suites=(trixie sid)
declare -A pinned=([trixie]=24.11 [sid]=26.05)
dirs=()
need=0
for suite in "${suites[@]}"; do [[ -e "$cache/$suite/.ready" ]] || need=1; done
if (( need )); then
  apt_dir="$cache/apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  for suite in "${suites[@]}"; do echo "deb $mirror $suite main"; done > "$apt_dir/sources.list"
  # sid's Release is re-signed daily; a mirror snapshot may be past its Valid-Until.
  opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=-
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
        -o Acquire::Check-Valid-Until=false -o APT::Sandbox::User=root -q)
  apt-get "${opts[@]}" update >&2 || { echo "slurm-headers: apt-get update failed for ${suites[*]} at $mirror" >&2; exit 1; }
  for suite in "${suites[@]}"; do
    [[ -e "$cache/$suite/.ready" ]] && continue
    rm -rf "$cache/$suite" && mkdir -p "$cache/$suite"
    (cd "$cache/$suite" && apt-get "${opts[@]}" download "libslurm-dev/$suite" >&2) ||
      { echo "slurm-headers: could not download libslurm-dev from $suite" >&2; exit 1; }
    dpkg-deb -x "$cache/$suite"/libslurm-dev_*.deb "$cache/$suite/root"
    touch "$cache/$suite/.ready"
  done
fi
for suite in "${suites[@]}"; do
  header="$cache/$suite/root/usr/include/slurm/slurm_version.h"
  number=$(awk '$2 == "SLURM_VERSION_NUMBER" { print $3 }' "$header" 2>/dev/null || true)
  [[ -n "$number" ]] || { echo "slurm-headers: $header names no SLURM_VERSION_NUMBER" >&2; exit 1; }
  found=$(printf '%d.%02d' $(( number >> 16 & 0xff )) $(( number >> 8 & 0xff )))
  if [[ "$found" != "${pinned[$suite]}" ]]; then
    echo "slurm-headers: $suite's libslurm-dev is Slurm $found, pinned at ${pinned[$suite]}: change the pin" \
         "(here, in vm/debian-slurm.sh's callers and CMake's release names) on purpose" >&2
    exit 1
  fi
  echo "slurm-headers: $suite: Slurm $found" >&2
  dirs+=("$cache/$suite/root/usr/include")
done
(IFS=';'; echo "${dirs[*]}")
