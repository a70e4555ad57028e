// What measured headroom lacked when a lease the site's scheduler placed was
// granted without it (admission::shortfallIn measures it; the granted row
// keeps it): per resource, what the lease declares and what was free, in the
// first of its pools where headroom fell short.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tally::lease {

struct Shortfall {
  struct Figure {
    std::uint64_t needed = 0, free = 0;
    std::uint64_t bytes() const { return needed > free ? needed - free : 0; }
  };
  std::string pool;
  std::optional<Figure> host, gpu;  // absent: measured and enough, or not measured
  bool any() const { return host || gpu; }
};

}  // namespace tally::lease
