#include "daemon/systemd_units.h"

#include <fmt/format.h>

#include "util/text.h"

namespace tally::daemon {

Result<std::string> SystemdUnits::controlGroup(const std::string& unit) {
  const char* iface = text::endsWith(unit, ".service") ? "org.freedesktop.systemd1.Service"
                      : text::endsWith(unit, ".scope") ? "org.freedesktop.systemd1.Scope"
                                                       : "org.freedesktop.systemd1.Slice";
  return bus_->controlGroup(unit, iface);
}

Status SystemdUnits::setMemoryMax(const std::string& unit, std::uint64_t bytes) {
  sd_bus_error error{nullptr, nullptr, 0};  // SD_BUS_ERROR_NULL is a C compound literal
  int r = sd_bus_call_method(bus_->bus(), "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                             "org.freedesktop.systemd1.Manager", "SetUnitProperties", &error,
                             nullptr, "sba(sv)", unit.c_str(), 1, 1, "MemoryMax", "t", bytes);
  if (r < 0) {
    Error e{-r, fmt::format("systemd refused MemoryMax={} on {}: {}", bytes, unit,
                            error.message ? error.message : std::strerror(-r))};
    sd_bus_error_free(&error);
    return e;
  }
  sd_bus_error_free(&error);
  return Ok{};
}

}  // namespace tally::daemon
