// A standalone `tally run` (no --pool) in the journal: its start, GPU bound
// events and outcome, with the same fields as the daemon's entries for a
// pool lease (the runner has printed them on stderr already).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "journal/journal.h"
#include "run/runner.h"

namespace tally::run {

class JournalObserver final : public LeaseObserver {
 public:
  JournalObserver(std::string id, std::string name) : id_(std::move(id)), name_(std::move(name)) {}
  Status placed(const LeaseRecord&, const contain::LeaseCgroup& cg) override;
  void finished(LeaseRecord&) override {}
  void bound(const enforce::BoundEvent& e) override;
  void ended(const nlohmann::ordered_json& record);

 private:
  void send(const journal::JournalEntry& e) { journal_.note(e.priority, e.message, e.fields); }
  std::string id_, name_;
  journal::VerifiedPlace place_;
  journal::SdJournal journal_{false, "tally run: "};
};

}  // namespace tally::run
