#include "daemon/sampler.h"

#include <fmt/format.h>
#include <signal.h>
#include <syslog.h>

#include "bpf/gpu_charge_abi.h"
#include "daemon/endings.h"
#include "gpumem/gpu_memory.h"
#include "util/clock.h"
#include "util/units.h"

namespace tally::daemon {

Status Sampler::arm(Lease& l, bool recovered) {
  if (!env_.charge || !l.place.inode) return Ok{};
  // The programs find a lease among a task's cgroup ancestors by level, in
  // the first TALLY_MAX_CGROUP_DEPTH levels: one deeper would be armed and
  // never charged nor refused.
  std::size_t level = 0;
  for (char c : l.place.cgroup) level += c == '/';
  if (l.place.cgroup == "/") level = 0;
  if (level > TALLY_MAX_CGROUP_DEPTH)
    return Error{E2BIG, fmt::format("cgroup {} is {} levels deep: the kernel charge finds "
                                    "a lease in the first {} levels only, so its buffers would be "
                                    "charged to no lease and never refused. Attach the cgroup "
                                    "that holds the workload nearer the root",
                                    l.place.cgroup, level, TALLY_MAX_CGROUP_DEPTH)};
  bpf::ArmSpec spec{l.plan().kernelLimit, 0, cfg_.kernelObjectsPerLease};
  if (!l.parent.empty())
    if (const Lease* p = book_.find(l.parent)) spec.parent = p->metering().kernelArmed;
  // A charge already there that is not this lease's own (an earlier lease of
  // the same cgroup left buffers): its bytes are carried, its counters not.
  std::optional<bpf::LeaseCharge> carried;
  if (!recovered) carried = env_.charge->read(l.place.inode);
  if (auto s = env_.charge->arm(l.place.inode, spec); !s)
    return Error{s.error().code, fmt::format("lease {} ({}) cannot be charged in the kernel: {}",
                                             l.id, l.name(), s.error().message)};
  l.metering_.kernelArmed = l.place.inode;
  l.metering_.kernelCarried = carried;
  return Ok{};
}

void Sampler::startMetering(Lease& l) {
  l.metering_.meter =
      std::make_unique<lease::LeaseMeter>(env_.proc, env_.sys, *l.place.cg, l.plan().bound.max);
  l.metering_.meter->readStatGpu(handover_.statNamesGpu);
  l.metering_.meter->followTree(env_.treeWatcher, l.owner);
  // Its figure is its charge, with fdinfo (walked as the meter decides) as
  // the floor: buffers made before it was armed, by a task moved in, or
  // passed in count as its processes hold them.
  if (env_.charge && l.metering_.kernelArmed)
    l.metering_.meter->useKernelCharge(env_.charge, l.metering_.kernelArmed,
                                       l.metering_.kernelCarried);
  l.metering_.meter->sample([this]() -> host::Snapshot& { return host_.fresh(); });
  readFigures(l, now());
  l.metering_.pace = {};
  l.metering_.pace.sampled(cadence(), l.plan().pacedMax(l.metering_.boundState),
                           l.metering_.meter->gpu().lastBytes, now());
  std::string events = fmt::format("{}/{}", env_.cgroupRoot->path(),
                                   fs::joinPath(l.place.countersCgroup, cgroup::file::kEvents));
  if (auto s = env_.watches.watch(l.id, events); !s) {
    events_.note(LOG_WARNING,
                 fmt::format("lease {}: cannot watch {}: {}; its end is found by polling", l.id,
                             events, s.error().message),
                 {{"TALLY_LEASE", l.id}});
  }
  // An attached workload's cgroup may be removed (by systemd) before its
  // lease ends: its counters are read at each OOM event too, not only at the end.
  if (l.isAttach()) {
    std::string memoryEvents =
        fmt::format("{}/{}", env_.cgroupRoot->path(),
                    fs::joinPath(l.place.countersCgroup, cgroup::file::kMemoryEvents));
    if (auto s = env_.watches.watch(l.id, memoryEvents); !s)
      events_.note(LOG_WARNING,
                   fmt::format("lease {}: cannot watch {}: {}; its OOM kills are read at its end "
                               "only",
                               l.id, memoryEvents, s.error().message),
                   {{"TALLY_LEASE", l.id}});
  }
}

void Sampler::readFigures(Lease& l, std::uint64_t monoUs) {
  auto& f = l.metering_.figures;
  if (!l.place.cg || !l.place.countersCg) return;
  // Near its bound a lease is sampled every 50 ms; what people read of it
  // moves at a human pace.
  if (f.readAtUs && monoUs < f.readAtUs + 1'000'000) return;
  f.readAtUs = monoUs ? monoUs : 1;
  f.memoryPeak = l.place.countersCg->memoryPeak();
  f.memoryMax = l.place.cg->memoryMax();
  if (l.place.countersCgroup != l.place.cgroup)
    f.sliceMemoryMax = l.place.countersCg->memoryMax();
  else
    f.sliceMemoryMax.reset();
}

std::vector<std::string> Sampler::sample() {
  const std::uint64_t mono = this->now();
  std::uint64_t now = clock::realtimeNs();
  // A timer fires up to its accuracy (10 ms) late, never early; a lease due
  // within a few ms is sampled now rather than on a timer of its own.
  constexpr std::uint64_t kSlackUs = 5'000;
  const enforce::Cadence cad = cadence();
  std::vector<std::string> ended;
  std::vector<ledger::Sample> batch;
  // One host snapshot per tick for every lease's scan, read at the first
  // scan (an idle daemon, or one whose leases' charges hold still, reads
  // nothing).
  host::Snapshot* snapshot = nullptr;
  auto tickSnapshot = [&]() -> host::Snapshot& {
    if (!snapshot) snapshot = &host_.fresh();
    return *snapshot;
  };
  std::size_t early = 0;
  // Cgroups walked this round, per owner (root not counted): a user's wide
  // trees cost the round a bounded amount, and others' leases are walked.
  std::map<uid_t, std::size_t> walked;
  if (env_.charge) noteRefusals(mono, now);
  // What changed in the leases' trees since the last round, onto their indexes.
  if (env_.treeWatcher) env_.treeWatcher->drain();
  // Narrow trees first (by the size each lease's last walk found), so a
  // user's walk budget meters as many of her leases as it can and one wide
  // tree never leaves her others unmetered; lease-id order among equals.
  std::vector<std::pair<const std::string*, Lease*>> order;
  for (const auto& [id, lp] : book_.all())
    if (lp->state() == Lease::State::Running && lp->metering_.meter)
      order.emplace_back(&id, lp.get());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->metering_.meter->lastWalkSize() < b.second->metering_.meter->lastWalkSize();
  });
  for (const auto& [idp, lp] : order) {
    const std::string& id = *idp;
    Lease& l = *lp;
    if (l.metering_.pace.nextUs > mono + kSlackUs) continue;  // not due
    // Due before its sample_interval because it is near its bound: at most
    // kEarlySamplesPerRound such leases per round; the rest keep
    // sample_interval this once, so many leases near their bounds cost a
    // bounded amount per round and none is sampled less than normally.
    auto& pace = l.metering_.pace;
    if (pace.lastUs && mono + kSlackUs < pace.lastUs + cad.normalUs &&
        early++ >= kEarlySamplesPerRound) {
      pace.nextUs = pace.lastUs + cad.normalUs;
      continue;
    }
    const std::size_t budget = env_.cgroupsWalkedPerUid;
    if (l.owner != 0 && budget) {
      std::size_t spent = walked[l.owner];
      l.metering_.meter->limitWalk(spent < budget ? budget - spent : 0,
                                   fmt::format("max_cgroups_walked_per_uid = {}", budget));
    }
    l.metering_.meter->sample(tickSnapshot);
    readFigures(l, mono);
    if (l.owner != 0) walked[l.owner] += l.metering_.meter->cgroupsWalked();
    const auto& h = l.metering_.meter->host();
    const auto& g = l.metering_.meter->gpu();
    noteFdinfoAbove(l);
    // The bound's message names the spacing its samples really had.
    const std::uint64_t spacingUs =
        l.metering_.pace.sampled(cad, l.plan().pacedMax(l.metering_.boundState), g.lastBytes, mono);
    if (l.plan().bound.any()) enforceBound(l, spacingUs, now);
    // A missed inotify event (or none possible) is caught here.
    if (l.isAttach() && Endings::over(l)) ended.push_back(id);
    // Stored rows keep sample_interval's resolution however fast it was sampled.
    if (l.metering_.lastRowUs != 0 && mono + kSlackUs < l.metering_.lastRowUs + cad.normalUs)
      continue;
    l.metering_.lastRowUs = mono;
    ledger::Sample s{id, now, h.last, g.lastBytes, {}};
    if (g.lastBytes) s.byClass = gpumem::bytesByClass(g.lastRegions, g.lastClasses);
    batch.push_back(std::move(s));
  }
  if (batch.empty()) return ended;  // only fast samples this time: nothing to store
  // A refusal is said once by LeaseEvents::ledgerHealth, not at every sample.
  (void)ledger_.appendSamples(batch);
  return ended;
}

