// The hand-over's rules, each written once: the kernel state a lease's plan
// reads (MemoryMax with GPU memory and an advisory gpu_memory_max follow in
// enforce::plan, tests/unit/enforce/plan_test.cpp), host memory without the
// charged GTT.
#include "coverage/handover.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

using coverage::Coverage;
using coverage::Handover;

TEST(Handover, NotChargedChangesNothing) {
  Handover h{Coverage::HostOnly, false};
  const enforce::KernelState k = h.kernelState(true);
  EXPECT_FALSE(k.gttCharged);
  EXPECT_FALSE(k.keepGpuMemoryMax);
  EXPECT_TRUE(k.chargeRefuses);
  EXPECT_FALSE(h.kernelState(false).chargeRefuses);
  EXPECT_EQ(h.hostOnly(100, std::nullopt, 30), 100u);
  EXPECT_NE(h.whatTallyDoes().find("gpu_memory_max kills"), std::string::npos);
}

TEST(Handover, ChargedGttIsBoundedByMemoryMaxAndCountedOnce) {
  Handover h{Coverage::HostAndGtt, false};
  EXPECT_TRUE(h.kernelState(true).gttCharged);
  EXPECT_FALSE(h.kernelState(true).keepGpuMemoryMax);
  EXPECT_EQ(h.hostOnly(100, std::nullopt, 30), 70u);
  EXPECT_EQ(h.hostOnly(10, std::nullopt, 30), 0u);
  EXPECT_FALSE(h.hostOnly(100, std::nullopt, std::nullopt))
      << "the split is unknown without the GTT figure";
  EXPECT_FALSE(h.hostOnly(std::nullopt, std::nullopt, 30));
  Handover kept{Coverage::HostAndGtt, true};
  EXPECT_TRUE(kept.kernelState(true).keepGpuMemoryMax);
  EXPECT_NE(kept.whatTallyDoes().find("still kills"), std::string::npos);
}

// A kernel whose memory.stat names the GPU bytes it charged (gpu_active from
// the TTM memcg series, dmem from the dmem -> memcg route): exactly those
// bytes come off memory.current, whatever the GTT verdict -- VRAM charged
// through dmem included, which a GTT-only rule would leave in the host figure.
TEST(Handover, MemoryStatsOwnGpuKeysAreSubtractedExactly) {
  Handover vramOnly{Coverage::HostOnly, false, true};
  EXPECT_EQ(vramOnly.hostOnly(1000, 256, 700), 744u) << "dmem (VRAM) charged, GTT not";
  EXPECT_FALSE(vramOnly.hostOnly(1000, std::nullopt, 700)) << "memory.stat unread: unknown";
  EXPECT_EQ(vramOnly.hostOnly(100, 300, 0), 0u);
  Handover both{Coverage::HostAndGtt, false, true};
  EXPECT_EQ(both.hostOnly(1000, 600, 900), 400u) << "the stat's figure, not the fdinfo GTT";
}

}  // namespace
}  // namespace tally
