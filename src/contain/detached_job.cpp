#include "contain/detached_job.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <cstdlib>

#include "contain/sd_bus_handles.h"
#include "lease/unit_names.h"

namespace tally::contain {

std::string detachedUnitName() {
  unsigned char b[6] = {};
  if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) {
    // Never a fixed name: time and pid are unique enough for one caller.
    auto t = static_cast<unsigned long long>(::time(nullptr)) ^
             (static_cast<unsigned long long>(::getpid()) << 20);
    for (std::size_t i = 0; i < sizeof b; ++i) b[i] = static_cast<unsigned char>(t >> (8 * i));
  }
  std::string hex;
  for (unsigned char c : b) hex += fmt::format("{:02x}", c);
  return lease::jobUnitName(hex);
}

namespace {

Result<std::string> statusText(sd_bus* b, const std::string& unit) {
  char* path = nullptr;
  int r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit.c_str(), &path);
  if (r < 0) return Error{-r, "cannot name the unit on the bus"};
  bus::Error err;
  char* status = nullptr;
  r = sd_bus_get_property_string(b, bus::kDest, path, "org.freedesktop.systemd1.Service",
                                 "StatusText", &err.e, &status);
  std::free(path);
  if (r < 0) return Error{-r, bus::errorText(err.e, r)};
  std::string out(status ? status : "");
  std::free(status);
  return out;
}

}  // namespace

Result<DetachedStart> startDetached(SystemdBus& sbus, const DetachedJob& job,
                                    std::uint64_t timeoutUs) {
  sd_bus* b = sbus.bus();
  bus::Msg m;
  int r = sd_bus_message_new_method_call(b, &m.m, bus::kDest, bus::kPath, bus::kManager,
                                         "StartTransientUnit");
  if (r >= 0) r = sd_bus_message_append(m.m, "ss", job.unit.c_str(), "fail");
  if (r >= 0) r = sd_bus_message_open_container(m.m, 'a', "(sv)");
  if (r >= 0) r = sd_bus_message_append(m.m, "(sv)", "Description", "s", job.description.c_str());
  // Ready when the daemon knows the lease (queued or granted), however long
  // the queue: no start timeout.
  if (r >= 0) r = sd_bus_message_append(m.m, "(sv)", "Type", "s", "notify");
  if (r >= 0) r = sd_bus_message_append(m.m, "(sv)", "NotifyAccess", "s", "main");
  if (r >= 0) r = sd_bus_message_append(m.m, "(sv)", "TimeoutStartUSec", "t", UINT64_MAX);
  if (r >= 0 && !job.workingDirectory.empty())
    r = sd_bus_message_append(m.m, "(sv)", "WorkingDirectory", "s", job.workingDirectory.c_str());
  if (r >= 0) {
    r = sd_bus_message_open_container(m.m, 'r', "sv");
    if (r >= 0) r = sd_bus_message_append(m.m, "s", "Environment");
    if (r >= 0) r = sd_bus_message_open_container(m.m, 'v', "as");
    if (r >= 0) r = sd_bus_message_open_container(m.m, 'a', "s");
    for (const auto& e : job.environment)
      if (r >= 0) r = sd_bus_message_append(m.m, "s", e.c_str());
    if (r >= 0) r = sd_bus_message_close_container(m.m);
    if (r >= 0) r = sd_bus_message_close_container(m.m);
    if (r >= 0) r = sd_bus_message_close_container(m.m);
  }
  // ExecStart: a(sasb) — path, argv, ignore-failure.
  if (r >= 0) {
    r = sd_bus_message_open_container(m.m, 'r', "sv");
    if (r >= 0) r = sd_bus_message_append(m.m, "s", "ExecStart");
    if (r >= 0) r = sd_bus_message_open_container(m.m, 'v', "a(sasb)");
    if (r >= 0) r = sd_bus_message_open_container(m.m, 'a', "(sasb)");
    if (r >= 0) r = sd_bus_message_open_container(m.m, 'r', "sasb");
    if (r >= 0) r = sd_bus_message_append(m.m, "s", job.argv.front().c_str());
    if (r >= 0) r = sd_bus_message_open_container(m.m, 'a', "s");
    for (const auto& a : job.argv)
      if (r >= 0) r = sd_bus_message_append(m.m, "s", a.c_str());
    if (r >= 0) r = sd_bus_message_close_container(m.m);
    if (r >= 0) r = sd_bus_message_append(m.m, "b", 0);
    for (int i = 0; i < 4 && r >= 0; ++i) r = sd_bus_message_close_container(m.m);
  }
  if (r >= 0) r = sd_bus_message_close_container(m.m);
  if (r >= 0) r = sd_bus_message_append(m.m, "a(sa(sv))", 0);
  if (r < 0)
    return Error{-r,
                 fmt::format("StartTransientUnit: cannot build the call: {}", std::strerror(-r))};

  bus::Error err;
  bus::Msg reply;
  r = sd_bus_call(b, m.m, bus::kCallTimeoutUs, &err.e, &reply.m);
  if (r < 0) {
    return Error{-r,
                 fmt::format("systemd ({} manager) refused the service {}: {}",
                             sbus.user() ? "user" : "system", job.unit, bus::errorText(err.e, r))};
  }
  const char* jobPath = nullptr;
  if ((r = sd_bus_message_read(reply.m, "o", &jobPath)) < 0)
    return Error{-r, "StartTransientUnit: malformed reply"};
  auto result = sbus.waitJob(jobPath, timeoutUs);
  if (!result) return result.error();
  DetachedStart out;
  out.ready = *result == "done";
  auto status = statusText(b, job.unit);
  out.status = status ? *status : "";
  if (!out.ready) {
    // A failed transient service stays loaded until reset: its StatusText was
    // read; nothing of it is left behind.
    bus::Error ignored;
    (void)sd_bus_call_method(b, bus::kDest, bus::kPath, bus::kManager, "ResetFailedUnit",
                             &ignored.e, nullptr, "s", job.unit.c_str());
    if (out.status.empty())
      out.status =
          fmt::format("the job's service ended before it had a lease (start job {})", *result);
  }
  return out;
}

}  // namespace tally::contain
