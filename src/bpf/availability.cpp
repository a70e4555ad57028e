#include "bpf/availability.h"

#include <fmt/format.h>

#include "util/text.h"

namespace tally::bpf {

bool lsmListHasBpf(const std::string& list) {
  std::string_view rest = list;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && (item.back() == '\n' || item.back() == ' ')) item.remove_suffix(1);
    if (item == "bpf") return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

Verdict assess(const HostFacts& f) {
  Verdict v;
  if (!f.btf) {
    v.why =
        "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing): the programs cannot be "
        "placed on this kernel's types; use a kernel built with CONFIG_DEBUG_INFO_BTF=y (every "
        "Debian kernel since 5.x is)";
    return v;
  }
  if (!f.capBpf || !f.capPerfmon) {
    v.why = fmt::format(
        "the daemon lacks {}: add CAP_BPF CAP_PERFMON to the unit's CapabilityBoundingSet (the "
        "shipped tally.service loads the programs in its privileged ExecStartPre and keeps "
        "CAP_BPF) or run it as root",
        !f.capBpf && !f.capPerfmon ? "CAP_BPF and CAP_PERFMON"
        : !f.capBpf                ? "CAP_BPF"
                                   : "CAP_PERFMON");
    return v;
  }
  if (!f.bpffs) {
    v.why =
        "/sys/fs/bpf is not a mounted bpf filesystem: the charges could not outlive a daemon "
        "restart; mount it (systemd does at boot: `mount -t bpf bpf /sys/fs/bpf`)";
    return v;
  }
  if (f.loadError) {
    v.why = fmt::format("the kernel refused the programs: {}", *f.loadError);
    return v;
  }
  v.can.charging = true;
  if (!f.lsmList) {
    v.why =
        "refusing off: /sys/kernel/security/lsm is unreadable, so whether the BPF LSM is active "
        "is unknown; mount securityfs, or the sampled kill stays the bound";
    return v;
  }
  if (!lsmListHasBpf(*f.lsmList)) {
    v.why = fmt::format(
        "refusing off: the BPF LSM is not active (/sys/kernel/security/lsm reads \"{}\"); add "
        "lsm={},bpf to the kernel command line and reboot. Until then the sampled kill is the "
        "bound",
        text::trim(*f.lsmList), text::trim(*f.lsmList));
    return v;
  }
  v.can.refusing = true;
  return v;
}

std::string describe(const Verdict& v) {
  if (v.can.charging && v.can.refusing) return "charging and refusing in the kernel (BPF)";
  if (v.can.charging) return fmt::format("charging in the kernel (BPF); {}", v.why);
  return fmt::format("off: {}; GPU memory is metered from fdinfo and bounded by the sampled kill",
                     v.why);
}

const char* reasonName(std::uint32_t reason) {
  switch (static_cast<RefusalReason>(reason)) {
    case RefusalReason::Bound:
      return "bound";
    case RefusalReason::Objects:
      return "object-quota";
    case RefusalReason::MapFull:
      return "map-full";
    case RefusalReason::Unreadable:
      return "unreadable-argument";
    case RefusalReason::Undecodable:
      return "undecodable-size";
    case RefusalReason::Contended:
      return "contended";
    case RefusalReason::NoMemory:
      return "no-memory";
  }
  return "unknown";
}

}  // namespace tally::bpf
