// Service, the systemd units half: attached units that stop or start
// again, and the leases the config declares for units ([leases.*]).
#include <fmt/format.h>
#include <syslog.h>

#include "daemon/service.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::daemon {

using json = nlohmann::json;
namespace code = rpc::code;

Lease* Service::leaseOfUnit(const std::string& unit) {
  for (const auto& [id, l] : book_.all()) {
    if (l->isAttach() && (l->place.unit == unit || (l->target && l->target->unit == unit)))
      return l.get();
  }
  return nullptr;
}

const config::DeclaredLease* Service::declarationOf(const std::string& unit) const {
  if (unit.empty()) return nullptr;
  for (const auto& d : cfg_.leases) {
    if (d.unit() == unit) return &d;
  }
  return nullptr;
}

void Service::endAttached(Lease& l) {
  std::optional<std::string> words;
  const std::string unit = l.place.unit;
  if (!unit.empty() && env_.units) {
    if (auto run = env_.units->run(unit)) {
      RunEnding e = runEnding(unit, l.place.invocation, *run);
      if (const config::DeclaredLease* d = declarationOf(unit)) {
        words =
            e.words +
            (e.restart ? "; its next run is leased again" : "; leased again when it next starts") +
            fmt::format(" ([leases.{}])", d->name);
      } else if (e.restart) {
        words = e.words + fmt::format(
                              "; its next run is not leased: tally attach --unit {} again, or "
                              "declare it in [leases.NAME] to lease every run",
                              unit);
      } else {
        words = e.words;
      }
    }
  }
  endings_.finishAttached(l, false, std::move(words));
}

void Service::unitChanged(const std::string& unit) {
  if (!env_.units) return;
  if (Lease* l = leaseOfUnit(unit)) {
    // The lease's cgroup (held open) still has processes: its run goes on.
    if (l->state() != Lease::State::Running || Endings::populated(*l)) return;
    endAttached(*l);  // frees l
  }
  if (const config::DeclaredLease* d = declarationOf(unit)) leaseDeclared(*d);
}

void Service::leaseDeclared(const config::DeclaredLease& d) {
  if (!env_.units || leaseOfUnit(d.unit())) return;
  DeclaredRun& st = declared_[d.unit()];
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
    } else if (auto it = declared_.find(d.unit());
               it != declared_.end() && !it->second.refusedWhy.empty()) {
      log.push_back(fmt::format("[leases.{}] {}: runs unleased: {}", d.name, d.unit(),
                                it->second.refusedWhy));
    } else {
      log.push_back(
          fmt::format("[leases.{}] {}: not running; leased when it starts", d.name, d.unit()));
    }
  }
  return log;
}

}  // namespace tally::daemon
