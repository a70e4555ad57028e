// request_timeout counts only the time the daemon waits on its client.
#include "daemon/line_clock.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

constexpr std::uint64_t kTimeout = 10'000'000;

TEST(LineClock, AnUnfinishedLineTimesOutOnlyWhileTheDaemonReads) {
  daemon::LineClock c;
  c.received(true, 1'000'000);  // half a line
  EXPECT_FALSE(c.expired(11'000'000, kTimeout));
  EXPECT_TRUE(c.expired(11'000'001, kTimeout));
  // The daemon stops reading (the client's replies pile up past the pause):
  // however long that lasts, the client is not to blame.
  c.reading(false, 2'000'000);
  EXPECT_FALSE(c.expired(500'000'000, kTimeout));
  // Reading again: the client gets the whole timeout from now.
  c.reading(true, 500'000'000);
  EXPECT_FALSE(c.expired(510'000'000, kTimeout));
  EXPECT_TRUE(c.expired(510'000'001, kTimeout));
  // The line completes: nothing waits.
  c.received(false, 510'000'001);
  EXPECT_FALSE(c.expired(900'000'000, kTimeout));
}

TEST(LineClock, MoreBytesOfTheSameLineDoNotRestartIt) {
  daemon::LineClock c;
  c.received(true, 1'000'000);
  c.received(true, 9'000'000);  // a slow client trickling bytes (slow loris)
  EXPECT_TRUE(c.expired(11'000'001, kTimeout));
  c.reading(true, 12'000'000);  // already reading: no restart
  EXPECT_TRUE(c.expired(12'000'001, kTimeout));
}

}  // namespace
}  // namespace tally
