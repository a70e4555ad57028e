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
  r.top += r.top / 20;  // a little room above the limit line
  // The highest figure sampled in each column's span of time; a column where
  // only an unread sample fell is a gap, not a zero.
  std::vector<std::optional<std::uint64_t>> peak(columns);
  std::vector<bool> unread(columns, false);
  for (const auto& p : s.points) {
    std::size_t c = columnOf(p.atNs, r, columns);
    if (!p.bytes) {
      unread[c] = true;
      continue;
    }
    peak[c] = std::max(peak[c].value_or(0), *p.bytes);
  }
  // Steps, as the SVG draws them: a figure holds until the next sample, so a
  // column between two samples shows the earlier one; an unread sample
  // breaks the hold (a gap), and nothing is drawn after the last sample.
  std::size_t lastSampled = 0;
  for (std::size_t c = 0; c < columns; ++c)
    if (peak[c]) lastSampled = c;
  std::optional<std::uint64_t> held;
  for (std::size_t c = 0; c <= lastSampled && c < columns; ++c) {
    if (unread[c] && !peak[c]) held.reset();
    if (peak[c])
      held = peak[c];
    else
      peak[c] = held;
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
    else if (row == 0)
      label = "0 B";  // the bars stand on zero
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

namespace {

// SVG geometry. Text is measured by an estimate (no font metrics in a pure
// function): 0.62 em per character is wider than sans-serif's average, so a
// label given that much room never runs into the next.
constexpr double kSvgWidth = 800, kLeft = 76, kRight = 24, kPlotH = 180;
constexpr double kFont = 12, kEm = 0.62;
// Labels drawn over lines keep a white outline, so a line crossing them never
// makes them unreadable.
constexpr const char* kHalo = "stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\"";

double textWidth(const std::string& t, double font = kFont) {
  std::size_t chars = 0;
  for (char c : t) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return static_cast<double>(chars) * font * kEm;
}

std::string escapeXml(const std::string& t) {
  std::string o;
  for (char c : t) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

// A round step for the byte axis: a power of two, so the ticks read as
// whole binary units (0, 16 GiB, 32 GiB, 48 GiB), at most five above zero.
std::uint64_t byteStep(std::uint64_t top) {
  std::uint64_t step = 1;
  while (step < (std::uint64_t{1} << 62) && (top + step - 1) / step > 5) step *= 2;
  return step;
}

// A round step for the time axis: the smallest whose labels (HH:MM:SS) stay
// kMinGapPx apart across the plot.
std::uint64_t timeStepNs(std::uint64_t spanNs, double plotW) {
  constexpr double kMinGapPx = 96;
  constexpr std::uint64_t kSteps[] = {1,   2,   5,    10,   15,   30,    60,    120,   300,
                                      600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400};
  auto fits = static_cast<std::uint64_t>(plotW / kMinGapPx);
  for (std::uint64_t s : kSteps)
    if (spanNs / (s * 1'000'000'000ULL) + 1 <= std::max<std::uint64_t>(fits, 1))
      return s * 1'000'000'000ULL;
  return spanNs + 1;  // longer than days: the two ends only
}

struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

// Every text drawn, with its box: a label is placed where it overlaps none.
struct Texts {
  std::vector<Box> taken;
  std::string svg;
  Box boxOf(double x, double baseline, const std::string& t, const char* anchor, double font) {
    double w = textWidth(t, font);
    double x0 = std::string_view(anchor) == "end"      ? x - w
                : std::string_view(anchor) == "middle" ? x - w / 2
                                                       : x;
    return {x0, baseline - font, x0 + w, baseline + font * 0.25};
  }
  bool fits(const Box& b) const {
    if (b.x0 < 0 || b.x1 > kSvgWidth || b.y0 < 0) return false;
    return std::none_of(taken.begin(), taken.end(), [&](const Box& o) { return o.overlaps(b); });
  }
  void put(double x, double baseline, const std::string& t, const char* anchor,
           const std::string& attrs = "", double font = kFont) {
    taken.push_back(boxOf(x, baseline, t, anchor, font));
    svg += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" font-size=\"{}\"{}>{}</text>\n", x,
        baseline, anchor, font, attrs.empty() ? "" : " " + attrs, escapeXml(t));
  }
};

}  // namespace

std::string timelineSvg(const std::vector<TimelineSeries>& series,
                        const std::vector<TimelineMark>& marks, const std::string& title) {
  const double plotW = kSvgWidth - kLeft - kRight;
  Texts texts;
  std::string shapes;
  double y = 8;  // the top of the next panel
  if (!title.empty()) {
    texts.put(kLeft, y + 16, title, "start", "class=\"title\" font-weight=\"bold\"", 15);
    y += 26;
  }
  for (const auto& s : series) {
    Range r = rangeOf(s, marks);
    std::uint64_t step = byteStep(r.top);
    std::uint64_t axisTop = (r.top + step - 1) / step * step;  // the next tick up
    texts.put(kLeft, y + 14, s.label, "start", "font-weight=\"bold\"", 13);
    const double plotTop = y + 26, plotBottom = plotTop + kPlotH;
    auto xAt = [&](std::uint64_t t) {
      return kLeft + plotW * static_cast<double>(t - r.from) / static_cast<double>(r.to - r.from);
    };
    auto yAt = [&](std::uint64_t b) {
      return plotBottom - kPlotH * static_cast<double>(b) / static_cast<double>(axisTop);
    };
    shapes += fmt::format(
        "<rect class=\"plot\" x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"none\" "
        "stroke=\"#888\"/>\n",
        kLeft, plotTop, plotW, kPlotH);
    // The byte axis from zero, a gridline at each tick.
    for (std::uint64_t v = 0; v <= axisTop; v += step) {
      double ty = yAt(v);
      if (v != 0 && v != axisTop)
        shapes += fmt::format(
            "<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" "
            "stroke=\"#ddd\"/>\n",
            kLeft, kLeft + plotW, ty, ty);
      texts.put(kLeft - 6, ty + 4, units::humanBytes(v), "end", "class=\"ytick\"");
      if (axisTop - v < step) break;  // no overflow at the largest steps
    }
    // The time axis: round ticks inside the span, their labels kept apart.
    std::uint64_t tstep = timeStepNs(r.to - r.from, plotW);
    std::uint64_t first = (r.from + tstep - 1) / tstep * tstep;
    if (r.to - r.from < tstep) first = r.from;  // a span shorter than a step: its start
    for (std::uint64_t t = first; t <= r.to; t += tstep) {
      double tx = xAt(t);
      shapes += fmt::format(
          "<line class=\"xtick\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" "
          "stroke=\"#888\"/>\n",
          tx, plotBottom, plotBottom + 4);
      // Centred under its tick, else beside it (at an edge, or clear of "0 B").
      for (const char* anchor : {"middle", "start", "end"}) {
        if (!texts.fits(texts.boxOf(tx, plotBottom + 17, clock(t), anchor, kFont))) continue;
        texts.put(tx, plotBottom + 17, clock(t), anchor, "class=\"xlabel\"");
        break;
      }
      if (r.to - t < tstep) break;
    }
    // Samples as steps: a figure holds until the next sample; an unread one is a gap.
    std::string points;
    auto flush = [&] {
      if (!points.empty())
        shapes += fmt::format(
            "<polyline class=\"series\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" "
            "points=\"{}\"/>\n",
            points);
      points.clear();
    };
    for (std::size_t i = 0; i < s.points.size(); ++i) {
      const auto& p = s.points[i];
      if (!p.bytes) {
        flush();
        continue;
      }
      double py = yAt(*p.bytes);
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", xAt(p.atNs), py);
      if (i + 1 < s.points.size() && s.points[i + 1].bytes)
        points += fmt::format(" {:.1f},{:.1f}", xAt(s.points[i + 1].atNs), py);
    }
    flush();
    // The limit, named at its right end, above the line where there is room.
    if (s.limit) {
      double ly = yAt(std::min(*s.limit, axisTop));
      shapes += fmt::format(
          "<line class=\"limit\" x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" "
          "stroke=\"#d62728\" stroke-dasharray=\"6 4\"/>\n",
          kLeft, kLeft + plotW, ly);
      std::string name = fmt::format("{} {}", s.limitName, units::humanBytes(*s.limit));
      for (double baseline : {ly - 5, ly + 15, ly - 20, ly + 30}) {
        Box b = texts.boxOf(kLeft + plotW - 4, baseline, name, "end", kFont);
        if (b.y0 >= plotTop && b.y1 <= plotBottom && texts.fits(b)) {
          texts.put(kLeft + plotW - 4, baseline, name, "end",
                    "class=\"limitlabel\" fill=\"#d62728\" " + std::string(kHalo));
          break;
        }
      }
    }
    // Marks: a line each, numbered at the top of the plot in the first row
    // where the number fits; the numbers are explained below the panels.
    for (std::size_t m = 0; m < marks.size(); ++m) {
      double mx = xAt(marks[m].atNs);
      shapes += fmt::format(
          "<line class=\"mark\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" "
          "stroke=\"#ff7f0e\"/>\n",
          mx, plotTop, plotBottom);
      std::string n = std::to_string(m + 1);
      for (double row = 0; row < 12; ++row) {
        double baseline = plotTop + 14 + row * 14;
        const char* anchor = mx + 3 + textWidth(n) > kLeft + plotW ? "end" : "start";
        double at = std::string_view(anchor) == "end" ? mx - 3 : mx + 3;
        if (texts.fits(texts.boxOf(at, baseline, n, anchor, kFont))) {
          texts.put(at, baseline, n, anchor,
                    "class=\"marklabel\" fill=\"#ff7f0e\" " + std::string(kHalo));
          break;
        }
      }
    }
    // The legend: what each line is.
    double lx = kLeft, ly = plotBottom + 38;
    auto legend = [&](const std::string& style, const std::string& label) {
      double w = 24 + textWidth(label) + 18;
      if (lx + w > kSvgWidth - kRight && lx > kLeft) {
        lx = kLeft;
        ly += 16;
      }
      shapes += fmt::format(
          "<line class=\"legendkey\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" "
          "{}/>\n",
          lx, lx + 18, ly - 4, ly - 4, style);
      texts.put(lx + 24, ly, label, "start", "class=\"legend\"");
      lx += w;
    };
    legend("stroke=\"#1f77b4\" stroke-width=\"1.5\"", "sampled (held until the next sample)");
    if (s.limit)
      legend("stroke=\"#d62728\" stroke-dasharray=\"6 4\"",
             fmt::format("{} {}", s.limitName, units::humanBytes(*s.limit)));
    if (!marks.empty()) legend("stroke=\"#ff7f0e\"", "event (numbered below)");
    y = ly + 18;
  }
  // The events, numbered as on the charts.
  for (std::size_t m = 0; m < marks.size(); ++m) {
    y += 16;
    texts.put(kLeft, y,
              fmt::format("event {} at {}: {}", m + 1, clock(marks[m].atNs), marks[m].label),
              "start", "class=\"event\"");
  }
  double height = y + 14;
  return fmt::format(
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1:.0f}\" "
             "viewBox=\"0 0 {0} {1:.0f}\" font-family=\"sans-serif\" font-size=\"{2}\">\n"
             "<rect width=\"{0}\" height=\"{1:.0f}\" fill=\"white\"/>\n",
             kSvgWidth, height, kFont) +
         (title.empty() ? std::string() : "<title>" + escapeXml(title) + "</title>\n") + shapes +
         texts.svg + "</svg>\n";
}

}  // namespace tally::views
