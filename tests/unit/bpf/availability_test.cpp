// Whether the kernel charge runs, and the sentence when it does not.
#include "bpf/availability.h"

#include <gtest/gtest.h>

namespace tally::bpf {
namespace {

HostFacts allThere() {
  HostFacts f;
  f.lsmList = "lockdown,capability,landlock,yama,apparmor,tomoyo,bpf\n";  // 6.1.0-57 in the VM
  f.btf = f.capBpf = f.capPerfmon = f.bpffs = true;
  return f;
}

bool says(const Verdict& v, const std::string& what) {
  return v.why.find(what) != std::string::npos;
}

TEST(BpfAvailability, EverythingThereChargesAndRefuses) {
  auto v = assess(allThere());
  EXPECT_TRUE(v.can.charging);
  EXPECT_TRUE(v.can.refusing);
  EXPECT_EQ(v.why, "");
  EXPECT_EQ(describe(v), "charging and refusing in the kernel (BPF)");
}

TEST(BpfAvailability, WithoutTheBpfLsmItChargesAndSaysTheLsmLine) {
  HostFacts f = allThere();
  f.lsmList = "lockdown,capability,landlock,yama,apparmor\n";
  auto v = assess(f);
  EXPECT_TRUE(v.can.charging);
  EXPECT_FALSE(v.can.refusing);
  EXPECT_TRUE(says(v, "lsm=lockdown,capability,landlock,yama,apparmor,bpf")) << v.why;
  EXPECT_TRUE(says(v, "sampled kill")) << v.why;
  // "bpf" only as a whole item: a name that contains it is another LSM.
  f.lsmList = "capability,bpfish,notbpf";
  EXPECT_FALSE(assess(f).can.refusing);
  EXPECT_TRUE(lsmListHasBpf("bpf"));
  EXPECT_TRUE(lsmListHasBpf("capability,bpf,ipe"));
  EXPECT_FALSE(lsmListHasBpf(""));
  f.lsmList.reset();
  v = assess(f);
  EXPECT_TRUE(v.can.charging);
  EXPECT_FALSE(v.can.refusing);
  EXPECT_TRUE(says(v, "unreadable")) << v.why;
}

TEST(BpfAvailability, EachMissingPieceIsNamedWithWhatToDo) {
  HostFacts f = allThere();
  f.btf = false;
  auto v = assess(f);
  EXPECT_FALSE(v.can.charging);
  EXPECT_TRUE(says(v, "CONFIG_DEBUG_INFO_BTF")) << v.why;
  EXPECT_TRUE(describe(v).starts_with("off: ")) << describe(v);
  f = allThere();
  f.capBpf = false;
  v = assess(f);
  EXPECT_FALSE(v.can.charging);
  EXPECT_TRUE(says(v, "lacks CAP_BPF:")) << v.why;
  EXPECT_TRUE(says(v, "CapabilityBoundingSet")) << v.why;
  f.capPerfmon = false;
  EXPECT_TRUE(says(assess(f), "CAP_BPF and CAP_PERFMON")) << assess(f).why;
  f = allThere();
  f.bpffs = false;
  EXPECT_TRUE(says(assess(f), "mount -t bpf")) << assess(f).why;
  f = allThere();
  f.loadError = "the kernel did not load the kernel charge: Invalid argument";
  v = assess(f);
  EXPECT_FALSE(v.can.charging);
  EXPECT_TRUE(says(v, "refused the programs: the kernel did not load")) << v.why;
}

}  // namespace
}  // namespace tally::bpf
