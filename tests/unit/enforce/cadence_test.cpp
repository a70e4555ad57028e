// When the daemon samples a lease again: near its bound (or rising fast toward
// it) every near_bound_interval, otherwise every sample_interval.
#include "enforce/cadence.h"

#include <gtest/gtest.h>

namespace tally::enforce {
namespace {

constexpr std::uint64_t MiB = 1ULL << 20;
const Cadence kDefault{1'000'000, 50'000, 10};

TEST(Cadence, WithinTheMarginOrOverIsNear) {
  const std::uint64_t max = 100 * MiB;
  EXPECT_FALSE(nearBound(kDefault, max, 89 * MiB, std::nullopt, 0));
  EXPECT_TRUE(nearBound(kDefault, max, 90 * MiB, std::nullopt, 0));  // the line is max - 10 %
  EXPECT_TRUE(nearBound(kDefault, max, 100 * MiB, std::nullopt, 0));
  EXPECT_TRUE(nearBound(kDefault, max, 500 * MiB, std::nullopt, 0));  // over: near until killed
  EXPECT_EQ(nextSampleDelayUs(kDefault, max, 95 * MiB, std::nullopt, 0), 50'000u);
  EXPECT_EQ(nextSampleDelayUs(kDefault, max, 10 * MiB, std::nullopt, 0), 1'000'000u);
}

TEST(Cadence, RisingFastTowardTheLineIsNear) {
  const std::uint64_t max = 100 * MiB;
  // 40 -> 60 MiB in 1 s: 80 MiB by the next sample, short of the 90 MiB line.
  EXPECT_FALSE(nearBound(kDefault, max, 60 * MiB, 40 * MiB, 1'000'000));
  // 40 -> 70 MiB in 1 s: 100 MiB by the next sample.
  EXPECT_TRUE(nearBound(kDefault, max, 70 * MiB, 40 * MiB, 1'000'000));
  // 5 MiB in 100 ms is 50 MiB/s: 95 MiB by the next sample; 2 MiB in 100 ms is not.
  EXPECT_TRUE(nearBound(kDefault, max, 45 * MiB, 40 * MiB, 100'000));
  EXPECT_FALSE(nearBound(kDefault, max, 42 * MiB, 40 * MiB, 100'000));
  // Falling or flat is never "rising fast".
  EXPECT_FALSE(nearBound(kDefault, max, 40 * MiB, 70 * MiB, 1'000'000));
  EXPECT_FALSE(nearBound(kDefault, max, 40 * MiB, 40 * MiB, 1'000'000));
  EXPECT_FALSE(nearBound(kDefault, max, 70 * MiB, 40 * MiB, 0)) << "no spacing, no rate";
  // A jump as large as the address space does not overflow into "far".
  EXPECT_TRUE(nearBound(kDefault, UINT64_MAX, UINT64_MAX / 2, 0, 1));
}

TEST(Cadence, NothingReadOrNothingToBeNearIsNormal) {
  EXPECT_FALSE(nearBound(kDefault, std::nullopt, 500 * MiB, std::nullopt, 0)) << "no bound";
  EXPECT_FALSE(nearBound(kDefault, 100 * MiB, std::nullopt, 50 * MiB, 1'000'000))
      << "an unread sample is not near (never a made-up figure)";
  Cadence off = kDefault;
  off.marginPercent = 0;
  EXPECT_FALSE(nearBound(off, 100 * MiB, 100 * MiB, std::nullopt, 0)) << "margin 0 turns it off";
  Cadence all = kDefault;
  all.marginPercent = 100;
  EXPECT_TRUE(nearBound(all, 100 * MiB, 0, std::nullopt, 0)) << "margin 100: always near";
  // The margin of a tiny bound rounds down, never below zero.
  EXPECT_TRUE(nearBound(kDefault, 7, 7, std::nullopt, 0));
  EXPECT_FALSE(nearBound(kDefault, 7, 6, std::nullopt, 0));
  // A bound of 0 (a Slurm job without the GRES): near only once it holds
  // something, so the many such leases are sampled at the normal pace.
  EXPECT_FALSE(nearBound(kDefault, 0, 0, std::nullopt, 0));
  EXPECT_FALSE(nearBound(all, 0, 0, 0, 1'000'000)) << "not even at margin 100";
  EXPECT_TRUE(nearBound(kDefault, 0, 1, std::nullopt, 0));
}

// A lease's pace (tally run and the daemon): the first sample's spacing is
// the normal interval, later ones the real one in whole ms; near the line the
// next sample comes nearUs later.
TEST(Cadence, APaceSchedulesTheNextSampleAndNamesTheSpacing) {
  Cadence c{1'000'000, 50'000, 10};
  Pace p;
  EXPECT_EQ(p.sampled(c, 100u, 10u, 5'000'000), 1'000'000u);
  EXPECT_FALSE(p.near);
  EXPECT_EQ(p.nextUs, 6'000'000u);
  EXPECT_EQ(p.sampled(c, 100u, 95u, 6'000'400), 1'000'000u);  // 1,000.4 ms -> 1,000 ms
  EXPECT_TRUE(p.near);
  EXPECT_EQ(p.nextUs, 6'050'400u);
  EXPECT_EQ(p.sampled(c, 100u, 96u, 6'050'900), 50'000u);
  EXPECT_EQ(p.sampled(c, std::nullopt, 96u, 6'050'950), 1'000u);  // under 1 ms: 1 ms
  EXPECT_FALSE(p.near) << "no bound: nothing to be near";
}

}  // namespace
}  // namespace tally::enforce
