#include "ledger/ledger.h"

#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "ledger/head_witness.h"
#include "ledger/schema.h"
#include "ledger/statement.h"
#include "util/clock.h"
#include "util/sha256.h"

namespace tally::ledger {

using detail::dbError;
using detail::eventFrom;
using detail::Stmt;

namespace {

// Outcome-like rows (a terminal row that carries a record), for listings.
std::string outcomeKindsSql() { return fmt::format("'{}','{}'", kOutcome, kLost); }

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

// The listing fields of an outcome-like body (a lease record, schema 1).
Entry entryFromRecord(const std::string& leaseId, const std::string& body) {
  Entry e;
  e.leaseId = leaseId;
  e.recordJson = body;
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return e;
  auto str = [](const nlohmann::json& o, const char* k) {
    return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>()
                                                              : std::string();
  };
  auto u64 = [](const nlohmann::json& o, const char* k) -> std::uint64_t {
    return o.is_object() && o.contains(k) && o[k].is_number_unsigned() ? o[k].get<std::uint64_t>()
                                                                       : 0;
  };
  const auto& lease = j.contains("lease") ? j["lease"] : nlohmann::json();
  const auto& outcome = j.contains("outcome") ? j["outcome"] : nlohmann::json();
  e.name = str(lease, "name");
  e.manager = str(lease, "manager");
  e.startedAtNs = u64(j, "started_at_ns");
  e.endedAtNs = u64(j, "ended_at_ns");
  e.outcomeClass = str(outcome, "class");
  if (outcome.is_object() && outcome.contains("tally_exit_status") &&
      outcome["tally_exit_status"].is_number_integer()) {
    e.exitStatus = outcome["tally_exit_status"].get<int>();
  }
  return e;
}

}  // namespace

std::string rowHash(std::int64_t seq, std::uint64_t atNs, std::string_view leaseId,
                    std::string_view kind, std::string_view body, std::string_view prevHash) {
  // Lengths prefix the free-text fields, so no two rows serialise alike.
  return sha256::hex(fmt::format("tally-ledger-v2\n{}\n{}\n{}:{}\n{}:{}\n{}:{}\n{}", seq, atNs,
                                 leaseId.size(), leaseId, kind.size(), kind, body.size(), body,
                                 prevHash));
}

std::string defaultStateDir() {
  if (const char* dir = std::getenv("TALLY_STATE_DIR"); dir && *dir) return dir;
  if (geteuid() == 0) return "/var/lib/tally";
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/tally";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.local/state/tally";
  return "/tmp/tally-state-" + std::to_string(geteuid());
}

Status createStateDir(const std::string& stateDir) { return mkdirs(stateDir); }

Result<std::vector<std::string>> Ledger::damage() {
  Stmt q(db_, "PRAGMA quick_check(10)");
  if (!q.ok()) return dbError(db_, fmt::format("ledger {}: integrity check", path_));
  std::vector<std::string> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    std::string line = q.col(0);
    if (line != "ok") out.push_back(line);
  }
  if (rc != SQLITE_DONE) return dbError(db_, fmt::format("ledger {}: integrity check", path_));
  return out;
}

bool ledgerExists(const std::string& stateDir) {
  struct stat st {};
  return ::stat((stateDir + "/ledger.sqlite").c_str(), &st) == 0;
}

Status canCreateLedger(const std::string& stateDir) {
  std::string dir = stateDir.empty() ? "." : stateDir;
  struct stat st {};
  while (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT)
      return Error{errno, fmt::format("cannot create the ledger under {}: {}: {}", stateDir, dir,
                                      std::strerror(errno))};
    auto slash = dir.find_last_of('/');
    if (slash == std::string::npos) {
      dir = ".";
    } else {
      dir = slash == 0 ? "/" : dir.substr(0, slash);
    }
  }
  if (!S_ISDIR(st.st_mode))
    return Error{ENOTDIR, fmt::format("cannot create the ledger under {}: {} is not a directory "
                                      "(pass --state-dir)",
                                      stateDir, dir)};
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Error{errno, fmt::format("cannot create the ledger under {}: {} is not writable by "
                                    "this user (pass --state-dir)",
                                    stateDir, dir)};
  return Ok{};
}

