#include "daemon/views.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "attribution/container.h"
#include "bpf/availability.h"
#include "ledger/rows.h"
#include "metrics/tally_metrics.h"
#include "rpc/messages.h"
#include "util/clock.h"
#include "util/json_view.h"

namespace tally::daemon {

using json = nlohmann::json;

namespace {

// A byte count read from the cgroup, or absent with the reason ("max" is no limit).
seats::Figure figure(const Result<std::uint64_t>& v) {
  return v ? seats::Figure{*v, {}} : seats::Figure{std::nullopt, v.error().message};
}

seats::Figure limitFigure(const Result<probes::MemoryLimit>& v, const char* file) {
  if (!v) return {std::nullopt, v.error().message};
  if (v->unlimited) return {std::nullopt, fmt::format("{} is max: no limit", file)};
  return {v->bytes, {}};
}

}  // namespace

json Views::lease(const Lease& l, const admission::Engine::Queued* queued, std::size_t index) {
  json j;
  j["lease"] = l.id;
  j["name"] = l.name();
  j["kind"] = lease::kindName(l.kind);
  j["state"] = stateName(l.state());
  j["owner_uid"] = l.owner;
  j["pools"] = l.req.pools;
  j["priority"] = l.req.priority;
  // The GPU max as its plan holds it: a child's is its parent's when that is
  // smaller (what the step's report, the listings and the metrics compare against).
  j["declared"] = {{"memory_max", jsonview::orNull(l.req.declaration.memoryMax)},
                   {"gpu_memory_max", jsonview::orNull(l.plan().bound.max)}};
  if (!l.attributes().empty()) j["attributes"] = lease::attributesJson(l.attributes());
  if (!l.parent.empty()) j["parent"] = l.parent;
  j["requested_at_ns"] = l.requestedAtNs;
  if (l.state() == Lease::State::Queued) {
    const auto& engine = book_.engine();
    auto position = queued ? std::optional<std::size_t>(index + 1) : engine.position(l.id);
    auto why = queued ? queued->reason : engine.waitReason(l.id);
    j["position"] = position ? json(*position) : json(nullptr);
    j["waiting_for"] = why ? json(admission::waitName(*why)) : json(nullptr);
    // What it waits for in one line, as its client hears it ("pool gpu is
    // full: 4 of 4 leases hold it"): top shows it on the queued row.
    if (!queued) headroomSeen_.clear();  // a lease asked for alone: measured now
    if (position && why)
      if (auto line = waitingLine(*position - 1); !line.empty()) j["waiting_detail"] = line;
  } else {
    j["granted_at_ns"] = l.grantedAtNs();
  }
  if (l.target && !l.target->empty()) j["target"] = ledger::targetJson(*l.target);
  if (!l.place.unit.empty()) j["unit"] = l.place.unit;
  if (!l.place.cgroup.empty()) {
    j["cgroup"] = l.place.cgroup;
    j["cgroup_inode"] = l.place.inode;
    j["started_at_ns"] = l.startedAtNs();
  }
  j["client_connected"] = l.client().conn != 0;
  if (l.ending().recovered) j["readopted_after_restart"] = true;
  if (l.ending().releaseRequested) j["release_requested"] = true;
  if (l.metering().meter) {
    const auto& h = l.metering().meter->host();
    const auto& g = l.metering().meter->gpu();
    j["memory"] = {{"current_bytes", jsonview::orNull(h.last)},
                   {"peak_sampled_bytes", jsonview::orNull(h.peakCurrent)},
                   {"samples", h.samples},
                   {"source", "cgroup"}};
    if (!h.last && h.lastError) j["memory"]["unknown"] = *h.lastError;
    j["gpu"] = {{"current_bytes", jsonview::orNull(g.lastBytes)},
                {"peak_bytes", jsonview::orNull(g.peakBytes)},
                {"regions", g.lastRegions},
                {"samples", g.samples},
                {"source", g.lastSource}};
    if (g.kernel) {
      j["gpu"]["fdinfo_bytes"] = jsonview::orNull(g.lastFdinfoBytes);
      j["gpu"]["allocations_refused"] = g.kernel->refused;
      j["gpu"]["refused_bytes"] = g.kernel->refusedBytes;
    }
    if (!g.lastBytes)
      j["gpu"]["unknown"] = g.lastError.value_or(
          g.samplesIncomplete ? "a client printed no resident figure" : "not sampled");
    // What budgets and headroom count: host and GPU memory, each byte once.
    auto host = measures_.hostOnly(l);
    j["budget_figures"] = {
        {"coverage", coverage::coverageName(handover_.coverage)},
        {"host_bytes", jsonview::orNull(host)},
        {"gpu_bytes", jsonview::orNull(g.lastBytes)},
        {"total_bytes", host && g.lastBytes ? json(*host + *g.lastBytes) : json(nullptr)}};
  }
  if (l.plan().bound.any()) {
    j["gpu_bound"] = {{"action", enforce::actionName(l.plan().bound.action)},
                      {"consecutive_samples", l.plan().bound.consecutive},
                      {"advisory", l.plan().advisory},
                      {"acted", l.metering().boundState.acted}};
    // Its kill, as recorded (the last: one per lease in practice), so a live
    // question as its tasks die says what killed them (the Slurm plugin's
    // step and job lines) before any outcome row exists.
    const auto& events = l.said().boundEvents;
    for (auto it = events.rbegin(); it != events.rend(); ++it)
      if (it->kind == enforce::Verdict::Kill) {
        j["gpu_bound"]["kill"] = enforce::boundEventJson(*it);
        break;
      }
  }
  // The kernel bounds GTT in MemoryMax now: a run lease's MemoryMax must hold both.
  if (l.plan().memoryMaxWithGpu) j["memory_max_effective"] = *l.plan().memoryMax;
  j["coverage"] = coverage::coverageName(handover_.coverage);
  return j;
}

rpc::api::LeaseReply Views::leaseReply(const Lease& l) {
  rpc::api::LeaseReply r;
  r.lease = l.id;
  r.name = l.name();
  r.kind = lease::kindName(l.kind);
  r.state = stateName(l.state());
  r.pools = l.req.pools;
  if (!l.place.unit.empty()) r.unit = l.place.unit;
  if (!l.place.cgroup.empty()) r.cgroup = l.place.cgroup;
  if (l.plan().memoryMaxWithGpu) r.memoryMaxEffective = l.plan().memoryMax;
  r.coverage = coverage::coverageName(handover_.coverage);
  r.gpuBoundAdvisory = l.plan().advisory;
  r.declaredMemoryMax = l.req.declaration.memoryMax;
  r.declaredGpuMemoryMax = l.plan().bound.max;
  r.view = lease(l);
  return r;
}

template <typename Row>
Views::Page Views::listing(const rpc::api::ListPage& page, Row row) {
  Page out;
  // One measure of each pool's headroom for the page's waiters, not one each.
  headroomSeen_.clear();
  const std::size_t limit = std::min<std::size_t>(page.limit.value_or(rpc::api::kMaxPageLeases),
                                                  rpc::api::kMaxPageLeases);
  const auto& all = book_.all();
  std::size_t live = 0, listed = 0;
  std::optional<std::string> next;
  for (const auto& [id, l] : all)
    if (l->state() != Lease::State::Queued) ++live;
  for (auto it = page.after ? all.upper_bound(*page.after) : all.begin(); it != all.end(); ++it) {
    const Lease& l = *it->second;
    if (l.state() == Lease::State::Queued) continue;
    if (listed == limit) {
      next = out.rows.back().value("lease", std::string());
      break;
    }
    out.rows.push_back(row(l, nullptr, 0));
    ++listed;
  }
  if (!page.after) {
    auto view = book_.engine().queueView();
    for (std::size_t i = 0; i < view.size() && i < kQueuedListed; ++i)
      if (const Lease* l = book_.find(view[i].req->id)) out.rows.push_back(row(*l, &view[i], i));
  }
  out.facts = {{"live", live}, {"listed", listed}, {"next", next ? json(*next) : json(nullptr)}};
  return out;
}

Views::Page Views::leases(const rpc::api::ListPage& page) {
  return listing(page, [&](const Lease& l, const admission::Engine::Queued* q, std::size_t i) {
    return lease(l, q, i);
  });
}

Views::Page Views::seatsPage(const rpc::api::ListPage& page, std::uint64_t nowNs) {
  return listing(page, [&](const Lease& l, const admission::Engine::Queued* q, std::size_t i) {
    seats::SeatFacts f = seatFacts(l);
    if (q) f.waiting = waitingLine(i);
    return seats::seatRow(f, nowNs, cfg_.daemon.sampleIntervalUs);
  });
}

std::string Views::waitingLine(std::size_t index) {
  auto headroom = [this](const config::Pool& p) {
    auto it = headroomSeen_.find(p.name);
    if (it == headroomSeen_.end())
      it = headroomSeen_.emplace(p.name, measures_.headroomFor(p)).first;
    return it->second;
  };
  return book_.waitAt(index, headroom).detail;
}

json Views::leasesReply(const rpc::api::ListPage& page) {
  auto p = leases(page);
  return {{"leases", std::move(p.rows)}, {"queued", queuedCounts()}, {"page", std::move(p.facts)}};
}

json Views::seatsReply(const rpc::api::ListPage& page, std::uint64_t nowNs) {
  auto p = seatsPage(page, nowNs);
  return {{"seats", std::move(p.rows)},
          {"queued", queuedCounts()},
          {"page", std::move(p.facts)},
          {"observed_at_ns", nowNs},
          {"sample_interval_us", cfg_.daemon.sampleIntervalUs}};
}

json Views::queuedCounts() const {
  std::size_t total = book_.queued();
  return {{"total", total}, {"listed", std::min(total, kQueuedListed)}};
}

json Views::liveLease(const Lease& l, const Lease* parent) {
  json r = lease(l);
  if (parent) r["parent_view"] = lease(*parent);
  return r;
}

json Views::leaseWithRows(const std::string& id) {
  json r;
  if (const Lease* l = book_.find(id)) r = lease(*l);
  // A lease's rows are few, except a run lease whose client reports bound
  // events for a month: the first rows (its grant and start) and the newest
  // are shown, and how many lie between.
  auto events = ledger_.leaseRows(id, kLeaseRowsFirst, kLeaseRowsLast);
  if (events && !events->rows.empty()) {
    r["ledger"] = ledger::eventRowsJson(events->rows);
    if (events->omitted) r["ledger_omitted"] = events->omitted;
    r["samples"] = ledger::chartSamplesJson(ledger_, id);
    if (!r.contains("state")) {
      r["lease"] = id;
      r["state"] = "ended";
    }
  }
  return r;
}

json Views::daemonSaw(const Lease& l) {
  json seen;
  if (l.metering().meter) {
    const auto& h = l.metering().meter->host();
    const auto& g = l.metering().meter->gpu();
    seen["samples"] = h.samples;
    seen["memory_peak_sampled_bytes"] = jsonview::orNull(h.peakCurrent);
    seen["gpu_samples"] = g.samples;
    seen["gpu_peak_bytes"] = jsonview::orNull(g.peakBytes);
    seen["source"] = "cgroup, drm-fdinfo";
  }
  if (l.place.countersCg) {
    auto counters = cgroup::readFinalCounters(*l.place.countersCg);
    if (counters.memoryPeak) seen["memory_peak_bytes"] = *counters.memoryPeak;
    if (counters.events) seen["oom_kill"] = jsonview::orNull(counters.events->get("oom_kill"));
  }
  if (l.said().clientReportsRefused) seen["bound_events_refused"] = l.said().clientReportsRefused;
  if (l.ending().recovered) seen["readopted_after_restart"] = true;
  return seen;
}

json Views::pools() {
  json list = json::array();
  const auto& engine = book_.engine();
  for (const auto& p : cfg_.pools) {
    const auto& u = engine.usage(p.name);
    json j;
    j["pool"] = p.name;
    j["capacity"] = p.capacity;
    j["holders"] = u.holders;
    json queued = json::array();
    std::size_t waiting = 0;
    for (const auto* r : engine.queue()) {
      if (std::find(r->pools.begin(), r->pools.end(), p.name) == r->pools.end()) continue;
      if (++waiting <= kQueuedListed) queued.push_back(r->id);
    }
    j["queue"] = queued;  // the first kQueuedListed, in grant order
    j["queue_length"] = waiting;
    j["memory_budget"] = jsonview::orNull(p.memoryBudget);
    j["memory_declared"] = u.memoryDeclared.value();
    j["gpu_memory_budget"] = jsonview::orNull(p.gpuMemoryBudget);
    j["gpu_memory_declared"] = u.gpuMemoryDeclared.value();
    // Held by buffers of the pool's ended leases: counted against its GPU budget.
    j["gpu_residue_bytes"] = u.gpuResidue;
    j["devices"] = p.devices;
    j["gtt_ceiling"] = devices::gttConsumerName(p.gttCeiling);  // which one its headroom reads
    auto h = measures_.headroomFor(p);
    j["headroom"] = {
        {"host_bytes", jsonview::orNull(h.hostBytes)},
        {"gpu_bytes", jsonview::orNull(h.gpuBytes)},
        {"source",
         "meminfo MemAvailable, sysfs-device mem_info_*, minus holders' unused declarations"}};
    if (!h.hostBytes) j["headroom"]["host_unknown"] = "MemAvailable not readable";
    if (!h.gpuBytes)
      j["headroom"]["gpu_unknown"] = "no device of the pool exports mem_info_gtt/vram_{total,used}";
    list.push_back(j);
  }
  return list;
}

seats::SeatFacts Views::seatFacts(const Lease& l) const {
  seats::SeatFacts f;
  f.lease = l.id;
  f.name = l.name();
  f.kind = lease::kindName(l.kind);
  f.state = stateName(l.state());
  f.pools = l.req.pools;
  f.owner = l.owner;
  f.parent = l.parent;
  f.unit = l.place.unit;
  f.cgroup = l.place.cgroup;
  if (!l.place.cgroup.empty()) {
    if (auto w = attribution::classifyCgroup(l.place.cgroup);
        w && w->kind != attribution::WorkloadKind::kSystemdUnit)
      f.container = w->name;
  }
  f.memoryMax = l.req.declaration.memoryMax;
  f.gpuMemoryMax = l.plan().bound.max;  // a child's may be its parent's
  f.gpuMemoryHigh = l.plan().bound.high;
  f.attributes = l.attributes();
  if (!l.place.countersCg) {
    f.populated = false;  // queued or granted: no cgroup, nothing runs in the lease
  } else if (auto p = l.place.countersCg->populated()) {
    // Read at the request, unlike the figures below: "running" must never
    // be a sample old (one read of cgroup.events).
    f.populated = *p;
  } else {
    f.populatedUnknown = p.error().message;
  }
  if (!l.metering().meter) return f;
  f.observedAtNs = l.metering().meter->sampledAtNs();
  const auto& h = l.metering().meter->host();
  const auto& g = l.metering().meter->gpu();
  f.hostCurrent = seats::Figure::of(
      h.last, h.lastError.value_or(std::string(cgroup::file::kMemoryCurrent) + " not read"));
  // The figures its sample read (Sampler::readFigures), never cgroupfs here.
  const auto& read = l.metering().figures;
  f.hostPeak = figure(read.memoryPeak);
  f.hostMax = limitFigure(read.memoryMax, cgroup::file::kMemoryMax);
  if (!f.hostMax.bytes && read.sliceMemoryMax) {
    // A run lease's MemoryMax may sit on its slice rather than its scope.
    if (auto slice = limitFigure(*read.sliceMemoryMax, cgroup::file::kMemoryMax); slice.bytes)
      f.hostMax = slice;
  }
  for (const auto& [region, bytes] : g.lastRegions) f.gpuRegions[region].currentBytes = bytes;
  for (const auto& [region, bytes] : g.regionPeaks) f.gpuRegions[region].peakBytes = bytes;
  for (const auto& [region, cls] : g.classesSeen)
    if (auto it = f.gpuRegions.find(region); it != f.gpuRegions.end()) it->second.memoryClass = cls;
  f.gpuCurrent = seats::Figure::of(
      g.lastBytes, g.lastError.value_or(g.samplesIncomplete ? "a client printed no resident figure"
                                                            : "not sampled"));
  f.gpuPeakBytes = g.peakBytes;
  f.gpuSource = g.lastSource;
  if (g.kernel) {
    f.kernelCharged = true;
    f.gpuFdinfoBytes = g.lastFdinfoBytes;
    f.gpuRefused = g.kernel->refused;
    f.gpuRefusedBytes = g.kernel->refusedBytes;
  }
  f.devices = g.lastDevices;
  return f;
}

// GPU memory outside every lease: what the devices say is in use minus what
// the leases' own clients hold (not the host-wide "unattributed" of `tally
// gpu`, which is what no process's fdinfo accounts for). Only when every
// running lease's figure is fresh and known.
json Views::devices(json& outsideLeases) {
  const host::Snapshot& host = host_.recent();
  json list = json::array();
  std::map<std::string, std::optional<std::uint64_t>>
      used;  // region -> sum over devices exporting it
  for (const auto& d : host.devices.devices) {
    json regions = json::object();
    for (const auto& m : d.memory) {
      regions[m.region] = {{"used_bytes", jsonview::orNull(m.usedBytes)},
                           {"total_bytes", jsonview::orNull(m.totalBytes)}};
      if (m.usedBytes && (m.region == "gtt" || m.region == "vram"))
        used[m.region] = used[m.region].value_or(0) + *m.usedBytes;
    }
    list.push_back({{"device", d.key},
                    {"driver", d.driver},
                    {"regions", regions},
                    {"source", "sysfs mem_info_*"}});
  }
  std::uint64_t now = clock::realtimeNs();
  std::optional<std::string> leaseUnknown;
  std::map<std::string, std::uint64_t> leased;
  for (const auto& [id, l] : book_.all()) {
    // A child's memory is its parent's too: counted there, once.
    if (l->state() != Lease::State::Running || !l->parent.empty()) continue;
    if (!l->metering().meter ||
        !seats::isFresh(l->metering().meter->sampledAtNs(), now, cfg_.daemon.sampleIntervalUs) ||
        !l->metering().meter->gpu().lastBytes) {
      leaseUnknown = fmt::format("lease {} has no fresh GPU figure", id);
      continue;
    }
    for (const auto& [region, bytes] : l->metering().meter->gpu().lastRegions)
      leased[region] += bytes;
  }
  outsideLeases = json::object();
  for (const char* region : {"gtt", "vram"}) {
    json u;
    auto it = used.find(region);
    if (it == used.end()) {
      u = {{"bytes", nullptr},
           {"unknown", fmt::format("no device exports mem_info_{}_used", region)}};
    } else if (leaseUnknown) {
      u = {{"bytes", nullptr}, {"unknown", *leaseUnknown}};
    } else if (leased[region] > *it->second) {
      u = {{"bytes", nullptr},
           {"unknown",
            "the leases' fdinfo resident exceeds the devices' counters (shared or imported "
            "buffers)"}};
    } else {
      u = {{"bytes", *it->second - leased[region]},
           {"device_used_bytes", *it->second},
           {"leases_bytes", leased[region]}};
    }
    outsideLeases[region] = u;
  }
  return list;
}

json Views::answer(rpc::api::Method m, std::uint64_t nowNs) {
  using rpc::api::Method;
  switch (m) {
    case Method::Leases:
      return leasesReply({});
    case Method::Pools:
      return {{"pools", pools()}};
    case Method::Seats:
      return seatsReply({}, nowNs);
    case Method::Overview:
      return overview(nowNs);
    case Method::Metrics:
      return rpc::api::encode(rpc::api::MetricsReply{metrics::renderOverview(overview(nowNs))});
    default:
      return json::object();
  }
}

json Views::overview(std::uint64_t nowNs) {
  json o;
  o["observed_at_ns"] = nowNs;
  o["sample_interval_us"] = cfg_.daemon.sampleIntervalUs;
  // The first page of seats (tally top, the per-lease metrics); "seats_page"
  // says how many live leases there are beyond it.
  auto first = seatsPage({}, nowNs);
  o["seats"] = std::move(first.rows);
  o["seats_page"] = std::move(first.facts);
  o["queued"] = queuedCounts();
  o["pools"] = pools();
  json outside;
  o["devices"] = devices(outside);
  o["outside_leases"] = outside;
  o["host"] = {{"mem_available_bytes", jsonview::orNull(host_.recent().meminfo.memAvailable)},
               {"source", "/proc/meminfo MemAvailable"}};
  o["coverage"] = {{"state", coverage::coverageName(handover_.coverage)},
                   {"kernel", coverageKernel_}};
  o["kernel_charge"] = kernelChargeState();
  json bound = json::object(), outcomes = json::object();
  for (const auto& [k, v] : events_.boundCounts()) bound[k] = v;
  for (const auto& [k, v] : events_.outcomeCounts()) outcomes[k] = v;
  json queueEnds = json::object();
  for (const auto& [k, v] : events_.queueEndCounts()) queueEnds[k] = v;
  json shortfalls = json::object();
  for (const auto& [k, c] : events_.shortfallCounts())
    shortfalls[k] = {{"grants", c.grants}, {"bytes", c.bytes}};
  o["enforcement"] = {{"gpu_bound_events", bound},
                      {"outcomes", outcomes},
                      {"placed_shortfalls", shortfalls},
                      {"queue_ends", queueEnds},
                      {"since_ns", events_.sinceNs()}};
  o["daemon"] = {{"pid", ::getpid()},           {"version", build_.version},
                 {"commit", build_.commit},     {"started_at_ns", events_.sinceNs()},
                 {"leases_live", book_.live()}, {"queued", book_.queued()}};
  o["daemon"]["containment"] = {{"possible", cannotContain_.empty()}, {"problems", cannotContain_}};
  auto failure = ledger_.writeFailure();
  o["ledger"] = {{"path", ledger_.path()},
                 {"writes", !failure.has_value()},
                 {"failure", failure ? json(*failure) : json()}};
  return o;
}

json Views::kernelChargeState() const {
  json kc = {{"charging", kernelCharge_.can.charging},
             {"refusing", kernelCharge_.can.refusing},
             {"line", bpf::describe(kernelCharge_)},
             {"why", kernelCharge_.why.empty() ? json() : json(kernelCharge_.why)}};
  if (!upkeep_) return kc;
  json ended = json::array();
  for (const auto& [id, e] : upkeep_->ended()) {
    ended.push_back({{"lease", e.lease.empty() ? json() : json(e.lease)},
                     {"name", e.name.empty() ? json() : json(e.name)},
                     {"pools", e.pools},
                     {"parent", e.parent.empty() ? json() : json(e.parent)},
                     {"cgroup_id", e.cgroupId},
                     {"bytes", e.bytes},
                     {"objects", e.objects},
                     {"ended_at_ns", e.endedAtNs ? json(e.endedAtNs) : json()}});
  }
  kc["ended_leases"] = ended;
  if (const auto& t = upkeep_->totals()) {
    kc["objects"] = t->objects;
    kc["objects_capacity"] = t->objectsCapacity;
    kc["objects_per_lease"] = t->objectsPerLease;
    kc["leases_capacity"] = t->leasesCapacity;
    json anomalies = json::object();
    for (const auto& [name, n] : KernelUpkeep::anomalies(*t)) anomalies[name] = n;
    kc["anomalies"] = anomalies;
  }
  json devices = json::array();
  for (const auto& d : upkeep_->devices())
    devices.push_back({{"node", fmt::format("{}:{}", d.major, d.minor)},
                       {"kind", d.kind},
                       {"charged", d.charged}});
  kc["devices"] = devices;
  return kc;
}

}  // namespace tally::daemon
