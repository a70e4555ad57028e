// libFuzzer target: the DRM fdinfo parser never crashes, never reads out of
// bounds, and keeps its invariants on any input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "probes/drm_fdinfo.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto f = tally::probes::parseDrmFdinfo(text);
  std::size_t lines = 0;
  for (char c : text) lines += c == '\n';
  for (const auto& r : f.rejected)
    if (r.line == 0 || r.line > lines + 1) std::abort();
  for (const auto& [name, region] : f.regions) {
    if (name.empty()) std::abort();
    auto res = tally::probes::residentOf(region);
    // The dedup rule: the resident figure is exactly one of the printed keys.
    if (res && res->bytes != region.resident.value_or(
                                 region.memory.value_or(region.legacy514.value_or(~0ull))))
      std::abort();
  }
  for (const auto& [name, engine] : f.engines)
    if (name.empty() || (engine.capacity && *engine.capacity == 0)) std::abort();
  return 0;
}
