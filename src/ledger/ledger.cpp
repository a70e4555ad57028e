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
#include "util/clock.h"
#include "util/sha256.h"

namespace tally::ledger {
namespace {

// "'outcome','lost','withdrawn'": the terminal kinds as an SQL list, from ledger/kinds.h.
std::string terminalKindsSql() {
  std::string out;
  for (const char* k : kTerminalKinds) out += fmt::format("{}'{}'", out.empty() ? "" : ",", k);
  return out;
}

// Outcome-like rows (a terminal row that carries a record), for listings.
std::string outcomeKindsSql() { return fmt::format("'{}','{}'", kOutcome, kLost); }

constexpr const char* kSchemaTemplate = R"sql(
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

CREATE TABLE IF NOT EXISTS events (
  seq        INTEGER PRIMARY KEY,
  at_ns      INTEGER NOT NULL,
  lease_id   TEXT    NOT NULL,
  kind       TEXT    NOT NULL,
  body       TEXT    NOT NULL,
  prev_hash  TEXT    NOT NULL,
  hash       TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_lease ON events (lease_id, seq);
CREATE INDEX IF NOT EXISTS events_by_time ON events (at_ns);
CREATE UNIQUE INDEX IF NOT EXISTS events_one_terminal ON events (lease_id)
  WHERE kind IN (@TERMINAL@);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
  BEGIN SELECT RAISE(ABORT, 'tally ledger rows are never rewritten; append a correction'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
  BEGIN SELECT RAISE(ABORT, 'tally ledger rows are never deleted'); END;

CREATE TABLE IF NOT EXISTS samples (
  lease_id        TEXT    NOT NULL,
  at_ns           INTEGER NOT NULL,
  memory_current  INTEGER,
  gpu_bytes       INTEGER,
  gtt_bytes       INTEGER,
  vram_bytes      INTEGER
);
CREATE INDEX IF NOT EXISTS samples_by_lease ON samples (lease_id, at_ns);
CREATE INDEX IF NOT EXISTS samples_by_time ON samples (at_ns);
PRAGMA user_version = 2;
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

// A prepared statement, finalized once; or one of the ledger's kept
// statements, taken from `kept` while in use (a nested use of the same SQL
// prepares its own) and reset and put back after.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) {
    ok_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) == SQLITE_OK;
  }
  Stmt(sqlite3* db, std::map<std::string_view, sqlite3_stmt*>& kept, std::string_view sql)
      : kept_(&kept), sql_(sql) {
    if (auto it = kept.find(sql); it != kept.end() && it->second) {
      st_ = std::exchange(it->second, nullptr);
      ok_ = true;
      return;
    }
    ok_ = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                             SQLITE_PREPARE_PERSISTENT, &st_, nullptr) == SQLITE_OK;
  }
  ~Stmt() {
    if (kept_ && ok_) {
      sqlite3_reset(st_);
      sqlite3_clear_bindings(st_);
      if (auto& slot = (*kept_)[sql_]; !slot) {
        slot = st_;
        return;
      }
    }
    sqlite3_finalize(st_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return ok_; }
  sqlite3_stmt* get() const { return st_; }
  void text(int i, std::string_view s) {
    sqlite3_bind_text(st_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void i64(int i, std::int64_t v) { sqlite3_bind_int64(st_, i, v); }
  void u64(int i, std::uint64_t v) { sqlite3_bind_int64(st_, i, static_cast<sqlite3_int64>(v)); }
  void optU64(int i, const std::optional<std::uint64_t>& v) {
    if (v)
      u64(i, *v);
    else
      sqlite3_bind_null(st_, i);
  }
  int step() { return sqlite3_step(st_); }
  std::string col(int c) const {
    const unsigned char* t = sqlite3_column_text(st_, c);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<std::size_t>(sqlite3_column_bytes(st_, c)))
             : std::string();
  }
  std::int64_t colI64(int c) const { return sqlite3_column_int64(st_, c); }
  std::optional<std::uint64_t> colOptU64(int c) const {
    if (sqlite3_column_type(st_, c) == SQLITE_NULL) return std::nullopt;
    return static_cast<std::uint64_t>(sqlite3_column_int64(st_, c));
  }

 private:
  sqlite3_stmt* st_ = nullptr;
  bool ok_ = false;
  std::map<std::string_view, sqlite3_stmt*>* kept_ = nullptr;
  std::string_view sql_;
};

Event eventFrom(const Stmt& st) {
  Event e;
  e.seq = st.colI64(0);
  e.atNs = static_cast<std::uint64_t>(st.colI64(1));
  e.leaseId = st.col(2);
  e.kind = st.col(3);
  e.body = st.col(4);
  e.prevHash = st.col(5);
  e.hash = st.col(6);
  return e;
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
  std::string schema = kSchemaTemplate;
  schema.replace(schema.find("@TERMINAL@"), 10, terminalKindsSql());
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, schema.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : "unknown";
    sqlite3_free(err);
    return Error{
        0, fmt::format("ledger {} is not usable: {} (pass --state-dir to put it elsewhere)", path,
                       msg)};
  }
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

Result<std::vector<Event>> Ledger::events(const std::optional<std::string>& leaseId) {
  Stmt q(db_,
         leaseId
             ? "SELECT seq, at_ns, lease_id, kind, body, prev_hash, hash FROM events WHERE "
               "lease_id = ?1 ORDER BY seq"
             : "SELECT seq, at_ns, lease_id, kind, body, prev_hash, hash FROM events ORDER BY seq");
  if (!q.ok()) return dbError(db_, "ledger query");
  if (leaseId) q.text(1, *leaseId);
  std::vector<Event> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(eventFrom(q));
  if (rc != SQLITE_DONE) return dbError(db_, "ledger query");
  return out;
}

Result<std::vector<Event>> Ledger::eventsFrom(std::uint64_t sinceNs, std::int64_t afterSeq,
                                              std::size_t limit, std::int64_t uptoSeq) {
  Stmt q(db_,
         "SELECT seq, at_ns, lease_id, kind, body, prev_hash, hash FROM events WHERE at_ns >= ?1 "
         "AND seq > ?2 AND seq <= ?4 ORDER BY seq LIMIT ?3");
  if (!q.ok()) return dbError(db_, "ledger query");
  q.i64(1, static_cast<std::int64_t>(std::min<std::uint64_t>(sinceNs, INT64_MAX)));
  q.i64(2, afterSeq);
  q.i64(3, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
  q.i64(4, uptoSeq);
  std::vector<Event> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(eventFrom(q));
  if (rc != SQLITE_DONE) return dbError(db_, "ledger query");
  return out;
}

Result<std::int64_t> Ledger::headSeq() {
  Stmt q(db_, "SELECT max(seq) FROM events");
  if (!q.ok() || q.step() != SQLITE_ROW) return dbError(db_, "ledger query");
  return q.colI64(0);  // NULL (no rows) reads as 0
}

Result<std::int64_t> Ledger::seqBefore(std::uint64_t atNs) {
  // The lowest seq among rows written at or after atNs, by the time index:
  // it visits the rows since then only, never those before. Not the seq of
  // the earliest such time: a wall clock stepped back writes a later row
  // with an earlier time, and every row at or after atNs is replayed.
  if (atNs == 0) return std::int64_t{0};
  Stmt q(db_, "SELECT min(seq) FROM events WHERE at_ns >= ?1");
  if (!q.ok()) return dbError(db_, "ledger query");
  q.i64(1, static_cast<std::int64_t>(std::min<std::uint64_t>(atNs, INT64_MAX)));
  if (q.step() != SQLITE_ROW) return dbError(db_, "ledger query");
  if (!q.colOptU64(0)) return headSeq();  // nothing written since then
  return q.colI64(0) - 1;
}

Result<std::optional<Event>> Ledger::firstOfKind(const std::string& leaseId,
                                                 std::string_view kind) {
  Stmt q(db_,
         "SELECT seq, at_ns, lease_id, kind, body, prev_hash, hash FROM events WHERE lease_id = ?1 "
         "AND kind = ?2 ORDER BY seq LIMIT 1");
  if (!q.ok()) return dbError(db_, "ledger query");
  q.text(1, leaseId);
  q.text(2, kind);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<Event>();
  if (rc != SQLITE_ROW) return dbError(db_, "ledger query");
  return std::optional<Event>(eventFrom(q));
}

Result<LeaseRows> Ledger::leaseRows(const std::string& leaseId, std::size_t first,
                                    std::size_t last) {
  LeaseRows out;
  Stmt n(db_, "SELECT count(*) FROM events WHERE lease_id = ?1");
  if (!n.ok()) return dbError(db_, "ledger query");
  n.text(1, leaseId);
  if (n.step() != SQLITE_ROW) return dbError(db_, "ledger query");
  auto total = static_cast<std::uint64_t>(n.colI64(0));
  auto take = [&](const char* sql, std::size_t limit, std::vector<Event>& into) -> Status {
    Stmt q(db_, sql);
    if (!q.ok()) return dbError(db_, "ledger query");
    q.text(1, leaseId);
    q.i64(2, static_cast<std::int64_t>(limit));
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) into.push_back(eventFrom(q));
    if (rc != SQLITE_DONE) return dbError(db_, "ledger query");
    return Ok{};
  };
  if (total <= first + last) {
    if (auto s = take("SELECT seq, at_ns, lease_id, kind, body, prev_hash, hash FROM events "
                      "WHERE lease_id = ?1 ORDER BY seq LIMIT ?2",
                      first + last, out.rows);
        !s)
      return s.error();
    return out;
  }
  if (auto s = take("SELECT seq, at_ns, lease_id, kind, body, prev_hash, hash FROM events "
                    "WHERE lease_id = ?1 ORDER BY seq LIMIT ?2",
                    first, out.rows);
      !s)
    return s.error();
  std::vector<Event> tail;
  if (auto s = take("SELECT seq, at_ns, lease_id, kind, body, prev_hash, hash FROM events "
                    "WHERE lease_id = ?1 ORDER BY seq DESC LIMIT ?2",
                    last, tail);
      !s)
    return s.error();
  out.omitted = total - first - tail.size();
  out.rows.insert(out.rows.end(), std::make_move_iterator(tail.rbegin()),
                  std::make_move_iterator(tail.rend()));
  return out;
}

Result<std::vector<std::vector<Event>>> Ledger::openLeases() {
  std::string sql = fmt::format(
      "SELECT seq, at_ns, lease_id, kind, body, prev_hash, hash FROM events WHERE lease_id IN ("
      " SELECT lease_id FROM events WHERE kind = '{}'"
      " EXCEPT SELECT lease_id FROM events WHERE kind IN ({}))"
      " ORDER BY lease_id, seq",
      kGranted, terminalKindsSql());
  Stmt q(db_, sql.c_str());
  if (!q.ok()) return dbError(db_, "ledger query");
  std::vector<std::vector<Event>> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    Event e = eventFrom(q);
    if (out.empty() || out.back().front().leaseId != e.leaseId) out.emplace_back();
    out.back().push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return dbError(db_, "ledger query");
  return out;
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

Status Ledger::appendSample(const Sample& s) {
  Stmt ins(db_, kept_,
           "INSERT INTO samples (lease_id, at_ns, memory_current, gpu_bytes, gtt_bytes, "
           "vram_bytes) VALUES (?1,?2,?3,?4,?5,?6)");
  if (!ins.ok()) return dbError(db_, "sample insert");
  ins.text(1, s.leaseId);
  ins.u64(2, s.atNs);
  ins.optU64(3, s.memoryCurrent);
  ins.optU64(4, s.gpuBytes);
  ins.optU64(5, s.gttBytes);
  ins.optU64(6, s.vramBytes);
  if (ins.step() != SQLITE_DONE)
    return dbError(db_, fmt::format("append a sample of lease {}", s.leaseId));
  return Ok{};
}

Status Ledger::appendSamples(const std::vector<Sample>& samples) {
  Status st = appendSamplesOnce(samples);
  if (st)
    sampleFailure_.reset();
  else
    sampleFailure_ = st.error().message;
  return st;
}

Status Ledger::appendSamplesOnce(const std::vector<Sample>& samples) {
  if (samples.empty()) return Ok{};
  // Samples are meter readings, not ledger facts: their commit is not
  // fsync'd (WAL + synchronous=NORMAL stays consistent; a power cut may drop
  // the last seconds of samples, never a chain row, which stays FULL).
  exec("PRAGMA synchronous=NORMAL");
  struct RestoreFull {
    Ledger* ledger;
    ~RestoreFull() { ledger->exec("PRAGMA synchronous=FULL"); }
  } restore{this};
  if (exec("BEGIN IMMEDIATE") != SQLITE_OK) return dbError(db_, "samples: begin");
  for (const auto& s : samples) {
    if (auto st = appendSample(s); !st) {
      exec("ROLLBACK");
      return st;
    }
  }
  if (exec("COMMIT") != SQLITE_OK) {
    Error e = dbError(db_, "samples: commit");
    exec("ROLLBACK");
    return e;
  }
  return Ok{};
}

Result<std::vector<Sample>> Ledger::samples(const std::string& leaseId) {
  Stmt q(db_,
         "SELECT at_ns, memory_current, gpu_bytes, gtt_bytes, vram_bytes FROM samples WHERE "
         "lease_id = ?1 ORDER BY at_ns");
  if (!q.ok()) return dbError(db_, "sample query");
  q.text(1, leaseId);
  std::vector<Sample> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    Sample s;
    s.leaseId = leaseId;
    s.atNs = static_cast<std::uint64_t>(q.colI64(0));
    s.memoryCurrent = q.colOptU64(1);
    s.gpuBytes = q.colOptU64(2);
    s.gttBytes = q.colOptU64(3);
    s.vramBytes = q.colOptU64(4);
    out.push_back(std::move(s));
  }
  if (rc != SQLITE_DONE) return dbError(db_, "sample query");
  return out;
}

Result<std::vector<ChartPoint>> Ledger::chart(const std::string& leaseId, std::size_t points) {
  // The span first (both ends from the samples_by_lease index), then one
  // pass by SQLite over the lease's samples, grouped into `points` equal
  // spans of time: the reply is `points` rows whatever the history holds.
  Stmt span(db_, "SELECT min(at_ns), max(at_ns) FROM samples WHERE lease_id = ?1");
  if (!span.ok()) return dbError(db_, "sample query");
  span.text(1, leaseId);
  if (span.step() != SQLITE_ROW) return dbError(db_, "sample query");
  std::vector<ChartPoint> out;
  auto from = span.colOptU64(0), to = span.colOptU64(1);
  if (!from || !to || points == 0) return out;
  std::uint64_t width = (*to - *from) / points + 1;
  Stmt q(db_,
         "SELECT min(at_ns), max(memory_current), max(gpu_bytes) FROM samples WHERE lease_id = ?1 "
         "GROUP BY (at_ns - ?2) / ?3 ORDER BY 1");
  if (!q.ok()) return dbError(db_, "sample query");
  q.text(1, leaseId);
  q.u64(2, *from);
  q.u64(3, width);
  int rc;
  while ((rc = q.step()) == SQLITE_ROW)
    out.push_back({static_cast<std::uint64_t>(q.colI64(0)), q.colOptU64(1), q.colOptU64(2)});
  if (rc != SQLITE_DONE) return dbError(db_, "sample query");
  return out;
}

Result<std::uint64_t> Ledger::pruneSamples(std::uint64_t nowNs, std::uint64_t fullResolutionNs,
                                           std::uint64_t maxAgeNs, std::uint64_t maxRows) {
  auto cutoff = [&](std::uint64_t age) -> std::int64_t {
    return static_cast<std::int64_t>(nowNs > age ? nowNs - age : 0);
  };
  std::uint64_t removed = 0;
  auto run = [&](const char* sql, std::int64_t a) -> Status {
    Stmt st(db_, sql);
    if (!st.ok()) return dbError(db_, "sample retention");
    st.i64(1, a);
    if (st.step() != SQLITE_DONE) return dbError(db_, "sample retention");
    removed += static_cast<std::uint64_t>(sqlite3_changes(db_));
    return Ok{};
  };
  if (auto s = run("DELETE FROM samples WHERE at_ns < ?1", cutoff(maxAgeNs)); !s) return s.error();
  // Older than full resolution: keep the first sample of each lease-minute.
  if (auto s = run("DELETE FROM samples WHERE at_ns < ?1 AND rowid NOT IN ("
                   " SELECT min(rowid) FROM samples WHERE at_ns < ?1 GROUP BY lease_id, at_ns / "
                   "60000000000)",
                   cutoff(fullResolutionNs));
      !s) {
    return s.error();
  }
  Stmt count(db_, "SELECT count(*) FROM samples");
  if (!count.ok() || count.step() != SQLITE_ROW) return dbError(db_, "sample retention");
  auto rows = static_cast<std::uint64_t>(count.colI64(0));
  if (rows > maxRows) {
    if (auto s = run("DELETE FROM samples WHERE rowid IN (SELECT rowid FROM samples ORDER BY at_ns "
                     "LIMIT ?1)",
                     static_cast<std::int64_t>(rows - maxRows));
        !s) {
      return s.error();
    }
  }
  return removed;
}

}  // namespace tally::ledger
