// A daemon overview with one seat, as the metrics and tally top are drawn
// from: the sample document both tests render.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace tally::testing {

using json = nlohmann::json;
inline constexpr std::uint64_t kOverviewGiB = 1ULL << 30;

inline json overviewWith(json seat) {
  return {
      {"seats", json::array({seat})},
      {"pools",
       json::array({{{"pool", "gpu"},
                     {"capacity", 4},
                     {"holders", {"a"}},
                     {"queue", json::array()},
                     {"memory_budget", nullptr},
                     {"memory_declared", 0},
                     {"gpu_memory_budget", 96 * kOverviewGiB},
                     {"gpu_memory_declared", 8 * kOverviewGiB},
                     {"devices", json::array()},
                     {"headroom", {{"host_bytes", 64 * kOverviewGiB}, {"gpu_bytes", nullptr}}}}})},
      {"devices",
       json::array(
           {{{"device", "0000:c6:00.0"},
             {"driver", "amdgpu"},
             {"regions",
              {{"gtt",
                {{"used_bytes", 20 * kOverviewGiB}, {"total_bytes", 120 * kOverviewGiB}}}}}}})},
      {"outside_leases",
       {{"gtt", {{"bytes", 16 * kOverviewGiB}}},
        {"vram", {{"bytes", nullptr}, {"unknown", "no device exports mem_info_vram_used"}}}}},
      {"host", {{"mem_available_bytes", 90 * kOverviewGiB}}},
      {"coverage", {{"state", "host"}, {"kernel", "6.12.0"}}},
      {"enforcement",
       {{"gpu_bound_events", {{"gpu-memory-kill", 2}}},
        {"outcomes", {{"exited", 5}}},
        {"queue_ends", {{"queue-timeout", 3}, {"cancelled", 0}}}}},
      {"daemon",
       {{"version", "0.9.0"},
        {"commit", "0effe31abcde"},
        {"started_at_ns", 1'700'000'000'000'000'000ULL},
        {"leases_live", 1},
        {"queued", 0},
        {"containment", {{"possible", true}, {"problems", json::array()}}}}},
      {"ledger", {{"path", "/var/lib/tally/ledger.db"}, {"writes", true}, {"failure", nullptr}}},
      {"observed_at_ns", 1'700'000'100'000'000'000ULL},
      {"sample_interval_us", 1'000'000}};
}

inline json freshSeat() {
  return {{"lease", "0123456789ab"},
          {"name", "llama"},
          {"kind", "attach"},
          {"state", "running"},
          {"pools", {"gpu"}},
          {"workload", {{"unit", "llama.service"}, {"cgroup", "/system.slice/llama.service"}}},
          {"running", true},
          {"fresh", true},
          {"observed_at_ns", 1'700'000'100'000'000'000ULL},
          {"declared",
           {{"memory_max", nullptr},
            {"gpu_memory_max", 48 * kOverviewGiB},
            {"gpu_memory_high", nullptr},
            {"attributes", {{"model", "qwen3 \"32b\""}}}}},
          {"host",
           {{"current_bytes", 3 * kOverviewGiB},
            {"peak_bytes", 4 * kOverviewGiB},
            {"max_bytes", nullptr}}},
          {"gpu",
           {{"regions",
             {{"gtt", {{"current_bytes", 41 * kOverviewGiB}, {"peak_bytes", 42 * kOverviewGiB}}}}},
            {"current_bytes", 41 * kOverviewGiB},
            {"peak_bytes", 42 * kOverviewGiB},
            {"limit_bytes", 48 * kOverviewGiB},
            {"source", "drm-fdinfo"}}}};
}

}  // namespace tally::testing
