#include "probes/kernel_release.h"

#include "util/text.h"

namespace tally::probes {
namespace {

// Leading decimal digits of `s` (at most 5, value <= 65535), consumed.
std::optional<std::uint32_t> number(std::string_view& s) {
  std::size_t n = 0;
  std::uint32_t v = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') {
    if (++n > 5) return std::nullopt;
    v = v * 10 + static_cast<std::uint32_t>(s[n - 1] - '0');
  }
  if (n == 0 || v > 0xffff) return std::nullopt;
  s.remove_prefix(n);
  return v;
}

}  // namespace

std::optional<KernelRelease> parseKernelRelease(std::string_view osrelease) {
  std::string_view s = text::trim(osrelease);
  KernelRelease r;
  r.text = text::truncateUtf8(s, 64);
  auto major = number(s);
  if (!major || s.empty() || s.front() != '.') return std::nullopt;
  s.remove_prefix(1);
  auto minor = number(s);
  if (!minor) return std::nullopt;
  r.major = *major;
  r.minor = *minor;
  if (!s.empty() && s.front() == '.') {
    s.remove_prefix(1);
    if (auto patch = number(s)) r.patch = *patch;
  }
  return r;
}

}  // namespace tally::probes
