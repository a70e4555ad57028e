#include "config/config.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

constexpr const char* kStrixHalo = R"(# a Strix Halo box: 128 GiB unified memory
[daemon]
socket = "/run/tally/tally.sock"
socket_group = "tally"
state_dir = "/var/lib/tally"
sample_interval = "500ms"
queue_timeout = "10m"
samples_full_resolution = "2h"
samples_max_age = "7d"
samples_max_rows = 50000
client_grace = 30

[pools.gpu]
capacity = 3
gpu_memory_budget = "96GiB"
memory_budget = 68719476736
devices = ["0000:c6:00.0"]
gtt_ceiling = "compute"

[pools.batch]
capacity = 8
allow_users = ["alice", "1002"]
allow_groups = ["slurm"]
)";

TEST(Config, ParsesEveryKeyIntoRawUnits) {
  auto p = config::parse(kStrixHalo, "tally.toml");
  ASSERT_TRUE(p.config) << config::formatProblems(p, "tally.toml");
  const auto& c = *p.config;
  EXPECT_EQ(c.daemon.socket, "/run/tally/tally.sock");
  EXPECT_EQ(c.daemon.socketGroup, "tally");
  EXPECT_EQ(c.daemon.stateDir, "/var/lib/tally");
  EXPECT_EQ(c.daemon.sampleIntervalUs, 500'000u);
  EXPECT_EQ(c.daemon.queueTimeoutUs, 600'000'000u);
  EXPECT_EQ(c.daemon.samplesFullResolutionUs, 7'200'000'000u);
  EXPECT_EQ(c.daemon.samplesMaxAgeUs, 604'800'000'000u);
  EXPECT_EQ(c.daemon.samplesMaxRows, 50'000u);
  EXPECT_EQ(c.daemon.clientGraceUs, 30'000'000u);
  ASSERT_EQ(c.pools.size(), 2u);
  EXPECT_EQ(c.pools[0].name, "gpu");  // file order
  EXPECT_EQ(c.pools[0].capacity, 3u);
  EXPECT_EQ(c.pools[0].gpuMemoryBudget, 96ULL << 30);
  EXPECT_EQ(c.pools[0].memoryBudget, 64ULL << 30);
  EXPECT_EQ(c.pools[0].devices, std::vector<std::string>{"0000:c6:00.0"});
  EXPECT_EQ(c.pools[0].gttCeiling, devices::GttConsumer::Compute);
  EXPECT_EQ(c.pools[1].name, "batch");
  EXPECT_EQ(c.pools[1].gttCeiling, devices::GttConsumer::Smaller);  // the default
  EXPECT_FALSE(c.pools[1].memoryBudget);
  EXPECT_FALSE(c.pools[1].gpuMemoryBudget);
  EXPECT_EQ(c.pools[1].allowUsers, (std::vector<std::string>{"alice", "1002"}));
  EXPECT_EQ(c.pools[1].allowGroups, std::vector<std::string>{"slurm"});
  EXPECT_TRUE(c.pools[0].allowUsers.empty() && c.pools[0].allowGroups.empty());  // open to all
  EXPECT_EQ(c.pool("batch"), &c.pools[1]);
  EXPECT_EQ(c.pool("nope"), nullptr);
}

TEST(Config, DefaultsNeedOnlyAPool) {
  auto p = config::parse("[pools.one]\ncapacity = 1\n", "t.toml");
  ASSERT_TRUE(p.config);
  EXPECT_EQ(p.config->daemon.socket, config::kSystemSocket);
  EXPECT_EQ(p.config->daemon.sampleIntervalUs, 1'000'000u);
  // A queue that can never be served ends: an hour unless the config says otherwise.
  EXPECT_EQ(p.config->daemon.queueTimeoutUs, 3'600'000'000u);
  EXPECT_TRUE(p.config->daemon.stateDir.empty());
  // Waiting forever is a choice written down, never a default.
  auto forever =
      config::parse("[daemon]\nqueue_timeout = \"0\"\n[pools.one]\ncapacity = 1\n", "t.toml");
  ASSERT_TRUE(forever.config);
  EXPECT_EQ(forever.config->daemon.queueTimeoutUs, 0u);
}

// metrics_listen beyond loopback: only with metrics_beyond_loopback = true,
// and the refusal names that key.
TEST(Config, MetricsBeyondLoopbackIsAnExplicitChoice) {
  auto open = config::parse(
      "[daemon]\nmetrics_listen = \"0.0.0.0:9464\"\nmetrics_beyond_loopback = true\n"
      "[pools.one]\ncapacity = 1\n",
      "t.toml");
  ASSERT_TRUE(open.config) << config::formatProblems(open, "t.toml");
  EXPECT_EQ(open.config->daemon.metricsListen, "0.0.0.0:9464");
  EXPECT_TRUE(open.config->daemon.metricsBeyondLoopback);
  auto refused = config::parse(
      "[daemon]\nmetrics_listen = \"0.0.0.0:9464\"\n[pools.one]\ncapacity = 1\n", "t.toml");
  ASSERT_FALSE(refused.config);
  std::string problems = config::formatProblems(refused, "t.toml");
  EXPECT_NE(problems.find("t.toml:2: daemon.metrics_listen '0.0.0.0:9464': tally serves metrics on "
                          "loopback unless daemon.metrics_beyond_loopback = true"),
            std::string::npos)
      << problems;
  auto defaults = config::parse("[pools.one]\ncapacity = 1\n", "t.toml");
  EXPECT_FALSE(defaults.config->daemon.metricsBeyondLoopback);
  EXPECT_TRUE(defaults.config->daemon.metricsAllowUsers.empty());
  // Who may read them: loopback only, where the kernel can name a peer's user.
  auto allowed = config::parse(
      "[daemon]\nmetrics_listen = \"127.0.0.1:9464\"\nmetrics_allow_users = [\"prometheus\"]\n"
      "[pools.one]\ncapacity = 1\n",
      "t.toml");
  ASSERT_TRUE(allowed.config) << config::formatProblems(allowed, "t.toml");
  EXPECT_EQ(allowed.config->daemon.metricsAllowUsers, std::vector<std::string>{"prometheus"});
  auto beyond = config::parse(
      "[daemon]\nmetrics_listen = \"0.0.0.0:9464\"\nmetrics_beyond_loopback = true\n"
      "metrics_allow_users = [\"prometheus\"]\n[pools.one]\ncapacity = 1\n",
      "t.toml");
  ASSERT_FALSE(beyond.config);
  EXPECT_NE(config::formatProblems(beyond, "t.toml")
                .find("t.toml:4: daemon.metrics_allow_users needs a loopback metrics_listen"),
            std::string::npos)
      << config::formatProblems(beyond, "t.toml");
}

// The loop time one user's listings and lease histories may take a second:
// a duration, 1ms..1s, 100 ms when not set.
TEST(Config, TheQueryTimeBudgetIsADurationWithinASecond) {
  auto d = config::parse("[daemon]\n[pools.gpu]\ncapacity = 1\n", "t.toml");
  ASSERT_TRUE(d.config);
  EXPECT_EQ(d.config->daemon.queryTimePerSecondPerUidUs, 100'000u);
  auto p = config::parse(
      "[daemon]\nquery_time_per_second_per_uid = \"50ms\"\n[pools.gpu]\ncapacity = 1\n", "t.toml");
  ASSERT_TRUE(p.config) << config::formatProblems(p, "t.toml");
  EXPECT_EQ(p.config->daemon.queryTimePerSecondPerUidUs, 50'000u);
  auto bad = config::parse(
      "[daemon]\nquery_time_per_second_per_uid = \"2s\"\n[pools.gpu]\ncapacity = 1\n", "t.toml");
  ASSERT_FALSE(bad.config);
  EXPECT_NE(config::formatProblems(bad, "t.toml")
                .find("t.toml:2: daemon.query_time_per_second_per_uid must be 1ms..1s"),
            std::string::npos)
      << config::formatProblems(bad, "t.toml");
}

TEST(Config, EveryProblemHasItsLine) {
  auto p = config::parse(R"([daemon]
sockt = "/x"
sample_interval = "5ms"

[pools.gpu]
capacity = 0
gpu_memory_budget = "96 parsecs"
devices = ["0000:C6:00.0", 7]
memory_budgt = "1G"
gtt_ceiling = "rocm"
allow_users = "alice"
allow_groups = ["", 7]
)",
                         "t.toml");
  ASSERT_FALSE(p.config);
  std::string all = config::formatProblems(p, "t.toml");
  EXPECT_NE(all.find("t.toml:2: unknown key 'sockt' in [daemon]"), std::string::npos) << all;
  EXPECT_NE(all.find("t.toml:3: daemon.sample_interval must be at least 100ms"), std::string::npos)
      << all;
  EXPECT_NE(all.find("t.toml:6: pools.gpu.capacity must be an integer in 1..1000000"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("t.toml:7: pools.gpu.gpu_memory_budget:"), std::string::npos) << all;
  EXPECT_NE(all.find("t.toml:8: pools.gpu.devices: '0000:C6:00.0' is not a PCI address"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("t.toml:8: pools.gpu.devices: a non-string"), std::string::npos) << all;
  EXPECT_NE(all.find("t.toml:9: unknown key 'memory_budgt' in [pools.gpu]: did you mean "
                     "'memory_budget'?"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("t.toml:2: unknown key 'sockt' in [daemon]: did you mean 'socket'?"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("t.toml:10: pools.gpu.gtt_ceiling must be \"smaller\", \"graphics\" (Mesa, "
                     "Vulkan) or \"compute\" (ROCm)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("t.toml:11: pools.gpu.allow_users must be an array of names or numeric ids"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("t.toml:12: pools.gpu.allow_groups: each entry must be a user or group name"),
            std::string::npos)
      << all;
  // Sorted by line.
  for (std::size_t i = 1; i < p.problems.size(); ++i)
    EXPECT_LE(p.problems[i - 1].line, p.problems[i].line);
}

// Per-user shares and defaults are parts of the pool's own limits: each is
// read into bytes, and one that the pool could never give is refused.
TEST(Config, PerUserSharesAndDefaultsArePartsOfThePoolsOwnLimits) {
  auto p = config::parse(R"([pools.gpu]
capacity = 4
memory_budget = "64G"
gpu_memory_budget = "96G"
per_user_capacity = 2
per_user_memory_budget = "32G"
per_user_gpu_memory_budget = "48G"
default_memory_max = "8G"
default_gpu_memory_max = "24G"
)",
                         "t.toml");
  ASSERT_TRUE(p.config) << config::formatProblems(p, "t.toml");
  const auto& g = p.config->pools[0];
  EXPECT_EQ(g.perUserCapacity, 2u);
  EXPECT_EQ(g.perUserMemoryBudget, 32ULL << 30);
  EXPECT_EQ(g.perUserGpuMemoryBudget, 48ULL << 30);
  EXPECT_EQ(g.defaultMemoryMax, 8ULL << 30);
  EXPECT_EQ(g.defaultGpuMemoryMax, 24ULL << 30);

  auto bad = config::parse(R"([pools.gpu]
capacity = 2
gpu_memory_budget = "96G"
per_user_capacity = 3
per_user_memory_budget = "8G"
per_user_gpu_memory_budget = "100G"
default_gpu_memory_max = "50G"
[pools.small]
capacity = 1
gpu_memory_budget = "96G"
per_user_gpu_memory_budget = "16G"
default_gpu_memory_max = "24G"
)",
                           "t.toml");
  ASSERT_FALSE(bad.config);
  std::string all = config::formatProblems(bad, "t.toml");
  for (const char* want : {
           "t.toml:4: pools.gpu.per_user_capacity 3 is more than the pool's capacity 2",
           "t.toml:5: pools.gpu.per_user_memory_budget is set but memory_budget is not",
           "t.toml:6: pools.gpu.per_user_gpu_memory_budget 100.0 GiB is more than the pool's "
           "gpu_memory_budget 96.0 GiB",
           "t.toml:12: pools.small.default_gpu_memory_max 24.0 GiB is more than "
           "pools.small.per_user_gpu_memory_budget 16.0 GiB: a lease declared by default could "
           "never be granted",
       })
    EXPECT_NE(all.find(want), std::string::npos) << want << "\n" << all;
}

// Sizes as systemd reads MemoryMax=: a fraction is fine, "GB" is refused
// with the sentence, and a bare number too small to be meant (a unit left
// out) is refused with the fix.
TEST(Config, SizesReadAsSystemdReadsThem) {
  auto ok = config::parse(
      "[pools.gpu]\ncapacity = 2\ngpu_memory_budget = \"1.5G\"\n"
      "memory_budget = 1073741824\n",
      "t.toml");
  ASSERT_TRUE(ok.config) << config::formatProblems(ok, "t.toml");
  EXPECT_EQ(ok.config->pools.at(0).gpuMemoryBudget, 1610612736u);
  EXPECT_EQ(ok.config->pools.at(0).memoryBudget, 1ULL << 30);
  auto bad = config::parse(
      "[pools.gpu]\ncapacity = 2\ngpu_memory_budget = 96\n"
      "memory_budget = \"96GB\"\n",
      "t.toml");
  ASSERT_FALSE(bad.config);
  std::string all = config::formatProblems(bad, "t.toml");
  EXPECT_NE(all.find("t.toml:3: pools.gpu.gpu_memory_budget = 96 is 96 bytes, too small to be "
                     "meant: a bare number is bytes. Write a size string, e.g. \"96GiB\""),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("t.toml:4: pools.gpu.memory_budget: '96GB': 'GB' could mean powers of 1000 "
                     "or of 1024"),
            std::string::npos)
      << all;
}

TEST(Config, SyntaxErrorsAndStructuralMistakes) {
  auto syntax = config::parse("[pools.a]\ncapacity = = 3\n", "t.toml");
  ASSERT_EQ(syntax.problems.size(), 1u);
  EXPECT_EQ(syntax.problems[0].line, 2u);

  auto none = config::parse("[daemon]\n", "t.toml");
  ASSERT_EQ(none.problems.size(), 1u);
  EXPECT_NE(none.problems[0].message.find("no pools"), std::string::npos);

  auto missingCap = config::parse("[pools.a]\nmemory_budget = \"1G\"\n", "t.toml");
  ASSERT_FALSE(missingCap.config);
  EXPECT_NE(config::formatProblems(missingCap, "t").find("capacity is missing"), std::string::npos);

  auto devicesWithoutBudget =
      config::parse("[pools.a]\ncapacity = 1\ndevices = [\"0000:c6:00.0\"]\n", "t.toml");
  ASSERT_FALSE(devicesWithoutBudget.config);

  auto badName = config::parse("[pools.\"a b\"]\ncapacity = 1\n", "t.toml");
  ASSERT_FALSE(badName.config);

  auto relative =
      config::parse("[daemon]\nstate_dir = \"var/lib\"\n[pools.a]\ncapacity = 1\n", "t.toml");
  ASSERT_FALSE(relative.config);

  auto topLevel = config::parse("pool = 1\n[pools.a]\ncapacity = 1\n", "t.toml");
  ASSERT_FALSE(topLevel.config);
  EXPECT_EQ(topLevel.problems[0].line, 1u);
}

TEST(Config, HostileInputIsAProblemNotACrash) {
  std::string nul("[pools.a]\ncapacity = 1\0\n", 24);
  EXPECT_FALSE(config::parse(nul, "t").config);
  EXPECT_FALSE(config::parse(std::string(100000, '['), "t").config);
  EXPECT_FALSE(config::parse("[pools.a]\ncapacity = 99999999999999999999999\n", "t").config);
  EXPECT_FALSE(config::parse("[pools.a]\ncapacity = 1\nmemory_budget = -5\n", "t").config);
  EXPECT_FALSE(
      config::parse("[pools.a]\ncapacity = 1\nmemory_budget = \"99999999999T\"\n", "t").config);
  // A float where an integer belongs is refused by type, even one beyond
  // int64's range (fuzz_config found toml++'s conversion of it undefined).
  for (const char* text :
       {"[pools.a]\ncapacity = 1\nmemory_budget = 68.19476e67\n", "[pools.a]\ncapacity = 3.0\n",
        "[pools.a]\ncapacity = 1\ngpu_memory_budget = 1e300\n",
        "[daemon]\nqueue_timeout = -1e300\n[pools.a]\ncapacity = 1\n"}) {
    auto r = config::parse(text, "t");
    EXPECT_FALSE(r.config) << text;
    ASSERT_EQ(r.problems.size(), 1u) << text;
    EXPECT_NE(r.problems[0].message.find("must be"), std::string::npos) << r.problems[0].message;
  }
  auto missing = config::load("/nonexistent/tally.toml");
  ASSERT_EQ(missing.problems.size(), 1u);
  EXPECT_NE(missing.problems[0].message.find("cannot read /nonexistent/tally.toml"),
            std::string::npos);
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

TEST(Config, NearBoundSamplingHasDefaultsLimitsAndNeverOutrunsTheNormalCadence) {
  auto defaults = config::parse("[pools.gpu]\ncapacity = 1\n", "t.toml");
  ASSERT_TRUE(defaults.config);
  EXPECT_EQ(defaults.config->daemon.nearBoundMarginPercent, 10u);
  EXPECT_EQ(defaults.config->daemon.nearBoundIntervalUs, 50'000u);
  auto set = config::parse(
      "[daemon]\nnear_bound_margin = 0\nnear_bound_interval = \"20ms\"\n[pools.gpu]\ncapacity = "
      "1\n",
      "t.toml");
  ASSERT_TRUE(set.config) << config::formatProblems(set, "t.toml");
  EXPECT_EQ(set.config->daemon.nearBoundMarginPercent, 0u);
  EXPECT_EQ(set.config->daemon.nearBoundIntervalUs, 20'000u);
  // Never slower than sample_interval: a "near" cadence that is slower is the normal one.
  auto slow = config::parse(
      "[daemon]\nsample_interval = \"200ms\"\nnear_bound_interval = \"1s\"\n[pools.gpu]\ncapacity "
      "= 1\n",
      "t.toml");
  ASSERT_TRUE(slow.config);
  EXPECT_EQ(slow.config->daemon.nearBoundIntervalUs, 200'000u);
  auto bad = config::parse(
      "[daemon]\nnear_bound_margin = 101\nnear_bound_interval = \"1ms\"\n[pools.gpu]\ncapacity = "
      "1\n",
      "t.toml");
  ASSERT_FALSE(bad.config);
  std::string all = config::formatProblems(bad, "t.toml");
  EXPECT_NE(all.find("t.toml:2: daemon.near_bound_margin"), std::string::npos) << all;
  EXPECT_NE(all.find("t.toml:3: daemon.near_bound_interval must be at least 10ms"),
            std::string::npos)
      << all;
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// [leases.*]: each becomes the attach request `tally attach --unit` would
// send, judged by the RPC's own decoder.
constexpr const char* kDeclared = R"([pools.gpu]
capacity = 2

[pools.batch]
capacity = 4

[leases.llama]
unit = "llama-server.service"
pools = ["gpu"]
memory_max = "8GiB"
gpu_memory_max = "64GiB"
gpu_memory_high = "60GiB"
gpu_memory_action = "kill"
gpu_over_samples = 3
priority = 5
attributes = { model = "qwen3-32b", owner = "ml" }

[leases.comfy]
unit = "container-comfyui.service"
pools = ["gpu", "batch"]
name = "comfyui"
)";

TEST(ConfigLeases, ADeclarationIsTheAttachRequestOfItsUnitInFileOrder) {
  auto p = config::parse(kDeclared, "t.toml");
  ASSERT_TRUE(p.config) << config::formatProblems(p, "t.toml");
  const auto& l = p.config->leases;
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].name, "llama");  // file order, not toml++'s sorted keys
  EXPECT_EQ(l[0].line, 7u);
  EXPECT_EQ(l[0].unit(), "llama-server.service");
  const auto& d = l[0].attach.declared;
  EXPECT_EQ(d.pools, std::vector<std::string>{"gpu"});
  EXPECT_EQ(d.declaration.name, "llama");  // the table's name names the lease
  EXPECT_EQ(d.declaration.memoryMax, 8ULL << 30);
  EXPECT_EQ(d.declaration.gpuMemoryMax, 64ULL << 30);
  EXPECT_EQ(d.declaration.gpuMemoryHigh, 60ULL << 30);
  EXPECT_EQ(d.declaration.gpuAction, enforce::Action::Kill);
  EXPECT_EQ(d.declaration.gpuOverSamples, 3u);
  EXPECT_EQ(d.priority, 5);
  EXPECT_EQ(d.declaration.attributes, (lease::Attributes{{"model", "qwen3-32b"}, {"owner", "ml"}}));
  EXPECT_TRUE(d.noWait);  // never queued behind a surprise
  EXPECT_EQ(l[1].name, "comfy");
  EXPECT_EQ(l[1].attach.declared.declaration.name, "comfyui");
  EXPECT_EQ(l[1].attach.declared.pools, (std::vector<std::string>{"gpu", "batch"}));
  EXPECT_FALSE(l[1].attach.declared.declaration.memoryMax);  // no limit nobody declared
}

std::string problemsOf(const std::string& text) {
  auto p = config::parse(text, "t.toml");
  EXPECT_FALSE(p.config) << text;
  return config::formatProblems(p, "t.toml");
}

TEST(ConfigLeases, EveryMistakeIsNamedWithItsLine) {
  const std::string pool = "[pools.gpu]\ncapacity = 1\n";
  EXPECT_NE(problemsOf(pool + "[leases.x]\npools = [\"gpu\"]\n").find("leases.x.unit is missing"),
            std::string::npos);
  EXPECT_NE(
      problemsOf(pool + "[leases.x]\nunit = \"x.service\"\n").find("leases.x.pools is missing"),
      std::string::npos);
  EXPECT_NE(problemsOf(pool + "[leases.x]\nunit = \"x.timer\"\npools = [\"gpu\"]\n")
                .find("leases.x.unit 'x.timer' must be a .service or .scope unit"),
            std::string::npos);
  EXPECT_NE(problemsOf(pool + "[leases.x]\nunit = \"x.service\"\npools = [\"cpu\"]\n")
                .find("t.toml:3: leases.x.pools: no pool 'cpu' (configured: gpu)"),
            std::string::npos);
  EXPECT_NE(problemsOf(pool + "[leases.x]\nunit = \"x.service\"\npools = [\"gpu\"]\n"
                              "[leases.y]\nunit = \"x.service\"\npools = [\"gpu\"]\n")
                .find("leases.y declares unit x.service again (leases.x at line 3)"),
            std::string::npos);
  EXPECT_NE(
      problemsOf(pool + "[leases.x]\nunit = \"x.service\"\npools = [\"gpu\"]\nmemroy_max = 1\n")
          .find("memroy_max"),
      std::string::npos);
  EXPECT_NE(problemsOf(pool + "[leases.x]\nunit = \"x.service\"\npools = [\"gpu\"]\n"
                              "attributes = { Model = \"a\" }\n")
                .find("leases.x"),
            std::string::npos);
  EXPECT_NE(problemsOf("leases = 3\n" + pool).find("leases must be tables"), std::string::npos);
  EXPECT_NE(problemsOf(pool + "[leases.x]\nunit = \"x.service\"\npools = []\n")
                .find("leases.x.pools must be a non-empty array"),
            std::string::npos);
}

}  // namespace
}  // namespace tally
