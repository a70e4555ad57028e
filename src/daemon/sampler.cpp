#include "daemon/sampler.h"

#include <fmt/format.h>
#include <signal.h>

#include "util/clock.h"

namespace tally::daemon {

void Sampler::startMetering(Lease& l) {
  l.meter = std::make_unique<lease::LeaseMeter>(env_.proc, env_.sys, *l.cg, l.req.gpuMemoryMax);
  l.meter->readStatGpu(handover_.statNamesGpu);
  l.meter->sample(&freshHost());
  l.pace = {};
  l.pace.sampled(cadence(), paced(l), l.meter->gpu().lastBytes, now());
  std::string events = fmt::format("{}/{}", env_.cgroupRoot->path(),
                                   fs::joinPath(l.countersCgroup, cgroup::file::kEvents));
  if (auto s = env_.watches.watch(l.id, events); !s) {
    fmt::print(stderr, "tally daemon: lease {}: cannot watch {}: {}; its end is found by polling\n",
               l.id, events, s.error().message);
  }
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
  // lease due (an idle daemon reads nothing).
  host::Snapshot* snapshot = nullptr;
  for (const auto& [id, lp] : book_.all()) {
    Lease& l = *lp;
    if (l.state != Lease::State::Running || !l.meter) continue;
    if (l.pace.nextUs > mono + kSlackUs) continue;  // not due
    if (!snapshot) snapshot = &freshHost();
    l.meter->sample(snapshot);
    const auto& h = l.meter->host();
    const auto& g = l.meter->gpu();
    // The bound's message names the spacing its samples really had.
    l.bound.sampleIntervalUs = l.pace.sampled(cad, paced(l), g.lastBytes, mono);
    if (l.isAttach() && l.bound.any()) enforceBound(l, now);
    // A missed inotify event (or none possible) is caught here.
    if (l.isAttach()) {
      auto p = l.countersCg ? l.countersCg->populated() : Result<bool>(false);
      if (!p || !*p) ended.push_back(id);
    }
    // Stored rows keep sample_interval's resolution however fast it was sampled.
    if (l.lastRowUs != 0 && mono + kSlackUs < l.lastRowUs + cad.normalUs) continue;
    l.lastRowUs = mono;
    ledger::Sample s{id, now, h.last, g.lastBytes, std::nullopt, std::nullopt};
    if (g.lastBytes) {
      auto get = [&](const char* r) -> std::optional<std::uint64_t> {
        auto it = g.lastRegions.find(r);
        return it == g.lastRegions.end() ? std::optional<std::uint64_t>() : it->second;
      };
      s.gttBytes = get("gtt");
      s.vramBytes = get("vram");
    }
    batch.push_back(std::move(s));
  }
  if (batch.empty()) return ended;  // only fast samples this time: nothing to store
  if (auto st = ledger_.appendSamples(batch); !st)
    fmt::print(stderr, "tally daemon: {}\n", st.error().message);
  return ended;
}

std::uint64_t Sampler::nextSampleDelayUs() const {
  const std::uint64_t mono = now();
  std::uint64_t delay = cfg_.sampleIntervalUs;
  for (const auto& [id, lp] : book_.all()) {
    const Lease& l = *lp;
    if (l.state != Lease::State::Running || !l.meter) continue;
    delay = std::min(delay, l.pace.nextUs > mono ? l.pace.nextUs - mono : 0);
  }
  return delay;
}

void Sampler::prune() {
  auto r = ledger_.pruneSamples(clock::realtimeNs(), cfg_.samplesFullResolutionUs * 1000,
                                cfg_.samplesMaxAgeUs * 1000, cfg_.samplesMaxRows);
  if (!r) fmt::print(stderr, "tally daemon: sample retention: {}\n", r.error().message);
}

// One sample of an attached lease through its GPU bound: kill first (the
// lease's cgroup and nothing else: KillUnit when systemd owns it, which
// would otherwise restart or mis-account a unit killed behind its back; else
// cgroup.kill), then record.
void Sampler::enforceBound(Lease& l, std::uint64_t nowNs) {
  const auto& g = l.meter->gpu();
  auto killed = enforce::drive(
      l.bound, l.boundState, g.lastBytes, g.lastSource, nowNs,
      {[&] {
         return !l.unit.empty() && env_.units ? env_.units->killUnit(l.unit, SIGKILL)
                                              : l.cg->kill();
       },
       [&](const enforce::BoundEvent& e) { events_.bound(l, e, g.lastSource); },
       [&](const std::string& why) {
         events_.note(3,
                      fmt::format("lease {} ({}): could not kill it over its gpu_memory_max: {}",
                                  l.id, l.name, why),
                      {{"TALLY_LEASE", l.id}});
       }});
  if (killed) l.tallyKill = *killed;
}

host::Snapshot& Sampler::freshHost() {
  host_.emplace(host::readSnapshot(env_.proc, env_.sys, env_.pageSize));
  return *host_;
}

const host::Snapshot& Sampler::host() {
  if (host_ && clock::monotonicUs() - host_->readAtUs <= 100'000) return *host_;
  return freshHost();
}

admission::Headroom Sampler::headroomFor(const config::Pool& pool) {
  const host::Snapshot& h = host();
  std::vector<HolderUse> holders;
  for (const auto& id : book_.engine().usage(pool.name).holders) {
    const Lease* l = book_.find(id);
    if (!l) continue;
    HolderUse u;
    u.memoryMax = l->req.memoryMax;
    u.gpuMemoryMax = l->req.gpuMemoryMax;
    if (l->meter) {
      u.memoryInUse = hostOnly(*l);
      u.gpuInUse = l->meter->gpu().lastBytes;
    }
    holders.push_back(u);
  }
  return poolHeadroom(pool, h, holders);
}

std::optional<std::uint64_t> Sampler::paced(const Lease& l) const {
  // Only the daemon's own bound (attached leases) is sampled faster near its
  // line; a run lease's client enforces its bound, at the same cadence.
  return l.isAttach() ? l.bound.max : std::nullopt;
}

std::optional<std::uint64_t> Sampler::hostOnly(const Lease& l) const {
  if (!l.meter) return std::nullopt;
  // What the kernel charges once it charges GTT: the host-uncharged regions
  // (gtt, amdgpu's cpu, xe's system), not host-charged shmem, which
  // memory.current always held and the GPU figure never counts.
  return handover_.hostOnly(l.meter->host().last, l.meter->host().lastStatGpu,
                            l.meter->gpu().lastHostUncharged);
}

}  // namespace tally::daemon
