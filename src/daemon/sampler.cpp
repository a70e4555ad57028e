#include "daemon/sampler.h"

#include <fmt/format.h>
#include <signal.h>

#include "util/clock.h"

namespace tally::daemon {

void Sampler::startMetering(Lease& l) {
  l.meter = std::make_unique<lease::LeaseMeter>(env_.proc, env_.sys, *l.cg, l.req.gpuMemoryMax);
  l.meter->readStatGpu(handover_.statNamesGpu);
  l.meter->sample(&freshHost());
  l.lastSampleUs = now();
  l.previousGpuBytes = l.meter->gpu().lastBytes;
  l.nearBound = l.isAttach() && enforce::nearBound(cadence(), l.bound.max, l.meter->gpu().lastBytes,
                                                   std::nullopt, 0);
  l.nextSampleUs =
      l.lastSampleUs + (l.nearBound ? cfg_.nearBoundIntervalUs : cfg_.sampleIntervalUs);
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
    if (l.nextSampleUs > mono + kSlackUs) continue;  // not due
    if (!snapshot) snapshot = &freshHost();
    l.meter->sample(snapshot);
    const auto& h = l.meter->host();
    const auto& g = l.meter->gpu();
    // The cadence: only the daemon's own bound (attached leases) is sampled
    // faster; a run lease's client enforces its bound itself.
    const std::uint64_t spacingUs = mono - l.lastSampleUs;
    l.nearBound = l.isAttach() &&
                  enforce::nearBound(cad, l.bound.max, g.lastBytes, l.previousGpuBytes, spacingUs);
    l.previousGpuBytes = g.lastBytes;
    l.lastSampleUs = mono;
    l.nextSampleUs = mono + (l.nearBound ? cad.nearUs : cad.normalUs);
    // The bound's message names the spacing its samples really had.
    l.bound.sampleIntervalUs = std::max<std::uint64_t>(spacingUs / 1000, 1) * 1000;  // in ms
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
    delay = std::min(delay, l.nextSampleUs > mono ? l.nextSampleUs - mono : 0);
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
  auto step = enforce::step(l.bound, l.boundState, g.lastBytes, g.lastSource, nowNs);
  bool killFailed = false;
  if (step.kill) {
    Status s = !l.unit.empty() && env_.units ? env_.units->killUnit(l.unit, SIGKILL) : l.cg->kill();
    if (s) {
      l.tallyKill = step.killSummary;
    } else {
      enforce::killFailed(l.boundState);  // try again next sample
      killFailed = true;
      events_.note(3,
                   fmt::format("lease {} ({}): could not kill it over its gpu_memory_max: {}", l.id,
                               l.name, s.error().message),
                   {{"TALLY_LEASE", l.id}});
    }
  }
  for (const auto& e : step.events) {
    if (killFailed && e.kind == enforce::Verdict::Kill) continue;  // not done: not recorded as done
    events_.bound(l, e, g.lastSource);
  }
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

std::optional<std::uint64_t> Sampler::hostOnly(const Lease& l) const {
  if (!l.meter) return std::nullopt;
  // What the kernel charges once it charges GTT: the host-uncharged regions
  // (gtt, amdgpu's cpu, xe's system), not host-charged shmem, which
  // memory.current always held and the GPU figure never counts.
  return handover_.hostOnly(l.meter->host().last, l.meter->host().lastStatGpu,
                            l.meter->gpu().lastHostUncharged);
}

}  // namespace tally::daemon
