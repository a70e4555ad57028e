// A Slurm node's own words, read exactly: the texts are what Debian 12's
// Slurm 22.05 printed in the VM harness (vm/slurm-node.sh: tallymem 1G).
#include "slurm/node_text.h"

#include <gtest/gtest.h>

#include "slurm/node_samples.h"

namespace tally::slurm {
namespace {

constexpr std::uint64_t GiB = 1ULL << 30;
using samples::kSlurmdG;
using samples::kSlurmdV;

TEST(SlurmNodeText, PlugstackFindsTallysLineAmongOthersAndItsIncludes) {
  auto p = parsePlugstack(
      "# site plugins\n"
      "optional /usr/lib/x86_64-linux-gnu/slurm-wlm/private-tmpdir.so base=/tmp\n"
      "\n"
      "required tally_spank.so socket=/run/tally/tally.sock  pool=slurm # bounded\n"
      "include /etc/slurm/plugstack.conf.d/*.conf\n");
  ASSERT_TRUE(p.tally);
  EXPECT_TRUE(p.tally->required);
  EXPECT_EQ(p.tally->path, "tally_spank.so");
  EXPECT_EQ(p.tally->args,
            (std::vector<std::string>{"socket=/run/tally/tally.sock", "pool=slurm"}));
  EXPECT_EQ(p.includes, std::vector<std::string>{"/etc/slurm/plugstack.conf.d/*.conf"});
  // Debian's default file: only an include.
  auto d = parsePlugstack("include /etc/slurm/plugstack.conf.d/*.conf\n");
  EXPECT_FALSE(d.tally);
  EXPECT_EQ(d.includes.size(), 1u);
  // Commented out is not loaded; a file merely named like it elsewhere in a path is not it.
  EXPECT_FALSE(parsePlugstack("# required tally_spank.so\n").tally);
  EXPECT_FALSE(parsePlugstack("required /opt/tally_spank/other.so\n").tally);
}

TEST(SlurmNodeText, VersionsAndTheNodesGresReadExactly) {
  EXPECT_EQ(releaseOfSlurmd(kSlurmdV), "22.05");
  EXPECT_EQ(releaseOfSlurmd("slurm 24.11.5\n"), "24.11");
  EXPECT_EQ(releaseOfSlurmd("slurmd: error: cannot read slurm.conf\n"), std::nullopt);
  EXPECT_EQ(releaseOfNumber(0x160508), "22.05");
  EXPECT_EQ(releaseOfNumber(0x1a0505), "26.05");
  auto g = gresOfSlurmd(kSlurmdG, "tallymem");
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(*g, GiB);
  auto none = gresOfSlurmd(kSlurmdG, "gpumem");
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, std::nullopt) << "not named: absent, never 0";
  // Typed GRES lines on one node add up.
  auto typed = gresOfSlurmd(
      "slurmd-h: Gres Name=tallymem Type=a Count=64G ID=1 (null)\n"
      "slurmd-h: Gres Name=tallymem Type=b Count=32G ID=1 (null)\n",
      "tallymem");
  ASSERT_TRUE(typed);
  EXPECT_EQ(*typed, 96 * GiB);
  EXPECT_FALSE(gresOfSlurmd("slurmd-h: Gres Name=tallymem Count=lots\n", "tallymem"));
}

TEST(SlurmNodeText, TheNodesRealMemoryReadsInMiB) {
  auto m = realMemoryOfScontrol(samples::kScontrolNode);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(*m, 512ULL << 20);
  EXPECT_EQ(*realMemoryOfScontrol("NodeName=h RealMemory=120000 AllocMem=0\n"), 120000ULL << 20);
  for (const char* bad : {"", "NodeName=h AllocMem=0\n", "RealMemory=\n", "RealMemory=12G\n",
                          "RealMemory=-1\n", "RealMemory=99999999999999\n"})
    EXPECT_FALSE(realMemoryOfScontrol(bad)) << bad;
}

}  // namespace
}  // namespace tally::slurm
