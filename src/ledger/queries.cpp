// Reading the chain's rows: a lease's, those since a time or a row, the
// open leases, the head.
#include <fmt/format.h>

#include <algorithm>

#include "ledger/ledger.h"
#include "ledger/statement.h"

namespace tally::ledger {

using detail::dbError;
using detail::eventFrom;
using detail::Stmt;
using detail::terminalKindsSql;

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

Result<std::vector<std::string>> Ledger::leaseIdsStartingWith(const std::string& prefix,
                                                              std::size_t limit) {
  // A range on the indexed column, not a LIKE (which would walk every row):
  // lease ids are printable ASCII, so every id beginning with `prefix` sorts
  // below prefix + DEL.
  Stmt q(db_,
         "SELECT DISTINCT lease_id FROM events WHERE lease_id >= ?1 AND lease_id < ?2 ORDER BY "
         "lease_id LIMIT ?3");
  if (!q.ok()) return dbError(db_, "ledger query");
  q.text(1, prefix);
  q.text(2, prefix + "\x7f");
  q.i64(3, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
  std::vector<std::string> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(q.col(0));
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

}  // namespace tally::ledger
