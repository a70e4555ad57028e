#!/usr/bin/env bash
# Sets a fresh Debian 12 machine up: installs the dependencies, builds tally
# (release preset) with everything `cmake --install` installs, and runs its
# main job: the host summary and the GPU meter. It changes nothing on the
# system: the demo lease's ledger is a throw-away directory.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --target tally_installable
tally=build/release/src/tally
demo=$(mktemp -d /tmp/tally-demo.XXXXXX)
trap 'rm -rf "$demo"' EXIT
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
echo "== tally run --memory-max 64M -- true  (a lease; refused with the reason where the host cannot contain one; its ledger: $demo, removed after) =="
rc=0
TALLY_STATE_DIR=$demo "$tally" run --memory-max 64M -- true || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 125 ] || exit "$rc"
TALLY_STATE_DIR=$demo "$tally" ledger --limit 3
TALLY_STATE_DIR=$demo "$tally" ledger verify
echo
echo "== tally config check dist/tally.toml  (the daemon's example config: pools and budgets) =="
"$tally" config check dist/tally.toml
echo
echo "tally is built at $tally"
echo "install it: sudo cmake --install build/release   (binary, units, sysusers.d/tmpfiles.d, man page, completion, the Slurm plugin)"
echo "   or as a Debian package: scripts/build-deb.sh && sudo apt install ./build/deb/tally_*.deb"
echo "then: docs/guide/README.md (the daemon, tally seats, tally top, tally metrics)"
