// The daemon's read-only views: seat rows, the overview (seats, pools,
// devices, unattributed GPU memory, coverage, counters) and the metrics made
// from it. Every figure is one the meters or sysfs gave; what was not read is
// absent with the reason.
#include <fmt/format.h>
#include <unistd.h>

#include "attribution/container.h"
#include "daemon/service.h"
#include "daemon/service_lease.h"
#include "metrics/tally_metrics.h"
#include "probes/sysfs_value.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::daemon {

using json = nlohmann::json;

namespace {

json opt(const std::optional<std::uint64_t>& v) { return v ? json(*v) : json(nullptr); }

// A cgroup file holding one byte count, or "max": absent with the reason.
seats::Figure readBytes(const fs::Root& root, const std::string& cgroup, const char* file) {
  auto t = root.read(fs::joinPath(cgroup, file), 64);
  if (!t) return {std::nullopt, t.error().message};
  std::string_view v = text::trim(*t);
  if (v == "max") return {std::nullopt, fmt::format("{} is max: no limit", file)};
  if (auto n = probes::parseSysfsU64(*t)) return {*n, {}};
  return {std::nullopt, fmt::format("{} reads '{}'", file, v.substr(0, 32))};
}

const char* stateName(int s) {
  static constexpr const char* kStates[] = {"queued", "granted", "running"};
  return kStates[s];
}

}  // namespace

seats::SeatFacts Service::seatFacts(const Lease& l) const {
  seats::SeatFacts f;
  f.lease = l.id;
  f.name = l.name;
  f.kind = l.kind;
  f.state = stateName(static_cast<int>(l.state));
  f.pools = l.req.pools;
  f.unit = l.unit;
  f.cgroup = l.cgroup;
  if (!l.cgroup.empty()) {
    if (auto w = attribution::classifyCgroup(l.cgroup); w && w->kind != attribution::WorkloadKind::kSystemdUnit) f.container = w->name;
  }
  f.memoryMax = l.req.memoryMax;
  f.gpuMemoryMax = l.req.gpuMemoryMax;
  f.gpuMemoryHigh = l.bound.high;
  f.attributes = l.attributes;
  if (l.cgroup.empty()) {
    f.populated = false;  // queued or granted: no cgroup, nothing runs in the lease
  } else if (auto p = readPopulated(l)) {
    f.populated = *p;
  } else {
    f.populatedUnknown = p.error().message;
  }
  if (!l.meter) return f;
  f.observedAtNs = l.meter->sampledAtNs();
  const auto& h = l.meter->host();
  const auto& g = l.meter->gpu();
  f.hostCurrent = seats::Figure::of(h.last, h.lastError.value_or("memory.current not read"));
  f.hostPeak = readBytes(*env_.cgroupRoot, l.countersCgroup, "memory.peak");
  f.hostMax = readBytes(*env_.cgroupRoot, l.cgroup, "memory.max");
  if (!f.hostMax.bytes && l.countersCgroup != l.cgroup) {
    // A run lease's MemoryMax may sit on its slice rather than its scope.
    if (auto slice = readBytes(*env_.cgroupRoot, l.countersCgroup, "memory.max"); slice.bytes) f.hostMax = slice;
  }
  for (const auto& [region, bytes] : g.lastRegions) f.gpuRegions[region].currentBytes = bytes;
  for (const auto& [region, bytes] : g.regionPeaks) f.gpuRegions[region].peakBytes = bytes;
  f.gpuCurrent = seats::Figure::of(g.lastBytes, g.lastError.value_or(g.samplesIncomplete ? "a client printed no resident figure" : "not sampled"));
  f.gpuPeakBytes = g.peakBytes;
  f.gpuSource = g.lastSource;
  f.devices = g.lastDevices;
  return f;
}

json Service::seats(std::uint64_t nowNs) {
  json rows = json::array();
  for (const auto& [id, l] : leases_) {
    if (l->state != Lease::State::Queued) rows.push_back(seats::seatRow(seatFacts(*l), nowNs, cfg_.daemon.sampleIntervalUs));
  }
  for (const auto* r : engine_.queue()) {
    if (const Lease* l = find(r->id)) rows.push_back(seats::seatRow(seatFacts(*l), nowNs, cfg_.daemon.sampleIntervalUs));
  }
  return rows;
}

