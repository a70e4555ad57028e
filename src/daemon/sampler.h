// Metering the daemon's running leases: at each lease's pace (every
// sample_interval, faster near a bound) its meter reads its cgroup and the DRM
// fdinfo of its processes against one host snapshot per tick, the samples go
// to the ledger in one transaction, and each lease's GPU bound takes its step
// (enforce::drive, as tally run's does; the daemon kills through systemd or
// cgroup.kill, for run leases as for attached ones).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "admission/engine.h"
#include "bpf/kernel_charge.h"
#include "cgroup/tree_watch.h"
#include "config/config.h"
#include "coverage/handover.h"
#include "daemon/lease.h"
#include "daemon/lease_book.h"
#include "daemon/lease_events.h"
#include "daemon/seams.h"
#include "enforce/cadence.h"
#include "fs/root.h"
#include "host/snapshot.h"
#include "ledger/ledger.h"
#include "util/clock.h"

namespace tally::daemon {

struct SamplerEnv {
  const fs::Root& proc;
  const fs::Root& sys;
  const fs::Root* cgroupRoot;
  Watches& watches;
  Units* units;
  std::uint64_t (*monotonicUs)() = nullptr;  // the cadence's clock; null: the real one
  bpf::KernelCharge* charge = nullptr;       // the kernel charge; null: off
  // Cgroups one user's leases' fdinfo walks may visit per sample round
  // (Limits::maxCgroupsWalkedPerUid; 0: no budget).
  std::size_t cgroupsWalkedPerUid = 0;
  // The one inotify instance that follows every lease's tree
  // (cgroup/tree_watch.h); null: each walk is whole.
  cgroup::TreeWatcher* treeWatcher = nullptr;
};

class Sampler {
 public:
  Sampler(const config::Daemon& cfg, SamplerEnv env, ledger::Ledger& ledger, LeaseBook& book,
          LeaseEvents& events, host::SnapshotCache& host, const coverage::Handover& handover)
      : cfg_(cfg),
        env_(env),
        ledger_(ledger),
        book_(book),
        events_(events),
        host_(host),
        handover_(handover) {}

  // The kernel's state a lease's plan is made for: the hand-over, and
  // whether the kernel charge refuses allocations here.
  enforce::KernelState kernelState() const {
    return handover_.kernelState(env_.charge && env_.charge->capabilities().refusing);
  }
  // Arms the lease in the kernel's charge once its cgroup is placed, before
  // it is granted or started: the error says why the kernel's charge cannot
  // cover it (its cgroup deeper than the lease lookup walks, no room in the
  // maps), and the lease must not run blind. `recovered`: re-adopted after a
  // restart (its charge is its own; an earlier lease's carried charge is not).
  Status arm(Lease& l, bool recovered = false);
  // A lease re-adopted after a restart whose cgroup is gone: the kernel's
  // entry for `cgroupId`, if any, is its (retired under its name at its end).
  void claimCharge(Lease& l, std::uint64_t cgroupId) {
    if (env_.charge && cgroupId && env_.charge->read(cgroupId)) l.metering_.kernelArmed = cgroupId;
  }
  // A lease starts being metered: its meter (on its held cgroup, from its
  // kernel charge when armed), a first sample, and an inotify watch on its
  // cgroup.events for its end.
  void startMetering(Lease& l);
  // What the views show of a lease's cgroup (Lease::Metering::figures), read
  // when it was last read a second or more before `monoUs`.
  static void readFigures(Lease& l, std::uint64_t monoUs);
  // Meters every running lease that is due (each has its own cadence:
  // enforce/cadence.h), stores a sample row per lease at most once per
  // sample_interval, takes each lease's GPU bound step. Returns the
  // attached leases whose cgroup emptied (caught here when an inotify event
  // was missed).
  std::vector<std::string> sample();
  // How long until the next lease is due: sample_interval when none is near
  // its bound (or none runs).
  std::uint64_t nextSampleDelayUs() const;
  // Refusals of one lease said (ledger, journal, subscribers) at most once
  // per this long, each event carrying the count since the last: a program
  // retrying an allocation in a loop writes a row a minute, not a row each.
  static constexpr std::uint64_t kRefusalEventUs = 60'000'000;
  // A lease ends: the refusals the kernel queued for it are said now,
  // whatever the minute's rate says (its outcome comes next).
  void finalRefusals(Lease& l);
  // The lease's kernel charge read now (its refusal counters current), and
  // its parent's when one is given, and the refusals waiting in the kernel
  // noted once (said at most once a minute).
  void refreshCharge(Lease& l, Lease* parent = nullptr);
  // Leases sampled before their sample_interval (near a bound) per round.
  static constexpr std::size_t kEarlySamplesPerRound = 16;
  std::uint64_t now() const { return env_.monotonicUs ? env_.monotonicUs() : clock::monotonicUs(); }
  enforce::Cadence cadence() const {
    return {cfg_.sampleIntervalUs, cfg_.nearBoundIntervalUs, cfg_.nearBoundMarginPercent};
  }

 private:
  // One sample through the lease's planned bound; `spacingUs`: the spacing
  // its samples had, which the bound's message names.
  void enforceBound(Lease& l, std::uint64_t spacingUs, std::uint64_t nowNs);
  // A lease whose fdinfo stayed above its charge for kLastingWalks walks is
  // said once, with both figures (again after they agree and part again).
  static constexpr unsigned kLastingWalks = 3;
  void noteFdinfoAbove(Lease& l);
  // The kernel's refusals since the last round, onto their leases; each
  // lease's unsaid ones said when due (kRefusalEventUs).
  void noteRefusals(std::uint64_t mono, std::uint64_t nowNs);
  void sayRefusals(Lease& l, std::uint64_t mono, std::uint64_t nowNs, bool now = false);

  const config::Daemon& cfg_;
  SamplerEnv env_;
  ledger::Ledger& ledger_;
  LeaseBook& book_;
  LeaseEvents& events_;
  host::SnapshotCache& host_;
  const coverage::Handover& handover_;
};

}  // namespace tally::daemon
