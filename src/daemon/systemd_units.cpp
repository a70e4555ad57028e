#include "daemon/systemd_units.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

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

namespace tally::daemon {
namespace {

constexpr const char* kDest = "org.freedesktop.systemd1";
constexpr const char* kUnitIface = "org.freedesktop.systemd1.Unit";

std::string busText(const sd_bus_error& e, int r) {
  return e.message ? e.message : std::strerror(-r);
}

Result<std::string> stringProperty(sd_bus* bus, const char* path, const char* iface,
                                   const char* name) {
  sd_bus_error error{nullptr, nullptr, 0};
  char* value = nullptr;
  int r = sd_bus_get_property_string(bus, kDest, path, iface, name, &error, &value);
  if (r < 0) {
    Error e{-r, fmt::format("cannot read {}: {}", name, busText(error, r))};
    sd_bus_error_free(&error);
    return e;
  }
  std::string out(value ? value : "");
  std::free(value);
  return out;
}

}  // namespace

Result<UnitRun> SystemdUnits::run(const std::string& unit) {
  sd_bus* bus = bus_->bus();
  sd_bus_error error{nullptr, nullptr, 0};
  sd_bus_message* reply = nullptr;
  // LoadUnit, not GetUnit: a stopped unit may be unloaded; its file still says what it is.
  int r = sd_bus_call_method(bus, kDest, "/org/freedesktop/systemd1",
                             "org.freedesktop.systemd1.Manager", "LoadUnit", &error, &reply, "s",
                             unit.c_str());
  if (r < 0) {
    Error e{-r, fmt::format("systemd cannot load {}: {}", unit, busText(error, r))};
    sd_bus_error_free(&error);
    return e;
  }
  const char* p = nullptr;
  r = sd_bus_message_read(reply, "o", &p);
  std::string path = r >= 0 && p ? p : "";
  sd_bus_message_unref(reply);
  if (path.empty()) return Error{0, fmt::format("LoadUnit({}): malformed reply", unit)};

  UnitRun run;
  auto active = stringProperty(bus, path.c_str(), kUnitIface, "ActiveState");
  if (!active) return Error{active.error().code, unit + ": " + active.error().message};
  run.activeState = *active;
  if (auto sub = stringProperty(bus, path.c_str(), kUnitIface, "SubState")) run.subState = *sub;

  // InvocationID: 16 bytes ("ay"), empty before the first start.
  reply = nullptr;
  r = sd_bus_get_property(bus, kDest, path.c_str(), kUnitIface, "InvocationID", &error, &reply,
                          "ay");
  if (r >= 0) {
    const void* bytes = nullptr;
    size_t size = 0;
    if (sd_bus_message_read_array(reply, 'y', &bytes, &size) >= 0) {
      for (size_t i = 0; i < size; ++i)
        run.invocation += fmt::format("{:02x}", static_cast<const unsigned char*>(bytes)[i]);
    }
    sd_bus_message_unref(reply);
  }
  sd_bus_error_free(&error);

  // The pending job, if any, and its type: a restart shows as one.
  reply = nullptr;
  r = sd_bus_get_property(bus, kDest, path.c_str(), kUnitIface, "Job", &error, &reply, "(uo)");
  if (r >= 0) {
    std::uint32_t jobId = 0;
    const char* jobPath = nullptr;
    if (sd_bus_message_read(reply, "(uo)", &jobId, &jobPath) >= 0 && jobId != 0 && jobPath) {
      if (auto type = stringProperty(bus, jobPath, "org.freedesktop.systemd1.Job", "JobType"))
        run.jobType = *type;
    }
    sd_bus_message_unref(reply);
  }
  sd_bus_error_free(&error);

  if (text::endsWith(unit, ".service") || text::endsWith(unit, ".scope")) {
    if (auto cg =
            stringProperty(bus, path.c_str(),
                           text::endsWith(unit, ".service") ? "org.freedesktop.systemd1.Service"
                                                            : "org.freedesktop.systemd1.Scope",
                           "ControlGroup"))
      run.controlGroup = *cg;
  }
  return run;
}

int SystemdUnits::propertiesChanged(sd_bus_message* m, void* self, sd_bus_error*) {
  auto* units = static_cast<SystemdUnits*>(self);
  const char* path = sd_bus_message_get_path(m);
  if (!path || !units->changed_) return 0;
  auto it = units->unitOfPath_.find(path);
  if (it != units->unitOfPath_.end()) units->changed_(it->second);
  return 0;
}

Status SystemdUnits::watchUnit(const std::string& unit) {
  sd_bus* bus = bus_->bus();
  if (!subscribed_) {
    // Without Subscribe the manager sends no unit signals to this client.
    sd_bus_error error{nullptr, nullptr, 0};
    int r =
        sd_bus_call_method(bus, kDest, "/org/freedesktop/systemd1",
                           "org.freedesktop.systemd1.Manager", "Subscribe", &error, nullptr, "");
    // The bus connection may have subscribed already (waiting for jobs): fine.
    if (r < 0 && !sd_bus_error_has_name(&error, "org.freedesktop.systemd1.AlreadySubscribed")) {
      Error e{-r, fmt::format("systemd refused Subscribe: {}", busText(error, r))};
      sd_bus_error_free(&error);
      return e;
    }
    sd_bus_error_free(&error);
    subscribed_ = true;
  }
  char* encoded = nullptr;
  int r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit.c_str(), &encoded);
  if (r < 0) return Error{-r, fmt::format("cannot name {} on the bus", unit)};
  std::string path(encoded);
  std::free(encoded);
  if (slots_.count(path)) return Ok{};
  auto slot = std::make_unique<Slot>();
  r = sd_bus_match_signal(bus, &slot->slot, kDest, path.c_str(), "org.freedesktop.DBus.Properties",
                          "PropertiesChanged", &SystemdUnits::propertiesChanged, this);
  if (r < 0) return Error{-r, fmt::format("cannot watch {}: {}", unit, std::strerror(-r))};
  unitOfPath_[path] = unit;
  slots_[path] = std::move(slot);
  return Ok{};
}

}  // namespace tally::daemon
