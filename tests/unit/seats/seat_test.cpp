// Seat rows: fresh within two sample intervals, a figure that cannot be read
// shown absent with the reason.
#include "seats/seat.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/fake_host.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST(Seat, FreshIsWithinTwoIntervalsAndNeverInTheFuture) {
  const std::uint64_t t = 1'000'000'000'000ULL;
  EXPECT_TRUE(seats::isFresh(t, t, 500'000));
  EXPECT_TRUE(seats::isFresh(t, t + 1'000'000'000ULL, 500'000));
  EXPECT_FALSE(seats::isFresh(t, t + 1'000'000'001ULL, 500'000));
  EXPECT_FALSE(seats::isFresh(t + 1, t, 500'000));
  EXPECT_FALSE(seats::isFresh(std::nullopt, t, 500'000));
}

TEST(Seat, ARowWithAnUnreadableFigureSaysWhy) {
  seats::SeatFacts f;
  f.lease = "0123456789ab";
  f.state = "running";
  f.cgroup = "/tally.slice/x.scope";
  f.populatedUnknown = "cgroup.events: Permission denied";
  f.observedAtNs = 100;
  f.hostCurrent = seats::Figure::of(std::nullopt, "memory.current: No such file or directory");
  f.hostPeak = {GiB, {}};
  f.gpuCurrent = seats::Figure::of(std::nullopt, "a client printed no resident figure");
  json r = seats::seatRow(f, 100, 1'000'000);
  EXPECT_TRUE(r["running"].is_null());
  EXPECT_EQ(r["running_unknown"], "cgroup.events: Permission denied");
  EXPECT_TRUE(r["host"]["current_bytes"].is_null());
  EXPECT_EQ(r["host"]["current_bytes_unknown"], "memory.current: No such file or directory");
  EXPECT_EQ(r["host"]["peak_bytes"], GiB);
  EXPECT_FALSE(r["host"].contains("peak_bytes_unknown"));
  EXPECT_TRUE(r["gpu"]["current_bytes"].is_null());
  EXPECT_EQ(r["gpu"]["current_bytes_unknown"], "a client printed no resident figure");
  EXPECT_EQ(r["gpu"]["limit_unknown"], "no gpu_memory_max declared");
}

// Each region says its memory class; one GPU memory does not count says why.
TEST(Seat, ARegionSaysItsClassAndWhyItIsNotCounted) {
  seats::SeatFacts f;
  f.lease = "0123456789ab";
  f.state = "running";
  f.observedAtNs = 100;
  f.gpuRegions["gtt"] = {4 * GiB, 4 * GiB, devices::MemoryClass::HostUncharged};
  f.gpuRegions["memory"] = {GiB, GiB, devices::MemoryClass::HostCharged};
  f.gpuRegions["odd"] = {1, 1, std::nullopt};
  json r = seats::seatRow(f, 100, 1'000'000);
  EXPECT_EQ(r["gpu"]["regions"]["gtt"]["class"], "host-uncharged");
  EXPECT_FALSE(r["gpu"]["regions"]["gtt"].contains("not_counted"));
  EXPECT_EQ(r["gpu"]["regions"]["memory"]["class"], "host-charged");
  EXPECT_EQ(r["gpu"]["regions"]["memory"]["not_counted"],
            "host-charged: shmem pages the cgroup's memory.current already holds");
  EXPECT_FALSE(r["gpu"]["regions"]["odd"].contains("class"));
}

}  // namespace
}  // namespace tally
