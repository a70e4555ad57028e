// enforce::RefusalLog: the kernel's refusals of one lease, said as one event
// at most once per interval (and at once at the lease's end), none lost.
#include "enforce/refusal_log.h"

#include <gtest/gtest.h>

namespace tally::enforce {
namespace {

constexpr std::uint64_t M = 1ULL << 20;
constexpr std::uint64_t kMinuteUs = 60'000'000;

TEST(RefusalLog, RefusalsAreSaidTogetherAtMostOncePerInterval) {
  RefusalLog log;
  EXPECT_FALSE(log.unsaid());
  EXPECT_FALSE(log.due(1, kMinuteUs)) << "nothing to say";
  log.add({64 * M, 900 * M, 41, false, ""});
  log.add({128 * M, 900 * M, 42, true, "object map full"});
  log.add({32 * M, 960 * M, 43, false, ""});
  EXPECT_TRUE(log.unsaid());
  EXPECT_TRUE(log.due(5, kMinuteUs)) << "never said: due at once";
  const BoundEvent e = log.say(1024 * M, 5, 7'000);
  EXPECT_EQ(e.kind, Verdict::Refused);
  EXPECT_EQ(e.atNs, 7'000u);
  EXPECT_EQ(e.bytes, 224 * M);
  EXPECT_EQ(e.limit, 1024 * M);
  EXPECT_EQ(e.samples, 3u);
  EXPECT_EQ(e.summary,
            "3 GPU allocations (224.0 MiB) refused in the kernel at gpu_memory_max 1.0 GiB: the "
            "last asked 32.0 MiB with 960.0 MiB held (pid 43); the lease runs on; 1 of them "
            "refused failing closed, not at the bound (the last: object map full): the kernel "
            "could not charge them exactly (tally doctor, docs/enforcement.md)");
  EXPECT_FALSE(log.unsaid());

  log.add({16 * M, 100 * M, 50, false, ""});
  EXPECT_FALSE(log.due(5 + kMinuteUs - 1, kMinuteUs)) << "said under a minute ago";
  EXPECT_TRUE(log.due(5 + kMinuteUs, kMinuteUs));
  const BoundEvent next = log.say(1024 * M, 5 + kMinuteUs, 8'000);
  EXPECT_EQ(next.samples, 1u) << "only those since the last event";
  EXPECT_EQ(next.bytes, 16 * M);
  EXPECT_EQ(next.summary,
            "1 GPU allocation (16.0 MiB) refused in the kernel at gpu_memory_max 1.0 GiB: the last "
            "asked 16.0 MiB with 100.0 MiB held (pid 50); the lease runs on");
}

}  // namespace
}  // namespace tally::enforce
