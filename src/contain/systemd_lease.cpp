#include "contain/systemd_lease.h"

#include <fmt/format.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "contain/sd_bus_handles.h"
#include "contain/stop_grace.h"
#include "fs/root.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::contain {
namespace {

using bus::kCallTimeoutUs;
using bus::kDest;
using bus::kManager;
using bus::kPath;
using BusError = bus::Error;
using bus::Msg;
std::string busErrorText(const sd_bus_error& e, int r) { return bus::errorText(e, r); }

std::string userBusHint() {
  const char* rt = std::getenv("XDG_RUNTIME_DIR");
  return fmt::format(
      "no user manager answers{}; start one (systemctl start user@{}.service, or "
      "loginctl enable-linger) and set XDG_RUNTIME_DIR, or run with --system",
      rt ? fmt::format(" at {}/bus", rt) : " (XDG_RUNTIME_DIR is not set)", getuid());
}

}  // namespace

Result<std::unique_ptr<SystemdBus>> SystemdBus::connect(bool user) {
  sd_bus* bus = nullptr;
  int r = user ? sd_bus_open_user(&bus) : sd_bus_open_system(&bus);
  if (r < 0) {
    if (user) return Error{-r, userBusHint() + fmt::format(" ({})", std::strerror(-r))};
    return Error{-r,
                 fmt::format("no systemd system bus ({}); is systemd PID 1 with D-Bus running? "
                             "Without systemd, a delegated cgroup v2 subtree works with --cgroupfs",
                             std::strerror(-r))};
  }
  std::unique_ptr<SystemdBus> self(new SystemdBus(bus, user));
  // Job results arrive as signals; the match is in place before any job starts.
  r = sd_bus_match_signal(bus, &self->jobSlot_, kDest, kPath, kManager, "JobRemoved",
                          &SystemdBus::onJobRemoved, self.get());
  if (r < 0) return Error{-r, fmt::format("cannot watch systemd jobs: {}", std::strerror(-r))};
  // Subscribe so the manager sends job signals to us whoever started the job;
  // it also proves a systemd manager answers on this bus.
  BusError err;
  r = sd_bus_call_method(bus, kDest, kPath, kManager, "Subscribe", &err.e, nullptr, "");
  if (r < 0) {
    if (user) return Error{-r, userBusHint() + fmt::format(" ({})", busErrorText(err.e, r))};
    return Error{
        -r, fmt::format("systemd does not answer on the system bus: {}", busErrorText(err.e, r))};
  }
  return self;
}

SystemdBus::~SystemdBus() {
  sd_bus_slot_unref(jobSlot_);
  sd_bus_flush_close_unref(bus_);
}

int SystemdBus::onJobRemoved(sd_bus_message* m, void* self, sd_bus_error*) {
  std::uint32_t id = 0;
  const char *path = nullptr, *unit = nullptr, *result = nullptr;
  if (sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0) return 0;
  static_cast<SystemdBus*>(self)->finishedJobs_[path] = result;
  return 0;
}

Result<std::string> SystemdBus::waitJob(const std::string& jobPath, std::uint64_t timeoutUs) {
  std::uint64_t deadline = clock::monotonicUs() + timeoutUs;
  for (;;) {
    if (auto it = finishedJobs_.find(jobPath); it != finishedJobs_.end()) {
      std::string result = it->second;
      finishedJobs_.erase(it);
      return result;
    }
    int r = sd_bus_process(bus_, nullptr);
    if (r < 0)
      return Error{-r, fmt::format("lost the systemd bus while waiting for {}: {}", jobPath,
                                   std::strerror(-r))};
    if (r > 0) continue;
    std::uint64_t now = clock::monotonicUs();
    if (now >= deadline)
      return Error{ETIMEDOUT, fmt::format("systemd job {} did not finish in {} s", jobPath,
                                          timeoutUs / 1000000)};
    r = sd_bus_wait(bus_, deadline - now);
    if (r < 0 && r != -EINTR)
      return Error{-r, fmt::format("waiting on the systemd bus: {}", std::strerror(-r))};
  }
}