std::uint64_t Sampler::nextSampleDelayUs() const {
  const std::uint64_t mono = now();
  std::uint64_t delay = cfg_.sampleIntervalUs;
  for (const auto& [id, lp] : book_.all()) {
    const Lease& l = *lp;
    if (l.state() != Lease::State::Running || !l.metering_.meter) continue;
    delay = std::min(delay, l.metering_.pace.nextUs > mono ? l.metering_.pace.nextUs - mono : 0);
  }
  return delay;
}

// One sample of a lease through its GPU bound: kill first (the lease's
// cgroup and nothing else: KillUnit when systemd owns it, which would
// otherwise restart or mis-account a unit killed behind its back; else
// cgroup.kill), then record. A run lease's client enforces the same bound;
// the daemon enforces it too, so a client that does not (an old or a hostile
// one) holds no more than it declared.
//
// A lease with child leases kills its children's cgroups, not its own: a
// Slurm job's cgroup holds slurmstepd beside the steps' tasks, and the
// workload is in the steps. A placed lease (its scheduler's cgroup: a Slurm
// job's, slurmstepd in it) never kills its own cgroup: without a child lease
// to take, the kill is not done (said once; its allocations are still
// refused in the kernel) and it is tried again at the next sample over.
// Children are the child leases whose cgroups have processes.
void Sampler::enforceBound(Lease& l, std::uint64_t spacingUs, std::uint64_t nowNs) {
  const auto& g = l.metering_.meter->gpu();
  enforce::GpuBound bound = l.plan().bound;
  bound.sampleIntervalUs = spacingUs;
  // Looked up only when the bound kills (not at every sample of every lease).
  std::vector<Lease*> children;
  auto killed = enforce::drive(
      bound, l.metering_.boundState, g.lastBytes, g.lastSource, nowNs,
      {[&]() -> Status {
         // Only a child with processes holds a workload: one kept empty (a
         // Slurm extern step's user part with no ssh session) is not killed,
         // and its end does not say it was. A parent with children never
         // kills its own cgroup, even when every child is empty.
         bool anyChild = false;
         for (const auto& [id, c] : book_.all()) {
           if (c->parent != l.id || !c->place.cg) continue;
           anyChild = true;
           if (Endings::populated(*c)) children.push_back(c.get());
         }
         if (!children.empty()) {
           Status all = Ok{};
           for (Lease* c : children)
             if (auto s = c->place.cg->kill(); !s && all) all = s;
           return all;
         }
         if (l.req.placed)
           return Error{EPERM,
                        "it was placed by the site's scheduler, whose own processes share its "
                        "cgroup (slurmstepd), and no child lease holds a workload to kill"};
         if (anyChild)
           return Error{ESRCH,
                        "its child leases hold no process to kill, and a parent never kills its "
                        "own cgroup while it has children"};
         return !l.place.unit.empty() && env_.units ? env_.units->killUnit(l.place.unit, SIGKILL)
                                                    : l.place.cg->kill();
       },
       // A failed kill is its own event (gpu-memory-kill-failed: a row, the
       // journal at LOG_ERR, subscribers, the counter), once per run over the
       // bound: it was once a log line at every sample, 320 in 20 s.
       [&](const enforce::BoundEvent& e) { events_.bound(l, e, g.lastSource); }, nullptr});
  if (!killed) return;
  l.killedByTally(*killed);
  for (Lease* c : children)
    c->killedByTally(
        fmt::format("killed with its parent lease {} ({}): {}", l.id, l.name(), *killed));
}

