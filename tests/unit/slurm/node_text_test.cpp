// A Slurm node's own words, read exactly: the texts are what Debian 12's
// Slurm 22.05 printed in the VM harness (vm/slurm-node.sh: tallymem 1G).
#include "slurm/node_text.h"

#include <gtest/gtest.h>

#include "slurm/node_samples.h"

namespace tally::slurm {
namespace {

constexpr std::uint64_t GiB = 1ULL << 30;
using samples::kScontrolNode;
using samples::kScontrolNode2605;
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
}

// The node's GRES as slurmctld places it, from its record of the node (the
// same line on 22.05 and 26.05).
TEST(SlurmNodeText, TheNodesGresReadsFromSlurmctldsRecordOfIt) {
  for (const char* record : {kScontrolNode, kScontrolNode2605}) {
    auto g = gresOfScontrol(record, "tallymem");
    ASSERT_TRUE(g) << g.error().message;
    EXPECT_EQ(*g, GiB);
    auto none = gresOfScontrol(record, "gpumem");
    ASSERT_TRUE(none);
    EXPECT_EQ(*none, std::nullopt) << "not named: absent, never 0";
  }
  // A node with no GRES at all: none, never 0.
  auto null = gresOfScontrol("NodeName=h Gres=(null) RealMemory=512\n", "tallymem");
  ASSERT_TRUE(null);
  EXPECT_EQ(*null, std::nullopt);
  // Typed entries on one node add up; other GRES beside it (a GPU with its
  // sockets) are passed over; no_consume's word is not a count.
  auto typed =
      gresOfScontrol("NodeName=h Gres=gpu:amd:1(S:0),tallymem:a:64G,tallymem:b:32G\n", "tallymem");
  ASSERT_TRUE(typed) << typed.error().message;
  EXPECT_EQ(*typed, 96 * GiB);
  EXPECT_EQ(*gresOfScontrol("NodeName=h Gres=tallymem:no_consume:8G\n", "tallymem"), 8 * GiB);
  auto bad = gresOfScontrol("NodeName=h Gres=tallymem:lots\n", "tallymem");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("scontrol: Gres=tallymem:lots"), std::string::npos)
      << bad.error().message;
  // A record without Gres= (not scontrol's -o line) is not "no GRES".
  auto missing =
      gresOfScontrol("slurm_load_node error: Unable to contact slurm controller\n", "tallymem");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "scontrol names no Gres for the node");
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

// PrologFlags, read by its own key (PrologFlagsX or PrologSlurmctld are
// other keys), Contain in a comma list; no PrologFlags line is an error.
TEST(SlurmNodeText, TheNodesCpusAreItsCPUTot) {
  EXPECT_EQ(*cpusOfScontrol(samples::kScontrolNode), 2u);
  EXPECT_EQ(*cpusOfScontrol(samples::kScontrolNode2605), 2u);
  EXPECT_FALSE(cpusOfScontrol("NodeName=vm CPUTot=two"));
  EXPECT_FALSE(cpusOfScontrol("NodeName=vm CPUAlloc=0"));
}

TEST(SlurmNodeText, ContainIsReadFromPrologFlagsAndPamSlurmAdoptFromLiveLines) {
  auto none = containOfScontrolConfig(samples::kScontrolConfig);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(*none);
  EXPECT_FALSE(*containOfScontrolConfig(samples::kScontrolConfig2605));
  auto contain = containOfScontrolConfig(samples::kScontrolConfigContain);
  ASSERT_TRUE(contain) << contain.error().message;
  EXPECT_TRUE(*contain);
  EXPECT_FALSE(*containOfScontrolConfig("PrologFlags = Alloc,ContainX\n"));
  EXPECT_TRUE(*containOfScontrolConfig("PrologFlags=Contain\n"));
  auto missing = containOfScontrolConfig("PrologSlurmctld = Contain\nPrologFlagsX = Contain\n");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "scontrol show config names no PrologFlags");
  EXPECT_TRUE(
      pamAdoptsIntoJobs("auth required pam_unix.so\naccount required pam_slurm_adopt.so\n"));
  EXPECT_FALSE(
      pamAdoptsIntoJobs("# account required pam_slurm_adopt.so\n  \n@include common-auth\n"));
}

}  // namespace
}  // namespace tally::slurm
