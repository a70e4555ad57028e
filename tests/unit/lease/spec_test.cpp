// The pure parts of a lease: unit parsing, cgroup memory file parsers, the
// read-back rules, outcome classification and the outcome record.
#include "lease/spec.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <limits>

#include "lease/lease_id.h"
#include "support/fake_host.h"
#include "util/units.h"

namespace tally {
namespace {

using namespace tally::testing;
using units::parseDurationUs;
using units::parseSize;

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
  EXPECT_TRUE(lease::validLeaseId(a));
}

// One rule for a lease id, wherever one arrives (an RPC field, a Slurm job's
// kept record): never a byte either syntax uses, nor a unit name's '.'.
TEST(LeaseSpec, ALeaseIdIsOneToSixtyFourOfItsOwnBytes) {
  EXPECT_TRUE(lease::validLeaseId("ed6397fc3ad5"));
  EXPECT_TRUE(lease::validLeaseId("A-z_9"));
  EXPECT_TRUE(lease::validLeaseId(std::string(64, 'f')));
  for (std::string_view bad : {"", "a.b", "a b", "a/b", "a=b", "a+1", "a,b", "a\n", "\xff"})
    EXPECT_FALSE(lease::validLeaseId(bad)) << bad;
  EXPECT_FALSE(lease::validLeaseId(std::string(65, 'f')));
}

}  // namespace
}  // namespace tally
