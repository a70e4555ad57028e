// The gpumem GRES as slurmctld prints it (shapes taken from Slurm 22.05 in the
// VM: `scontrol show step -d`, job_step_info_t.tres_per_node, job_info_t
// gres_detail_str, tres_alloc_str).
#include "slurm/gres.h"

#include <gtest/gtest.h>

#include <string>

namespace tally::slurm {
namespace {

constexpr std::uint64_t MiB = 1ULL << 20, GiB = 1ULL << 30;

std::optional<std::uint64_t> count(std::string_view list) {
  auto r = gresCount(list, "gpumem");
  EXPECT_TRUE(r) << list << ": " << (r ? "" : r.error().message);
  return r ? *r : std::nullopt;
}

TEST(SlurmGres, ReadsEveryShapeSlurmPrints) {
  EXPECT_EQ(count("gres:gpumem:64M"), 64 * MiB);        // tres_per_node (22.05)
  EXPECT_EQ(count("gres/gpumem:64M"), 64 * MiB);        // the TRES spelling
  EXPECT_EQ(count("gres/gpumem=67108864"), 64 * MiB);   // tres_alloc_str: exact
  EXPECT_EQ(count("gpumem:768M(IDX:N/A)"), 768 * MiB);  // gres_detail_str per node
  // What Slurm 22.05 really prints for a count-only GRES in a job's per-node
  // detail (`scontrol show job -d`: "GRES=gpumem(CNT:805306368)").
  EXPECT_EQ(count("gpumem(CNT:805306368)"), 768 * MiB);
  EXPECT_EQ(count("gpu:2,gpumem(CNT:1024,IDX:0)"), 1024u);
  EXPECT_EQ(count("gres:gpumem:amd:1G"), GiB);    // typed
  EXPECT_EQ(count("gres:gpumem"), 1u);            // a bare name is one
  EXPECT_EQ(count("gres:gpumem:96g"), 96 * GiB);  // suffix case
  EXPECT_EQ(count("cpu=2,mem=1500M,node=1,billing=2,gres/gpumem=1073741824"), GiB);
  EXPECT_EQ(count("gres:gpu:2,gres:gpumem:24G"), 24 * GiB);
  EXPECT_EQ(count("gres:gpu:2;gres:gpumem:24G"), 24 * GiB);
  // Two types of one GRES on a node add up.
  EXPECT_EQ(count("gres:gpumem:a:1G,gres:gpumem:b:2G"), 3 * GiB);
}

TEST(SlurmGres, OtherResourcesAreNotOurs) {
  EXPECT_EQ(count(""), std::nullopt);
  EXPECT_EQ(count("gres:gpu:2"), std::nullopt);
  EXPECT_EQ(count("cpu=2,mem=1500M,node=1"), std::nullopt);
  // A GRES whose name only starts with ours is another GRES.
  EXPECT_EQ(count("gres:gpumemx:64M"), std::nullopt);
  EXPECT_EQ(count("gres:gpumem_fast:64M"), std::nullopt);
}

TEST(SlurmGres, AMalformedCountOfOursIsAnErrorNeverAGuess) {
  for (const char* bad :
       {"gres:gpumem:", "gres:gpumem:64X", "gpumem(CNT:)", "gpumem(CNT:lots)", "gres:gpumem:-1",
        "gres:gpumem:M", "gres/gpumem=", "gres:gpumem:18446744073709551616",
        "gres:gpumem:17179869184G" /* 2^34 GiB: over 2^64 */}) {
    auto r = gresCount(bad, "gpumem");
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_NE(r.error().message.find("GRES entry"), std::string::npos) << r.error().message;
    }
  }
  // Two entries that add past 2^64 - 1.
  EXPECT_FALSE(gresCount("gres:gpumem:a:16777215T,gres:gpumem:b:16777215T", "gpumem"));
  // A malformed entry of another GRES is not our business.
  EXPECT_EQ(count("gres:gpu:lots,gres:gpumem:1G"), GiB);
}

// Several names (a cluster moving from gpumem to tallymem): the first the list names counts.
TEST(SlurmGres, TheFirstOfSeveralNamesCounts) {
  auto both = firstGres("gres:tallymem:2G,gres:gpumem:1G", {"tallymem", "gpumem"});
  ASSERT_TRUE(both) << both.error().message;
  ASSERT_TRUE(*both);
  EXPECT_EQ((*both)->name, "tallymem");
  EXPECT_EQ((*both)->count, 2 * GiB);
  auto old = firstGres("gres:gpumem:1G", {"tallymem", "gpumem"});
  ASSERT_TRUE(old && *old);
  EXPECT_EQ((*old)->name, "gpumem");
  EXPECT_EQ((*old)->count, GiB);
  auto none = firstGres("gres:gpu:2", {"tallymem", "gpumem"});
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  EXPECT_FALSE(firstGres("gres:tallymem:lots", {"tallymem", "gpumem"})) << "never guessed";
}

TEST(SlurmGres, SlurmCountsAreBinary) {
  EXPECT_EQ(*slurmCount("1K"), 1024u);
  EXPECT_EQ(*slurmCount("1P"), 1ULL << 50);
  EXPECT_EQ(*slurmCount("0"), 0u);
  EXPECT_FALSE(slurmCount(""));
  EXPECT_FALSE(slurmCount("1.5G"));
  EXPECT_FALSE(slurmCount(std::string("1\0G", 3)));
}

}  // namespace
}  // namespace tally::slurm