Result<Ledger> Ledger::openExisting(const std::string& stateDir) {
  std::string path = stateDir + "/ledger.sqlite";
  struct stat st {};
  if (::stat(stateDir.c_str(), &st) != 0)
    return Error{errno, fmt::format("no ledger at {}: the state directory {} does not exist "
                                    "(nothing was recorded there; pass --state-dir or --config "
                                    "to read another)",
                                    path, stateDir)};
  if (::stat(path.c_str(), &st) != 0)
    return Error{errno, fmt::format("no ledger at {}: {} (nothing was recorded there; pass "
                                    "--state-dir or --config to read another)",
                                    path, std::strerror(errno))};
  return openFile(path, false);
}

Result<Ledger> Ledger::open(const std::string& stateDir) {
  if (auto s = mkdirs(stateDir); !s) return s.error();
  return openFile(stateDir + "/ledger.sqlite", true);
}

Result<Ledger> Ledger::openFile(const std::string& path, bool create) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db,
      SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_FULLMUTEX, nullptr);
  Ledger ledger(db, path);
  if (rc != SQLITE_OK)
    return dbError(db, fmt::format("open ledger {} (pass --state-dir to put it elsewhere)", path));
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  // A small page cache (512 KiB, not SQLite's 2 MiB default): the daemon
  // appends and rarely reads, and its RSS budget is 10 MiB.
  rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA cache_size=-512;",
                    nullptr, nullptr, &err);
  std::string msg;
  if (rc != SQLITE_OK) {
    msg = err ? err : "unknown";
    sqlite3_free(err);
  } else if (!detail::applySchema(db, msg)) {
    rc = SQLITE_ERROR;
  }
  if (rc != SQLITE_OK)
    return Error{
        0, fmt::format("ledger {} is not usable: {} (pass --state-dir to put it elsewhere)", path,
                       msg)};
  return ledger;
}

Ledger::Ledger(Ledger&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)),
      path_(std::move(o.path_)),
      eventFailure_(std::move(o.eventFailure_)),
      sampleFailure_(std::move(o.sampleFailure_)),
      witnessFailure_(std::move(o.witnessFailure_)),
      deferHead_(o.deferHead_),
      unwitnessed_(std::exchange(o.unwitnessed_, std::nullopt)),
      kept_(std::exchange(o.kept_, {})) {}

Ledger::~Ledger() {
  flushHead();
  for (auto& [sql, st] : kept_) sqlite3_finalize(st);
  if (db_) sqlite3_close_v2(db_);
}

int Ledger::exec(std::string_view sql) {
  Stmt st(db_, kept_, sql);
  if (!st.ok()) return sqlite3_errcode(db_);
  int rc = st.step();
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

Result<Event> Ledger::appendEvent(const std::string& leaseId, std::string_view kind,
                                  const std::string& bodyJson, std::uint64_t atNs) {
  // IMMEDIATE takes the write lock before reading the head, so no other
  // writer can append between the read and the insert.
  if (exec("BEGIN IMMEDIATE") != SQLITE_OK) {
    Error err = dbError(db_, fmt::format("ledger {}: begin", path_));
    eventFailure_ = err.message;
    return err;
  }
  auto rollback = [&](const std::string& what) {
    Error e = dbError(
        db_, fmt::format("append {} of lease {} to ledger {}: {}", kind, leaseId, path_, what));
    exec("ROLLBACK");
    eventFailure_ = e.message;
    return e;
  };
  Event e;
  e.leaseId = leaseId;
  e.kind = std::string(kind);
  e.body = bodyJson;
  e.atNs = atNs ? atNs : clock::realtimeNs();
  {
    Stmt head(db_, kept_, "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1");
    if (!head.ok()) return rollback("read head");
    int rc = head.step();
    if (rc == SQLITE_ROW) {
      e.seq = head.colI64(0) + 1;
      e.prevHash = head.col(1);
    } else if (rc == SQLITE_DONE) {
      e.seq = 1;
      e.prevHash = kGenesisHash;
    } else {
      return rollback("read head");
    }
  }
  e.hash = rowHash(e.seq, e.atNs, e.leaseId, e.kind, e.body, e.prevHash);
  {
    Stmt ins(db_, kept_,
             "INSERT INTO events (seq, at_ns, lease_id, kind, body, prev_hash, hash) VALUES "
             "(?1,?2,?3,?4,?5,?6,?7)");
    if (!ins.ok()) return rollback("prepare");
    ins.i64(1, e.seq);
    ins.u64(2, e.atNs);
    ins.text(3, e.leaseId);
    ins.text(4, e.kind);
    ins.text(5, e.body);
    ins.text(6, e.prevHash);
    ins.text(7, e.hash);
    if (ins.step() != SQLITE_DONE) {
      if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_UNIQUE && isTerminal(kind)) {
        exec("ROLLBACK");
        return Error{
            EEXIST,
            fmt::format(
                "lease {} already has its terminal row in ledger {}; an outcome is recorded once",
                leaseId, path_)};
      }
      return rollback("insert");
    }
  }
  if (exec("COMMIT") != SQLITE_OK) return rollback("commit");
  // The row is on disk whatever the witness does; a witness that cannot move
  // only narrows what verify() can see, and is said as a write failure.
  eventFailure_.reset();
  unwitnessed_ = Head{e.seq, e.hash};
  if (!deferHead_) flushHead();
  return e;
}

