// `tally doctor` as a typed report: what this host offers a lease, each part
// with the evidence read -- the kernel, cgroup v2 and where leases live,
// systemd, dmem, the GPU devices and their GTT ceilings, and GTT -> memcg
// coverage (static signs and, with the probe, its proof). examine() reads
// the host once (the I/O edge); renderJson() and renderText() only format.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bpf/availability.h"
#include "cgroup/chain.h"
#include "contain/host_layout.h"
#include "coverage/active_probe.h"
#include "coverage/assess.h"
#include "coverage/charge_probe.h"
#include "devices/gtt_ceiling.h"
#include "doctor/kernel_bound.h"
#include "fs/root.h"
#include "host/snapshot.h"
#include "util/result.h"

namespace tally::doctor {

struct Systemd {
  std::string evidence;           // where PID 1's name was read
  std::optional<bool> reachable;  // absent: not queried (the roots are not this host's)
  std::string manager;            // "system" or "user", when reachable
  std::optional<std::string> version, versionUnknown, error, note;
};

struct Dmem {
  std::optional<bool> present;  // absent: unknowable (no cgroup v2 root there)
  std::string evidence;
  std::optional<cgroup::Chain> chain;  // down to where leases live, when present
};

// The kernel charge and bound (bpf/): what this host allows,
// judged as the daemon judges it at start, whether a daemon has the programs
// attached now (their pins under /sys/fs/bpf/tally), which devices they cover,
// what they could not do exactly, and, with --active, the charge probe.
struct KernelCharge {
  bpf::HostFacts facts;  // capabilities are this process's: run it as the daemon runs
  bpf::Verdict verdict;
  bool pinned = false;
  // Each DRM device and /dev/kfd (kernel_bound.h); read only on the host's own
  // roots, when the bound can run here or is attached.
  std::vector<DeviceCoverage> devices;
  bool devicesRead = false;
  // The attached programs' counters and room, when their maps were read.
  std::optional<bpf::Totals> totals;
  std::optional<std::string> pinsUnread;  // why the attached programs' maps were not read
  std::optional<coverage::ChargeProbeResult> probe;
  bool required = false;  // --require-kernel-charge

  // Whether the section says more than the verdict: the bound can run here, or runs.
  bool shown() const { return pinned || verdict.can.charging; }
};

// What the doctor concludes, as its exit status says it (docs/doctor.md).
enum class Health { Ok, Degraded, CheckFailed };

struct Report {
  std::string cgroupRootPath;  // as named (--cgroup-root)
  std::string kernelEvidence;
  contain::HostLayout layout;
  std::string leaseParent;  // where leases would live (contain::leasePlacement)
  std::optional<cgroup::Chain> memoryChain;
  bool memoryDelegated = false;
  std::optional<std::string> memoryHint;
  Systemd systemd;
  Dmem dmem;
  KernelCharge kernelCharge;
  host::Snapshot host;
  std::vector<devices::GttCeilings> ceilings;  // parallel to host.devices.devices
  std::vector<std::string> silentDevices;      // their driver prints no memory figure
  std::optional<std::string> gttAdvice;
  coverage::Assessment assessment;
  std::vector<std::string> degraded;
  bool checkFailed = false;  // a check could not run (no /sys devices, the probe failed)

  Health health() const;
};

struct Options {
  std::optional<coverage::ProbeOptions> probe;              // run the active probe
  std::optional<coverage::ChargeProbeOptions> chargeProbe;  // run the kernel charge's probe
  // The kernel charge must be there and proven (the charge probe): when it
  // cannot run, or refusing is off, a check could not run (exit 2).
  bool requireKernelBound = false;
  bool queryManager = true;  // ask systemd (only for the host's own /proc and /sys)
};

// Reads the host through the roots. An error: /proc or /sys cannot be opened.
Result<Report> examine(const fs::RootPaths& paths, const Options& o);

// The exit status `tally doctor` gives (docs/doctor.md): 0 ok, 1 degraded,
// 2 a check could not run.
int exitStatus(Health h);

nlohmann::ordered_json renderJson(const Report& r);
std::string renderText(const Report& r);

}  // namespace tally::doctor
