// What a Slurm node says of itself, as text: its plugstack.conf, `slurmd -V`
// and `slurmd -G`. Pure readers for `tally doctor --slurm` (slurm/health.h);
// fuzzed (fuzz_slurm_node).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tally::slurm {

// One plugstack.conf entry: `required|optional PATH [ARGS...]`.
struct PlugstackLine {
  bool required = false;
  std::string path;
  std::vector<std::string> args;
};
struct Plugstack {
  std::optional<PlugstackLine> tally;  // the entry whose file name starts tally_spank
  std::vector<std::string> includes;   // `include GLOB` lines, for the caller to read
};
// Comments (#) and blank lines skipped; other plugins' lines ignored.
Plugstack parsePlugstack(std::string_view text);

// "slurm-wlm 22.05.8" (slurmd -V) -> "22.05"; absent when it names no version.
std::optional<std::string> releaseOfSlurmd(std::string_view slurmdV);
// SLURM_VERSION_NUMBER (a plugin's plugin_version) -> "22.05".
std::string releaseOfNumber(unsigned versionNumber);

// The count of GRES `name` that `slurmd -G` says this node has, from lines
// such as "slurmd-halo01: Gres Name=tallymem Type=(null) Count=103079215104 ..."
// (summed over its lines); absent when no line names it. A malformed count
// is an error.
Result<std::optional<std::uint64_t>> gresOfSlurmd(std::string_view slurmdG, std::string_view name);

// The memory Slurm hands out on the node, in bytes, from `scontrol show node
// NAME -o`'s "RealMemory=<MiB>". An error when it names none or a malformed one.
Result<std::uint64_t> realMemoryOfScontrol(std::string_view text);

}  // namespace tally::slurm
