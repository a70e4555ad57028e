// The one rule for declared limits (lease/limits_rule.h), as every way in
// sees it: the refusals name the field as that caller spelt it.
#include "lease/limits_rule.h"

#include <gtest/gtest.h>

#include <string_view>

namespace tally::lease {
namespace {

std::string refusal(const DeclaredLimits& d, const LimitNames& n = kCliLimitNames) {
  auto s = checkLimits(d, n);
  return s ? std::string() : s.error().message;
}

TEST(LimitsRule, AGpuMemoryMaxOfZeroIsABoundOfNoGpuMemory) {
  DeclaredLimits d;
  d.gpuMemoryMax = 0;
  EXPECT_EQ(refusal(d), "");
  d.gpuMemoryHigh = 0;
  EXPECT_NE(refusal(d).find("--gpu-memory-high 0 would act on the lease at its first sample"),
            std::string::npos)
      << refusal(d);
}

TEST(LimitsRule, EachRefusalNamesTheFieldAsItsCallerSpeltIt) {
  DeclaredLimits d;
  d.memoryMax = kMinMemoryMax - 1;
  EXPECT_NE(refusal(d, kRpcLimitNames).find("\"memory_max\" 1048575 bytes is below 1 MiB"),
            std::string::npos);
  d = {};
  d.memoryMax = kMinMemoryMax;
  EXPECT_EQ(refusal(d), "") << "1 MiB itself is allowed";
  d = {};
  d.gpuMemoryMax = 1 << 20;
  d.gpuMemoryHigh = 2 << 20;
  EXPECT_NE(refusal(d).find("--gpu-memory-high 2.0 MiB is above --gpu-memory-max 1.0 MiB"),
            std::string::npos)
      << refusal(d);
  d.gpuMemoryHigh = 1 << 20;
  EXPECT_EQ(refusal(d), "") << "a high mark at the max is allowed";
}

}  // namespace
}  // namespace tally::lease
