// The memory timeline a person reads in `tally lease show` and its SVG: the
// limit drawn, a gap left a gap, events marked, and an SVG a parser accepts.
#include "views/timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <vector>

#include "cli/cmd_client.h"
#include "views/ledger_view.h"

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
  // Sparse samples (3 over 40 columns) hold until the next, as steps: no
  // empty column between two read samples, none after the last.
  views::TimelineSeries sparse;
  sparse.label = "GPU memory";
  constexpr std::uint64_t t0 = 1'796'040'000ULL * kSec;
  sparse.points = {{t0, 8 * GiB}, {t0 + 4 * kSec, 16 * GiB}, {t0 + 10 * kSec, 16 * GiB}};
  auto steps = views::timelineText(sparse, {}, 51, 2);  // 40 plot columns
  std::string bottom = steps[2].substr(steps[2].find("┤") + 3);
  EXPECT_EQ(bottom.find(' '), std::string::npos) << steps[2];
  sparse.points.insert(sparse.points.begin() + 1, {t0 + 2 * kSec, std::nullopt});
  steps = views::timelineText(sparse, {}, 51, 2);
  bottom = steps[2].substr(steps[2].find("┤") + 3);
  EXPECT_NE(bottom.find(' '), std::string::npos) << "the unread sample is a gap: " << steps[2];
  // Nothing sampled: said, no empty chart.
  views::TimelineSeries empty;
  empty.label = "host memory";
  auto none = views::timelineText(empty, {}, 80, 6);
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(none[0], "host memory (no limit declared)");
  EXPECT_EQ(none[1], "  (no samples with this figure in the ledger)");
}

// A picture kept or sent names itself: which lease, from when (lease show
// --svg gives the title), as its heading and as the document's <title>.
TEST(Timeline, TheSvgNamesItsLeaseAndDate) {
  auto untitled = views::timelineSvg({gpuSeries()}, {});
  EXPECT_EQ(untitled.find("<title>"), std::string::npos);
  auto svg = views::timelineSvg({gpuSeries()}, {},
                                "lease 1f0c2a9b3e7d (llama <q>), from 2026-12-07 08:00:01");
  EXPECT_NE(
      svg.find("<title>lease 1f0c2a9b3e7d (llama &lt;q&gt;), from 2026-12-07 08:00:01</title>"),
      std::string::npos)
      << svg;
  EXPECT_NE(svg.find("class=\"title\" font-weight=\"bold\">lease 1f0c2a9b3e7d (llama &lt;q&gt;), "
                     "from 2026-12-07 08:00:01</text>"),
            std::string::npos)
      << svg;
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
  EXPECT_NE(svg.find(": gpu-memory-kill</text>"), std::string::npos);
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

// The SVG as a picture, checked by its geometry: every text's box (estimated
// at 0.6 em per character, as wide as sans-serif runs) inside the image and
// clear of every other; the byte axis from zero in round steps; time labels
// apart; samples drawn as steps; marks numbered and explained; the limit
// named. Over a short lease, a long one, marks crowded at one moment and at
// the edges, no limit, and text that is markup.
struct SvgText {
  double x0, y0, x1, y1;
  std::string cls, text;
};

std::vector<SvgText> textsOf(const std::string& svg) {
  std::vector<SvgText> out;
  std::regex text(
      "<text x=\"([-0-9.]+)\" y=\"([-0-9.]+)\" text-anchor=\"([a-z]+)\" "
      "font-size=\"([0-9.]+)\"([^>]*)>"
      "([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator();
       ++it) {
    const auto& m = *it;
    double x = std::stod(m[1]), y = std::stod(m[2]), font = std::stod(m[4]);
    std::string body = m[6];
    std::size_t chars = 0;
    for (std::size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '&') i = body.find(';', i);  // an entity is one character
      if ((static_cast<unsigned char>(body[i]) & 0xC0) != 0x80) ++chars;
    }
    double w = static_cast<double>(chars) * font * 0.6;
    double x0 = m[3] == "end" ? x - w : m[3] == "middle" ? x - w / 2 : x;
    std::smatch c;
    std::string attrs = m[5];
    std::string cls =
        std::regex_search(attrs, c, std::regex("class=\"([a-z]+)\"")) ? c[1].str() : "";
    out.push_back({x0, y - font, x0 + w, y + font * 0.2, cls, body});
  }
  return out;
}

