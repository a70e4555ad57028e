// What the in-kernel GPU memory bound (bpf/) covers on this host, and what it
// does not: each DRM device and /dev/kfd with the charge's rule for it
// (registered in the attached programs or not), the programs' counters of
// what they could not do exactly, their room, and the fixed list of what the
// kernel charge never sees. Pure: examine() reads, this judges and words.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bpf/kernel_charge.h"
#include "coverage/charge_probe.h"
#include "devices/drm_devices.h"

namespace tally::doctor {

// One DRM device (or /dev/kfd) as the kernel charge covers it.
struct DeviceCoverage {
  std::string device;  // the device's key (BDF or platform name), or the KFD node
  std::string driver;  // the driver its ioctls are (DRM_IOCTL_VERSION), else sysfs's
  std::vector<std::string> nodes;
  // Whether the attached programs have every node registered as the host
  // shows it now; absent: no programs attached, or their maps unread.
  std::optional<bool> registered;
  // "charged-and-refused", "charged-not-refused", "charged-not-decoded", "memcg",
  // "not-charged", "not-registered"
  std::string coverage;
  std::string says;  // the same, in words
};

// `expected`: the rules the daemon registers for this host now
// (bpf::discoverDeviceRules); `registered`: those the attached programs hold
// (KernelCharge::devices()), absent when none are attached or unread.
// `refusing`: the programs refuse (the BPF LSM).
std::vector<DeviceCoverage> judgeDevices(
    const devices::DeviceMap& devices, const std::vector<bpf::DeviceRule>& expected,
    const std::optional<std::vector<bpf::DeviceRule>>& registered, bool refusing,
    const std::string& kfdNode = "/dev/kfd");

// One counter of what the programs could not do exactly, nonzero.
struct CounterLine {
  std::string name;  // as in the JSON: "stale_objects"
  std::uint64_t value = 0;
  std::string says;  // what it means and what follows for the bound
};
std::vector<CounterLine> counterLines(const bpf::Totals& t);

// The room line: "12 objects of 65536 (4096 per lease at most), 256 leases".
std::string roomWords(const bpf::Totals& t);
// Set when the object map is nearly full (90 %): what follows.
std::optional<std::string> roomWarning(const bpf::Totals& t);

// What the charge probe does to the doctor's exit status: a path that could
// not be probed, or the probe failing, is a check that could not run; a charge
// that differs, or an allocation past the bound not refused there, is a bound
// that does not hold as said (a degraded line each). `required`
// (--require-kernel-charge): the bound unavailable here, refusing off, or no
// path probed is a check that could not run too.
struct ChargeProbeHealth {
  std::vector<std::string> degraded;
  bool checkFailed = false;
};
ChargeProbeHealth judgeChargeProbe(const coverage::ChargeProbeResult& p, bool required);

// What the kernel charge does not see (docs/enforcement.md, "What it cannot see").
extern const char* const kKernelBoundDoesNotSee;

}  // namespace tally::doctor
