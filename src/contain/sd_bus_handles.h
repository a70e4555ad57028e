// The system manager's D-Bus names and RAII for sd-bus's C handles, shared
// by everything in contain/ that talks to systemd.
#pragma once

#include <fmt/format.h>
#include <systemd/sd-bus.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tally::contain::bus {

inline constexpr const char* kDest = "org.freedesktop.systemd1";
inline constexpr const char* kPath = "/org/freedesktop/systemd1";
inline constexpr const char* kManager = "org.freedesktop.systemd1.Manager";
inline constexpr std::uint64_t kCallTimeoutUs = 30'000'000;

// "Invalid slice name (org.freedesktop.DBus.Error.InvalidArgs)", or strerror.
inline std::string errorText(const sd_bus_error& e, int r) {
  if (sd_bus_error_is_set(&e)) {
    return fmt::format("{} ({})", e.message ? e.message : "no message", e.name ? e.name : "?");
  }
  return std::strerror(-r);
}

// The D-Bus interface holding a unit's ControlGroup: .service, .scope or
// .slice; nullptr for any other name (not a unit a cgroup can be leased by).
inline const char* unitInterface(std::string_view unit) {
  auto endsWith = [unit](std::string_view suffix) {
    return unit.size() >= suffix.size() && unit.substr(unit.size() - suffix.size()) == suffix;
  };
  if (endsWith(".service")) return "org.freedesktop.systemd1.Service";
  if (endsWith(".scope")) return "org.freedesktop.systemd1.Scope";
  if (endsWith(".slice")) return "org.freedesktop.systemd1.Slice";
  return nullptr;
}

struct Error {
  sd_bus_error e{nullptr, nullptr, 0};  // SD_BUS_ERROR_NULL is a C compound literal
  ~Error() { sd_bus_error_free(&e); }
};
struct Msg {
  sd_bus_message* m = nullptr;
  ~Msg() { sd_bus_message_unref(m); }
};

}  // namespace tally::contain::bus
