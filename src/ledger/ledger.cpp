#include "ledger/ledger.h"

#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

namespace tally::ledger {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS lease_outcomes (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  lease_id       TEXT    NOT NULL UNIQUE,
  name           TEXT    NOT NULL,
  manager        TEXT    NOT NULL,
  started_at_ns  INTEGER NOT NULL,
  ended_at_ns    INTEGER NOT NULL,
  outcome_class  TEXT    NOT NULL,
  exit_status    INTEGER NOT NULL,
  record         TEXT    NOT NULL
);
CREATE TRIGGER IF NOT EXISTS lease_outcomes_no_update BEFORE UPDATE ON lease_outcomes
  BEGIN SELECT RAISE(ABORT, 'tally ledger rows are never rewritten'); END;
CREATE TRIGGER IF NOT EXISTS lease_outcomes_no_delete BEFORE DELETE ON lease_outcomes
  BEGIN SELECT RAISE(ABORT, 'tally ledger rows are never deleted'); END;
PRAGMA user_version = 1;
)sql";

Status mkdirs(const std::string& dir) {
  std::string partial;
  std::size_t i = 0;
  while (i <= dir.size()) {
    auto next = dir.find('/', i);
    if (next == std::string::npos) next = dir.size();
    partial = dir.substr(0, next);
    if (!partial.empty() && ::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return errnoError(errno, fmt::format("create state directory {}", partial));
    }
    i = next + 1;
  }
  return Ok{};
}

Error dbError(sqlite3* db, const std::string& what) {
  return Error{0, fmt::format("{}: {}", what, db ? sqlite3_errmsg(db) : "out of memory")};
}

}  // namespace

std::string defaultStateDir() {
  if (const char* dir = std::getenv("TALLY_STATE_DIR"); dir && *dir) return dir;
  if (geteuid() == 0) return "/var/lib/tally";
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) return std::string(xdg) + "/tally";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.local/state/tally";
  return "/tmp/tally-state-" + std::to_string(geteuid());
}

Result<Ledger> Ledger::open(const std::string& stateDir) {
  if (auto s = mkdirs(stateDir); !s) return s.error();
  std::string path = stateDir + "/ledger.sqlite";
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  Ledger ledger(db, path);
  if (rc != SQLITE_OK) return dbError(db, fmt::format("open ledger {} (pass --state-dir to put it elsewhere)", path));
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", nullptr, nullptr, &err);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, kSchema, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : "unknown";
    sqlite3_free(err);
    return Error{0, fmt::format("ledger {} is not usable: {} (pass --state-dir to put it elsewhere)", path, msg)};
  }
  return ledger;
}

Ledger::Ledger(Ledger&& o) noexcept : db_(std::exchange(o.db_, nullptr)), path_(std::move(o.path_)) {}

Ledger::~Ledger() {
  if (db_) sqlite3_close_v2(db_);
}

Status Ledger::append(const Entry& e) {
  sqlite3_stmt* st = nullptr;
  const char* sql =
      "INSERT INTO lease_outcomes (lease_id, name, manager, started_at_ns, ended_at_ns, outcome_class, exit_status, record)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
  if (sqlite3_prepare_v2(db_, sql, -1, &st, nullptr) != SQLITE_OK) return dbError(db_, "ledger insert");
  sqlite3_bind_text(st, 1, e.leaseId.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, e.name.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 3, e.manager.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 4, static_cast<sqlite3_int64>(e.startedAtNs));
  sqlite3_bind_int64(st, 5, static_cast<sqlite3_int64>(e.endedAtNs));
  sqlite3_bind_text(st, 6, e.outcomeClass.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 7, e.exitStatus);
  sqlite3_bind_text(st, 8, e.recordJson.c_str(), -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return dbError(db_, fmt::format("append lease {} to ledger {}", e.leaseId, path_));
  return Ok{};
}

Result<std::vector<Row>> Ledger::recent(std::size_t limit) {
  sqlite3_stmt* st = nullptr;
  const char* sql =
      "SELECT seq, lease_id, name, manager, started_at_ns, ended_at_ns, outcome_class, exit_status, record"
      " FROM (SELECT * FROM lease_outcomes ORDER BY seq DESC LIMIT ?1) ORDER BY seq";
  if (sqlite3_prepare_v2(db_, sql, -1, &st, nullptr) != SQLITE_OK) return dbError(db_, "ledger query");
  sqlite3_bind_int64(st, 1, static_cast<sqlite3_int64>(limit));
  std::vector<Row> rows;
  auto text = [&](int col) {
    const unsigned char* t = sqlite3_column_text(st, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    Row r;
    r.seq = sqlite3_column_int64(st, 0);
    r.entry.leaseId = text(1);
    r.entry.name = text(2);
    r.entry.manager = text(3);
    r.entry.startedAtNs = static_cast<std::uint64_t>(sqlite3_column_int64(st, 4));
    r.entry.endedAtNs = static_cast<std::uint64_t>(sqlite3_column_int64(st, 5));
    r.entry.outcomeClass = text(6);
    r.entry.exitStatus = sqlite3_column_int(st, 7);
    r.entry.recordJson = text(8);
    rows.push_back(std::move(r));
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return dbError(db_, "ledger query");
  return rows;
}

}  // namespace tally::ledger
