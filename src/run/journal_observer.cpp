#include "run/journal_observer.h"

namespace tally::run {

Status JournalObserver::placed(const LeaseRecord&, const contain::LeaseCgroup& cg) {
  send(journal::lifecycleEntry("started", id_, name_, {},
                               {{"unit", cg.unitName()}, {"cgroup", cg.cgroup()}}));
  return Ok{};
}

void JournalObserver::bound(const enforce::BoundEvent& e) {
  send(journal::boundEventEntry(id_, name_, e));
}

void JournalObserver::ended(const nlohmann::ordered_json& record) {
  send(journal::lifecycleEntry("outcome", id_, name_, {}, nlohmann::json::parse(record.dump())));
}

}  // namespace tally::run
