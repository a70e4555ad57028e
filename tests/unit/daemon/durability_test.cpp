// Acknowledge only what is on disk: a reply that states a fact (granted,
// released) is sent after its ledger row is committed; when the ledger cannot
// write, the request fails with the reason and nothing changes, the daemon
// says so once, and damage no operator accepted stops new grants.
// RLIMIT_FSIZE stands in for a full disk (support/fake_host.h).
#include <sqlite3.h>
#include <syslog.h>

#include "daemon/service_fixture.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;

std::size_t notesContaining(const FakeJournal& j, const std::string& text) {
  std::size_t n = 0;
  for (const auto& note : j.notes)
    if (note.message.find(text) != std::string::npos) ++n;
  return n;
}

TEST_F(ServiceTest, AReleaseTheLedgerCannotRecordIsRefusedAndTheLeaseIsUnchanged) {
  json a = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "kept"}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string id = a["result"]["lease"];
  json r;
  {
    FileSizeLimit full(1);
    r = call(1, 1000, "release", {{"lease", id}});
  }
  ASSERT_FALSE(r["ok"]) << r;
  EXPECT_EQ(r["error"]["code"], "unavailable");
  std::string msg = r["error"]["message"];
  EXPECT_NE(msg.find("lease " + id + " is not released: the ledger could not record the release"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("The lease is unchanged and still bounded; release it again"),
            std::string::npos)
      << msg;
  // Unchanged: still granted, still holding the pool's one slot, no row.
  EXPECT_EQ(call(2, 1000, "lease", {{"lease", id}})["result"]["state"], "granted");
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted"}));
  EXPECT_EQ(call(3, 1000, "acquire", {{"pools", {"one"}}, {"no_wait", true}})["error"]["code"],
            "refused");
  // Once it writes, the same release goes through.
  EXPECT_EQ(call(1, 1000, "release", {{"lease", id}})["result"]["state"], "withdrawn");
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "released", "withdrawn"}));
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

TEST_F(ServiceTest, AGrantTheLedgerCannotRecordIsNoGrantAndTheFailureIsSaidOnce) {
  json r;
  {
    FileSizeLimit full(1);
    r = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "refused"}});
    service->tick();
    service->sample();
    service->tick();
  }
  ASSERT_FALSE(r["ok"]) << r;
  EXPECT_EQ(r["error"]["code"], "unavailable");
  EXPECT_NE(r["error"]["message"].get<std::string>().find(
                "not granted: the ledger could not record the grant"),
            std::string::npos)
      << r;
  EXPECT_EQ(service->liveLeases(), 0u);
  EXPECT_EQ(notesContaining(journal, "cannot write"), 1u);
  EXPECT_EQ(journal.notes.back().priority, LOG_ERR);
  EXPECT_NE(journal.notes.back().message.find(
                "Running leases stay metered and bounded; new leases and releases are refused"),
            std::string::npos)
      << journal.notes.back().message;
  // It writes again: said once, and grants go on.
  json ok = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "granted"}});
  ASSERT_TRUE(ok["ok"]) << ok;
  service->tick();
  service->tick();
  std::string all;
  for (const auto& n : journal.notes) all += n.message + "\n";
  EXPECT_EQ(notesContaining(journal, "ledger.sqlite writes again"), 1u) << all;
  EXPECT_EQ(notesContaining(journal, "cannot write"), 1u) << all;
}

TEST_F(ServiceTest, DamageNoOperatorAcceptedStopsNewGrantsNotRunningLeases) {
  json a = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "before"}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string before = a["result"]["lease"];
  // Row 1 edited behind the daemon's back, as verify() finds it at start.
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(ledgerDb->path().c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw,
                           "DROP TRIGGER events_no_update; UPDATE events SET at_ns = 1 WHERE "
                           "seq = 1;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
  }
  auto open = ledgerDb->unacceptedDamage();
  ASSERT_EQ(open.size(), 1u);
  service->setLedgerDamage(open);
  json r = call(2, 1000, "acquire", {{"pools", {"one"}}, {"name", "after"}});
  ASSERT_FALSE(r["ok"]) << r;
  EXPECT_EQ(r["error"]["code"], "unavailable");
  std::string msg = r["error"]["message"];
  EXPECT_NE(msg.find("no lease is granted while the ledger " + ledgerDb->path() +
                     " holds damage no operator accepted (row 1"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("'tally ledger acknowledge'"), std::string::npos) << msg;
  // The lease granted before is still there, and its owner can still end it.
  EXPECT_EQ(call(1, 1000, "lease", {{"lease", before}})["result"]["state"], "granted");
  EXPECT_EQ(call(1, 1000, "release", {{"lease", before}})["result"]["state"], "withdrawn");
  // An operator accepts exactly that damage: nothing is open any more.
  ASSERT_TRUE(ledgerDb->acknowledgeDamage(open, 0));
  EXPECT_TRUE(ledgerDb->unacceptedDamage().empty());
}

}  // namespace
}  // namespace tally
