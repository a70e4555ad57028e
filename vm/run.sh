#!/usr/bin/env bash
# tally's real-kernel test harness: boot one of Debian's kernels (6.12 by default;
# 6.1 and 7.x with --kernel) under QEMU (TCG) with the host's root read-only over
# 9p and the host's systemd as PID 1 on a pure cgroup v2 hierarchy, run one
# command inside, and hand back its output and status.
#
#   vm/run.sh [--kernel 6.1|6.12|7] [--timeout SECONDS] [--env NAME=VALUE]...
#             [--append KERNEL-ARGS] [--keep] -- COMMAND [ARGS...]
#
# The command runs as root in the guest, from the caller's working directory (the
# host tree is visible at the same paths, read-only; /tmp is a fresh tmpfs, into
# which the working directory is bound when it lives under /tmp).
# TALLY_TESTDRM_KO names the test DRM driver built for the guest kernel.
# --append adds to the guest kernel's command line (e.g. an lsm= list without
# bpf, to test what tally does on a kernel whose BPF LSM is off).
# TALLY_VM_TCG_THREAD=single runs the vCPUs on one host thread (docs/vm-harness.md).
#
# Exit status: the command's own status when the VM completed it;
#   124  the command or the VM timed out;
#   125  the VM itself failed (no kernel, QEMU error, boot failure).
# Downloads (kernel, headers) are cached in ${TALLY_VM_CACHE:-~/.cache/tally-vm}.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
timeout_s=300
series=${TALLY_VM_KERNEL:-6.12}
keep=
extra_args=
envs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --timeout) timeout_s=$2; shift 2 ;;
    --kernel) series=$2; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --append) extra_args+=" $2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "vm/run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "vm/run.sh: no command given (see --help)" >&2; exit 2; }

vmfail() { echo "vm: $*" >&2; exit 125; }
command -v qemu-system-x86_64 >/dev/null || vmfail "qemu-system-x86_64 missing; run scripts/install-deps.sh"

kdir=$("$here/fetch-kernel.sh" "$series") || vmfail "could not prepare the $series guest kernel"
kver=$(cat "$kdir/version")
ko=$("$here/build-testdrm.sh" "$kdir") || vmfail "could not build the test DRM driver"

# The initramfs: static busybox, and the modules 9p over virtio and overlayfs
# need, in load order (virtio_pci is a module on 6.1, built in later; netfs
# comes in as 9p's dependency where 9p has one).
mapfile -t modpaths < <(for m in virtio_pci 9pnet_virtio 9p overlay; do
                           modprobe -d "$kdir/root" -S "$kver" --show-depends "$m"
                         done | awk '$1 == "insmod" {print $2}')
[[ ${#modpaths[@]} -gt 0 ]] || vmfail "no module list for 9p and overlay in the $kver tree"
modules=
for p in "${modpaths[@]}"; do
  m=$(basename "$p"); m=${m%%.ko*}
  [[ " $modules " == *" $m "* ]] || modules+="${modules:+ }$m"
done
initrd_key=$( (cat "$here/init" "$0"; echo "$modules") | sha256sum | cut -c1-16)
initrd="$kdir/initramfs-$initrd_key.cpio"
if [[ ! -e "$initrd" ]]; then
  stage=$(mktemp -d)
  mkdir -p "$stage"/{bin,dev,proc,sys,modules}
  cp /bin/busybox "$stage/bin/busybox"
  for f in "${modpaths[@]}"; do
    m=$(basename "$f"); m=${m%%.ko*}
    [[ -e "$stage/modules/$m.ko" ]] && continue
    case "$f" in
      *.xz) xz -dc "$f" > "$stage/modules/$m.ko" ;;
      *.zst) zstd -qdc "$f" > "$stage/modules/$m.ko" ;;
      *) cp "$f" "$stage/modules/$m.ko" ;;
    esac
  done
  cp "$here/init" "$stage/init" && chmod +x "$stage/init"
  cat > "$stage/tally-vm.conf" <<CONF
