// The hand-over's rules, each written once: MemoryMax with GPU memory, an
// advisory gpu_memory_max, host memory without the charged GTT.
#include "coverage/handover.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

using coverage::Coverage;
using coverage::Handover;

TEST(Handover, NotChargedChangesNothing) {
  Handover h{Coverage::HostOnly, false};
  EXPECT_FALSE(h.memoryMaxWithGpu(8, 40));
  EXPECT_FALSE(h.gpuBoundAdvisory(true));
  EXPECT_EQ(h.hostOnly(100, 30), 100u);
  EXPECT_NE(h.whatTallyDoes().find("gpu_memory_max kills"), std::string::npos);
}

TEST(Handover, ChargedGttIsBoundedByMemoryMaxAndCountedOnce) {
  Handover h{Coverage::HostAndGtt, false};
  EXPECT_EQ(h.memoryMaxWithGpu(8, 40), 48u);
  EXPECT_FALSE(h.memoryMaxWithGpu(8, std::nullopt));
  EXPECT_FALSE(h.memoryMaxWithGpu(std::nullopt, 40));
  EXPECT_TRUE(h.gpuBoundAdvisory(true));
  EXPECT_FALSE(h.gpuBoundAdvisory(false));
  EXPECT_EQ(h.hostOnly(100, 30), 70u);
  EXPECT_EQ(h.hostOnly(10, 30), 0u);
  EXPECT_FALSE(h.hostOnly(100, std::nullopt)) << "the split is unknown without the GTT figure";
  EXPECT_FALSE(h.hostOnly(std::nullopt, 30));
  Handover kept{Coverage::HostAndGtt, true};
  EXPECT_FALSE(kept.gpuBoundAdvisory(true));
  EXPECT_NE(kept.whatTallyDoes().find("still kills"), std::string::npos);
}

}  // namespace
}  // namespace tally
