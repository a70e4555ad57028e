#include "config/suggest.h"

#include <gtest/gtest.h>

#include "config/config.h"

namespace tally {
namespace {

constexpr std::uint64_t GiB = 1ULL << 30, MiB = 1ULL << 20;

config::Config parsedOrFail(const std::string& text) {
  auto p = config::parse(text, "suggested.toml");
  EXPECT_TRUE(p.config) << config::formatProblems(p, "suggested.toml") << text;
  return p.config.value_or(config::Config{});
}

// A Strix Halo box: 125 GiB MemTotal, GTT raised to 96 GiB, 512 MiB carve-out.
TEST(ConfigSuggest, AStrixHaloBoxGetsBudgetsThatTogetherFitItsRam) {
  config::HostFigures h;
  h.memTotal = 125 * GiB;
  h.gpus.push_back(
      {"0000:c6:00.0", true, 96 * GiB, "the graphics ceiling (the smaller)", 512 * MiB});
  auto text = config::suggestConfig(h, {});
  ASSERT_TRUE(text) << text.error().message;
  auto c = parsedOrFail(*text);
  ASSERT_EQ(c.pools.size(), 1u);
  const auto& gpu = c.pools[0];
  EXPECT_EQ(gpu.name, "gpu");
  EXPECT_EQ(gpu.capacity, 4u);
  EXPECT_EQ(gpu.devices, std::vector<std::string>{"0000:c6:00.0"});
  // reserve: 125/8 = 15.6 GiB, rounded up to 16; 109 GiB to share.
  EXPECT_EQ(*gpu.gpuMemoryBudget, 96 * GiB + 512 * MiB);
  EXPECT_EQ(*gpu.memoryBudget, 13 * GiB);
  EXPECT_EQ(*gpu.defaultGpuMemoryMax, (96 * GiB + 512 * MiB) / 4);
  EXPECT_EQ(*gpu.defaultMemoryMax, 13 * GiB / 4);
  EXPECT_LE(*gpu.gpuMemoryBudget - 512 * MiB + *gpu.memoryBudget, 125 * GiB - 16 * GiB);
  EXPECT_NE(text->find("# reserve       16.0 GiB"), std::string::npos) << *text;
  EXPECT_NE(text->find("# 0000:c6:00.0  GTT ceiling 96.0 GiB (the graphics ceiling (the "
                       "smaller)), VRAM 512.0 MiB"),
            std::string::npos)
      << *text;
}

// GTT at its default on a small box: the ceiling is cut to what the reserve
// leaves, and no host budget is promised out of RAM the GPU may take.
TEST(ConfigSuggest, AGttCeilingAboveTheRamLeftIsCutAndNoHostBudgetIsInvented) {
  config::HostFigures h;
  h.memTotal = 32 * GiB;
  h.gpus.push_back({"card1", false, 30 * GiB, "the compute ceiling (the smaller)", std::nullopt});
  config::SuggestOptions o;
  o.capacity = 2;
  o.reserve = 6 * GiB;
  auto text = config::suggestConfig(h, o);
  ASSERT_TRUE(text);
  auto c = parsedOrFail(*text);
  EXPECT_EQ(*c.pools[0].gpuMemoryBudget, 26 * GiB);
  EXPECT_FALSE(c.pools[0].memoryBudget);
  EXPECT_FALSE(c.pools[0].defaultMemoryMax);
  EXPECT_NE(text->find("GTT ceiling 30.0 GiB cut to MemTotal - reserve\n"), std::string::npos)
      << *text;  // no VRAM region: no "+ VRAM 0 B" made up
  EXPECT_NE(text->find("# card1  GTT ceiling 30.0 GiB (the compute ceiling (the smaller)), no "
                       "VRAM region"),
            std::string::npos)
      << *text;
  // A device with no PCI address: the pool names none (every GPU).
  EXPECT_TRUE(c.pools[0].devices.empty());
}

TEST(ConfigSuggest, WithoutAGpuItIsOneHostPoolAndMissingFiguresAreRefused) {
  config::HostFigures h;
  h.memTotal = 16 * GiB;
  h.leftOut.push_back("vgem: its GTT ceiling is unknown (no figure)");
  auto text = config::suggestConfig(h, {});
  ASSERT_TRUE(text);
  auto c = parsedOrFail(*text);
  ASSERT_EQ(c.pools.size(), 1u);
  EXPECT_EQ(c.pools[0].name, "host");
  EXPECT_EQ(*c.pools[0].memoryBudget, 12 * GiB);  // reserve: at least 4 GiB
  EXPECT_NE(text->find("# left out: vgem"), std::string::npos);

  EXPECT_EQ(config::suggestConfig(config::HostFigures{}, {}).error().message,
            "cannot read MemTotal from /proc/meminfo; a budget needs the host's size");
  config::SuggestOptions all;
  all.reserve = 16 * GiB;
  EXPECT_FALSE(config::suggestConfig(h, all));
  all.reserve = UINT64_MAX;  // never wraps into a budget above MemTotal
  EXPECT_FALSE(config::suggestConfig(h, all));
  config::SuggestOptions many;
  many.capacity = 1'000'000;  // a default share of nothing is refused, not printed as "0MiB"
  EXPECT_EQ(config::suggestConfig(h, many).error().message,
            "--capacity 1000000 leaves each lease less than 1 MiB of the budget; ask for fewer");
}

}  // namespace
}  // namespace tally
