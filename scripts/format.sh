#!/usr/bin/env bash
# The tree's C++ follows .clang-format (Google, 100 columns), checked by
# clang-format 14, Debian 12's: another version may format some lines
# differently, so CI and this script use the one the archive ships.
#   scripts/format.sh          fail, listing the drift, when a file differs
#   scripts/format.sh --fix    rewrite the files in place
# The test DRM driver (vm/testdrm) is kernel C in the kernel's style: not ours to reflow.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$clang_format" ] || { echo "format.sh: clang-format not found; run scripts/install-deps.sh" >&2; exit 2; }
mapfile -t files < <(find src tests fuzz bench -name '*.cpp' -o -name '*.h' | sort)
case "${1:-}" in
  --fix) "$clang_format" -i "${files[@]}" ;;
  "")
    if ! "$clang_format" --dry-run --Werror "${files[@]}" 2>/tmp/tally-format.$$; then
      grep -E '^[^ ].*: (error|warning):' /tmp/tally-format.$$ | cut -d: -f1 | sort -u | sed 's/^/  not formatted: /'
      rm -f /tmp/tally-format.$$
      echo "format.sh: the files above drift from .clang-format; scripts/format.sh --fix rewrites them" >&2
      exit 1
    fi
    rm -f /tmp/tally-format.$$
    echo "format: ${#files[@]} files match .clang-format" ;;
  *) echo "usage: scripts/format.sh [--fix]" >&2; exit 2 ;;
esac
