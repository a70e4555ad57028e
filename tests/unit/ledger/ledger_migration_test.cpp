// A ledger written at schema 2 (samples stored as amdgpu's gtt_bytes and
// vram_bytes) opened by this tally: its samples are carried over by memory
// class, its chain rows are left as written, and the chain verifies as it did
// (and still names a row edited after the migration).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <tuple>
#include <vector>

#include "ledger/head_witness.h"
#include "ledger/ledger.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;

// Schema 2's tables exactly as ledger.cpp made them before schema 3 (its
// terminal kinds spelled out).
constexpr const char* kSchema2 = R"sql(
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
  WHERE kind IN ('outcome','lost','withdrawn');
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

class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  void exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    ASSERT_EQ(rc, SQLITE_OK) << msg << "\n" << sql;
  }
  // The first column of each row of `sql`, as text ("NULL" for null).
  std::vector<std::string> column(const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st, 0);
      out.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    sqlite3_finalize(st);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

struct ChainRow {
  std::int64_t seq;
  std::uint64_t atNs;
  std::string lease, kind, body, prevHash, hash;
};

class LedgerMigration : public ::testing::Test {
 protected:
  // A schema-2 ledger: three chain rows with their witness, and four samples
  // of two leases (one read nothing of the GPU, one read gtt only).
  void SetUp() override {
    path = dir.path() + "/ledger.sqlite";
    RawDb db(path);
    db.exec(kSchema2);
    std::string prev = ledger::kGenesisHash;
    const std::vector<std::tuple<std::uint64_t, std::string, std::string, std::string>> rows = {
        {100, "l1", "granted", R"({"pools":["default"]})"},
        {200, "l1", "adopted", R"({"cgroup":"/work.slice"})"},
        {300, "l1", "outcome", R"({"schema":1,"outcome":{"class":"exited"}})"},
    };
    std::int64_t seq = 0;
    for (const auto& [at, lease, kind, body] : rows) {
      ++seq;
      std::string hash = ledger::rowHash(seq, at, lease, kind, body, prev);
      chain.push_back({seq, at, lease, kind, body, prev, hash});
      db.exec(fmt::format(
          "INSERT INTO events (seq, at_ns, lease_id, kind, body, prev_hash, hash) VALUES "
          "({}, {}, '{}', '{}', '{}', '{}', '{}')",
          seq, at, lease, kind, body, prev, hash));
      prev = hash;
    }
    ASSERT_TRUE(ledger::advanceHead(path, {seq, prev}));
    db.exec(
        "INSERT INTO samples (lease_id, at_ns, memory_current, gpu_bytes, gtt_bytes, vram_bytes) "
        "VALUES ('l1', 150, 1000, 300, 200, 100), ('l1', 250, 2000, NULL, NULL, NULL), "
        "('l2', 260, 4096, 8192, 8192, NULL), ('l1', 240, 1500, 700, NULL, 700)");
  }

  std::vector<std::string> problems() {
    auto db = ledger::Ledger::open(dir.path());
    EXPECT_TRUE(db) << db.error().message;
    auto rep = db->verify();
    EXPECT_TRUE(rep);
    return rep ? rep->problems : std::vector<std::string>{"verify failed"};
  }

  TempDir dir;
  std::string path;
  std::vector<ChainRow> chain;
};

TEST_F(LedgerMigration, SamplesAreCarriedOverByMemoryClass) {
  auto db = ledger::Ledger::open(dir.path());
  ASSERT_TRUE(db) << db.error().message;
  auto l1 = db->samples("l1");
  ASSERT_TRUE(l1);
  ASSERT_EQ(l1->size(), 3u);
  const auto& first = (*l1)[0];
  EXPECT_EQ(first.atNs, 150u);
  EXPECT_EQ(first.memoryCurrent, 1000u);
  EXPECT_EQ(first.gpuBytes, 300u);
  // gtt was host-uncharged, vram device: no other class was stored.
  EXPECT_EQ(first.byClass, (devices::BytesByClass{.device = 100, .hostUncharged = 200}));
  const auto& second = (*l1)[1];  // at 240: vram only
  EXPECT_EQ(second.atNs, 240u);
  EXPECT_EQ(second.gpuBytes, 700u);
  EXPECT_EQ(second.byClass, (devices::BytesByClass{.device = 700}));
  const auto& third = (*l1)[2];  // nothing of the GPU read: absent, never 0
  EXPECT_EQ(third.atNs, 250u);
  EXPECT_EQ(third.memoryCurrent, 2000u);
  EXPECT_FALSE(third.gpuBytes);
  EXPECT_EQ(third.byClass, devices::BytesByClass{});
  auto l2 = db->samples("l2");
  ASSERT_TRUE(l2);
  ASSERT_EQ(l2->size(), 1u);
  EXPECT_EQ((*l2)[0].byClass, (devices::BytesByClass{.hostUncharged = 8192}));

  // Schema 3, the old columns gone, the samples' indexes on the new table.
  RawDb raw(path);
  EXPECT_EQ(raw.column("PRAGMA user_version"), std::vector<std::string>{"3"});
  EXPECT_EQ(raw.column("SELECT name FROM pragma_table_info('samples') ORDER BY cid"),
            (std::vector<std::string>{"lease_id", "at_ns", "memory_current", "gpu_bytes",
                                      "device_bytes", "host_uncharged_bytes", "host_mixed_bytes",
                                      "host_charged_bytes", "other_bytes", "unknown_bytes"}));
  EXPECT_EQ(raw.column("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = "
                       "'samples' ORDER BY name"),
            (std::vector<std::string>{"samples_by_lease", "samples_by_time"}));
  EXPECT_EQ(raw.column("SELECT count(*) FROM sqlite_master WHERE name = 'samples_by_class'"),
            std::vector<std::string>{"0"});
  // The retention's order (rowid) is the order the rows were written in.
  EXPECT_EQ(raw.column("SELECT at_ns FROM samples ORDER BY rowid"),
            (std::vector<std::string>{"150", "250", "260", "240"}));
}