void expectAPicture(const std::string& svg, const std::vector<views::TimelineSeries>& series,
                    const std::vector<views::TimelineMark>& marks, const std::string& what,
                    std::size_t timeLabels = 2) {
  SCOPED_TRACE(what);
  std::smatch vb;
  ASSERT_TRUE(std::regex_search(svg, vb, std::regex("viewBox=\"0 0 ([0-9.]+) ([0-9.]+)\"")));
  double w = std::stod(vb[1]), h = std::stod(vb[2]);
  auto texts = textsOf(svg);
  ASSERT_FALSE(texts.empty());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto& a = texts[i];
    EXPECT_TRUE(a.x0 >= 0 && a.x1 <= w && a.y0 >= 0 && a.y1 <= h)
        << "'" << a.text << "' leaves the " << w << "x" << h << " image: " << a.x0 << ".." << a.x1
        << ", " << a.y0 << ".." << a.y1;
    for (std::size_t j = i + 1; j < texts.size(); ++j) {
      const auto& b = texts[j];
      bool overlap = a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
      EXPECT_FALSE(overlap) << "'" << a.text << "' and '" << b.text << "' overlap";
    }
  }
  // Lines and points inside the image.
  std::regex num("(x1|x2|y1|y2)=\"([-0-9.]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), num); it != std::sregex_iterator();
       ++it) {
    double v = std::stod((*it)[2]);
    EXPECT_GE(v, 0);
    EXPECT_LE(v, (*it)[1].str()[0] == 'x' ? w : h);
  }
  // Found by hand: std::regex recurses per character, and a 3 h polyline
  // overflows the stack under ASan.
  for (std::size_t at = 0; (at = svg.find("points=\"", at)) != std::string::npos;) {
    at += 8;
    std::istringstream in(svg.substr(at, svg.find('"', at) - at));
    std::vector<std::pair<double, double>> pts;
    for (std::string xy; in >> xy;)
      pts.emplace_back(std::stod(xy.substr(0, xy.find(','))),
                       std::stod(xy.substr(xy.find(',') + 1)));
    for (std::size_t i = 0; i < pts.size(); ++i) {
      EXPECT_TRUE(pts[i].first >= 0 && pts[i].first <= w && pts[i].second >= 0 &&
                  pts[i].second <= h);
      // Steps: each segment is level or upright, never a ramp.
      if (i) {
        EXPECT_TRUE(pts[i].first == pts[i - 1].first || pts[i].second == pts[i - 1].second)
            << "a ramp from " << pts[i - 1].first << "," << pts[i - 1].second << " to "
            << pts[i].first << "," << pts[i].second;
      }
    }
  }
  auto all = [&](const std::string& cls) {
    std::vector<std::string> v;
    for (const auto& t : texts)
      if (t.cls == cls) v.push_back(t.text);
    return v;
  };
  // Per panel: the byte axis starts at zero and has round steps above it.
  auto y = all("ytick");
  EXPECT_EQ(std::count(y.begin(), y.end(), "0 B"), static_cast<long>(series.size()));
  EXPECT_GE(y.size(), 3 * series.size());
  EXPECT_GE(all("xlabel").size(), timeLabels * series.size());
  // Every mark numbered on every panel and explained once, in order, with its time.
  EXPECT_EQ(all("marklabel").size(), marks.size() * series.size());
  auto events = all("event");
  ASSERT_EQ(events.size(), marks.size());
  for (std::size_t m = 0; m < marks.size(); ++m)
    EXPECT_EQ(events[m].rfind("event " + std::to_string(m + 1) + " at ", 0), 0u) << events[m];
  // The limits named, on the chart and in the legend.
  for (const auto& s : series) {
    if (!s.limit) continue;
    auto named = all("limitlabel");
    EXPECT_TRUE(std::any_of(named.begin(), named.end(), [&](const std::string& t) {
      return t.rfind(s.limitName + " ", 0) == 0;
    })) << s.limitName;
    auto legend = all("legend");
    EXPECT_TRUE(std::any_of(legend.begin(), legend.end(), [&](const std::string& t) {
      return t.rfind(s.limitName + " ", 0) == 0;
    }));
  }
}

TEST(Timeline, TheSvgIsAPictureWhoseLabelsStayInsideAndApart) {
  constexpr std::uint64_t t0 = 1'796'040'000ULL * kSec;
  auto host = gpuSeries();
  host.label = "host memory (cgroup)";
  host.limit = 48 * GiB;
  host.limitName = "MemoryMax";
  auto gpu = gpuSeries();
  // Ten seconds, the kill at the very end (the right edge) and the outcome with it.
  std::vector<views::TimelineMark> atEnd{{gpu.points[9].atNs, "gpu-memory-kill"},
                                         {gpu.points[9].atNs, "killed-by-tally"}};
  expectAPicture(views::timelineSvg({host, gpu}, atEnd), {host, gpu}, atEnd, "ten seconds");
  // Five marks in one second, at the start (the left edge).
  std::vector<views::TimelineMark> crowded;
  for (int i = 0; i < 5; ++i)
    crowded.push_back({t0 + static_cast<std::uint64_t>(i) * 1000, "gpu-memory-high <x&y>"});
  expectAPicture(views::timelineSvg({gpu}, crowded), {gpu}, crowded, "crowded marks");
  // Three hours of samples every 10 s, no limit, the label long.
  views::TimelineSeries longRun;
  longRun.label = "GPU memory (GTT + VRAM, DRM fdinfo, counted as gpu_memory_max counts it)";
  for (std::uint64_t i = 0; i < 1080; ++i)
    longRun.points.push_back({t0 + i * 10 * kSec, (i % 97) * GiB / 3});
  std::vector<views::TimelineMark> one{{t0 + 5000 * kSec, "gpu-memory-high"}};
  expectAPicture(views::timelineSvg({longRun}, one), {longRun}, one, "three hours");
  // A tiny lease: two samples of a few KiB, one instant.
  views::TimelineSeries tiny;
  tiny.label = "host memory (cgroup)";
  tiny.points = {{t0, 4096}, {t0, 12288}};
  expectAPicture(views::timelineSvg({tiny}, {}), {tiny}, {}, "one instant", 1);
}

// From the daemon's lease reply: samples, declared limits from the granted
// row, and the GPU bound and outcome as marks.
TEST(Timeline, ALeaseReplyBecomesSeriesWithLimitsAndMarks) {
  auto t = cli::leaseTimeline(nlohmann::json::parse(R"({
    "lease": "abc", "state": "ended",
    "samples": [{"at_ns": 10, "memory_bytes": 100, "gpu_bytes": 200},
                {"at_ns": 20, "memory_bytes": null, "gpu_bytes": 300}],
    "ledger": [
      {"seq": 1, "at_ns": 5, "kind": "granted", "body": {"name": "llama", "declared": {"memory_max": 1000, "gpu_memory_max": 250}}},
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
  // Named by its id, its granted row's name, and its first sample's time.
  EXPECT_EQ(t.title, "lease abc (llama), from " + views::wallTime(10, false));
}

}  // namespace
}  // namespace tally
