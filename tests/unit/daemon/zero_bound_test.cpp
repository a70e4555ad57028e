// A bound of 0 (gpu_memory_max 0: no GPU memory, a Slurm job without the
// GRES) is a bound like any other to the daemon, never "no bound".
#include <gtest/gtest.h>

#include "daemon/service_fixture.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;

// The daemon saw the lease hold GPU memory over its bound of 0 (one sample:
// not yet its own kill); the client's kill at that bound is then tally's,
// as at any other bound.
TEST_F(ServiceBoundTest, AClientsKillAtABoundOfZeroTheDaemonSawIsTallys) {
  json a = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 0}, {"name", "none"}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string id = a["result"]["lease"];
  std::string scope = "/tally.slice/tally-" + id + ".scope";
  gpuWorkload(scope, 5030, 31, 1);  // 1 GiB of GTT against none declared
  ASSERT_EQ(::chown((host.cgroupRoot() + scope).c_str(), 1000, 1000), 0);
  ASSERT_TRUE(call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
  service->sample();  // over once: the daemon's own kill waits for the second
  EXPECT_FALSE(killed(scope));
  json ev = {{"kind", "gpu-memory-kill"},
             {"bytes", GiB},
             {"limit", 0},
             {"samples", 1},
             {"summary", "killed by tally: GPU memory 1.0 GiB over gpu_memory_max 0 B"}};
  ASSERT_TRUE(call(1, 1000, "bound", {{"lease", id}, {"event", ev}})["ok"]);
  json claimed = {{"lease", {{"id", id}}},
                  {"outcome", {{"class", "killed-by-tally"}, {"signal", 9}, {"summary", "x"}}}};
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", id}, {"record", claimed}})["ok"]);
  json stored = json::parse(rows(id).back().body);
  EXPECT_EQ(stored["outcome"]["class"], "killed-by-tally") << stored["outcome"];
  EXPECT_EQ(stored["declared"]["gpu_memory_max"], 0);
}

}  // namespace
}  // namespace tally
