// Units over the system manager's D-Bus API (sd-bus), attached to the
// daemon's event loop.
#pragma once

#include <memory>

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
  sd_bus* bus() const { return bus_->bus(); }

 private:
  std::unique_ptr<contain::SystemdBus> bus_;
};

}  // namespace tally::daemon
