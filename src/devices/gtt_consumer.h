// Which of a device's two GTT ceilings (devices/gtt_ceiling.h) a headroom
// figure is measured against: the smaller of the two, graphics (Mesa,
// Vulkan), or compute (ROCm). A pool's gtt_ceiling key names it. Pure, header
// only: the config parser uses it without the device code.
#pragma once

#include <optional>
#include <string_view>

namespace tally::devices {

enum class GttConsumer { Smaller, Graphics, Compute };

inline const char* gttConsumerName(GttConsumer c) {
  switch (c) {
    case GttConsumer::Smaller:
      return "smaller";
    case GttConsumer::Graphics:
      return "graphics";
    case GttConsumer::Compute:
      return "compute";
  }
  return "?";
}

inline std::optional<GttConsumer> parseGttConsumer(std::string_view s) {
  for (auto c : {GttConsumer::Smaller, GttConsumer::Graphics, GttConsumer::Compute})
    if (s == gttConsumerName(c)) return c;
  return std::nullopt;
}

}  // namespace tally::devices
