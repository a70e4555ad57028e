// A lease's memory over time against its limit, for a person: a terminal
// chart of Unicode blocks (`tally lease show`) and the same as an SVG image
// (`--svg FILE`). Pure: samples in, lines or SVG text out. A sample whose
// figure was not read is a gap, never a zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tally::views {

struct TimelinePoint {
  std::uint64_t atNs = 0;
  std::optional<std::uint64_t> bytes;
};

struct TimelineSeries {
  std::string label;  // "host memory (cgroup)", "GPU memory (GTT + VRAM, DRM fdinfo)"
  std::vector<TimelinePoint> points;  // in time order
  std::optional<std::uint64_t> limit;
  std::string limitName;  // "MemoryMax", "gpu_memory_max"
};

// A moment worth marking: a GPU bound event, the OOM kill, the end.
struct TimelineMark {
  std::uint64_t atNs = 0;
  std::string label;
};

// `height` rows of `width` columns (labels included), then a time axis with
// ▲ at each mark, and one legend line per mark.
std::vector<std::string> timelineText(const TimelineSeries& series,
                                      const std::vector<TimelineMark>& marks, std::size_t width,
                                      std::size_t height);

// Every series in one SVG document (one panel each, its limit dashed, marks as
// vertical lines), 800 px wide. A `title` (which lease, from when) heads it
// and is the document's <title>, so a picture kept or sent names itself.
std::string timelineSvg(const std::vector<TimelineSeries>& series,
                        const std::vector<TimelineMark>& marks, const std::string& title = "");

}  // namespace tally::views
