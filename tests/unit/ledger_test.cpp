#include <sqlite3.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "ledger/ledger.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;

ledger::Entry entry(const std::string& id, const std::string& cls, int status) {
  return {id, "job", "system", 1, 2, cls, status, R"({"schema":1,"lease":{"id":")" + id + R"("}})"};
}

TEST(Ledger, AppendsAndReadsBackInOrder) {
  TempDir dir;
  std::string state = dir.path() + "/deep/state";
  {
    auto db = ledger::Ledger::open(state);
    ASSERT_TRUE(db) << db.error().message;
    ASSERT_TRUE(db->append(entry("a1", "exited", 0)));
    ASSERT_TRUE(db->append(entry("a2", "oom-killed", 137)));
  }
  struct stat st{};
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto db = ledger::Ledger::open(state);  // reopened: the rows survived
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->append(entry("a3", "containment-refused", 125)));
  auto rows = db->recent(10);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].entry.leaseId, "a1");
  EXPECT_EQ((*rows)[1].entry.outcomeClass, "oom-killed");
  EXPECT_EQ((*rows)[1].entry.exitStatus, 137);
  EXPECT_EQ((*rows)[2].entry.recordJson, entry("a3", "", 0).recordJson);
  auto last = db->recent(1);
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].entry.leaseId, "a3");
}

TEST(Ledger, LeaseIdsAreUniqueAndRowsAreNeverRewritten) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->append(entry("same", "exited", 0)));
  EXPECT_FALSE(db->append(entry("same", "exited", 1)));
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db->path().c_str(), &raw), SQLITE_OK);
  char* err = nullptr;
  EXPECT_NE(sqlite3_exec(raw, "UPDATE lease_outcomes SET exit_status = 0", nullptr, nullptr, &err), SQLITE_OK);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(err).find("never rewritten"), std::string::npos);
  sqlite3_free(err);
  EXPECT_NE(sqlite3_exec(raw, "DELETE FROM lease_outcomes", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  EXPECT_EQ(db->recent(5)->size(), 1u);
}

TEST(Ledger, UnwritableStateDirIsAnErrorThatNamesTheFix) {
  TempDir dir;
  writeFile(dir.path() + "/file", "x");
  auto db = ledger::Ledger::open(dir.path() + "/file/state");
  ASSERT_FALSE(db);
  EXPECT_NE(db.error().message.find("state directory"), std::string::npos) << db.error().message;
}

}  // namespace
}  // namespace tally
