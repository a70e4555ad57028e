#include "run/journal_observer.h"

namespace tally::run {

Status JournalObserver::placed(const LeaseRecord&, const contain::LeaseCgroup& cg) {
  place_ = {cg.unitName(), cg.cgroup()};  // its own: this run made it
  send(journal::lifecycleEntry("started", id_, name_, {},
                               {{"unit", cg.unitName()}, {"cgroup", cg.cgroup()}}, {}, place_));
  return Ok{};
}

void JournalObserver::bound(const enforce::BoundEvent& e) {
  send(journal::boundEventEntry(id_, name_, e));
}

void JournalObserver::ended(const nlohmann::ordered_json& record) {
  send(journal::lifecycleEntry("outcome", id_, name_, {}, nlohmann::json::parse(record.dump()), {},
                               place_));
}

}  // namespace tally::run