void Sampler::noteFdinfoAbove(Lease& l) {
  const auto& g = l.metering_.meter->gpu();
  if (g.walksFdinfoAbove == 0) l.metering_.fdinfoAboveSaid = false;
  if (g.walksFdinfoAbove < kLastingWalks || l.metering_.fdinfoAboveSaid || !g.kernel) return;
  l.metering_.fdinfoAboveSaid = true;
  events_.note(4,
               fmt::format("lease {} ({}): its processes hold {} of GPU memory by fdinfo, the "
                           "kernel charged it {}: buffers made outside the lease (before it was "
                           "armed, by a task moved in, or passed in) count at fdinfo's figure",
                           l.id, l.name(), units::humanBytes(g.lastFdinfoBytes.value_or(0)),
                           units::humanBytes(g.kernel->bytes)),
               {{"TALLY_LEASE", l.id},
                {"TALLY_EVENT", "gpu-fdinfo-above-charge"},
                {"TALLY_GPU_BYTES", std::to_string(g.lastFdinfoBytes.value_or(0))},
                {"TALLY_KERNEL_CHARGE_BYTES", std::to_string(g.kernel->bytes)}});
}

void Sampler::noteRefusals(std::uint64_t mono, std::uint64_t nowNs) {
  std::vector<bpf::Refusal> refusals = env_.charge->refusals();
  for (const bpf::Refusal& r : refusals) {
    for (const auto& [id, lp] : book_.all()) {
      Lease& l = *lp;
      if (l.metering_.kernelArmed != r.lease) continue;
      const bool failsafe = r.reason != static_cast<std::uint32_t>(bpf::RefusalReason::Bound);
      l.metering_.refusals.add({r.requestedBytes, r.chargedBytes, r.pid, failsafe,
                                failsafe ? bpf::reasonName(r.reason) : ""});
      break;
    }
  }
  for (const auto& [id, lp] : book_.all())
    if (lp->metering_.refusals.unsaid()) sayRefusals(*lp, mono, nowNs);
}

void Sampler::refreshCharge(Lease& l, Lease* parent) {
  auto armed = [](const Lease* x) {
    return x && x->metering_.kernelArmed && x->metering_.meter != nullptr;
  };
  if (!env_.charge || (!armed(&l) && !armed(parent))) return;
  noteRefusals(now(), clock::realtimeNs());
  for (Lease* x : {&l, parent})
    if (armed(x)) x->metering_.meter->readKernelCharge();
}

void Sampler::finalRefusals(Lease& l) {
  if (!env_.charge || !l.metering_.kernelArmed) return;
  const std::uint64_t mono = now(), nowNs = clock::realtimeNs();
  noteRefusals(mono, nowNs);
  if (l.metering_.refusals.unsaid()) sayRefusals(l, mono, nowNs, true);
}

void Sampler::sayRefusals(Lease& l, std::uint64_t mono, std::uint64_t nowNs, bool now) {
  enforce::RefusalLog& log = l.metering_.refusals;
  if (!now && !log.due(mono, kRefusalEventUs)) return;
  events_.bound(l, log.say(l.plan().bound.max.value_or(0), mono, nowNs), "kernel-charge");
}

}  // namespace tally::daemon
