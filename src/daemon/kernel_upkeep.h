// The daemon's side of the kernel charge beyond each lease's meter:
//
//   ended leases   a lease that ends is retired in the kernel; the buffers it
//                  created and that outlive it stay counted (in its entry, in
//                  its parent lease's charge, and for a top-level lease
//                  against its pools' GPU budgets) until whoever holds them
//                  frees them. Each is said and recorded (a host-level
//                  `gpu-residue` ledger row) when it ends holding buffers and
//                  when they are freed, and shown meanwhile ("held by buffers
//                  of ended lease X").
//   anomalies      what the programs could not do exactly (recursion misses,
//                  unseen objects, a full object map, ...), read from the
//                  kernel's counters: said once a minute at most when they
//                  grow, and counted for the metrics and their alerts.
//   devices        a GPU that appears after the daemon started (a rescan of
//                  /sys/class/drm when its listing changes) is registered, so
//                  its buffers are charged and refused too.
//
// The kernel's maps are the truth; this adds the names the ledger knows.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bpf/kernel_charge.h"
#include "daemon/lease.h"
#include "daemon/lease_events.h"
#include "fs/root.h"
#include "ledger/ledger.h"

namespace tally::daemon {

class KernelUpkeep {
 public:
  // An ended lease whose buffers live on.
  struct Ended {
    std::uint64_t cgroupId = 0;
    std::string lease, name;  // empty when no ledger row names it (it ended before a restart)
    std::vector<std::string> pools;
    std::string parent;  // its parent lease's id: the bytes count in the parent's charge
    std::uint64_t parentCgroup = 0;
    std::uint64_t bytes = 0, objects = 0;  // held now (as of the last refresh)
    std::uint64_t endedAtNs = 0;
  };
  // How often ended leases, the counters and the device listing are looked at.
  static constexpr std::uint64_t kRefreshUs = 5'000'000;
  // Anomalies are said at most this often (each line the counts since the last).
  static constexpr std::uint64_t kAnomalySayUs = 60'000'000;

  KernelUpkeep(bpf::KernelCharge* charge, const fs::Root& sys, ledger::Ledger& ledger,
               LeaseEvents& events)
      : charge_(charge), sys_(sys), ledger_(ledger), events_(events) {}

  // The lease ended (it leaves the book): retired in the kernel. Holding
  // buffers it created, it is kept here, said and recorded. `parentCgroup`:
  // its parent lease's cgroup id (0: top-level).
  void retire(const Lease& l, std::uint64_t parentCgroup);
  // After a restart: armed entries no re-adopted lease claims are retired
  // (they ended while no daemon ran), and the kernel's ended entries are
  // named from the ledger's gpu-residue rows.
  void recover(const std::vector<std::uint64_t>& claimed);
  // Due work (every kRefreshUs): ended leases whose buffers are all freed are
  // said and recorded and go; the others' figures are refreshed; anomalies
  // read; new devices registered. True when it ran (pools' residue may have
  // changed).
  bool tick(std::uint64_t nowMonoUs, std::uint64_t nowNs);

  const std::map<std::uint64_t, Ended>& ended() const { return ended_; }
  // What buffers of a pool's ended top-level leases hold now.
  std::uint64_t poolResidue(const std::string& pool) const;
  // The kernel's counters as last read (absent: off, or not read yet).
  const std::optional<bpf::Totals>& totals() const { return totals_; }
  // Each anomaly counter by name ("stale-objects", ..., "recursion-misses"),
  // counted since the maps were made: the metrics' labels.
  static std::vector<std::pair<std::string, std::uint64_t>> anomalies(const bpf::Totals& t);
  // The devices registered now, as last read.
  const std::vector<bpf::DeviceRule>& devices() const { return devices_; }

 private:
  void say(const Ended& e, const char* event, std::uint64_t nowNs);
  void readAnomalies(std::uint64_t nowMonoUs);
  void rescanDevices();

  bpf::KernelCharge* charge_;
  const fs::Root& sys_;
  ledger::Ledger& ledger_;
  LeaseEvents& events_;
  std::map<std::uint64_t, Ended> ended_;
  std::optional<bpf::Totals> totals_;
  std::optional<bpf::Totals> totalsSaid_;  // the counts last said
  std::uint64_t lastSaidUs_ = 0;
  std::uint64_t nextUs_ = 0;
  std::string drmListing_;  // /sys/class/drm's names when devices were last registered
  std::vector<bpf::DeviceRule> devices_;
};

}  // namespace tally::daemon
