#!/usr/bin/env bash
# Installs tally's build and test dependencies, all from Debian 12's archive.
# Idempotent: when every package is present it changes nothing and needs no
# network. Run as root (or with sudo available).
set -euo pipefail

packages=(
  # toolchain and build
  g++ cmake ninja-build pkg-config
  # fuzzing: clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-14-dev
  # the tree's formatting check (scripts/format.sh)
  clang-format
  # libraries tally links
  libfmt-dev nlohmann-json3-dev libcli11-dev libsystemd-dev libsqlite3-dev libtomlplusplus-dev libdrm-dev
  # the kernel charge: libbpf, and bpftool for its skeleton (clang compiles it)
  libbpf-dev bpftool
  # tests: a real HTTP client for GET /metrics
  libcpp-httplib-dev
  # the real-kernel VM harness (vm/): QEMU, the initramfs, kernel module tools
  qemu-system-x86 busybox-static cpio kmod xz-utils zstd make
  # the 7.x guest kernel's test driver is built in a trixie chroot
  debootstrap
  # what the guest boots: the host's own systemd, D-Bus and PAM session support
  systemd dbus libpam-systemd
  # tests and benchmarks
  libgtest-dev libbenchmark-dev
  # metrics validation (promtool), the tally top test (tmux), bash completion
  prometheus tmux bash-completion
  # the VM reaction benchmark reads the ledger export with jq
  jq
  # the Debian package (scripts/build-deb.sh): its checker
  lintian
  # the zsh and fish completion are syntax-checked by their own shells
  zsh fish
  # the Slurm plugin (slurm/spank.h) and its VM tests' one-node cluster; the
  # services stay idle on the host: slurmd and slurmctld start only with a
  # /etc/slurm/slurm.conf, which only the VM guest writes
  libslurm-dev slurmd slurmctld slurm-client munge
  # tally attach --container's VM test runs a real podman container (no
  # image: --rootfs); its units stay idle on the host
  podman
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
