#!/bin/sh
# Runs inside the VM, on the installed Debian package (VmDeb.TheDeploymentGuide…
# runs it after apt install): the day one quoted in docs/guide/deployment.md,
# as root ("$ sudo …"), as alice (a member of group tally) and as bob (not).
#   usage: vm/deployment-example.sh WORKLOAD_BINARY
W=$1
# What a reader types, then what it printed; a failure's status is shown.
show() { echo; echo "\$ $*" | sed "s|$W|tally_vm_workload|g"; "$@" >/tmp/show.out 2>&1; rc=$?; cat /tmp/show.out; echo "[exit status $rc]"; }
as() {  # USER CMD: as a fresh login of USER would run CMD
  u=$1; shift
  echo; echo "$u\$ $*"
  setpriv --reuid "$u" --regid "$u" --init-groups env HOME=/home/$u USER=$u LOGNAME=$u \
    XDG_RUNTIME_DIR=/run/user/$(id -u "$u") PATH=/usr/bin:/bin sh -c "$*" >/tmp/show.out 2>&1
  rc=$?; cat /tmp/show.out; echo "[exit status $rc]"
}
sudo() { "$@"; }  # the VM runs as root; the page says sudo where a reader needs it
# Barriers, not sleeps: each waits at most 30 s for what the next command shows.
until_true() { i=0; until "$@"; do i=$((i + 1)); [ $i -lt 300 ] || { echo "gave up waiting: $*"; break; }; sleep 0.1; done; }
lease_of() {  # NAME: the id of its live lease, once a sample of its GPU memory is in
  tally leases --json 2>/dev/null | python3 -c "
import json, sys
for l in json.load(sys.stdin):
    if l.get('name') == '$1' and (l.get('gpu') or {}).get('current_bytes'): print(l['lease'])"
}
has_lease() { [ -n "$(lease_of "$1")" ]; }

modprobe drm 2>/dev/null; [ -e /sys/module/tally_testdrm ] || insmod "$TALLY_TESTDRM_KO"
userdel -r -f alice 2>/dev/null; userdel -r -f bob 2>/dev/null
useradd -m alice && usermod -aG tally alice && useradd -m bob
systemctl start "user@$(id -u alice).service"

show systemctl is-active tally
show ls -l /run/tally/tally.sock

# 2. The group.
as bob tally seats
as alice tally run --pool batch --name hello -- echo hello from alice

# 3. A declared unit: a server holding 16 MiB of GTT.
cat > /etc/systemd/system/llama-server.service <<UNIT
[Service]
ExecStart=$W gpu gtt 16 1 600000
UNIT
systemctl daemon-reload && systemctl start llama-server.service
cat >> /etc/tally/tally.toml <<TOML

[leases.llama]
unit = "llama-server.service"
pools = ["gpu"]
memory_max = "256MiB"
gpu_memory_max = "1GiB"
attributes = { model = "qwen3-32b" }
TOML
echo; echo '$ sudo tally config check /etc/tally/tally.toml | tail -5'
tally config check /etc/tally/tally.toml 2>&1 | tail -5
show sudo systemctl restart tally
until_true has_lease llama
echo; echo "\$ journalctl -u tally -o cat | grep 'declared lease'"
journalctl -u tally -o cat --no-pager | grep 'declared lease'
show tally leases
first=$(lease_of llama)
show sudo systemctl restart llama-server
new_llama() { l=$(lease_of llama); [ -n "$l" ] && [ "$l" != "$first" ] && [ "$(echo "$l" | wc -l)" = 1 ]; }
until_true new_llama
show tally leases
show sudo tally ledger --name llama
echo; echo "\$ sudo tally ledger --name llama --json | jq -r '.[0].record.outcome.summary'"
tally ledger --name llama --json | jq -r '.[0].record.outcome.summary'

# 4. A detached job, its output, its end.
show tally run --pool batch --detach --name train -- sh -c 'echo epoch 1; sleep 2; echo epoch 2; sleep 600'
ID=$(grep -E '^[0-9a-f]{12}$' /tmp/show.out | tail -1)
until_true sh -c "journalctl -u tally-$ID.scope -o cat --no-pager | grep -q 'epoch 2'"
show tally logs "$ID"
show tally lease release "$ID"
until_true sh -c "tally ledger --name train --json | grep -q '\"stopped\"'"
show sudo tally ledger --name train
as alice tally run --pool batch --detach --name alices -- sleep 5
alices_ended() { [ -z "$(tally leases --json | python3 -c "import json,sys; print(''.join(l['lease'] for l in json.load(sys.stdin) if l.get('name') == 'alices'))")" ]; }
until_true alices_ended

# 5. A container by its name (podman, image-less: --rootfs over the VM's /usr).
printf '[storage]\ndriver = "vfs"\nrunroot = "/run/containers/storage"\ngraphroot = "/var/lib/containers/storage"\n' \
  > /etc/containers/storage.conf
root=/tmp/comfyui-root; bin=$(dirname "$W")
mkdir -p $root/usr $root/etc $root$bin $root/dev $root/proc $root/sys $root/tmp $root/run
ln -sfn usr/lib $root/lib; ln -sfn usr/lib64 $root/lib64; ln -sfn usr/bin $root/bin
rm -f /tmp/comfyui.ready
echo; echo '$ sudo podman run -d --name comfyui --device /dev/dri/renderD128 ...'
podman run -d --name comfyui --network none --device /dev/dri/renderD128 -v /usr:/usr:ro -v "$bin:$bin:ro" \
  -v /etc:/etc:ro -v /tmp:/tmp --rootfs $root "$W" gpu gtt 16 1 600000 /tmp/comfyui.ready >/dev/null
until_true test -e /tmp/comfyui.ready
show sudo tally attach --container comfyui --pool gpu --memory-max 256M --gpu-memory-max 1G
show sudo tally attach --pid "$(podman inspect -f '{{.State.Pid}}' comfyui)" --pool gpu --memory-max 256M --gpu-memory-max 1G
until_true has_lease comfyui
show tally seats

# What this walk made goes; the package stays for the suite's next test.
podman rm -f -t 0 comfyui >/dev/null 2>&1
systemctl stop llama-server.service "user@$(id -u alice).service"
rm -f /etc/systemd/system/llama-server.service; systemctl daemon-reload
sed -i '/^\[leases.llama\]/,$d' /etc/tally/tally.toml
systemctl restart tally
userdel -r -f alice 2>/dev/null; userdel -r -f bob 2>/dev/null
