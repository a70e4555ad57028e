#include "slurm/spank_options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "slurm/spank_node.h"

namespace tally::slurm::plugin {

namespace {

// The environment variable that carries every --tally-attr to slurmstepd,
// joined by an ASCII unit separator (attribute values hold no control characters).
constexpr const char* kAttrsEnv = "TALLY_SPANK_ATTRS";
constexpr char kAttrSep = '\x1f';

std::string joinAttrs(const std::vector<std::string>& attrs) {
  std::string s;
  for (const auto& a : attrs) {
    if (!s.empty()) s += kAttrSep;
    s += a;
  }
  return s;
}

std::vector<std::string> splitAttrs(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    auto cut = s.find(kAttrSep, start);
    out.push_back(s.substr(start, cut == std::string::npos ? std::string::npos : cut - start));
    if (cut == std::string::npos) break;
    start = cut + 1;
  }
  return out;
}

}  // namespace

OptionTable optionTable(spank_opt_cb_f onOption) {
  return {{
      {const_cast<char*>("gpu-memory-max"), const_cast<char*>("SIZE"),
       const_cast<char*>("tally: cap the step's GPU memory (GTT + VRAM) at SIZE, below the job's "
                         "tallymem GRES (default: the GRES on the node)"),
       1, kGpuMemoryMax, onOption},
      {const_cast<char*>("gpu-memory-high"), const_cast<char*>("SIZE"),
       const_cast<char*>("tally: report (never kill) when the step's GPU memory is over SIZE"), 1,
       kGpuMemoryHigh, onOption},
      {const_cast<char*>("tally-pool"), const_cast<char*>("NAME"),
       const_cast<char*>("tally: the pool the job's lease joins, set by the step that makes it "
                         "(the plugin's pool= or one of its allowed_pools=)"),
       1, kPool, onOption},
      {const_cast<char*>("tally-attr"), const_cast<char*>("KEY=VALUE"),
       const_cast<char*>("tally: a label on the step's lease (repeatable)"), 1, kAttr, onOption},
  }};
}

bool registerOptions(spank_t sp, OptionTable& table) {
  for (auto& opt : table) {
    if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
      slurm_error("tally: could not register --%s", opt.name);
      return false;
    }
  }
  return true;
}

void storeOption(StepOptions& o, int id, const char* arg) {
  std::string value = arg ? arg : "";
  switch (id) {
    case kGpuMemoryMax:
      o.gpuMemoryMax = value;
      break;
    case kGpuMemoryHigh:
      o.gpuMemoryHigh = value;
      break;
    case kPool:
      o.pool = value;
      break;
    case kAttr:
      o.attrs.emplace_back(value);
      break;
    default:
      break;
  }
}

int submitOptions(const StepOptions& o) {
  // A typo is refused before anything is allocated.
  if (auto s = checkOptions(o); !s) {
    slurm_error("tally: %s", s.error().message.c_str());
    return -1;
  }
  // srun and sbatch hand their environment to the step (Slurm's default
  // --export=ALL); SPANK's own forwarding keeps only an option's last value.
  if (o.attrs.size() > 1 && ::setenv(kAttrsEnv, joinAttrs(o.attrs).c_str(), 1) != 0) {
    slurm_error("tally: could not pass --tally-attr to the step: %s", std::strerror(errno));
    return -1;
  }
  return 0;
}

void attrsFromSubmit(spank_t sp, StepOptions& o) {
  if (std::string all = getenvOf(sp, kAttrsEnv); !all.empty()) o.attrs = splitAttrs(all);
}

}  // namespace tally::slurm::plugin
