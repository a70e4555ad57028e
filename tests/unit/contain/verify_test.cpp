// The pure parts of a lease: unit parsing, cgroup memory file parsers, the
// read-back rules, outcome classification and the outcome record.
#include "contain/verify.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <limits>

#include "fs/root.h"
#include "probes/cgroup_memory.h"
#include "support/fake_host.h"
#include "util/units.h"

namespace tally {
namespace {

using namespace tally::testing;
using units::parseDurationUs;
using units::parseSize;

constexpr std::uint64_t kMiB = 1 << 20;

TEST(Verify, PageRoundingEitherNeighbourButNothingElse) {
  const std::uint64_t page = 4096;
  probes::MemoryLimit max{true, 0};
  EXPECT_TRUE(cgroup::limitMatches(std::nullopt, max, page));
  EXPECT_FALSE(cgroup::limitMatches(64 * kMiB, max, page));
  EXPECT_TRUE(cgroup::limitMatches(64 * kMiB, {false, 64 * kMiB}, page));
  EXPECT_TRUE(
      cgroup::limitMatches(1000000, {false, 999424}, page));  // down (page_counter_memparse)
  EXPECT_TRUE(cgroup::limitMatches(1000000, {false, 1003520}, page));  // up
  EXPECT_FALSE(cgroup::limitMatches(1000000, {false, 995328}, page));
  EXPECT_FALSE(cgroup::limitMatches(64 * kMiB, {false, 64 * kMiB + page}, page));
  EXPECT_FALSE(cgroup::limitMatches(std::nullopt, {false, 64 * kMiB}, page))
      << "a limit nobody declared";
  EXPECT_TRUE(cgroup::limitMatches(0, {false, 0}, page));
}

struct VerifyTree : ::testing::Test {
  TempDir dir;
  std::string lease = "/tally.slice/tally-ab.slice/tally-ab.scope";
  void write(const std::string& file, const std::string& v) {
    writeFile(dir.path() + lease + "/" + file, v);
  }
  void SetUp() override {
    write("memory.max", "67108864\n");
    write("memory.high", "max\n");
    write("memory.swap.max", "max\n");
    write("memory.oom.group", "1\n");
  }
  Result<cgroup::AppliedLimits> verify(const cgroup::ExpectedLimits& e) {
    auto root = fs::Root::open(dir.path());
    auto cg = cgroup::Cgroup::open(*root, lease);
    if (!cg) return cg.error();
    return contain::verifyLimits(*cg, e, 4096, "; DELEGATE-HINT");
  }
};

TEST_F(VerifyTree, MatchingLimitsAreReportedAsApplied) {
  auto r = verify({64 * kMiB, std::nullopt, std::nullopt, true});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->memoryMax.bytes, 64 * kMiB);
  EXPECT_TRUE(r->memoryHigh.unlimited);
  EXPECT_TRUE(r->oomGroup);
}

TEST_F(VerifyTree, EveryMismatchIsNamed) {
  write("memory.high", "1048576\n");
  write("memory.oom.group", "0\n");
  auto r = verify({32 * kMiB, std::nullopt, std::nullopt, true});
  ASSERT_FALSE(r);
  const auto& m = r.error().message;
  EXPECT_NE(m.find("memory.max is 67108864, declared 33554432"), std::string::npos) << m;
  EXPECT_NE(m.find("memory.high is 1048576, declared max"), std::string::npos) << m;
  EXPECT_NE(m.find("memory.oom.group is 0"), std::string::npos) << m;
}

TEST_F(VerifyTree, MissingMemoryControllerNamesWhoMustDelegate) {
  TempDir empty;
  makeDirs(empty.path() + lease);
  auto root = fs::Root::open(empty.path());
  auto cg = cgroup::Cgroup::open(*root, lease);
  ASSERT_TRUE(cg) << cg.error().message;
  auto r = contain::verifyLimits(*cg, {}, 4096, "; DELEGATE-HINT");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("memory controller not enabled for " + lease),
            std::string::npos);
  EXPECT_NE(r.error().message.find("DELEGATE-HINT"), std::string::npos);
}

TEST_F(VerifyTree, GarbageInALimitFileIsRefused) {
  write("memory.max", "lots\n");
  auto r = verify({64 * kMiB, std::nullopt, std::nullopt, true});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a limit"), std::string::npos);
  write("memory.max", "67108864\n");
  write("memory.oom.group", "2\n");
  EXPECT_FALSE(verify({64 * kMiB, std::nullopt, std::nullopt, true}));
}

TEST_F(VerifyTree, DeclaredSwapLimitWithoutSwapAccountingIsRefused) {
  ::unlink((dir.path() + lease + "/memory.swap.max").c_str());
  EXPECT_TRUE(verify({64 * kMiB, std::nullopt, std::nullopt, true}));
  auto r = verify({64 * kMiB, std::nullopt, 0, true});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("swap accounting"), std::string::npos);
}

TEST(VerifyMembership, ComparesTheV2Line) {
  TempDir dir;
  writeFile(dir.path() + "/42/cgroup",
            "12:memory:/x\n0::/tally.slice/tally-ab.slice/tally-ab.scope\n");
  writeFile(dir.path() + "/43/cgroup", "0::/user.slice\n");
  writeFile(dir.path() + "/44/cgroup", "12:memory:/x\n");
  auto root = fs::Root::open(dir.path());
  EXPECT_TRUE(contain::verifyMembership(*root, 42, "/tally.slice/tally-ab.slice/tally-ab.scope"));
  auto wrong = contain::verifyMembership(*root, 43, "/tally.slice/tally-ab.slice/tally-ab.scope");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("is in /user.slice"), std::string::npos);
  EXPECT_FALSE(contain::verifyMembership(*root, 44, "/x"));
  EXPECT_FALSE(contain::verifyMembership(*root, 45, "/x"))
      << "a vanished process is not in the lease";
}

}  // namespace
}  // namespace tally
