// A lease's meter: every sample reads the lease cgroup's memory.current (and,
// on a new peak, its memory.stat) and the GPU memory of the processes in the
// cgroup subtree, listed through the cgroup's held directory fd (the
// scanner's cgroup scope, DRM fdinfo + KFD, counted by gpumem/gpu_memory.h).
// Peaks are of what was sampled; a figure no sample saw is absent, never 0
// (doctrine 1).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bpf/kernel_charge.h"
#include "cgroup/cgroup.h"
#include "cgroup/tree_watch.h"
#include "devices/memory_class.h"
#include "fs/root.h"
#include "host/snapshot.h"
#include "probes/cgroup_memory.h"
#include "scanner/scan.h"

namespace tally::lease {

struct HostMeter {
  std::uint64_t samples = 0;                 // successful memory.current reads
  std::optional<std::uint64_t> peakCurrent;  // max sampled memory.current
  std::uint64_t peakAtNs = 0;
  std::optional<probes::FlatKeyed> statAtPeak;  // memory.stat read at that sample
  std::optional<std::string> lastError;
  // The latest sample, absent when the latest read failed (stale is absent).
  std::optional<std::uint64_t> last;
  // memory.stat's GPU keys (gpu_active + dmem) at the latest sample, read
  // only when the meter is told the kernel has them (readStatGpu).
  std::optional<std::uint64_t> lastStatGpu;
};

struct GpuMeter {
  std::uint64_t samples = 0;  // completed scans
  // max over samples of the counted sum (device + host-uncharged regions,
  // gpumem/gpu_memory.h)
  std::optional<std::uint64_t> peakBytes;
  std::uint64_t peakAtNs = 0;
  std::map<std::string, std::uint64_t> atPeak;       // per region, at that sample
  std::map<std::string, std::uint64_t> regionPeaks;  // per region, each its own max
  // The class of every region any sample saw (devices/memory_class.h): what
  // the peak counts (device, host-uncharged) and what it shows only.
  std::map<std::string, devices::MemoryClass> classesSeen;
  std::uint64_t maxClients = 0;
  std::uint64_t samplesOverBudget = 0;      // samples whose sum exceeded gpu_memory_max
  std::uint64_t samplesWithUnreadable = 0;  // some process could not be read (its GPU use unknown)
  // A client printed a counted region but no resident figure: that sample's
  // sum is unknown, so it is left out of the peak rather than undercounted.
  std::uint64_t samplesIncomplete = 0;
  std::optional<std::string> lastUnreadable;
  std::optional<std::string> lastError;
  // Why the latest sample's sum is unknown (a driver that prints no memory
  // figures, a region without a resident figure); absent when it is known.
  std::optional<std::string> lastUnknown;
  std::optional<std::string> unknownSeen;  // the latest such reason any sample had
  // The latest sample's counted sum, its host-uncharged part (GTT and kin:
  // what memory.current holds too once the kernel charges GTT), and every
  // region's figure with its class; absent/empty when the latest scan failed
  // or was incomplete.
  std::optional<std::uint64_t> lastBytes;
  std::optional<std::uint64_t> lastHostUncharged;
  std::map<std::string, std::uint64_t> lastRegions;
  std::map<std::string, devices::MemoryClass> lastClasses;
  std::string lastSource = "drm-fdinfo";      // or "drm-fdinfo+kfd-sysfs" (gpumem/gpu_memory.h)
  std::optional<std::uint64_t> lastKfdBytes;  // KFD's VRAM-flagged figure, shown beside
  std::vector<std::string> lastDevices;       // device keys (PCI BDF) the latest scan's clients use
  // The kernel charge (bpf/), where the daemon armed the lease: the
  // latest reading (its counters this lease's own: a charge carried from an
  // earlier lease of the same cgroup counts its bytes, not its refusals), and
  // the fdinfo sum shown beside it (absent when that sample's sum was
  // unknown). With a reading, lastBytes is the larger of the charge and the
  // fdinfo sum walked this sample: never below what the lease's own
  // processes hold.
  std::optional<bpf::LeaseCharge> kernel;
  std::optional<std::uint64_t> lastFdinfoBytes;
  // Consecutive walks whose fdinfo sum exceeded the charge (buffers made
  // outside the lease: before it was armed, by a task moved in, passed in).
  unsigned walksFdinfoAbove = 0;
};

class LeaseMeter {
 public:
  // `cg` is the lease's cgroup, held open by the caller for the meter's life;
  // its subtree's processes are listed through it, never by path.
  LeaseMeter(const fs::Root& proc, const fs::Root& sys, const cgroup::Cgroup& cg,
             std::optional<std::uint64_t> gpuMemoryMax);
  // The sampler tick's snapshot (devices, KFD index, kernel: read once for
  // all leases), asked for only when this sample walks fdinfo (a lease
  // metered by a steady charge needs none); without it the sample reads its
  // own.
  using SnapshotSource = std::function<host::Snapshot&()>;
  void sample(const SnapshotSource& host = {});
  // How many cgroups the next fdinfo walk may visit (the daemon's budget of
  // its owner's walks this round; `budgetName` is what a refusal names), and
  // how many the last sample's walk visited (0: it did not walk).
  void limitWalk(std::size_t maxCgroups, std::string budgetName) {
    walkLimit_ = maxCgroups;
    walkBudget_ = std::move(budgetName);
  }
  std::size_t cgroupsWalked() const { return cgroupsWalked_; }
  // The size of its tree as its last walk found it (0: never walked): the
  // sampler walks a user's narrow leases first, so one wide tree cannot
  // leave her others unmetered.
  std::size_t lastWalkSize() const { return lastWalkSize_; }
  // Follow the lease's tree with the daemon's inotify instance
  // (cgroup/tree_watch.h), drawing on `owner`'s share of its watches: a walk
  // then opens only the cgroups where something runs or changed, so a wide
  // tree costs at its changes. Every kSteadyWalkEvery walks the index looks
  // at every cgroup again (cgroup::SubtreeIndex::recheck). Null: every walk
  // is whole.
  void followTree(cgroup::TreeWatcher* watcher, uid_t owner) {
    index_ = watcher ? std::make_unique<cgroup::SubtreeIndex>(*watcher, cgroup_, owner) : nullptr;
  }
  const cgroup::SubtreeIndex* treeIndex() const { return index_.get(); }
  // The kernel's memory.stat names the GPU bytes it charged (gpu_active,
  // dmem: coverage::Handover::statNamesGpu): read them every sample.
  void readStatGpu(bool on) { readStatGpu_ = on; }
  // The lease's GPU figure is the kernel's charge of cgroup `cgroupId`
  // (buffers its tasks created, whoever holds them): no fd trick hides it.
  // fdinfo is the second source and the floor: a sample that walks it takes
  // the larger of the two. `carried`: the charge as it was when the lease was
  // armed, when it took over one an earlier lease of the cgroup left (its
  // refusals and peak are not this lease's).
  void useKernelCharge(const bpf::KernelCharge* charge, std::uint64_t cgroupId,
                       std::optional<bpf::LeaseCharge> carried = std::nullopt) {
    kernel_ = charge;
    kernelCgroup_ = cgroupId;
    carried_ = carried;
  }
  // Between samples: the charge's counters (refusals, peak) read now; the
  // figures the bound acts on change only at a sample.
  void readKernelCharge() {
    if (!kernel_) return;
    if (auto c = kernel_->read(kernelCgroup_)) gpu_.kernel = own(*c);
  }
  // fdinfo is walked when the charge moves or a task moved into the lease,
  // every sample while the last walk found more than the charge (fdinfo is
  // then the figure), after 1, 2, 4, ... samples while it found less (a
  // buffer is charged before its handle shows in fdinfo), and otherwise once
  // in kSteadyWalkEvery samples (a buffer passed in counts within ten
  // minutes at the default 1 s; a walk costs what ~250 steady samples do,
  // docs/PERFORMANCE.md).
  static constexpr unsigned kSteadyWalkEvery = 600;
  const HostMeter& host() const { return host_; }
  const GpuMeter& gpu() const { return gpu_; }
  // CLOCK_REALTIME of the latest sample(); absent before the first.
  std::optional<std::uint64_t> sampledAtNs() const { return sampledAtNs_; }

