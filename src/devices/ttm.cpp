#include "devices/ttm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "probes/sysfs_value.h"
#include "util/text.h"

namespace tally::devices {

TtmModules readTtmModules(const fs::Root& sys) {
  TtmModules out;
  for (const char* name : kTtmModuleNames) {
    std::string dir = std::string("module/") + name;
    if (!sys.exists(dir)) continue;
    TtmModule m;
    m.name = name;
    std::string limit = dir + "/parameters/pages_limit";
    if (auto v = sys.read(limit, 64)) {
      m.pagesLimit = probes::parseSysfsU64(*v);
      if (!m.pagesLimit) {
        m.pagesLimitUnknown =
            fmt::format("{} reads '{}', not a page count", sys.describe(limit), text::trim(*v));
      } else if (*m.pagesLimit == 0) {
        // 0 is "not set yet", never a ceiling: TTM fills in its default (half of
        // RAM) when the first device that uses it initialises (ttm_tt_mgr_init).
        m.pagesLimit.reset();
        m.pagesLimitUnknown = fmt::format(
            "{} reads 0: no device using {} has initialised yet (the kernel sets the default, "
            "half of RAM, then)",
            sys.describe(limit), name);
      }
    } else {
      m.pagesLimitUnknown = fmt::format("{}: {}", sys.describe(limit), v.error().message);
    }
    if (auto holders = sys.list(dir + "/holders")) {
      m.holders = std::move(*holders);
      std::sort(m.holders.begin(), m.holders.end());
    }
    if (auto v = sys.read(dir + "/parameters/ttm_memcg", 64))
      m.ttmMemcg = std::string(text::trim(*v));
    out.loaded.push_back(std::move(m));
  }
  return out;
}

const TtmModule* TtmModules::serving(std::string_view driver, std::string& how) const {
  for (const auto& m : loaded) {
    if (std::find(m.holders.begin(), m.holders.end(), driver) != m.holders.end()) {
      how = fmt::format("{} lists {} in /sys/module/{}/holders", m.name, driver, m.name);
      return &m;
    }
  }
  if (loaded.size() == 1) {
    how = fmt::format("{} is the only TTM module loaded", loaded.front().name);
    return &loaded.front();
  }
  if (loaded.empty()) {
    how = "no TTM module is loaded (/sys/module/{ttm,amdttm,amd_ttm} absent)";
    return nullptr;
  }
  std::vector<std::string> names;
  for (const auto& m : loaded) names.push_back(m.name);
  how = fmt::format("{} are loaded and none lists {} as a holder", fmt::join(names, " and "),
                    driver.empty() ? "the driver" : driver);
  return nullptr;
}

}  // namespace tally::devices
