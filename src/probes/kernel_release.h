// /proc/sys/kernel/osrelease ("6.12.117+deb12-amd64", "7.3.4-amd64",
// "6.1.0-57-amd64"): the version a kernel-era rule (KFD's limits, ROCm's
// placement on an APU) is chosen by. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tally::probes {

struct KernelRelease {
  std::uint32_t major = 0, minor = 0, patch = 0;
  std::string text;  // as read, trimmed (at most 64 bytes kept)
  bool atLeast(std::uint32_t maj, std::uint32_t min) const {
    return major != maj ? major > maj : minor >= min;
  }
};

// "MAJOR.MINOR[.PATCH][anything not a digit ...]". A release without a
// MINOR, or numbers past 16 bits, is not a release (nullopt).
std::optional<KernelRelease> parseKernelRelease(std::string_view osrelease);

}  // namespace tally::probes