 private:
  void sampleHost(std::uint64_t nowNs);
  void sampleGpu(std::uint64_t nowNs, const SnapshotSource& host);
  void sampleFdinfo(host::Snapshot& host);  // the DRM fdinfo (and KFD) sum
  const fs::Root& proc_;
  const fs::Root& sys_;
  const cgroup::Cgroup& cgroup_;
  bool readStatGpu_ = false;
  std::size_t walkLimit_ = cgroup::SubtreeLimits{}.maxCgroups;
  std::string walkBudget_;
  std::size_t cgroupsWalked_ = 0;
  std::size_t lastWalkSize_ = 0;
  // The charge as this lease's own: counters net of what was carried.
  bpf::LeaseCharge own(const bpf::LeaseCharge& c) const;
  const bpf::KernelCharge* kernel_ = nullptr;
  std::uint64_t kernelCgroup_ = 0;
  std::optional<bpf::LeaseCharge> carried_;
  std::optional<std::uint64_t> chargeAtWalk_;  // the charge when fdinfo was last walked
  std::uint64_t movedInAtWalk_ = 0;            // the charge's moved-in count then
  unsigned disagreeingWalks_ = 0;  // walks since the charge moved whose sum differed from it
  unsigned samplesSinceWalk_ = 0;
  std::optional<std::uint64_t> gpuMemoryMax_;
  HostMeter host_;
  GpuMeter gpu_;
  std::optional<std::uint64_t> sampledAtNs_;
  // The lease's processes held open between samples (scanner/scan.h).
  scanner::ProcHandles handles_;
  std::unique_ptr<cgroup::SubtreeIndex> index_;
  unsigned walksSinceIndexed_ = 0;
};

}  // namespace tally::lease
