// The meter's samples: written a tick at a time, read as a chart, thinned
// with age (Ledger::pruneSamples).
#include <fmt/format.h>

#include <algorithm>

#include "ledger/ledger.h"
#include "ledger/statement.h"

namespace tally::ledger {

using detail::dbError;
using detail::eventFrom;
using detail::Stmt;
using detail::terminalKindsSql;

Status Ledger::appendSample(const Sample& s) {
  Stmt ins(db_, kept_,
           "INSERT INTO samples (lease_id, at_ns, memory_current, gpu_bytes, device_bytes, "
           "host_uncharged_bytes, host_mixed_bytes, host_charged_bytes, other_bytes, "
           "unknown_bytes) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)");
  if (!ins.ok()) return dbError(db_, "sample insert");
  ins.text(1, s.leaseId);
  ins.u64(2, s.atNs);
  ins.optU64(3, s.memoryCurrent);
  ins.optU64(4, s.gpuBytes);
  ins.optU64(5, s.byClass.device);
  ins.optU64(6, s.byClass.hostUncharged);
  ins.optU64(7, s.byClass.hostMixed);
  ins.optU64(8, s.byClass.hostCharged);
  ins.optU64(9, s.byClass.other);
  ins.optU64(10, s.byClass.unknown);
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
         "SELECT at_ns, memory_current, gpu_bytes, device_bytes, host_uncharged_bytes, "
         "host_mixed_bytes, host_charged_bytes, other_bytes, unknown_bytes FROM samples WHERE "
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
    s.byClass.device = q.colOptU64(3);
    s.byClass.hostUncharged = q.colOptU64(4);
    s.byClass.hostMixed = q.colOptU64(5);
    s.byClass.hostCharged = q.colOptU64(6);
    s.byClass.other = q.colOptU64(7);
    s.byClass.unknown = q.colOptU64(8);
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
