#include "seats/seat.h"

#include <fmt/format.h>

#include "cgroup/cgroup.h"
#include "util/json_view.h"

namespace tally::seats {
namespace {

using json = nlohmann::json;

// {"bytes": N} or {"bytes": null, "unknown": "why"}.
void put(json& into, const char* key, const Figure& f) {
  into[key] = jsonview::orNull(f.bytes);
  if (!f.bytes) into[std::string(key) + "_unknown"] = f.unknown;
}

}  // namespace

bool isFresh(const std::optional<std::uint64_t>& observedAtNs, std::uint64_t nowNs,
             std::uint64_t intervalUs) {
  if (!observedAtNs) return false;
  // A sample stamped after "now" (clock stepped back) is not trusted either.
  if (*observedAtNs > nowNs) return false;
  return nowNs - *observedAtNs <= 2 * intervalUs * 1000;
}

json seatRow(const SeatFacts& f, std::uint64_t nowNs, std::uint64_t intervalUs) {
  json r;
  r["lease"] = f.lease;
  r["name"] = f.name;
  r["kind"] = f.kind;
  r["state"] = f.state;
  r["pools"] = f.pools;
  r["owner_uid"] = f.owner;
  if (!f.waiting.empty()) r["waiting"] = f.waiting;
  if (!f.parent.empty()) r["parent"] = f.parent;
  json w = json::object();
  if (!f.unit.empty()) w["unit"] = f.unit;
  if (!f.cgroup.empty()) w["cgroup"] = f.cgroup;
  if (f.container) w["container"] = *f.container;
  r["workload"] = w;
  if (f.populated) {
    r["running"] = *f.populated;
  } else {
    r["running"] = nullptr;
    r["running_unknown"] = f.populatedUnknown;
  }
  r["running_source"] = f.cgroup.empty() ? std::string("no cgroup yet: nothing runs in the lease")
                                         : fmt::format("{} populated", cgroup::file::kEvents);
  r["observed_at_ns"] = jsonview::orNull(f.observedAtNs);
  r["sample_interval_us"] = intervalUs;
  bool fresh = isFresh(f.observedAtNs, nowNs, intervalUs);
  r["fresh"] = fresh;
  json declared = {{"memory_max", jsonview::orNull(f.memoryMax)},
                   {"gpu_memory_max", jsonview::orNull(f.gpuMemoryMax)},
                   {"gpu_memory_high", jsonview::orNull(f.gpuMemoryHigh)},
                   {"attributes", lease::attributesJson(f.attributes)}};
  r["declared"] = declared;
  r["devices"] = f.devices;
  if (!fresh) {
    // Stale or never sampled: no measured figure, and the reason.
    r["measured_unknown"] =
        !f.observedAtNs ? (f.state == "running" ? "not sampled yet"
                                                : "the lease is " + f.state + ", nothing to meter")
                        : "stale: the last sample is older than 2 x sample_interval";
    return r;
  }
  json host;
  put(host, "current_bytes", f.hostCurrent);
  put(host, "peak_bytes", f.hostPeak);
  put(host, "max_bytes", f.hostMax);
  host["source"] = fmt::format("cgroup {}, {}, {}", cgroup::file::kMemoryCurrent,
                               cgroup::file::kMemoryPeak, cgroup::file::kMemoryMax);
  r["host"] = host;
  json gpu;
  json regions = json::object();
  for (const auto& [name, g] : f.gpuRegions) {
    json& region = regions[name];
    region = {{"current_bytes", jsonview::orNull(g.currentBytes)},
              {"peak_bytes", jsonview::orNull(g.peakBytes)}};
    if (!g.memoryClass) continue;
    region["class"] = devices::memoryClassName(*g.memoryClass);
    if (const char* why = devices::notCountedReason(*g.memoryClass)) region["not_counted"] = why;
  }
  gpu["regions"] = regions;
  put(gpu, "current_bytes", f.gpuCurrent);
  gpu["peak_bytes"] = jsonview::orNull(f.gpuPeakBytes);
  // gpu_memory_max bounds gtt + vram together; no region has a limit of its own.
  gpu["limit_bytes"] = jsonview::orNull(f.gpuMemoryMax);
  if (!f.gpuMemoryMax) gpu["limit_unknown"] = "no gpu_memory_max declared";
  gpu["source"] = f.gpuSource;
  if (f.kernelCharged) {
    gpu["fdinfo_bytes"] = jsonview::orNull(f.gpuFdinfoBytes);
    gpu["allocations_refused"] = f.gpuRefused;
    gpu["refused_bytes"] = f.gpuRefusedBytes;
  }
  r["gpu"] = gpu;
  return r;
}

}  // namespace tally::seats
