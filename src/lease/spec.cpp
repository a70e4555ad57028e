#include "lease/spec.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <array>

#include "lease/unit_names.h"
#include "util/text.h"

namespace tally::lease {

const char* oomPolicyName(OomPolicy p) {
  switch (p) {
    case OomPolicy::Kill:
      return "kill";
    case OomPolicy::Stop:
      return "stop";
    case OomPolicy::Continue:
      return "continue";
  }
  return "?";
}

std::string leaseSliceName(const LeaseSpec& spec) {
  std::string_view parent = spec.slice;
  if (text::endsWith(parent, ".slice")) parent.remove_suffix(6);
  // "-.slice" is the root slice: a lease slice directly under it has no prefix.
  if (parent == "-") return "tally" + spec.id + ".slice";
  return std::string(parent) + "-" + spec.id + ".slice";
}

std::string leaseScopeName(const LeaseSpec& spec) { return leaseScopeName(spec.id); }

std::string newLeaseId() {
  std::array<unsigned char, 6> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  return fmt::format("{:02x}", fmt::join(bytes, ""));
}

bool validLeaseName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace tally::lease
