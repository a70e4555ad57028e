// The pure parts of a lease: unit parsing, cgroup memory file parsers, the
// read-back rules, outcome classification and the outcome record.
#include "probes/cgroup_memory.h"

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

// Real memory.events and memory.stat as read in the VM (kernel 6.12.117).
constexpr const char* kEvents = "low 0\nhigh 0\nmax 33\noom 1\noom_kill 4\noom_group_kill 1\n";

TEST(CgroupMemory, FlatKeyedFromTheKernel) {
  auto ev = probes::parseFlatKeyed(kEvents);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->entries.size(), 6u);
  EXPECT_EQ(ev->get("oom_kill"), 4u);
  EXPECT_EQ(ev->get("oom_group_kill"), 1u);
  EXPECT_EQ(ev->get("max"), 33u);
  EXPECT_FALSE(ev->get("sock_throttled"));
  auto populated = probes::parseFlatKeyed("populated 0\nfrozen 0\n");
  ASSERT_TRUE(populated);
  EXPECT_EQ(populated->get("populated"), 0u);
}

TEST(CgroupMemory, FlatKeyedHostileInput) {
  EXPECT_TRUE(probes::parseFlatKeyed("")->entries.empty());
  EXPECT_FALSE(probes::parseFlatKeyed("oom_kill\n"));                       // no value
  EXPECT_FALSE(probes::parseFlatKeyed("oom_kill -1\n"));                    // negative
  EXPECT_FALSE(probes::parseFlatKeyed("oom_kill 18446744073709551616\n"));  // overflow
  EXPECT_FALSE(probes::parseFlatKeyed(" 5\n"));                             // no key
  EXPECT_FALSE(probes::parseFlatKeyed(std::string("oom\0kill 1\n", 11)));   // NUL inside
  // Truncation at every byte: a prefix either parses to a prefix of the
  // entries or is refused; it never invents a value.
  std::string full = kEvents;
  for (std::size_t n = 0; n <= full.size(); ++n) {
    auto p = probes::parseFlatKeyed(full.substr(0, n));
    if (!p) continue;
    for (const auto& [k, v] : p->entries) {
      auto whole = probes::parseFlatKeyed(full)->get(k);
      if (whole) {
        EXPECT_LE(v, *whole) << "prefix " << n;
      }
    }
  }
  auto dup = probes::parseFlatKeyed("oom 1\noom 2\n");
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->get("oom"), 1u);
  EXPECT_EQ(dup->entries.size(), 1u);
}

TEST(CgroupMemory, Limits) {
  EXPECT_EQ(*probes::parseMemoryLimit("max\n"), (probes::MemoryLimit{true, 0}));
  EXPECT_EQ(*probes::parseMemoryLimit("67108864\n"), (probes::MemoryLimit{false, 67108864}));
  EXPECT_FALSE(probes::parseMemoryLimit(""));
  EXPECT_FALSE(probes::parseMemoryLimit("maximum"));
  EXPECT_FALSE(probes::parseMemoryLimit("64M"));
}

}  // namespace
}  // namespace tally
