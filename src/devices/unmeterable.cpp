#include "devices/unmeterable.h"

#include <fmt/format.h>

#include <algorithm>

#include "devices/memory_class.h"

namespace tally::devices {

std::vector<const DrmDevice*> unmeterableDevices(const DeviceMap& map,
                                                 const std::vector<std::string>& scope) {
  std::vector<const DrmDevice*> out;
  for (const auto& d : map.devices) {
    if (!scope.empty() &&
        (!d.pdev || std::find(scope.begin(), scope.end(), *d.pdev) == scope.end()))
      continue;
    if (driverFigures(d.driver) == DriverFigures::None) out.push_back(&d);
  }
  return out;
}

std::optional<std::string> gpuBoundRefusal(const DeviceMap& map,
                                           const std::vector<std::string>& scope) {
  auto silent = unmeterableDevices(map, scope);
  if (silent.empty()) return std::nullopt;
  std::vector<std::string> names;
  for (const DrmDevice* d : silent) names.push_back(fmt::format("{} ({})", d->key, d->driver));
  return fmt::format(
      "gpu_memory_max cannot be checked on {}: the driver prints no memory figure in fdinfo, so "
      "the lease's GPU memory there would be unknown and its bound would never fire. Run it in a "
      "pool whose devices = [...] leave {} out, or declare no gpu_memory_max",
      fmt::join(names, ", "), silent.size() == 1 ? "it" : "them");
}

}  // namespace tally::devices