Status SystemdBus::stopUnit(const std::string& name, bool wait) {
  BusError err;
  Msg reply;
  int r = sd_bus_call_method(bus_, kDest, kPath, kManager, "StopUnit", &err.e, &reply.m, "ss",
                             name.c_str(), "replace");
  if (r < 0) {
    if (sd_bus_error_has_name(&err.e, "org.freedesktop.systemd1.NoSuchUnit")) return Ok{};
    return Error{-r, fmt::format("systemd refused to stop {}: {}", name, busErrorText(err.e, r))};
  }
  const char* job = nullptr;
  r = sd_bus_message_read(reply.m, "o", &job);
  if (r < 0) return Error{-r, "StopUnit: malformed reply"};
  if (!wait) return Ok{};
  auto result = waitJob(job, kStopGraceUs + kCallTimeoutUs);
  if (!result) return result.error();
  if (*result != "done") return Error{0, fmt::format("stopping {} ended '{}'", name, *result)};
  return Ok{};
}

Status SystemdBus::killUnit(const std::string& name, int signal) {
  BusError err;
  int r = sd_bus_call_method(bus_, kDest, kPath, kManager, "KillUnit", &err.e, nullptr, "ssi",
                             name.c_str(), "all", signal);
  if (r < 0 && !sd_bus_error_has_name(&err.e, "org.freedesktop.systemd1.NoSuchUnit")) {
    return Error{-r, fmt::format("systemd refused to signal {}: {}", name, busErrorText(err.e, r))};
  }
  return Ok{};
}

Result<std::string> SystemdBus::version() {
  BusError err;
  char* v = nullptr;
  int r = sd_bus_get_property_string(bus_, kDest, kPath, kManager, "Version", &err.e, &v);
  if (r < 0)
    return Error{-r, fmt::format("reading the manager's Version: {}", busErrorText(err.e, r))};
  std::string out(v ? v : "");
  std::free(v);
  return out;
}

Result<std::string> SystemdBus::controlGroup(const std::string& unit, const char* interface) {
  BusError err;
  Msg reply;
  int r = sd_bus_call_method(bus_, kDest, kPath, kManager, "GetUnit", &err.e, &reply.m, "s",
                             unit.c_str());
  if (r < 0)
    return Error{-r, fmt::format("systemd does not know {}: {}", unit, busErrorText(err.e, r))};
  const char* objectPath = nullptr;
  if ((r = sd_bus_message_read(reply.m, "o", &objectPath)) < 0)
    return Error{-r, "GetUnit: malformed reply"};
  char* cgroup = nullptr;
  BusError err2;
  r = sd_bus_get_property_string(bus_, kDest, objectPath, interface, "ControlGroup", &err2.e,
                                 &cgroup);
  if (r < 0)
    return Error{-r,
                 fmt::format("cannot read ControlGroup of {}: {}", unit, busErrorText(err2.e, r))};
  std::string out(cgroup);
  std::free(cgroup);
  if (out.empty()) return Error{0, fmt::format("{} has no cgroup (it is not running)", unit)};
  return out;
}

SystemdLease::SystemdLease(std::unique_ptr<SystemdBus> bus, const lease::LeaseSpec& spec)
    : bus_(std::move(bus)),
      spec_(spec),
      scope_(lease::leaseScopeName(spec)),
      slice_(lease::leaseSliceName(spec)) {}

std::string SystemdLease::delegationHint() const {
  if (bus_->user()) {
    return "; the user manager needs the memory controller delegated: Delegate=memory on "
           "user@.service "
           "(systemctl edit user@.service), or run with --system";
  }
  return "; enable the memory controller at the cgroup v2 root (a pure cgroup v2 host: "
         "systemd.unified_cgroup_hierarchy=1)";
}

