#include "daemon/systemd_units.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "contain/sd_bus_handles.h"

namespace tally::daemon {

Result<std::string> SystemdUnits::controlGroup(const std::string& unit) {
  const char* iface = contain::bus::unitInterface(unit);
  return bus_->controlGroup(unit, iface ? iface : "org.freedesktop.systemd1.Slice");
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

namespace bus = contain::bus;
constexpr const char* kUnitIface = "org.freedesktop.systemd1.Unit";

Result<std::string> stringProperty(sd_bus* b, const char* path, const char* iface,
                                   const char* name) {
  bus::Error err;
  char* value = nullptr;
  int r = sd_bus_get_property_string(b, bus::kDest, path, iface, name, &err.e, &value);
  if (r < 0) return Error{-r, fmt::format("cannot read {}: {}", name, bus::errorText(err.e, r))};
  std::string out(value ? value : "");
  std::free(value);
  return out;
}

}  // namespace

Result<UnitRun> SystemdUnits::run(const std::string& unit) {
  sd_bus* b = bus_->bus();
  std::string path;
  {
    // LoadUnit, not GetUnit: a stopped unit may be unloaded; its file still says what it is.
    bus::Error err;
    bus::Msg reply;
    int r = sd_bus_call_method(b, bus::kDest, bus::kPath, bus::kManager, "LoadUnit", &err.e,
                               &reply.m, "s", unit.c_str());
    if (r < 0)
      return Error{-r, fmt::format("systemd cannot load {}: {}", unit, bus::errorText(err.e, r))};
    const char* p = nullptr;
    if (sd_bus_message_read(reply.m, "o", &p) < 0 || !p)
      return Error{0, fmt::format("LoadUnit({}): malformed reply", unit)};
    path = p;
  }
  UnitRun run;
  auto active = stringProperty(b, path.c_str(), kUnitIface, "ActiveState");
  if (!active) return Error{active.error().code, unit + ": " + active.error().message};
  run.activeState = *active;
  if (auto sub = stringProperty(b, path.c_str(), kUnitIface, "SubState")) run.subState = *sub;
  {
    // InvocationID: 16 bytes ("ay"), empty before the first start.
    bus::Error err;
    bus::Msg reply;
    if (sd_bus_get_property(b, bus::kDest, path.c_str(), kUnitIface, "InvocationID", &err.e,
                            &reply.m, "ay") >= 0) {
      const void* bytes = nullptr;
      size_t size = 0;
      if (sd_bus_message_read_array(reply.m, 'y', &bytes, &size) >= 0) {
        for (size_t i = 0; i < size; ++i)
          run.invocation += fmt::format("{:02x}", static_cast<const unsigned char*>(bytes)[i]);
      }
    }
  }
  {
    // The pending job, if any, and its type: a restart shows as one.
    bus::Error err;
    bus::Msg reply;
    if (sd_bus_get_property(b, bus::kDest, path.c_str(), kUnitIface, "Job", &err.e, &reply.m,
                            "(uo)") >= 0) {
      std::uint32_t jobId = 0;
      const char* jobPath = nullptr;
      if (sd_bus_message_read(reply.m, "(uo)", &jobId, &jobPath) >= 0 && jobId != 0 && jobPath) {
        if (auto type = stringProperty(b, jobPath, "org.freedesktop.systemd1.Job", "JobType"))
          run.jobType = *type;
      }
    }
  }
  if (const char* iface = bus::unitInterface(unit)) {
    if (auto cg = stringProperty(b, path.c_str(), iface, "ControlGroup")) run.controlGroup = *cg;
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
  sd_bus* b = bus_->bus();
  if (!subscribed_) {
    // Without Subscribe the manager sends no unit signals to this client.
    bus::Error err;
    int r = sd_bus_call_method(b, bus::kDest, bus::kPath, bus::kManager, "Subscribe", &err.e,
                               nullptr, "");
    // The bus connection may have subscribed already (waiting for jobs): fine.
    if (r < 0 && !sd_bus_error_has_name(&err.e, "org.freedesktop.systemd1.AlreadySubscribed"))
      return Error{-r, fmt::format("systemd refused Subscribe: {}", bus::errorText(err.e, r))};
    subscribed_ = true;
  }
  char* encoded = nullptr;
  int r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit.c_str(), &encoded);
  if (r < 0) return Error{-r, fmt::format("cannot name {} on the bus", unit)};
  std::string path(encoded);
  std::free(encoded);
  if (slots_.count(path)) return Ok{};
  auto slot = std::make_unique<Slot>();
  r = sd_bus_match_signal(b, &slot->slot, bus::kDest, path.c_str(),
                          "org.freedesktop.DBus.Properties", "PropertiesChanged",
                          &SystemdUnits::propertiesChanged, this);
  if (r < 0) return Error{-r, fmt::format("cannot watch {}: {}", unit, std::strerror(-r))};
  unitOfPath_[path] = unit;
  slots_[path] = std::move(slot);
  return Ok{};
}

}  // namespace tally::daemon