KVER=$kver
MODDIR=$(readlink -f "$kdir/modules")
MODULES="$modules"
MASK_UNITS="apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer man-db.timer systemd-tmpfiles-clean.timer systemd-timesyncd.service systemd-journal-flush.service systemd-binfmt.service proc-sys-fs-binfmt_misc.automount systemd-sysusers.service systemd-random-seed.service systemd-update-utmp.service systemd-update-utmp-runlevel.service systemd-pstore.service systemd-remount-fs.service kmod-static-nodes.service sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount sys-fs-fuse-connections.mount systemd-firstboot.service ldconfig.service systemd-hwdb-update.service systemd-udevd.service systemd-udev-trigger.service cron.service ssh.service postgresql.service"
MASK_GENERATORS="postgresql-generator systemd-getty-generator systemd-sysv-generator systemd-gpt-auto-generator systemd-fstab-generator systemd-cryptsetup-generator systemd-hibernate-resume-generator systemd-integritysetup-generator systemd-veritysetup-generator"
CONF
  (cd "$stage" && find . | cpio -o -H newc --quiet) > "$initrd.tmp"
  mv "$initrd.tmp" "$initrd"
  rm -rf "$stage"
fi

xfer=$(mktemp -d /tmp/tally-vm.XXXXXX)
cleanup() { [[ -n "$keep" ]] && echo "vm: kept $xfer" >&2 || rm -rf "$xfer"; }
trap cleanup EXIT

{ printf 'exec'; printf ' %q' "$@"; printf '\n'; } > "$xfer/cmd"
envlines="export TALLY_TESTDRM_KO=$(printf %q "$ko") TALLY_IN_VM=1"
for e in "${envs[@]}"; do envlines+=$'\n'"export $(printf %q "$e")"; done
sed -e "s|@CWD@|$(printf %q "$PWD")|" -e "s|@TIMEOUT@|$timeout_s|" "$here/wrapper.in" \
  | awk -v env="$envlines" '{ if ($0 == "@ENV@") print env; else print }' > "$xfer/wrapper"

bind=
case "$PWD" in /tmp/*) bind=" tally_bind=$PWD" ;; esac
[[ "$PWD" == *" "* ]] && bind=  # a path with blanks cannot travel on the kernel command line

start=$(date +%s%N)
set +e
timeout -k 10 $((timeout_s + 120)) qemu-system-x86_64 \
  -accel tcg,thread=${TALLY_VM_TCG_THREAD:-multi} -cpu max -smp 2 -m 2048 \
  -nographic -no-reboot -monitor none -serial "file:$xfer/console.log" \
  -kernel "$kdir/vmlinuz" -initrd "$initrd" \
  -append "console=ttyS0 quiet panic=-1 systemd.unified_cgroup_hierarchy=1 systemd.show_status=error systemd.unit=tally-vm.target$bind$extra_args" \
  -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
  -fsdev local,id=vmxfer,path="$xfer",security_model=none,multidevs=remap \
  -device virtio-9p-pci,fsdev=vmxfer,mount_tag=vmxfer \
  -device virtio-gpu-pci >"$xfer/qemu.log" 2>&1
qemu_rc=$?
set -e
ms=$(( ($(date +%s%N) - start) / 1000000 ))
elapsed="$((ms / 1000)).$(( (ms % 1000) / 100 ))"

[[ -e "$xfer/stdout" ]] && cat "$xfer/stdout"
[[ -e "$xfer/stderr" ]] && cat "$xfer/stderr" >&2
if [[ -e "$xfer/status" ]]; then
  rc=$(cat "$xfer/status")
  printf 'vm: command exited %s; VM ran %s s\n' "$rc" "$elapsed" >&2
  [[ "$rc" == 124 ]] && echo "vm: the command timed out after ${timeout_s}s" >&2
  exit "$rc"
fi
# A panic's tail shows the last oops; the cause is usually the first one.
first=$(grep -n -m1 -E 'BUG:|Oops|general protection fault|WARNING: CPU|Kernel panic' "$xfer/console.log" 2>/dev/null | cut -d: -f1)
if [[ -n "$first" ]]; then
  echo "vm: the guest kernel's first report, at console line $first:" >&2
  sed -n "$((first > 5 ? first - 5 : 1)),$((first + 45))p" "$xfer/console.log" >&2
fi
echo "vm: the VM did not complete the command (qemu exit $qemu_rc after ${elapsed}s); console tail:" >&2
tail -n 40 "$xfer/console.log" >&2 || true
cat "$xfer/qemu.log" >&2 || true
[[ $qemu_rc == 124 || $qemu_rc == 137 ]] && exit 124
exit 125
