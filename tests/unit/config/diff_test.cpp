#include "config/diff.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

config::Config parsed(const char* text) {
  auto p = config::parse(text, "tally.toml");
  EXPECT_TRUE(p.config) << config::formatProblems(p, "tally.toml");
  return p.config.value_or(config::Config{});
}

constexpr const char* kBefore = R"([daemon]
state_dir = "/var/lib/tally"
queue_timeout = "10m"

[pools.gpu]
capacity = 2
gpu_memory_budget = "48GiB"
memory_budget = "64GiB"

[pools.batch]
capacity = 8

[leases.llm]
unit = "llama-server.service"
pools = ["gpu"]
memory_max = "8GiB"
gpu_memory_max = "40GiB"
)";

constexpr const char* kAfter = R"([daemon]
state_dir = "/var/lib/tally"
queue_timeout = "30min"

[pools.gpu]
capacity = 3
gpu_memory_budget = "64GiB"
memory_budget = "64GiB"
allow_groups = ["render"]

[pools.train]
capacity = 1

[leases.llm]
unit = "llama-server.service"
pools = ["gpu"]
memory_max = "8GiB"
gpu_memory_max = "44GiB"
gpu_memory_action = "kill"
)";

TEST(ConfigDiff, SaysEachChangedSettingInTheUnitsConfigCheckShows) {
  auto c = config::differences(parsed(kBefore), parsed(kAfter));
  EXPECT_EQ(c.daemon, (std::vector<std::string>{"daemon.queue_timeout 10min -> 30min"}));
  EXPECT_EQ(c.pools, (std::vector<std::string>{
                         "pools.batch removed",
                         "pools.gpu.capacity 2 -> 3",
                         "pools.gpu.gpu_memory_budget 48.0 GiB -> 64.0 GiB",
                         "pools.gpu.allow_groups [] -> [render]",
                         "pools.train added",
                     }));
  EXPECT_EQ(c.leases, (std::vector<std::string>{"leases.llm.gpu_memory_max 40.0 GiB -> 44.0 GiB",
                                                "leases.llm.gpu_memory_action refuse -> kill"}));
  EXPECT_FALSE(c.empty());
}

TEST(ConfigDiff, TheSameConfigHasNoChanges) {
  EXPECT_TRUE(config::differences(parsed(kBefore), parsed(kBefore)).empty());
  // Comments and the order of keys are not changes.
  std::string reordered = std::string("# edited\n") + kBefore;
  EXPECT_TRUE(config::differences(parsed(kBefore), parsed(reordered.c_str())).empty());
}

}  // namespace
}  // namespace tally
