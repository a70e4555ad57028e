// The pure parts of a lease: unit parsing, cgroup memory file parsers, the
// read-back rules, outcome classification and the outcome record.
#include "lease/spec.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <limits>

#include "support/fake_host.h"
#include "util/units.h"

namespace tally {
namespace {

using namespace tally::testing;
using units::parseDurationUs;
using units::parseSize;

constexpr std::uint64_t kMiB = 1 << 20;

TEST(LeaseNames, SliceNestsUnderTheParentAndIdsHaveNoDash) {
  lease::LeaseSpec s;
  s.id = "0123456789ab";
  EXPECT_EQ(lease::leaseSliceName(s), "tally-0123456789ab.slice");
  EXPECT_EQ(lease::leaseScopeName(s), "tally-0123456789ab.scope");
  s.slice = "gpu-batch.slice";
  EXPECT_EQ(lease::leaseSliceName(s), "gpu-batch-0123456789ab.slice");
  s.slice = "-.slice";
  EXPECT_EQ(lease::leaseSliceName(s), "tally0123456789ab.slice");
  auto a = lease::newLeaseId(), b = lease::newLeaseId();
  EXPECT_EQ(a.size(), 12u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace tally
