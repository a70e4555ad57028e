// A DRM device's memory facts as tally gpu and tally doctor both show them:
// its sysfs figures, its GTT ceilings, where ROCm's device memory lives.
#include "report/device_memory.h"

#include <fmt/format.h>

#include "util/units.h"

namespace tally::report {

using json = nlohmann::ordered_json;

const char* rocmWhereName(devices::RocmPlacement::Where w) {
  switch (w) {
    case devices::RocmPlacement::Where::Gtt:
      return "gtt";
    case devices::RocmPlacement::Where::Vram:
      return "vram";
    case devices::RocmPlacement::Where::Unknown:
      return "unknown";
  }
  return "unknown";
}

json rocmPlacementJson(const devices::RocmPlacement& p) {
  return {{"where", rocmWhereName(p.where)}, {"evidence", p.evidence}};
}

std::vector<std::string> computeTermLines(const devices::GttCeilings& c) {
  std::vector<std::string> out;
  for (const auto& t : c.computeTerms) {
    if (!t.applies)
      out.push_back(fmt::format("{}: {}", t.name, t.value.source));
    else if (t.value.bytes)
      out.push_back(
          fmt::format("{} {} ({})", t.name, units::humanBytes(*t.value.bytes), t.value.source));
    else
      out.push_back(fmt::format("{} unknown ({})", t.name, t.value.unknown.value_or("?")));
  }
  return out;
}

json gttCeilingsJson(const devices::GttCeilings& c) {
  auto one = [](const devices::Ceiling& x) {
    json j;
    if (x.bytes) {
      j["bytes"] = *x.bytes;
      j["source"] = x.source;
    } else {
      j["bytes"] = nullptr;
      j["unknown"] = x.unknown.value_or("unknown");
    }
    return j;
  };
  json compute = one(c.compute);
  if (!c.computeTerms.empty()) {
    json terms = json::array();
    for (const auto& t : c.computeTerms) {
      json tj = one(t.value);
      tj["name"] = t.name;
      tj["applies"] = t.applies;
      if (!t.applies) tj["source"] = t.value.source;
      terms.push_back(tj);
    }
    compute["terms"] = terms;
  }
  json j = {{"graphics", one(c.graphics)}, {"compute", compute}};
  j["ttm_module"] = c.ttmModule.empty() ? json(nullptr) : json(c.ttmModule);
  j["ttm_module_how"] = c.ttmHow;
  const char* which = nullptr;
  if (c.forConsumer(devices::GttConsumer::Smaller, &which)) j["headroom_uses"] = which;
  return j;
}

json deviceMemoryJson(const devices::DrmDevice& d) {
  json mem = json::object();
  for (const auto& m : d.memory) {
    json r = json::object();
    if (m.totalBytes) r["total_bytes"] = *m.totalBytes;
    if (m.usedBytes) r["used_bytes"] = *m.usedBytes;
    r["source"] = "sysfs-device";
    mem[m.region] = r;
  }
  return mem;
}

}  // namespace tally::report
