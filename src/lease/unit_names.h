// The names tally gives what it makes for a lease, built only here: a
// lease's scope ("tally-<id>.scope"; its cgroupfs directory without the
// suffix) and a detached job's service ("tally-job-<token>.service").
// Callers that show an operator a unit name (`journalctl -u`) ask here too.
#pragma once

#include <string>
#include <string_view>

namespace tally::lease {

inline std::string leaseCgroupName(std::string_view leaseId) {
  return "tally-" + std::string(leaseId);
}
inline std::string leaseScopeName(std::string_view leaseId) {
  return leaseCgroupName(leaseId) + ".scope";
}

inline constexpr std::string_view kJobUnitPrefix = "tally-job-", kJobUnitSuffix = ".service";
inline std::string jobUnitName(std::string_view token) {
  return std::string(kJobUnitPrefix) + std::string(token) + std::string(kJobUnitSuffix);
}
// Whether `unit` is a name jobUnitName() makes (with a token).
constexpr bool isJobUnitName(std::string_view unit) {
  return unit.size() > kJobUnitPrefix.size() + kJobUnitSuffix.size() &&
         unit.substr(0, kJobUnitPrefix.size()) == kJobUnitPrefix &&
         unit.substr(unit.size() - kJobUnitSuffix.size()) == kJobUnitSuffix;
}

}  // namespace tally::lease
