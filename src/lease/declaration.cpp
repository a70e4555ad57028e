#include "lease/declaration.h"

#include <fmt/format.h>

#include "lease/limits_rule.h"
#include "lease/spec.h"

namespace tally::lease {

using json = nlohmann::json;

enforce::Bounds boundsOf(const Declaration& d, std::uint64_t sampleIntervalUs) {
  return {d.memoryMax,
          {d.gpuMemoryMax, d.gpuMemoryHigh, d.gpuAction, d.gpuOverSamples, sampleIntervalUs}};
}

json declarationJson(const Declaration& d) {
  json j = json::object();
  if (!d.name.empty()) j["name"] = d.name;
  if (d.memoryMax) j["memory_max"] = *d.memoryMax;
  if (d.gpuMemoryMax) j["gpu_memory_max"] = *d.gpuMemoryMax;
  if (d.gpuMemoryHigh) j["gpu_memory_high"] = *d.gpuMemoryHigh;
  j["gpu_memory_action"] = enforce::actionName(d.gpuAction);
  j["gpu_over_samples"] = d.gpuOverSamples;
  if (!d.attributes.empty()) j["attributes"] = attributesJson(d.attributes);
  return j;
}

Status decodeDeclaration(jsonfields::Fields& f, Declaration& d) {
  auto name = f.str("name", 64);
  if (!name) return name.error();
  if (*name && !(*name)->empty()) {
    if (!validLeaseName(**name)) return f.bad("name", "must be 1-64 of [A-Za-z0-9._-]");
    d.name = std::move(**name);
  }
  for (auto [key, out] :
       {std::pair{"memory_max", &d.memoryMax}, std::pair{"gpu_memory_max", &d.gpuMemoryMax},
        std::pair{"gpu_memory_high", &d.gpuMemoryHigh}}) {
    auto v = f.u64(key);
    if (!v) return v.error();
    *out = *v;
  }
  if (auto s = checkLimits({d.memoryMax, d.gpuMemoryMax, d.gpuMemoryHigh}, kRpcLimitNames); !s)
    return Error{0, s.error().message};
  auto action = f.str("gpu_memory_action", 16);
  if (!action) return action.error();
  if (*action) {
    auto a = enforce::parseAction(**action);
    if (!a) return f.bad("gpu_memory_action", "must be " + enforce::actionChoices());
    d.gpuAction = *a;
  }
  auto over = f.u64("gpu_over_samples", kMaxOverSamples);
  if (!over) return over.error();
  if (*over) {
    if (**over < 1) return f.bad("gpu_over_samples", fmt::format("must be 1..{}", kMaxOverSamples));
    d.gpuOverSamples = static_cast<unsigned>(**over);
  }
  if (const json* attrs = f.get("attributes")) {
    auto a = attributesFromJson(*attrs);
    if (!a) return Error{0, fmt::format("\"attributes\": {}", a.error().message)};
    d.attributes = std::move(*a);
  }
  return Ok{};
}

}  // namespace tally::lease
