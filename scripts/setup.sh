#!/usr/bin/env bash
# Sets a fresh Debian 12 machine up: installs the dependencies, builds tally
# (release preset), and runs its main job: the host summary and the GPU meter.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --target tally
tally=build/release/src/tally
echo
echo "== tally doctor =="
rc=0
"$tally" doctor || rc=$?
# 1 = "this host cannot contain a lease" (reported above), not a setup failure.
[ "$rc" -le 1 ] || exit "$rc"
echo
echo "== tally gpu =="
"$tally" gpu
echo
echo "== tally run --memory-max 64M -- true  (a lease; refused with the reason where the host cannot contain one) =="
rc=0
"$tally" run --memory-max 64M -- true || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 125 ] || exit "$rc"
"$tally" ledger --limit 3
"$tally" ledger verify
echo
echo "== tally config check dist/tally.toml  (the daemon's example config: pools and budgets) =="
"$tally" config check dist/tally.toml
echo
echo "tally is built at $tally"
echo "install it: sudo cmake --install build/release   (binary, tally.service, user unit, man page, bash completion)"
echo "then: docs/guide/README.md (the daemon, tally seats, tally top, tally metrics)"
