// Units over the system manager's D-Bus API (sd-bus), attached to the
// daemon's event loop.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "contain/systemd_lease.h"
#include "daemon/seams.h"

namespace tally::daemon {

class SystemdUnits final : public Units {
 public:
  explicit SystemdUnits(std::unique_ptr<contain::SystemdBus> bus) : bus_(std::move(bus)) {}
  Result<std::string> controlGroup(const std::string& unit) override;
  Status setMemoryMax(const std::string& unit, std::uint64_t bytes) override;
  Status killUnit(const std::string& unit, int signal) override {
    return bus_->killUnit(unit, signal);
  }
  Status stopUnit(const std::string& unit) override { return bus_->stopUnit(unit, false); }
  Result<UnitRun> run(const std::string& unit) override;
  Status watchUnit(const std::string& unit) override;
  // Where watchUnit's signals go (the composition root sets the service's).
  void onChange(std::function<void(const std::string&)> f) { changed_ = std::move(f); }
  sd_bus* bus() const { return bus_->bus(); }

 private:
  static int propertiesChanged(sd_bus_message* m, void* self, sd_bus_error* error);

  std::unique_ptr<contain::SystemdBus> bus_;
  std::function<void(const std::string&)> changed_;
  bool subscribed_ = false;
  // One match per watched unit, by its object path (the signal names the path).
  struct Slot {
    sd_bus_slot* slot = nullptr;
    ~Slot() { sd_bus_slot_unref(slot); }
  };
  std::map<std::string, std::string> unitOfPath_;
  std::map<std::string, std::unique_ptr<Slot>> slots_;
};

}  // namespace tally::daemon