Result<std::vector<std::string>> Ledger::acknowledgedDamage() {
  Stmt q(db_, "SELECT seq, body FROM events WHERE kind = ?1 ORDER BY seq DESC LIMIT 1");
  if (!q.ok()) return dbError(db_, fmt::format("ledger {}: acknowledged damage", path_));
  q.text(1, kDamageAcknowledged);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::vector<std::string>{};
  if (rc != SQLITE_ROW) return dbError(db_, fmt::format("ledger {}: acknowledged damage", path_));
  std::int64_t seq = q.colI64(0);
  auto body = nlohmann::json::parse(q.col(1), nullptr, false);
  std::vector<std::string> out;
  if (body.is_object() && body.contains("problems") && body["problems"].is_array()) {
    for (const auto& p : body["problems"]) {
      if (!p.is_string()) break;
      out.push_back(p.get<std::string>());
    }
    if (out.size() == body["problems"].size()) return out;
  }
  return Error{EINVAL, fmt::format("ledger {}: row {} ({}) does not list its problems as text; "
                                   "acknowledge the damage again",
                                   path_, seq, kDamageAcknowledged)};
}

void Ledger::flushHead() {
  if (!unwitnessed_) return;
  Head h = std::move(*unwitnessed_);
  unwitnessed_.reset();
  if (auto w = advanceHead(path_, h); !w)
    witnessFailure_ =
        fmt::format("the ledger's head witness was not moved on: {}", w.error().message);
  else
    witnessFailure_.reset();
}