TEST_F(LedgerMigration, TheChainIsUntouchedAndVerifies) {
  {
    auto db = ledger::Ledger::open(dir.path());
    ASSERT_TRUE(db) << db.error().message;
    auto rep = db->verify();
    ASSERT_TRUE(rep);
    EXPECT_TRUE(rep->problems.empty()) << rep->problems.front();
    EXPECT_EQ(rep->rows, 3u);
    EXPECT_EQ(rep->headSeq, 3);
    EXPECT_EQ(rep->headHash, chain.back().hash);
    EXPECT_EQ(rep->witnessSeq, 3);
    auto rows = db->events();
    ASSERT_TRUE(rows);
    ASSERT_EQ(rows->size(), 3u);
    for (std::size_t i = 0; i < chain.size(); ++i) {  // every byte as written at schema 2
      EXPECT_EQ((*rows)[i].seq, chain[i].seq);
      EXPECT_EQ((*rows)[i].atNs, chain[i].atNs);
      EXPECT_EQ((*rows)[i].leaseId, chain[i].lease);
      EXPECT_EQ((*rows)[i].kind, chain[i].kind);
      EXPECT_EQ((*rows)[i].body, chain[i].body);
      EXPECT_EQ((*rows)[i].prevHash, chain[i].prevHash);
      EXPECT_EQ((*rows)[i].hash, chain[i].hash);
    }
    // The chain goes on from the migrated head, and samples go in by class.
    auto ev = db->appendEvent("l2", ledger::kGranted, R"({"pools":["default"]})", 400);
    ASSERT_TRUE(ev) << ev.error().message;
    EXPECT_EQ(ev->seq, 4);
    EXPECT_EQ(ev->prevHash, chain.back().hash);
    ASSERT_TRUE(db->appendSample({"l2", 500, 1, 2, {.device = 2, .hostMixed = 3}}));
  }
  EXPECT_TRUE(problems().empty());  // and again, opened at schema 3: nothing more to migrate
  auto db = ledger::Ledger::open(dir.path());
  ASSERT_TRUE(db);
  auto l2 = db->samples("l2");
  ASSERT_TRUE(l2);
  ASSERT_EQ(l2->size(), 2u);
  EXPECT_EQ((*l2)[0].byClass, (devices::BytesByClass{.hostUncharged = 8192}));
  EXPECT_EQ((*l2)[1].byClass, (devices::BytesByClass{.device = 2, .hostMixed = 3}));
}

TEST_F(LedgerMigration, AMigratedRowEditedAfterwardsIsNamed) {
  ASSERT_TRUE(problems().empty());  // migrates
  RawDb(path).exec(
      "DROP TRIGGER events_no_update; UPDATE events SET body = "
      "replace(body, 'exited', 'oom-killed') WHERE seq = 3;");
  auto p = problems();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("row 3 (lease l1, outcome) was edited"), std::string::npos) << p[0];
}

TEST_F(LedgerMigration, AChainRowEditedBeforeTheMigrationIsStillNamed) {
  RawDb(path).exec(
      "DROP TRIGGER events_no_update; UPDATE events SET body = "
      "replace(body, 'default', 'gold') WHERE seq = 1;");
  auto p = problems();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("row 1 (lease l1, granted) was edited"), std::string::npos) << p[0];
}

}  // namespace
}  // namespace tally
