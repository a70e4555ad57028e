// The kernel charge as the daemon sees it (gpu_charge.bpf.c
// does the work): leases armed by their cgroup id, each one's charge read
// back, refusals drained, ended leases kept while their buffers live. An
// interface, so the daemon's tests run it in memory and observe every arm
// and retirement; bpf/bpf_charge.cpp is the real one over libbpf.
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
  std::uint64_t bytes = 0;      // held now: objects its tasks created, not yet freed (+ in flight)
  std::uint64_t peakBytes = 0;  // the most it held at once since its entry was made (exact)
  std::uint64_t objects = 0;
  std::uint64_t refused = 0;  // allocations refused, every reason
  std::uint64_t refusedBytes = 0;
  std::uint64_t refusedFailsafe = 0;  // of those, refused because it could not be charged exactly
  std::uint64_t untracked = 0;   // objects left uncharged (its object quota, a full map): fdinfo's
  std::uint64_t underflows = 0;  // uncharges that would have gone below zero (held at zero)
  std::uint64_t movedIn = 0;     // tasks moved into its cgroup tree (fdinfo is walked again)
  std::uint64_t extraBytes = 0;  // bytes made beyond what their ioctl was decoded to make
  // Of `bytes`, allocations made whose object the kernel's init program did
  // not see (a recursion miss): kept charged until the lease ends.
  std::uint64_t unseenBytes = 0;
};

// Why the kernel refused an allocation (gpu_charge_abi.h's tally_refusal_reason).
enum class RefusalReason : std::uint32_t {
  Bound = 1,        // the lease's (or its parent's) bound
  Objects = 2,      // its object quota
  MapFull = 3,      // the box's object map is full
  Unreadable = 4,   // the argument could not be read (fail closed)
  Undecodable = 5,  // a size that wraps in the driver's arithmetic (fail closed)
  Contended = 6,    // the charge could not be updated exactly (fail closed)
  NoMemory = 7,     // no room for the reservation record (fail closed)
};
// "bound", "object-quota", "map-full", ... (events, metrics labels).
const char* reasonName(std::uint32_t reason);

// One refused allocation, from the ring buffer.
struct Refusal {
  std::uint64_t lease = 0;  // the cgroup id of the lease that refused (a child's parent, maybe)
  std::uint64_t requestedBytes = 0;
  std::uint64_t chargedBytes = 0;  // what that lease held when it asked
  std::uint64_t maxBytes = 0;
  std::uint32_t pid = 0;
  std::uint32_t cmd = 0;  // the ioctl
  std::uint32_t reason = 1;
};

// What the programs do on this kernel.
struct Capabilities {
  bool charging = false;  // objects charged to their creator's lease
  bool refusing = false;  // allocations past a bound refused (needs the BPF LSM)
};

// How a lease is armed.
struct ArmSpec {
  std::optional<std::uint64_t> boundBytes;  // absent: charged, never refused
  std::uint64_t parent = 0;                 // the parent lease's cgroup id, armed before it
  std::uint64_t maxObjects = 0;             // its object quota (0: the loader's default)
};

// An ended lease whose buffers still live: its charge, until they are freed.
struct Ended {
  std::uint64_t cgroupId = 0;
  std::uint64_t parent = 0;
  LeaseCharge charge;
};

// Box-wide counters of what the programs could not do exactly, and the room
// they have. Each is a count since the maps were made (they outlive daemons).
struct Totals {
  std::uint64_t objects = 0;  // in the object map (+ reserved)
  std::uint64_t objectsCapacity = 0;
  std::uint64_t leasesCapacity = 0;
  std::uint64_t objectsPerLease = 0;  // the default object quota
  std::uint64_t staleObjects = 0;     // releases the program missed, found later and uncharged
  std::uint64_t insertFailed = 0;
  std::uint64_t untrackedFull = 0;  // objects left uncharged because the map was full
  std::uint64_t staleReservations = 0;
  std::uint64_t orphanUncharges = 0;
  std::uint64_t eventsDropped = 0;
  std::uint64_t contended = 0;
  std::uint64_t unseenObjects = 0;  // allocations made whose object the init program missed
  // bpf_prog_info.recursion_misses of each tracing program: runs the kernel
  // skipped (a charge, an uncharge or an ioctl's end not seen). Absent: unread.
  std::optional<std::uint64_t> recursionMisses;
};

// A device the programs watch: its character node (as stat's st_rdev splits
// it), what its allocation ioctls are (gpu_charge_abi.h's tally_device_kind)
// and whether its objects are charged (memory memcg does not see).
struct DeviceRule {
  std::uint32_t major = 0, minor = 0;
  std::uint32_t kind = 0;
  bool charged = false;
  bool operator==(const DeviceRule&) const = default;
};

class KernelCharge {
 public:
  virtual ~KernelCharge() = default;
  virtual Capabilities capabilities() const = 0;
  // Charges the lease whose cgroup is `cgroupId` from now on. A charge
  // already there (kept across a daemon restart, or left by an ended lease
  // of the same cgroup whose buffers live on) is carried: the lease's figure
  // is what its workload holds. The error says why it cannot be armed (no
  // room: the lease must not run blind).
  virtual Status arm(std::uint64_t cgroupId, const ArmSpec& spec) = 0;
  // The lease ended: charged no more, never refused. Its entry stays while
  // buffers it created live (counted in it and in its parent); gone at once
  // when it holds none.
  virtual void retire(std::uint64_t cgroupId) = 0;
  // Ended leases whose buffers are all freed now: their entries go, and they
  // are returned (each once).
  virtual std::vector<std::uint64_t> reap() = 0;
  // Ended leases still holding buffers.
  virtual std::vector<Ended> ended() const = 0;
  // Absent: not armed (nor ended), or the map could not be read.
  virtual std::optional<LeaseCharge> read(std::uint64_t cgroupId) const = 0;
  // Every armed (not ended) cgroup id: after a restart, those no lease claims are retired.
  virtual std::vector<std::uint64_t> armed() const = 0;
  // The refusals since the last call (at most `max`; the rest stay queued).
  virtual std::vector<Refusal> refusals(std::size_t max = 4096) = 0;
  virtual Totals totals() const = 0;
  // Registers devices that appeared since load (a hot-plugged GPU); those
  // already there are left as they are. Returns how many were added.
  virtual Result<std::size_t> addDevices(const std::vector<DeviceRule>& rules) = 0;
  // The devices registered now.
  virtual std::vector<DeviceRule> devices() const = 0;
};

}  // namespace tally::bpf
