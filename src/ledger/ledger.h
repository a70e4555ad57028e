// The local ledger: one SQLite database in the state directory, one row per
// lease outcome. Append-only (doctrine 7): triggers refuse UPDATE and DELETE,
// so a figure recorded once is never rewritten. WAL mode, synchronous=FULL:
// a row that append() returned for survives a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

struct sqlite3;

namespace tally::ledger {

struct Entry {
  std::string leaseId;
  std::string name;
  std::string manager;
  std::uint64_t startedAtNs = 0;
  std::uint64_t endedAtNs = 0;
  std::string outcomeClass;
  int exitStatus = 0;
  std::string recordJson;  // the full outcome record
};

struct Row {
  std::int64_t seq = 0;
  Entry entry;
};

class Ledger {
 public:
  // Creates the directory (0700) and the database as needed.
  static Result<Ledger> open(const std::string& stateDir);
  Ledger(Ledger&& o) noexcept;
  Ledger& operator=(Ledger&&) = delete;
  ~Ledger();

  const std::string& path() const { return path_; }
  Status append(const Entry& e);
  // The newest `limit` rows, oldest first.
  Result<std::vector<Row>> recent(std::size_t limit);

 private:
  Ledger(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_ = nullptr;
  std::string path_;
};

// The default state directory: $TALLY_STATE_DIR, else /var/lib/tally for
// root, else $XDG_STATE_HOME/tally (~/.local/state/tally).
std::string defaultStateDir();

}  // namespace tally::ledger
