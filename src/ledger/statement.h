// The ledger's SQLite plumbing, shared by its files (ledger.cpp: the
// chain and its checks; queries.cpp: reading rows; samples.cpp: the meter's
// samples) and by nothing else.
#pragma once

#include <fmt/format.h>
#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ledger/kinds.h"
#include "ledger/ledger.h"
#include "util/result.h"

namespace tally::ledger::detail {

// "'outcome','lost','withdrawn'": the terminal kinds as an SQL list, from ledger/kinds.h.
inline std::string terminalKindsSql() {
  std::string out;
  for (const char* k : kTerminalKinds) out += fmt::format("{}'{}'", out.empty() ? "" : ",", k);
  return out;
}

inline Error dbError(sqlite3* db, const std::string& what) {
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

inline Event eventFrom(const Stmt& st) {
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

}  // namespace tally::ledger::detail
