// Service, the systemd units half: attached units that stop or start
// again (the leases the config declares for units are in declared_leases.cpp).
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

}  // namespace tally::daemon