Result<Event> Ledger::acknowledgeDamage(const std::vector<std::string>& problems,
                                        std::uint32_t uid) {
  nlohmann::json body = {{"problems", problems}, {"uid", uid}};
  auto ev = appendEvent("", kDamageAcknowledged,
                        body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (!ev) return ev;
  unwitnessed_.reset();  // the reset names this row
  if (auto w = resetHead(path_, Head{ev->seq, ev->hash}); !w) return w.error();
  return ev;
}

std::vector<std::string> Ledger::unacceptedDamage() {
  std::vector<std::string> found, accepted;
  if (auto v = verify())
    found = v->problems;
  else
    found.push_back("the chain could not be verified: " + v.error().message);
  if (auto a = acknowledgedDamage())
    accepted = *a;
  else
    found.push_back(a.error().message);
  return unacknowledged(found, accepted);
}

std::vector<std::string> unacknowledged(const std::vector<std::string>& found,
                                        const std::vector<std::string>& acknowledged) {
  std::vector<std::string> out;
  for (const auto& p : found)
    if (std::find(acknowledged.begin(), acknowledged.end(), p) == acknowledged.end())
      out.push_back(p);
  return out;
}

Status Ledger::appendOutcome(const std::string& leaseId, const std::string& recordJson) {
  auto r = appendEvent(leaseId, kOutcome, recordJson);
  if (!r) return r.error();
  return Ok{};
}

Result<std::vector<Row>> Ledger::recent(std::size_t limit) {
  // Legacy rows first (they predate every chain row), then the chain's.
  std::string sql = fmt::format(
      "SELECT legacy, seq, lease_id, body FROM ("
      " SELECT 0 AS legacy, seq, lease_id, body, 1 AS ord FROM events WHERE kind IN ({})"
      " UNION ALL SELECT 1 AS legacy, seq, lease_id, record AS body, 0 AS ord FROM lease_outcomes"
      " ORDER BY ord DESC, seq DESC LIMIT ?1) ORDER BY ord ASC, seq ASC",
      outcomeKindsSql());
  Stmt q(db_, sql.c_str());
  if (!q.ok()) return dbError(db_, "ledger query");
  q.u64(1, limit);
  std::vector<Row> rows;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    Row r;
    r.legacy = q.colI64(0) != 0;
    r.seq = q.colI64(1);
    r.entry = entryFromRecord(q.col(2), q.col(3));
    rows.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return dbError(db_, "ledger query");
  return rows;
}

Result<VerifyReport> Ledger::verify() {
  VerifyReport rep;
  {
    // Every page, not only the chain's rows: SQLite's own check.
    Stmt ic(db_, "PRAGMA integrity_check(10)");
    if (!ic.ok()) return dbError(db_, "ledger verify: integrity check");
    int rc;
    while ((rc = ic.step()) == SQLITE_ROW) {
      std::string line = ic.col(0);
      if (line != "ok")
        rep.problems.push_back("the database is damaged (SQLite integrity_check): " + line);
    }
    if (rc != SQLITE_DONE) return dbError(db_, "ledger verify: integrity check");
  }
  {
    Stmt n(db_, "SELECT count(*) FROM lease_outcomes");
    if (n.ok() && n.step() == SQLITE_ROW) rep.legacyRows = static_cast<std::uint64_t>(n.colI64(0));
  }
  std::optional<Head> witness;
  std::string witnessedHash;
  if (auto w = readHead(path_); !w)
    rep.problems.push_back(w.error().message);
  else
    witness = *w;
  // Read by rowid order as stored, not by seq: a reordered table shows up as
  // seq going backwards.
  Stmt q(db_,
         "SELECT seq, at_ns, lease_id, kind, body, prev_hash, hash FROM events ORDER BY rowid");
  if (!q.ok()) return dbError(db_, "ledger verify");
  std::string prev = kGenesisHash;
  std::int64_t expectSeq = 1;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    Event e = eventFrom(q);
    ++rep.rows;
    if (e.seq != expectSeq) {
      if (e.seq > expectSeq) {
        rep.problems.push_back(
            e.seq == expectSeq + 1
                ? fmt::format("row {} is missing (deleted)", expectSeq)
                : fmt::format("rows {}..{} are missing (deleted)", expectSeq, e.seq - 1));
      } else {
        rep.problems.push_back(fmt::format("row {} appears after row {} (reordered or re-inserted)",
                                           e.seq, expectSeq - 1));
      }
    }
    std::string want = rowHash(e.seq, e.atNs, e.leaseId, e.kind, e.body, e.prevHash);
    if (want != e.hash) {
      rep.problems.push_back(
          fmt::format("row {} (lease {}, {}) was edited: its content does not match its hash",
                      e.seq, e.leaseId, e.kind));
    }
    if (e.prevHash != prev) {
      rep.problems.push_back(fmt::format(
          "row {} does not follow the row before it (previous hash differs): a row before it "
          "was edited, deleted or moved",
          e.seq));
    }
    if (witness && e.seq == witness->seq) witnessedHash = e.hash;
    prev = e.hash;
    expectSeq = e.seq + 1;
    rep.headSeq = e.seq;
    rep.headHash = e.hash;
  }
  if (rc != SQLITE_DONE) return dbError(db_, "ledger verify");
  // Rows lost at the end leave a chain that verifies: the witness says so.
  if (witness) {
    rep.witnessSeq = witness->seq;
    if (witness->seq > rep.headSeq) {
      rep.problems.push_back(fmt::format(
          "{} at the end {} missing: the chain ends at row {} but its head witness ({}, moved on "
          "after every committed row) names row {} (a lost or older write-ahead log?)",
          witness->seq == rep.headSeq + 1
              ? fmt::format("row {}", witness->seq)
              : fmt::format("rows {}..{}", rep.headSeq + 1, witness->seq),
          witness->seq == rep.headSeq + 1 ? "is" : "are", rep.headSeq, headWitnessPath(path_),
          witness->seq));
    } else if (witnessedHash != witness->hash) {
      rep.problems.push_back(fmt::format(
          "row {} is not the row its head witness ({}) names: rows from it on were replaced",
          witness->seq, headWitnessPath(path_)));
    }
  }
  return rep;
}

}  // namespace tally::ledger
