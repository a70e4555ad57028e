// The in-kernel GPU memory charge as the daemon sees it (gpu_charge.bpf.c
// does the work): leases armed by their cgroup id, each one's charge read
// back, refusals drained. An interface, so the daemon's tests run it in
// memory and observe every arm and disarm; bpf/kernel_charge_bpf.cpp is the
// real one over libbpf.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace tally::bpf {

// One lease's charge, as the kernel holds it (bytes; counts).
struct LeaseCharge {
  std::uint64_t bytes = 0;      // held now: objects its tasks created, not yet freed
  std::uint64_t peakBytes = 0;  // the most it held at once since armed (exact, between samples too)
  std::uint64_t objects = 0;
  std::uint64_t refused = 0;  // allocations refused at its bound
  std::uint64_t refusedBytes = 0;
};

// One refused allocation, from the ring buffer.
struct Refusal {
  std::uint64_t lease = 0;  // the lease's cgroup id
  std::uint64_t requestedBytes = 0;
  std::uint64_t chargedBytes = 0;  // what the lease held when it asked
  std::uint64_t maxBytes = 0;
  std::uint32_t pid = 0;
  std::uint32_t cmd = 0;  // the ioctl
};

// What the programs do on this kernel.
struct Capabilities {
  bool charging = false;  // objects charged to their creator's lease
  bool refusing = false;  // allocations past a bound refused (needs the BPF LSM)
};

class KernelCharge {
 public:
  virtual ~KernelCharge() = default;
  virtual Capabilities capabilities() const = 0;
  // Charges the lease whose cgroup is `cgroupId` from now on (a charge already
  // there, kept across a daemon restart, is kept), refusing allocations past
  // `boundBytes` when given; absent: charged, never refused.
  virtual Status arm(std::uint64_t cgroupId, std::optional<std::uint64_t> boundBytes) = 0;
  // The lease ended: its charge and bound go (objects it created and that
  // outlive it are charged to no one since).
  virtual void disarm(std::uint64_t cgroupId) = 0;
  // Absent: not armed, or the map could not be read.
  virtual std::optional<LeaseCharge> read(std::uint64_t cgroupId) const = 0;
  // Every armed cgroup id: after a restart, those no lease claims are disarmed.
  virtual std::vector<std::uint64_t> armed() const = 0;
  // The refusals since the last call (at most `max`; the rest stay queued).
  virtual std::vector<Refusal> refusals(std::size_t max = 4096) = 0;
};

}  // namespace tally::bpf
