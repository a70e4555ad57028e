#include "config/listing.h"

#include <fmt/format.h>

#include "devices/gtt_consumer.h"
#include "enforce/gpu_bound.h"
#include "util/json_view.h"
#include "util/units.h"

namespace tally::config {

using json = nlohmann::ordered_json;

json effectiveJson(const Config& c, const std::string& stateDir) {
  const auto& d = c.daemon;
  json pools = json::array();
  for (const auto& p : c.pools) {
    pools.push_back(
        {{"name", p.name},
         {"capacity", p.capacity},
         {"memory_budget", jsonview::orNull<json>(p.memoryBudget)},
         {"gpu_memory_budget", jsonview::orNull<json>(p.gpuMemoryBudget)},
         {"devices", p.devices},
         {"gtt_ceiling", devices::gttConsumerName(p.gttCeiling)},
         {"allow_users", p.allowUsers},
         {"allow_groups", p.allowGroups},
         {"per_user_capacity", jsonview::orNull<json>(p.perUserCapacity)},
         {"per_user_memory_budget", jsonview::orNull<json>(p.perUserMemoryBudget)},
         {"per_user_gpu_memory_budget", jsonview::orNull<json>(p.perUserGpuMemoryBudget)},
         {"default_memory_max", jsonview::orNull<json>(p.defaultMemoryMax)},
         {"default_gpu_memory_max", jsonview::orNull<json>(p.defaultGpuMemoryMax)}});
  }
  json dj = {
      {"socket", d.socket},
      {"socket_group", d.socketGroup ? json(*d.socketGroup) : json(nullptr)},
      {"state_dir", stateDir},
      {"sample_interval_us", d.sampleIntervalUs},
      {"near_bound_margin_percent", d.nearBoundMarginPercent},
      {"near_bound_interval_us", d.nearBoundIntervalUs},
      {"queue_timeout_us", d.queueTimeoutUs},
      {"samples_full_resolution_us", d.samplesFullResolutionUs},
      {"samples_max_age_us", d.samplesMaxAgeUs},
      {"samples_max_rows", d.samplesMaxRows},
      {"client_grace_us", d.clientGraceUs},
      {"coverage_probe", d.coverageProbe},
      {"coverage_probe_size_bytes", d.coverageProbeBytes},
      {"keep_gpu_memory_max", d.keepGpuMemoryMax},
      {"kernel_charge", d.kernelCharge},
      {"kernel_objects_per_lease", d.kernelObjectsPerLease},
      {"metrics_textfile", d.metricsTextfile.empty() ? json(nullptr) : json(d.metricsTextfile)},
      {"metrics_listen", d.metricsListen.empty() ? json(nullptr) : json(d.metricsListen)},
      {"metrics_beyond_loopback", d.metricsBeyondLoopback},
      {"metrics_allow_users", d.metricsAllowUsers},
      {"max_connections", d.maxConnections},
      {"max_connections_per_uid", d.maxConnectionsPerUid},
      {"max_queued", d.maxQueued},
      {"max_queued_per_connection", d.maxQueuedPerConnection},
      {"max_queued_per_uid", d.maxQueuedPerUid},
      {"max_leases_per_uid", d.maxLeasesPerUid},
      {"max_children_per_lease", d.maxChildrenPerLease},
      {"max_replays_per_uid", d.maxReplaysPerUid},
      {"max_cgroups_walked_per_uid", d.maxCgroupsWalkedPerUid},
      {"queries_per_second_per_uid", d.queriesPerSecondPerUid},
      {"query_time_per_second_per_uid_us", d.queryTimePerSecondPerUidUs},
      {"ledger_rows_per_minute_per_uid", d.ledgerRowsPerMinutePerUid},
      {"ledger_bytes_per_minute_per_uid", d.ledgerBytesPerMinutePerUid},
      {"priority_group", d.priorityGroup ? json(*d.priorityGroup) : json(nullptr)},
      {"idle_timeout_us", d.idleTimeoutUs},
      {"request_timeout_us", d.requestTimeoutUs}};
  json leases = json::array();
  for (const auto& l : c.leases) {
    const auto& want = l.attach.declared;
    leases.push_back(
        {{"name", l.name},
         {"unit", l.unit()},
         {"pools", want.pools},
         {"lease_name", want.declaration.name.empty() ? l.name : want.declaration.name},
         {"memory_max", jsonview::orNull<json>(want.declaration.memoryMax)},
         {"gpu_memory_max", jsonview::orNull<json>(want.declaration.gpuMemoryMax)},
         {"gpu_memory_high", jsonview::orNull<json>(want.declaration.gpuMemoryHigh)},
         {"gpu_memory_action", enforce::actionName(want.declaration.gpuAction)},
         {"gpu_over_samples", want.declaration.gpuOverSamples},
         {"priority", want.priority},
         {"attributes", want.declaration.attributes}});
  }
  return {{"daemon", dj}, {"pools", pools}, {"leases", leases}};
}

std::vector<std::string> effectiveText(const Config& c, const std::string& stateDir) {
  const auto& d = c.daemon;
  std::vector<std::string> out;
  auto dur = [](std::uint64_t us) { return units::humanDuration(us); };
  out.push_back(fmt::format("[daemon]"));
  out.push_back(fmt::format("  socket                    {} (group {})", d.socket,
                            d.socketGroup.value_or("the daemon's")));
  out.push_back(fmt::format("  state_dir                 {}", stateDir));
  out.push_back(fmt::format("  sample_interval           {}", dur(d.sampleIntervalUs)));
  out.push_back(
      fmt::format("  queue_timeout             {}",
                  d.queueTimeoutUs ? dur(d.queueTimeoutUs) : std::string("0 (until granted)")));
  out.push_back(fmt::format("  samples_full_resolution   {}", dur(d.samplesFullResolutionUs)));
  out.push_back(fmt::format("  samples_max_age           {}", dur(d.samplesMaxAgeUs)));
  out.push_back(fmt::format("  samples_max_rows          {}", d.samplesMaxRows));
  out.push_back(fmt::format("  client_grace              {}", dur(d.clientGraceUs)));
  out.push_back(fmt::format("  coverage_probe            {} ({})", d.coverageProbe ? "on" : "off",
                            units::humanBytes(d.coverageProbeBytes)));
  out.push_back(fmt::format("  keep_gpu_memory_max       {}", d.keepGpuMemoryMax ? "yes" : "no"));
  out.push_back(fmt::format("  kernel_charge             {}",
                            d.kernelCharge ? "on where the kernel allows" : "off"));
  out.push_back(fmt::format("  kernel_objects_per_lease  {}", d.kernelObjectsPerLease));
  out.push_back(fmt::format("  metrics_textfile          {}",
                            d.metricsTextfile.empty() ? std::string("off") : d.metricsTextfile));
  out.push_back(fmt::format("  metrics_listen            {}",
                            d.metricsListen.empty() ? std::string("off") : d.metricsListen));
  out.push_back(fmt::format("  max_connections           {} ({} per uid)", d.maxConnections,
                            d.maxConnectionsPerUid));
  out.push_back(fmt::format("  max_queued                {} ({} per connection)", d.maxQueued,
                            d.maxQueuedPerConnection));
  out.push_back(fmt::format("  idle_timeout              {}", dur(d.idleTimeoutUs)));
  out.push_back(fmt::format("  request_timeout           {}", dur(d.requestTimeoutUs)));
  for (const auto& p : c.pools) {
    out.push_back(fmt::format("[pools.{}]", p.name));
    out.push_back(fmt::format("  capacity                  {}", p.capacity));
    out.push_back(
        fmt::format("  memory_budget             {}",
                    p.memoryBudget ? units::humanBytes(*p.memoryBudget) : std::string("none")));
    out.push_back(fmt::format(
        "  gpu_memory_budget         {}",
        p.gpuMemoryBudget ? units::humanBytes(*p.gpuMemoryBudget) : std::string("none")));
    out.push_back(fmt::format("  devices                   {}",
                              p.devices.empty() ? std::string("every GPU with mem_info_*")
                                                : fmt::format("{}", fmt::join(p.devices, ", "))));
    out.push_back(
        fmt::format("  gtt_ceiling               {}", devices::gttConsumerName(p.gttCeiling)));
    // Shares and defaults only where set: most pools have none.
    auto some = [&](const char* key, const std::optional<std::uint64_t>& b) {
      if (b) out.push_back(fmt::format("  {:<25} {}", key, units::humanBytes(*b)));
    };
    if (p.perUserCapacity)
      out.push_back(fmt::format("  per_user_capacity         {}", *p.perUserCapacity));
    some("per_user_memory_budget", p.perUserMemoryBudget);
    some("per_user_gpu_memory_budget", p.perUserGpuMemoryBudget);
    some("default_memory_max", p.defaultMemoryMax);
    some("default_gpu_memory_max", p.defaultGpuMemoryMax);
  }
  auto bytesOr = [](const std::optional<std::uint64_t>& b) {
    return b ? units::humanBytes(*b) : std::string("none");
  };
  for (const auto& l : c.leases) {
    const auto& want = l.attach.declared;
    out.push_back(fmt::format("[leases.{}]  (leased at every run of its unit)", l.name));
    out.push_back(fmt::format("  unit                      {}", l.unit()));
    out.push_back(fmt::format("  pools                     {}", fmt::join(want.pools, ", ")));
    out.push_back(
        fmt::format("  memory_max                {}", bytesOr(want.declaration.memoryMax)));
    out.push_back(
        fmt::format("  gpu_memory_max            {}", bytesOr(want.declaration.gpuMemoryMax)));
    if (want.declaration.gpuMemoryHigh)
      out.push_back(
          fmt::format("  gpu_memory_high           {}", bytesOr(want.declaration.gpuMemoryHigh)));
  }
  return out;
}

}  // namespace tally::config
