#!/bin/sh
# Runs inside the VM (vm/run.sh): the worked example quoted in
# docs/guide/strix-halo.md, scaled to the VM (MiB where a Strix Halo has GiB):
# a "llama.cpp server" unit attached as a lease, a batch job run through the
# pool with a GPU limit it outgrows, and what seats, metrics, top and the
# journal show.   usage: vm/guide-example.sh TALLY_BINARY WORKLOAD_BINARY
T=$1; W=$2
show() { echo; echo "\$ $*" | sed "s|$T|tally|; s|$W|tally_vm_workload|g"; "$@"; echo "[exit status $?]"; }
modprobe drm; insmod "$TALLY_TESTDRM_KO"
mkdir -p /etc/tally
cat > /etc/tally/tally.toml <<TOML
[daemon]
sample_interval = "500ms"
metrics_textfile = "/tmp/tally.prom"

[pools.gpu]
capacity = 4
gpu_memory_budget = "1GiB"
memory_budget = "1GiB"
TOML
systemd-run --quiet --unit=tally.service -p Type=notify "$T" daemon --config /etc/tally/tally.toml
# The "llama.cpp server": 64 MiB of host memory, 256 MiB of GTT through the test DRM driver.
rm -f /tmp/llama.ready
systemd-run --quiet --unit=llama-server.service -p Type=exec sh -c "$W hog 64 600000 & exec $W gpu gtt 64 4 600000 /tmp/llama.ready"
# Barriers, not sleeps: the server holds its four buffers (it says so in
# /tmp/llama.ready), and (below) the daemon has sampled what a command shows.
# Each waits at most 30 s.
until_true() { i=0; until "$@"; do i=$((i + 1)); [ $i -lt 300 ] || { echo "gave up waiting: $*"; break; }; sleep 0.1; done; }
until_true test -e /tmp/llama.ready
seat_sampled() { "$T" seats --json 2>/dev/null | python3 -c 'import json,sys; s=json.load(sys.stdin)["seats"]; sys.exit(0 if s and s[0]["gpu"]["current_bytes"] == 268435456 and s[0]["host"]["current_bytes"] else 1)'; }
show "$T" attach --unit llama-server.service --pool gpu --memory-max 512M --gpu-memory-max 384M --name llama \
  --attr model=qwen3-32b-q4 --attr context_window=32768
# The batch job: declares 96 MiB of GPU memory, then takes 128 MiB.
show "$T" run --pool gpu --name finetune --memory-max 256M --gpu-memory-max 96M --sample-interval 250ms \
  --attr model=lora-7b -- "$W" gpu gtt 32 4 30000
until_true seat_sampled
show "$T" seats
echo; echo '$ tally seats --json   (the llama row)'
"$T" seats --json | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["seats"][0], indent=2))'
echo; echo '$ tally metrics | grep -E "^tally_(lease|gpu_memory_unattributed|lease_outcomes_total|gpu_bound_events_total)" | grep -v " 0$"'
"$T" metrics | grep -E '^tally_(lease|gpu_memory_unattributed|lease_outcomes_total|gpu_bound_events_total)' | grep -v ' 0$'
echo; echo '$ tally metrics | promtool check metrics'
"$T" metrics | promtool check metrics; echo "[exit status $?]"
echo; echo '$ COLUMNS=150 tally top --once'; COLUMNS=150 "$T" top --once; echo "[exit status $?]"
journalctl --sync
outcomes='journalctl -t tally -o json TALLY_EVENT=lease-outcome --no-pager | jq -cS '\''with_entries(select(.key | startswith("TALLY_") or . == "MESSAGE" or . == "PRIORITY"))'\'''
echo; echo "\$ $outcomes"; sh -c "$outcomes"; echo "[exit status $?]"

# A job that grows in steps for the timeline: 16 MiB of host memory, 64 MiB
# of GTT at 1 s, 32 MiB more at 2 s (96 MiB: at its bound), and a third 32
# MiB buffer the kernel refuses; the process that asked for it exits 1, the
# rest of the job runs on to 4 s.
show "$T" run --pool gpu --name embed --memory-max 256M --gpu-memory-max 96M --sample-interval 250ms \
  -- sh -c "$W hog 16 4000 & sleep 1; $W gpu gtt 32 2 3000 & sleep 1; $W gpu gtt 32 2 2000; wait"
# Its timeline: the terminal chart, and the SVG printed between markers
# (docs/guide/images/embed-timeline.svg is this output).
ID=$("$T" ledger --name embed --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["record"]["lease"]["id"])')
show "$T" lease show "$ID" --svg /tmp/embed-timeline.svg
echo; echo '$ cat /tmp/embed-timeline.svg   (docs/guide/images/embed-timeline.svg)'
echo "----- BEGIN embed-timeline.svg -----"; cat /tmp/embed-timeline.svg; echo "----- END embed-timeline.svg -----"
show "$T" ledger
# What happened, replayed from the ledger with its time, like docker events.
show "$T" events --since 10m --timeout 2s
# The shipped alert rules, checked and tested by the guest's promtool.
if [ -n "$TALLY_SOURCE" ]; then
  (cd "$TALLY_SOURCE" && show promtool check rules dist/prometheus/tally.rules.yml)
  (cd "$TALLY_SOURCE/tests/fixtures/prometheus" && show promtool test rules tally.rules.test.yml)
fi
