// The ledger's lease rows: what a grant writes is what recovery reads, field
// for field; a damaged field is named; rows of earlier tallies still read.
#include "ledger/rows.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

using json = nlohmann::json;

TEST(LedgerRows, AGrantedRowReadsBackAsWritten) {
  ledger::GrantedRow g;
  g.kind = lease::LeaseKind::Attach;
  g.declaration.name = "llama";
  g.owner = 1000;
  g.peerPid = 4242;
  g.pools = {"gpu"};
  g.priority = 5;
  g.declaration.memoryMax = 8ULL << 30;
  g.declaration.gpuMemoryMax = 48ULL << 30;
  g.declaration.gpuMemoryHigh = 40ULL << 30;
  g.declaration.attributes = {{"model", "qwen3-32b"}};
  g.boundAction = enforce::Action::Report;
  g.boundConsecutive = 3;
  g.requestedAtNs = 123;
  g.target.unit = "llama.service";
  g.reportsExit = true;
  g.keepWhenEmpty = true;
  json body = ledger::encode(g);
  EXPECT_EQ(body["gpu_bound"]["enforced_by"], "daemon");
  auto r = ledger::decodeGranted(json::parse(body.dump()));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, g.kind);
  EXPECT_EQ(r->declaration.name, g.declaration.name);
  EXPECT_EQ(r->owner, g.owner);
  EXPECT_EQ(r->peerPid, g.peerPid);
  EXPECT_EQ(r->pools, g.pools);
  EXPECT_EQ(r->priority, g.priority);
  EXPECT_EQ(r->declaration.memoryMax, g.declaration.memoryMax);
  EXPECT_EQ(r->declaration.gpuMemoryMax, g.declaration.gpuMemoryMax);
  EXPECT_EQ(r->declaration.gpuMemoryHigh, g.declaration.gpuMemoryHigh);
  EXPECT_EQ(r->declaration.attributes, g.declaration.attributes);
  EXPECT_EQ(r->boundAction, g.boundAction);
  EXPECT_EQ(r->boundConsecutive, 3u);
  EXPECT_EQ(r->requestedAtNs, 123u);
  EXPECT_EQ(r->target.unit, "llama.service");
  EXPECT_TRUE(r->reportsExit);
  EXPECT_TRUE(r->keepWhenEmpty);
}

TEST(LedgerRows, OlderRowsReadWithDefaultsAndDamageIsNamed) {
  auto old = ledger::decodeGranted({{"name", "x"}, {"pools", {"one"}}});
  ASSERT_TRUE(old);
  EXPECT_EQ(old->kind, lease::LeaseKind::Run);
  EXPECT_FALSE(old->boundAction);
  EXPECT_FALSE(old->reportsExit) << "a row from before reports_exit was kept";
  EXPECT_FALSE(old->keepWhenEmpty);
  EXPECT_FALSE(ledger::decodeGranted({{"kind", "attach"}, {"keep_when_empty", 1}}));
  auto bad = ledger::decodeGranted({{"owner_uid", "root"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("\"owner_uid\""), std::string::npos) << bad.error().message;
  EXPECT_FALSE(ledger::decodeGranted({{"kind", "stolen"}}));
  auto notBool = ledger::decodeGranted({{"kind", "attach"}, {"reports_exit", "yes"}});
  ASSERT_FALSE(notBool);
  EXPECT_NE(notBool.error().message.find("reports_exit"), std::string::npos)
      << notBool.error().message;
  EXPECT_FALSE(ledger::decodeGranted(json::array()));
}

TEST(LedgerRows, APlacedRowKeepsItsCgroupsAndInode) {
  ledger::PlacedRow p{
      "", "/tally.slice/x.scope", 777, "/tally.slice", 2, probes::MemoryLimit{false, 1 << 30}};
  auto r = ledger::decodePlaced(json::parse(ledger::encode(p).dump()));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->cgroup, p.cgroup);
  EXPECT_EQ(r->inode, 777u);
  EXPECT_EQ(r->countersCgroup, "/tally.slice");
  EXPECT_EQ(r->oomKillsAtAdoption, 2u);
  EXPECT_EQ(r->appliedMemoryMax, p.appliedMemoryMax);
  // A row without a counters cgroup reads its counters from the cgroup itself.
  EXPECT_EQ(ledger::decodePlaced({{"cgroup", "/a"}})->countersCgroup, "/a");
}

TEST(LedgerRows, AKillRowIsReadAsAKill) {
  ledger::BoundRow b{{9, enforce::Verdict::Kill, 2, 1, 2, 3, "killed by tally: ..."}, "drm-fdinfo"};
  auto r = ledger::decodeBound(json::parse(ledger::encode(b).dump()));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->event.kind, enforce::Verdict::Kill);
  EXPECT_EQ(r->event.summary, "killed by tally: ...");
  EXPECT_EQ(r->source, "drm-fdinfo");
}

}  // namespace
}  // namespace tally