json Service::devicesJson(json& unattributed) {
  refreshHost();
  json list = json::array();
  std::map<std::string, std::optional<std::uint64_t>> used;  // region -> sum over devices exporting it
  for (const auto& d : hostCache_->figures.devices.devices) {
    json regions = json::object();
    for (const auto& m : d.memory) {
      regions[m.region] = {{"used_bytes", opt(m.usedBytes)}, {"total_bytes", opt(m.totalBytes)}};
      if (m.usedBytes && (m.region == "gtt" || m.region == "vram")) used[m.region] = used[m.region].value_or(0) + *m.usedBytes;
    }
    list.push_back({{"device", d.key}, {"driver", d.driver}, {"regions", regions}, {"source", "sysfs mem_info_*"}});
  }
  // Unattributed: what the devices say is in use minus what the leases' own
  // clients hold. Only when every running lease's figure is fresh and known.
  std::uint64_t now = clock::realtimeNs();
  std::optional<std::string> leaseUnknown;
  std::map<std::string, std::uint64_t> leased;
  for (const auto& [id, l] : leases_) {
    if (l->state != Lease::State::Running) continue;
    if (!l->meter || !seats::isFresh(l->meter->sampledAtNs(), now, cfg_.daemon.sampleIntervalUs) || !l->meter->gpu().lastBytes) {
      leaseUnknown = fmt::format("lease {} has no fresh GPU figure", id);
      continue;
    }
    for (const auto& [region, bytes] : l->meter->gpu().lastRegions) leased[region] += bytes;
  }
  unattributed = json::object();
  for (const char* region : {"gtt", "vram"}) {
    json u;
    auto it = used.find(region);
    if (it == used.end()) {
      u = {{"bytes", nullptr}, {"unknown", fmt::format("no device exports mem_info_{}_used", region)}};
    } else if (leaseUnknown) {
      u = {{"bytes", nullptr}, {"unknown", *leaseUnknown}};
    } else if (leased[region] > *it->second) {
      u = {{"bytes", nullptr}, {"unknown", "the leases' fdinfo resident exceeds the devices' counters (shared or imported buffers)"}};
    } else {
      u = {{"bytes", *it->second - leased[region]}, {"device_used_bytes", *it->second}, {"leases_bytes", leased[region]}};
    }
    unattributed[region] = u;
  }
  return list;
}

json Service::overview(std::uint64_t nowNs) {
  json o;
  o["observed_at_ns"] = nowNs;
  o["sample_interval_us"] = cfg_.daemon.sampleIntervalUs;
  o["seats"] = seats(nowNs);
  o["pools"] = poolsJson();
  json unattributed;
  o["devices"] = devicesJson(unattributed);
  o["unattributed"] = unattributed;
  o["host"] = {{"mem_available_bytes", opt(hostCache_->figures.memAvailable)}, {"source", "/proc/meminfo MemAvailable"}};
  o["coverage"] = {{"state", coverage::coverageName(coverage_)}, {"kernel", coverageKernel_}};
  json bound = json::object(), outcomes = json::object();
  for (const auto& [k, v] : boundCounts_) bound[k] = v;
  for (const auto& [k, v] : outcomeCounts_) outcomes[k] = v;
  o["enforcement"] = {{"gpu_bound_events", bound}, {"outcomes", outcomes}, {"since_ns", startedAtNs_}};
  o["daemon"] = {{"pid", ::getpid()}, {"started_at_ns", startedAtNs_}, {"leases_live", liveLeases()}, {"queued", engine_.queued()}};
  return o;
}

void Service::onSeats(std::uint64_t conn, const json& id) {
  std::uint64_t now = clock::realtimeNs();
  reply(conn, id, {{"seats", seats(now)}, {"observed_at_ns", now}, {"sample_interval_us", cfg_.daemon.sampleIntervalUs}});
}

void Service::onOverview(std::uint64_t conn, const json& id) { reply(conn, id, overview(clock::realtimeNs())); }

void Service::onMetrics(std::uint64_t conn, const json& id) {
  reply(conn, id, {{"text", metrics::renderOverview(overview(clock::realtimeNs()))}, {"content_type", "text/plain; version=0.0.4"}});
}

}  // namespace tally::daemon
