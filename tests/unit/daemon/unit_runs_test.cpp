#include "daemon/unit_runs.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

using daemon::UnitRun;

constexpr const char* kOld = "3f2a9c0d1b2e4f5a6b7c8d9e0f1a2b3c";
constexpr const char* kNew = "77aa9c0d1b2e4f5a6b7c8d9e0f1a2b3c";

TEST(UnitRuns, ARunIsLeasableOnceItsMainProcessRuns) {
  const std::string cg = "/system.slice/llama.service";
  EXPECT_TRUE(daemon::runLeasable({"active", "running", kNew, cg, ""}));
  EXPECT_TRUE(daemon::runLeasable({"reloading", "reload", kNew, cg, ""}));
  EXPECT_TRUE(daemon::runLeasable({"activating", "start", kNew, cg, ""}));  // Type=notify
  EXPECT_TRUE(daemon::runLeasable({"activating", "start-post", kNew, cg, ""}));
  EXPECT_FALSE(daemon::runLeasable({"activating", "start-pre", kNew, cg, ""}));  // not yet
  EXPECT_FALSE(daemon::runLeasable({"activating", "auto-restart", kOld, cg, ""}));
  EXPECT_FALSE(daemon::runLeasable({"active", "exited", kNew, cg, ""}));   // RemainAfterExit
  EXPECT_FALSE(daemon::runLeasable({"active", "running", kNew, "", ""}));  // nowhere to meter
  EXPECT_FALSE(daemon::runLeasable({"inactive", "dead", "", "", ""}));
  EXPECT_FALSE(daemon::runLeasable({"failed", "failed", kOld, "", ""}));
  EXPECT_FALSE(daemon::runLeasable({"deactivating", "stop-sigterm", kOld, cg, "stop"}));
}

TEST(UnitRuns, HowARunEndedIsToldFromWhatTheUnitShowsNow) {
  const std::string u = "llama.service";
  auto restarted = daemon::runEnding(u, kOld, {"active", "running", kNew, "/x", ""});
  EXPECT_TRUE(restarted.restart);
  EXPECT_EQ(restarted.words, "unit llama.service restarted (a new run, invocation 77aa9c0d1b2e)");
  auto starting = daemon::runEnding(u, kOld, {"activating", "start-pre", kNew, "/x", "start"});
  EXPECT_TRUE(starting.restart);
  EXPECT_EQ(starting.words, "unit llama.service restarted (a new run, invocation 77aa9c0d1b2e)");
  auto policy = daemon::runEnding(u, kOld, {"activating", "auto-restart", kOld, "", ""});
  EXPECT_TRUE(policy.restart);
  EXPECT_EQ(policy.words, "unit llama.service is restarting (its Restart= policy)");
  auto job = daemon::runEnding(u, kOld, {"inactive", "dead", kOld, "", "restart"});
  EXPECT_TRUE(job.restart);
  EXPECT_EQ(job.words, "unit llama.service is restarting (a restart job)");
  auto stopped = daemon::runEnding(u, kOld, {"inactive", "dead", kOld, "", ""});
  EXPECT_FALSE(stopped.restart);
  EXPECT_EQ(stopped.words, "unit llama.service stopped");
  // A new invocation that already failed is a failure, not a running restart.
  auto failed = daemon::runEnding(u, kOld, {"failed", "failed", kNew, "", ""});
  EXPECT_FALSE(failed.restart);
  EXPECT_EQ(failed.words, "unit llama.service failed");
  auto stopping = daemon::runEnding(u, kOld, {"deactivating", "stop-sigterm", kOld, "/x", "stop"});
  EXPECT_FALSE(stopping.restart);
  EXPECT_EQ(stopping.words, "unit llama.service stopped");
  // Same run, still active (a oneshot's remains): said as it is.
  auto remains = daemon::runEnding(u, kOld, {"active", "exited", kOld, "/x", ""});
  EXPECT_FALSE(remains.restart);
  EXPECT_EQ(remains.words, "unit llama.service is active (exited), its processes gone");
  // No invocation recorded (adopted before systemd had one): never "restarted" by guess.
  EXPECT_FALSE(daemon::runEnding(u, "", {"active", "running", kNew, "/x", ""}).restart);
}

}  // namespace
}  // namespace tally
