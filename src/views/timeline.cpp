#include "views/timeline.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>

#include "util/units.h"

namespace tally::views {
namespace {

struct Range {
  std::uint64_t from = 0, to = 0;  // ns
  std::uint64_t top = 0;           // bytes at the top of the chart
};

Range rangeOf(const TimelineSeries& s, const std::vector<TimelineMark>& marks) {
  Range r;
  bool first = true;
  auto see = [&](std::uint64_t t) {
    if (first || t < r.from) r.from = t;
    if (first || t > r.to) r.to = t;
    first = false;
  };
  for (const auto& p : s.points) {
    see(p.atNs);
    if (p.bytes) r.top = std::max(r.top, *p.bytes);
  }
  for (const auto& m : marks) see(m.atNs);
  if (s.limit) r.top = std::max(r.top, *s.limit);
  r.top += r.top / 20;  // a little room above the limit line
  if (r.top == 0) r.top = 1;
  if (r.to == r.from) r.to = r.from + 1;
  return r;
}

std::string clock(std::uint64_t ns) {
  time_t secs = static_cast<time_t>(ns / 1000000000u);
  tm t{};
  localtime_r(&secs, &t);
  char buf[16];
  strftime(buf, sizeof buf, "%H:%M:%S", &t);
  return buf;
}

std::size_t columnOf(std::uint64_t t, const Range& r, std::size_t columns) {
  if (columns <= 1) return 0;
  auto c = static_cast<std::size_t>(static_cast<double>(t - r.from) /
                                    static_cast<double>(r.to - r.from) *
                                    static_cast<double>(columns - 1));
  return std::min(c, columns - 1);
}

}  // namespace

std::vector<std::string> timelineText(const TimelineSeries& s,
                                      const std::vector<TimelineMark>& marks, std::size_t width,
                                      std::size_t height) {
  static const char* kBlocks[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  constexpr std::size_t kLabel = 11;  // "  48.0 GiB " then the plot
  std::vector<std::string> out;
  out.push_back(s.label +
                (s.limit ? fmt::format(" against {} {}", s.limitName, units::humanBytes(*s.limit))
                         : std::string(" (no limit declared)")));
  bool any = std::any_of(s.points.begin(), s.points.end(), [](const auto& p) { return p.bytes; });
  if (!any || width <= kLabel + 2 || height == 0) {
    out.push_back("  (no samples with this figure in the ledger)");
    return out;
  }
  std::size_t columns = width - kLabel;
  Range r = rangeOf(s, marks);
  // The highest figure sampled in each column's span of time; a column no
  // sample fell in stays empty (a gap, not a zero).
  std::vector<std::optional<std::uint64_t>> peak(columns);
  for (const auto& p : s.points) {
    if (!p.bytes) continue;
    auto& cell = peak[columnOf(p.atNs, r, columns)];
    cell = std::max(cell.value_or(0), *p.bytes);
  }
  double eighthsPerByte = static_cast<double>(height * 8) / static_cast<double>(r.top);
  std::optional<std::size_t> limitRow;  // from the bottom
  if (s.limit)
    limitRow = std::min(
        height - 1, static_cast<std::size_t>(static_cast<double>(*s.limit) * eighthsPerByte / 8));
  for (std::size_t row = height; row-- > 0;) {
    std::string label;  // the limit's row says so; else the top row gives the scale
    if (limitRow && row == *limitRow)
      label = "max";
    else if (row == height - 1)
      label = units::humanBytes(r.top);
    std::string line = fmt::format("{:>{}} ", label, kLabel - 2) + "┤";
    for (std::size_t c = 0; c < columns; ++c) {
      std::size_t level = 0;
      if (peak[c]) {
        auto h = static_cast<std::size_t>(static_cast<double>(*peak[c]) * eighthsPerByte);
        level = h >= (row + 1) * 8 ? 8 : h > row * 8 ? h - row * 8 : 0;
        if (row == 0 && level == 0 && *peak[c] > 0) level = 1;  // small, but not nothing
      }
      if (level == 0 && limitRow && row == *limitRow)
        line += "┄";
      else
        line += kBlocks[level];
    }
    out.push_back(line);
  }
  std::string axis = std::string(kLabel - 1, ' ') + "└";
  std::vector<std::string> axisCells(columns, "─");
  for (const auto& m : marks) axisCells[columnOf(m.atNs, r, columns)] = "▲";
  for (const auto& cell : axisCells) axis += cell;
  out.push_back(axis);
  std::string times = std::string(kLabel, ' ') + clock(r.from);
  std::string end = clock(r.to);
  if (columns > 16 + end.size()) times += std::string(columns - 8 - end.size(), ' ') + end;
  out.push_back(times);
  for (const auto& m : marks)
    out.push_back(fmt::format("{}▲ {} {}", std::string(kLabel, ' '), clock(m.atNs), m.label));
  return out;
}

std::string timelineSvg(const std::vector<TimelineSeries>& series,
                        const std::vector<TimelineMark>& marks) {
  constexpr double kWidth = 800, kPanel = 180, kLeft = 90, kRight = 20, kTop = 30;
  double height = kTop + static_cast<double>(series.size()) * (kPanel + 40) + 20;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kWidth, height);
  double plotW = kWidth - kLeft - kRight;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    Range r = rangeOf(s, marks);
    double y0 = kTop + static_cast<double>(i) * (kPanel + 40);
    auto x = [&](std::uint64_t t) {
      return kLeft + plotW * static_cast<double>(t - r.from) / static_cast<double>(r.to - r.from);
    };
    auto y = [&](std::uint64_t b) {
      return y0 + kPanel - kPanel * static_cast<double>(b) / static_cast<double>(r.top);
    };
    auto escape = [](const std::string& t) {
      std::string o;
      for (char c : t) {
        if (c == '<')
          o += "&lt;";
        else if (c == '>')
          o += "&gt;";
        else if (c == '&')
          o += "&amp;";
        else
          o += c;
      }
      return o;
    };
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", kLeft, y0 - 8,
                       escape(s.label));
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
        kLeft, y0, plotW, kPanel);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", kLeft - 6,
                       y0 + 12, units::humanBytes(r.top));
    // One polyline per unbroken run of samples: a gap stays a gap.
    std::string points;
    auto flush = [&] {
      if (!points.empty())
        svg += fmt::format(
            "<polyline class=\"series\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" "
            "points=\"{}\"/>\n",
            points);
      points.clear();
    };
    for (const auto& p : s.points) {
      if (!p.bytes) {
        flush();
        continue;
      }
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", x(p.atNs), y(*p.bytes));
    }
    flush();
    if (s.limit) {
      svg += fmt::format(
          "<line class=\"limit\" x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" "
          "stroke=\"#d62728\" stroke-dasharray=\"6 4\"/>\n"
          "<text x=\"{1}\" y=\"{3:.1f}\" text-anchor=\"end\" fill=\"#d62728\">{4} {5}</text>\n",
          kLeft, kLeft + plotW, y(*s.limit), y(*s.limit) - 4, escape(s.limitName),
          units::humanBytes(*s.limit));
    }
    for (const auto& m : marks) {
      svg += fmt::format(
          "<line class=\"mark\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" "
          "stroke=\"#ff7f0e\"/>\n<text x=\"{0:.1f}\" y=\"{3}\" fill=\"#ff7f0e\">{4}</text>\n",
          x(m.atNs), y0, y0 + kPanel, y0 + kPanel + 14, escape(m.label));
    }
    svg +=
        fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", kLeft, y0 + kPanel + 28, clock(r.from));
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", kLeft + plotW,
                       y0 + kPanel + 28, clock(r.to));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace tally::views
