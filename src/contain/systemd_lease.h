// A lease as a transient systemd scope, created through the manager's D-Bus API
// (sd-bus; never by shelling out to systemd-run). The scope sits in a slice of
// its own, "<parent>-<id>.slice", whose hierarchical counters outlive the
// scope: systemd 252 removes a stopped scope's cgroup at once, even while a
// bus client holds a reference to the unit.
#pragma once

#include <systemd/sd-bus.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "contain/lease_cgroup.h"
#include "lease/spec.h"

namespace tally::contain {

// A connection to one systemd manager, with the job bookkeeping every call
// that starts or stops a unit needs.
class SystemdBus {
 public:
  // `user`: the calling user's manager; otherwise the system manager.
  static Result<std::unique_ptr<SystemdBus>> connect(bool user);
  ~SystemdBus();
  SystemdBus(const SystemdBus&) = delete;
  SystemdBus& operator=(const SystemdBus&) = delete;

  bool user() const { return user_; }
  sd_bus* bus() const { return bus_; }

  // Waits for the job's JobRemoved signal; returns its result ("done",
  // "failed", "canceled", "timeout", "dependency", "skipped").
  Result<std::string> waitJob(const std::string& jobPath, std::uint64_t timeoutUs);
  // StopUnit(name, "replace"), optionally waiting for the job. A unit that no
  // longer exists is already stopped.
  Status stopUnit(const std::string& name, bool wait);
  Status killUnit(const std::string& name, int signal);
  // The manager's Version property ("252.39-1~deb12u1").
  Result<std::string> version();
  // The unit's ControlGroup property.
  Result<std::string> controlGroup(const std::string& unit, const char* interface);

 private:
  SystemdBus(sd_bus* bus, bool user) : bus_(bus), user_(user) {}
  static int onJobRemoved(sd_bus_message* m, void* self, sd_bus_error* error);
  sd_bus* bus_ = nullptr;
  sd_bus_slot* jobSlot_ = nullptr;
  bool user_ = false;
  std::map<std::string, std::string> finishedJobs_;  // job path -> result
};

class SystemdLease final : public LeaseCgroup {
 public:
  SystemdLease(std::unique_ptr<SystemdBus> bus, const lease::LeaseSpec& spec);

  const char* manager() const override { return bus_->user() ? "user" : "system"; }
  std::string unitName() const override { return scope_; }
  std::string sliceName() const override { return slice_; }
  Status place(pid_t pid) override;
  const std::string& cgroup() const override { return cgroup_; }
  const std::string& countersCgroup() const override { return sliceCgroup_; }
  std::string delegationHint() const override;
  Status stop() override;
  Status killAll() override;
  Status endWorkload() override;
  Status release() override;

 private:
  std::unique_ptr<SystemdBus> bus_;
  const lease::LeaseSpec& spec_;
  std::string scope_, slice_;
  std::string cgroup_, sliceCgroup_;
  bool placed_ = false;
  bool scopeStopped_ = false;  // endWorkload() saw its stop job done
};

}  // namespace tally::contain
