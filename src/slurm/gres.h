// Slurm's words for a job's or a step's generic resources, read without Slurm:
// the count of one count-only GRES (tally's `tallymem`) in the strings slurmctld
// hands out. Pure: the Slurm plugin fetches the text, this reads it.
//
// The shapes Slurm 22.05 prints (a list separated by ',' or ';'):
//   tres_per_node / tres_per_step   "gres:gpumem:64M", "gres/gpumem:64M", "gres:gpumem"
//   typed                           "gres:gpumem:amd:64M"
//   tres_alloc_str                  "cpu=1,mem=1500M,node=1,gres/gpumem=67108864"
//   gres_detail_str (per node)      "gpumem:64M(IDX:N/A)"
// A count may carry Slurm's suffixes K, M, G, T, P (powers of 1024), so a GRES
// declared in bytes (`Count=96G`) reads back as bytes. A bare name counts 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tally::slurm {

// The count of GRES `name` in `list`; nullopt when the list does not name it.
// A malformed count of that GRES (not a number, an unknown suffix, more than
// 2^64 - 1) is an error naming the entry: a bound is never guessed.
Result<std::optional<std::uint64_t>> gresCount(std::string_view list, std::string_view name);

// The first of `names` that `list` names, with its count: a plugin reading
// several names (tallymem,gpumem while a cluster moves) counts one of them.
struct GresFound {
  std::string name;
  std::uint64_t count = 0;
};
Result<std::optional<GresFound>> firstGres(std::string_view list,
                                           const std::vector<std::string>& names);

// "64M" -> 67108864: digits and an optional K/M/G/T/P (case-insensitive).
Result<std::uint64_t> slurmCount(std::string_view text);

}  // namespace tally::slurm
