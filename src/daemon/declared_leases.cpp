// Service, the declared leases' half ([leases.*], daemon/declared_leases.h):
// each run of a declared unit leased, as root's `tally attach --unit` would.
#include <fmt/format.h>
#include <syslog.h>

#include "daemon/service.h"

namespace tally::daemon {

using json = nlohmann::json;

const config::DeclaredLease* Service::declarationOf(const std::string& unit) const {
  if (unit.empty()) return nullptr;
  for (const auto& d : cfg_.leases) {
    if (d.unit() == unit) return &d;
  }
  return nullptr;
}

void Service::leaseDeclared(const config::DeclaredLease& d) {
  if (!env_.units || leaseOfUnit(d.unit())) return;
  DeclaredRun& st = declared_.byUnit[d.unit()];
  auto run = env_.units->run(d.unit());
  if (!run) return noteDeclared(d, st, run.error().message);
  if (!runLeasable(*run)) {
    st.waitsForRoom = false;  // not running: leased when systemd says it started
    return;
  }
  // One lease per run: a run whose lease ended (released, or refused past
  // admission) is not leased again; its next run is.
  if (!run->invocation.empty() &&
      (run->invocation == st.leasedInvocation || run->invocation == st.refusedInvocation))
    return;
  auto a = admit(0, Peer{0, 0, 0}, json(), d.attach.declared, &d.attach);
  if (a.denial) {
    st.waitsForRoom = a.wouldWait;
    if (!a.wouldWait) st.refusedInvocation = run->invocation;
    return noteDeclared(d, st, a.denial->message);
  }
  st = DeclaredRun{};
  st.leasedInvocation = run->invocation;
}

void Service::noteDeclared(const config::DeclaredLease& d, DeclaredRun& st,
                           const std::string& why) {
  if (st.refusedWhy == why) return;  // said once per distinct reason, not every retry
  st.refusedWhy = why;
  events_.note(LOG_WARNING,
               fmt::format("[leases.{}] {} runs unleased (unmetered, unbounded): {}{}", d.name,
                           d.unit(), why, st.waitsForRoom ? "; tried again as room frees" : ""),
               {{"TALLY_DECLARED", d.name}, {"TALLY_UNIT", d.unit()}});
}

std::vector<std::string> Service::startDeclared() {
  std::vector<std::string> log;
  for (const auto& d : cfg_.leases) {
    if (!env_.units) {
      log.push_back(fmt::format("[leases.{}] {}: not followed: no systemd manager is reachable",
                                d.name, d.unit()));
      continue;
    }
    if (auto s = env_.units->watchUnit(d.unit()); !s) {
      log.push_back(
          fmt::format("[leases.{}] {}: not followed: {}", d.name, d.unit(), s.error().message));
      continue;
    }
    leaseDeclared(d);
    if (const Lease* l = leaseOfUnit(d.unit())) {
      log.push_back(fmt::format("[leases.{}] {}: leased ({})", d.name, d.unit(), l->id));
    } else if (auto it = declared_.byUnit.find(d.unit());
               it != declared_.byUnit.end() && !it->second.refusedWhy.empty()) {
      log.push_back(fmt::format("[leases.{}] {}: runs unleased: {}", d.name, d.unit(),
                                it->second.refusedWhy));
    } else {
      log.push_back(
          fmt::format("[leases.{}] {}: not running; leased when it starts", d.name, d.unit()));
    }
  }
  return log;
}

void Service::retryDeclared(std::uint64_t nowUs) {
  // Admission only: the unit's state comes from systemd's signals.
  if (nowUs - declared_.lastPassUs < 1'000'000) return;
  declared_.lastPassUs = nowUs;
  for (const auto& d : cfg_.leases) {
    if (auto it = declared_.byUnit.find(d.unit());
        it != declared_.byUnit.end() && it->second.waitsForRoom)
      leaseDeclared(d);
  }
}

}  // namespace tally::daemon
