// An errno as the probes' findings say it: its name and its words.
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <string>

namespace tally::coverage {

// "ENOMEM", or "errno 1234" for one the C library does not name.
inline std::string errnoName(int e) {
  const char* n = ::strerrorname_np(e);
  return n ? n : fmt::format("errno {}", e);
}

// "ENOMEM (Cannot allocate memory)".
inline std::string errnoWords(int e) {
  return fmt::format("{} ({})", errnoName(e), std::strerror(e));
}

}  // namespace tally::coverage
