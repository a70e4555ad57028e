#include "probes/meminfo.h"

#include "util/text.h"

namespace tally::probes {

std::optional<std::uint64_t> parseMemInfoValue(std::string_view value) {
  value = text::trim(value);
  constexpr std::string_view kKb = " kB";
  if (value.size() > kKb.size() && value.substr(value.size() - kKb.size()) == kKb) {
    auto n = text::parseU64(text::trim(value.substr(0, value.size() - kKb.size())));
    if (!n) return std::nullopt;
    return text::mulU64(*n, 1024);
  }
  return text::parseU64(value);
}

MemInfo parseMemInfo(std::string_view input) {
  MemInfo out;
  text::LineReader lines(input);
  while (auto l = lines.next()) {
    auto colon = l->find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = l->substr(0, colon);
    std::optional<std::uint64_t>* field = nullptr;
    if (key == "MemTotal")
      field = &out.memTotal;
    else if (key == "MemAvailable")
      field = &out.memAvailable;
    else if (key == "GPUActive")
      field = &out.gpuActive;
    else if (key == "GPUReclaim")
      field = &out.gpuReclaim;
    if (field == nullptr || field->has_value()) continue;
    *field = parseMemInfoValue(l->substr(colon + 1));
  }
  return out;
}

}  // namespace tally::probes