Status SystemdLease::place(pid_t pid) {
  Msg m;
  sd_bus* bus = bus_->bus();
  int r = sd_bus_message_new_method_call(bus, &m.m, kDest, kPath, kManager, "StartTransientUnit");
  if (r < 0) return Error{-r, "StartTransientUnit: cannot build the call"};
  std::string description = fmt::format("tally lease {} ({})", spec_.id, spec_.declaration.name);
  r = sd_bus_message_append(m.m, "ss", scope_.c_str(), "fail");
  if (r >= 0) r = sd_bus_message_open_container(m.m, 'a', "(sv)");
  if (r >= 0) r = sd_bus_message_append(m.m, "(sv)", "Description", "s", description.c_str());
  if (r >= 0) r = sd_bus_message_append(m.m, "(sv)", "Slice", "s", slice_.c_str());
  if (r >= 0)
    r = sd_bus_message_append(m.m, "(sv)", "PIDs", "au", 1, static_cast<std::uint32_t>(pid));
  if (r >= 0)
    r = sd_bus_message_append(m.m, "(sv)", "OOMPolicy", "s", lease::oomPolicyName(spec_.oomPolicy));
  if (r >= 0) r = sd_bus_message_append(m.m, "(sv)", "TimeoutStopUSec", "t", kStopGraceUs);
  // A failed lease scope (OOM kill) is collected at once; its record is tally's.
  if (r >= 0) r = sd_bus_message_append(m.m, "(sv)", "CollectMode", "s", "inactive-or-failed");
  // Only what was declared (doctrine 3): an undeclared limit stays "max".
  if (r >= 0 && spec_.memoryMax())
    r = sd_bus_message_append(m.m, "(sv)", "MemoryMax", "t", *spec_.memoryMax());
  if (r >= 0 && spec_.memoryHigh)
    r = sd_bus_message_append(m.m, "(sv)", "MemoryHigh", "t", *spec_.memoryHigh);
  if (r >= 0 && spec_.memorySwapMax)
    r = sd_bus_message_append(m.m, "(sv)", "MemorySwapMax", "t", *spec_.memorySwapMax);
  if (r >= 0) r = sd_bus_message_close_container(m.m);
  if (r >= 0) r = sd_bus_message_append(m.m, "a(sa(sv))", 0);
  if (r < 0)
    return Error{-r,
                 fmt::format("StartTransientUnit: cannot build the call: {}", std::strerror(-r))};

  BusError err;
  Msg reply;
  r = sd_bus_call(bus, m.m, kCallTimeoutUs, &err.e, &reply.m);
  if (r < 0) {
    return Error{-r, fmt::format("systemd ({} manager) refused the scope {} in {}: {}", manager(),
                                 scope_, slice_, busErrorText(err.e, r))};
  }
  placed_ = true;
  const char* job = nullptr;
  if ((r = sd_bus_message_read(reply.m, "o", &job)) < 0)
    return Error{-r, "StartTransientUnit: malformed reply"};
  auto result = bus_->waitJob(job, kCallTimeoutUs);
  if (!result) return result.error();
  if (*result != "done") {
    return Error{
        0,
        fmt::format("systemd could not start {} in {}: job result '{}' (journalctl -u {} says why)",
                    scope_, slice_, *result, scope_)};
  }
  auto cg = bus_->controlGroup(scope_, "org.freedesktop.systemd1.Scope");
  if (!cg) return cg.error();
  cgroup_ = *cg;
  sliceCgroup_ = fs::parentPath(cgroup_);
  if (!text::endsWith(sliceCgroup_, "/" + slice_)) {
    return Error{
        0, fmt::format("the scope's cgroup {} is not inside its lease slice {}", cgroup_, slice_)};
  }
  return Ok{};
}

Status SystemdLease::stop() { return bus_->stopUnit(scope_, false); }
Status SystemdLease::killAll() { return bus_->killUnit(scope_, SIGKILL); }

Status SystemdLease::endWorkload() {
  if (!placed_ || scopeStopped_) return Ok{};
  auto s = bus_->stopUnit(scope_, true);
  scopeStopped_ = s.ok();
  return s;
}

Status SystemdLease::release() {
  if (!placed_) return Ok{};
  // The scope first (a refused lease still has one), then its slice.
  auto s = endWorkload();
  auto t = bus_->stopUnit(slice_, true);
  return s ? t : s;
}

}  // namespace tally::contain
