// Coverage: the dmem parser on the real Strix Halo sample and hostile text,
// the probe's judgement at its thresholds, and the verdict it leads to.
#include "probes/dmem.h"

#include <gtest/gtest.h>

#include "coverage/coverage.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using coverage::ProbeOutcome;

TEST(Dmem, ParsesTheStrixHaloSample) {
  auto text =
      testing::readFile(std::string(TALLY_FIXTURE_DIR) + "/dmem/dmem.capacity.strixhalo-7.1.8");
  auto r = probes::parseDmemCapacity(text);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "drm/0000:c6:00.0/vram");
  EXPECT_EQ((*r)[0].bytes, 1073741824u);
  auto current = probes::parseDmemCapacity(
      testing::readFile(std::string(TALLY_FIXTURE_DIR) + "/dmem/dmem.current.strixhalo-7.1.8"));
  ASSERT_TRUE(current);
  EXPECT_EQ((*current)[0].bytes, 1006202880u);
}

TEST(Dmem, HostileTextIsRefusedNotGuessed) {
  EXPECT_TRUE(probes::parseDmemCapacity("")->empty());
  EXPECT_TRUE(probes::parseDmemCapacity("\n\n")->empty());
  EXPECT_FALSE(probes::parseDmemCapacity(
      "drm/0000:03:00.0/stolen max\n"));  // dmem.max syntax, not a capacity
  EXPECT_FALSE(
      probes::parseDmemCapacity("drm/0000:03:00.0/vram0 99999999999999999999999\n"));  // overflow
  EXPECT_FALSE(probes::parseDmemCapacity("drm/0000:03:00.0/vram0\n"));                 // truncated
  EXPECT_FALSE(probes::parseDmemCapacity(std::string("drm/a 12\0 34\n", 13)));         // NUL inside
  auto two = probes::parseDmemCapacity(
      "drm/0000:03:00.0/vram0 8514437120\r\ndrm/0000:03:00.0/stolen\t67108864");
  ASSERT_TRUE(two);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].name, "drm/0000:03:00.0/stolen");
  EXPECT_EQ((*two)[1].bytes, 67108864u);
}

}  // namespace
}  // namespace tally
