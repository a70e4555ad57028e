// The TTM memory manager behind DRM drivers' system-RAM buffers (GTT). The
// in-tree module is `ttm`; AMD's DKMS driver loads its own copy beside it
// (`amdttm`, `amd_ttm` on newer installs), and then only that copy serves
// amdgpu ("replicate your ttm.conf to amdttm.conf"). Which copy serves a
// driver is in sysfs: /sys/module/<ttm>/holders/<driver>. Its pages_limit
// bounds the pages TTM hands out, and is ROCm's GTT ceiling (gtt_ceiling.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/root.h"

namespace tally::devices {

inline constexpr std::array<const char*, 3> kTtmModuleNames = {"ttm", "amdttm", "amd_ttm"};

struct TtmModule {
  std::string name;                              // "ttm", "amdttm", "amd_ttm"
  std::optional<std::uint64_t> pagesLimit;       // parameters/pages_limit, in pages
  std::optional<std::string> pagesLimitUnknown;  // why pagesLimit is absent
  std::vector<std::string> holders;              // the drivers it serves (holders/), sorted
  std::optional<std::string> ttmMemcg;           // parameters/ttm_memcg as read; absent: none
};

struct TtmModules {
  std::vector<TtmModule> loaded;  // in kTtmModuleNames order; a module is loaded when
                                  // /sys/module/<name> exists

  // The module that serves `driver`: the one that lists it as a holder;
  // else, when exactly one is loaded, that one (a built-in ttm has no
  // holders directory). nullptr when none is loaded, or several are and
  // none names the driver. `how` says which case held, in words.
  const TtmModule* serving(std::string_view driver, std::string& how) const;
};

TtmModules readTtmModules(const fs::Root& sys);

}  // namespace tally::devices
