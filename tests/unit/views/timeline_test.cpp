// The memory timeline a person reads in `tally lease show` and its SVG: the
// limit drawn, a gap left a gap, events marked, and an SVG a parser accepts.
#include "views/timeline.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <vector>

#include "cli/cmd_client.h"

namespace tally {
namespace {

constexpr std::uint64_t kSec = 1'000'000'000ULL;
constexpr std::uint64_t GiB = 1ULL << 30;

views::TimelineSeries gpuSeries() {
  views::TimelineSeries s;
  s.label = "GPU memory";
  s.limit = 40 * GiB;
  s.limitName = "gpu_memory_max";
  // Ten seconds: rising to 20 GiB, one unread sample, then over the limit.
  std::uint64_t t0 = 1'796'040'000ULL * kSec;
  for (int i = 0; i < 10; ++i) {
    std::optional<std::uint64_t> v = static_cast<std::uint64_t>(i) * 4 * GiB;
    if (i == 5) v.reset();
    if (i >= 8) v = 44 * GiB;
    s.points.push_back({t0 + static_cast<std::uint64_t>(i) * kSec, v});
  }
  return s;
}

std::size_t columns(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

TEST(Timeline, TheTextChartDrawsTheLimitTheGapAndTheMarks) {
  auto s = gpuSeries();
  std::vector<views::TimelineMark> marks{{s.points[9].atNs, "gpu-memory-kill"}};
  auto lines = views::timelineText(s, marks, 31, 4);  // 11 for labels, 20 for the plot
  ASSERT_EQ(lines.size(), 1u + 4 + 1 + 1 + 1);
  EXPECT_EQ(lines[0], "GPU memory against gpu_memory_max 40.0 GiB");
  for (std::size_t i = 1; i <= 4; ++i) EXPECT_EQ(columns(lines[i]), 31u) << lines[i];
  // The scale: the top row's label, unless the limit's row is the top one.
  EXPECT_TRUE(lines[1].find("46.2 GiB") != std::string::npos ||
              lines[1].find("max") != std::string::npos)
      << lines[1];
  // The limit's row is labelled and dotted where nothing reaches it.
  bool limitRow = false;
  for (std::size_t i = 1; i <= 4; ++i)
    limitRow = limitRow || (lines[i].find("max") != std::string::npos &&
                            lines[i].find("┄") != std::string::npos);
  EXPECT_TRUE(limitRow);
  // Over the limit at the end: the bar reaches the top row there, and fills the rows below.
  EXPECT_NE(lines[1].substr(lines[1].size() - 3), " ");
  EXPECT_EQ(lines[2].substr(lines[2].size() - 3), "█");
  // The unread sample is an empty column in the bottom row, not a zero bar.
  EXPECT_NE(lines[4].find("┤"), std::string::npos);
  EXPECT_NE(lines[5].find("▲"), std::string::npos);
  EXPECT_EQ(lines[5].substr(lines[5].size() - 3), "▲");
  EXPECT_NE(lines[7].find("gpu-memory-kill"), std::string::npos);
  // Nothing sampled: said, no empty chart.
  views::TimelineSeries empty;
  empty.label = "host memory";
  auto none = views::timelineText(empty, {}, 80, 6);
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(none[0], "host memory (no limit declared)");
  EXPECT_EQ(none[1], "  (no samples with this figure in the ledger)");
}

TEST(Timeline, TheSvgIsWellFormedWithAGapBetweenTwoLines) {
  auto svg = views::timelineSvg({gpuSeries()}, {{gpuSeries().points[9].atNs, "gpu-memory-kill"}});
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  // Every element opened is closed, in order (a small XML check: no attribute holds '<' or '>').
  std::vector<std::string> open;
  std::regex tag("<(/?)([a-z]+)[^>]*?(/?)>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tag); it != std::sregex_iterator();
       ++it) {
    const auto& m = *it;
    if (m[1] == "/") {
      ASSERT_FALSE(open.empty()) << m.str();
      EXPECT_EQ(open.back(), m[2].str());
      open.pop_back();
    } else if (m[3] != "/") {
      open.push_back(m[2]);
    }
  }
  EXPECT_TRUE(open.empty());
  // The unread sample splits the line in two; the limit is drawn; the kill is marked.
  std::size_t lines = 0;
  for (std::size_t at = 0; (at = svg.find("class=\"series\"", at)) != std::string::npos; ++at)
    ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(svg.find("class=\"limit\""), std::string::npos);
  EXPECT_NE(svg.find(">gpu-memory-kill</text>"), std::string::npos);
  // Every point lies inside the 800 px wide image.
  std::regex points("points=\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), points); it != std::sregex_iterator();
       ++it) {
    std::istringstream in((*it)[1].str());
    for (std::string xy; in >> xy;) {
      double x = std::stod(xy.substr(0, xy.find(',')));
      double y = std::stod(xy.substr(xy.find(',') + 1));
      EXPECT_GE(x, 0);
      EXPECT_LE(x, 800);
      EXPECT_GE(y, 0);
    }
  }
}

// From the daemon's lease reply: samples, declared limits from the granted
// row, and the GPU bound and outcome as marks.
TEST(Timeline, ALeaseReplyBecomesSeriesWithLimitsAndMarks) {
  auto t = cli::leaseTimeline(nlohmann::json::parse(R"({
    "lease": "abc", "state": "ended",
    "samples": [{"at_ns": 10, "memory_bytes": 100, "gpu_bytes": 200},
                {"at_ns": 20, "memory_bytes": null, "gpu_bytes": 300}],
    "ledger": [
      {"seq": 1, "at_ns": 5, "kind": "granted", "body": {"declared": {"memory_max": 1000, "gpu_memory_max": 250}}},
      {"seq": 2, "at_ns": 21, "kind": "gpu-bound", "body": {"kind": "gpu-memory-kill", "at_ns": 20}},
      {"seq": 3, "at_ns": 30, "kind": "outcome", "body": {"ended_at_ns": 25, "outcome": {"class": "killed-by-tally"}}}]})"));
  ASSERT_EQ(t.host.points.size(), 2u);
  EXPECT_EQ(t.host.points[0].bytes, 100u);
  EXPECT_FALSE(t.host.points[1].bytes);
  EXPECT_EQ(t.gpu.points[1].bytes, 300u);
  EXPECT_EQ(t.host.limit, 1000u);
  EXPECT_EQ(t.gpu.limit, 250u);
  ASSERT_EQ(t.marks.size(), 2u);
  EXPECT_EQ(t.marks[0].atNs, 20u);
  EXPECT_EQ(t.marks[0].label, "gpu-memory-kill");
  EXPECT_EQ(t.marks[1].label, "killed-by-tally");
}

}  // namespace
}  // namespace tally
