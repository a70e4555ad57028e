// Whether the kernel charge can run here, and if not exactly why and what
// to do: from facts the caller read (the active LSM list, BTF, capabilities,
// the unit's syscall filter showing as EPERM), never guessed. Pure: the
// doctor, the daemon's `status` reply (tally metrics, seats) and the daemon's journal line say the
// same.
#pragma once

#include <optional>
#include <string>

#include "bpf/kernel_charge.h"

namespace tally::bpf {

struct HostFacts {
  // /sys/kernel/security/lsm; absent when securityfs is not readable.
  std::optional<std::string> lsmList;
  bool btf = false;         // /sys/kernel/btf/vmlinux exists
  bool capBpf = false;      // CAP_BPF (or CAP_SYS_ADMIN) effective
  bool capPerfmon = false;  // CAP_PERFMON (or CAP_SYS_ADMIN) effective
  bool bpffs = false;       // /sys/fs/bpf is a bpf filesystem (the pins live there)
  // The load's own error, when it was tried and failed (libbpf's words).
  std::optional<std::string> loadError;
};

struct Verdict {
  Capabilities can;
  // When not fully active: why, and what to do. Empty when charging and refusing.
  std::string why;
};

// Before a load: what can be tried. Charging needs BTF and the capabilities;
// refusing needs those and `bpf` in the active LSM list.
Verdict assess(const HostFacts& f);

// Whether `list` (the comma list of /sys/kernel/security/lsm) names bpf.
bool lsmListHasBpf(const std::string& list);

// One line: "charging and refusing in the kernel", "charging in the kernel;
// refusing off: ..." or "off: ...".
std::string describe(const Verdict& v);

}  // namespace tally::bpf
