// The step's tally options (--gpu-memory-max, --gpu-memory-high,
// --tally-pool, --tally-attr) as SPANK is told them, and what srun or sbatch
// does with them before anything is allocated.
#pragma once

#include <array>

#include "slurm/step.h"

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

// Each option's `val` in the table: SPANK hands it to the callback, which so
// knows which option it was given.
enum OptionId : int { kGpuMemoryMax, kGpuMemoryHigh, kPool, kAttr, kOptionCount };

// The table SPANK registers, every option's callback `onOption`. SPANK may
// keep pointers into it: it lives as long as the plugin (in the step's state).
using OptionTable = std::array<spank_option, kOptionCount>;
OptionTable optionTable(spank_opt_cb_f onOption);

// Every option of `table` registered with SPANK; false (said in the log) when
// one could not be.
bool registerOptions(spank_t sp, OptionTable& table);

// Option `id`'s value as SPANK hands it to the callback (null: none), kept in `o`.
void storeOption(StepOptions& o, int id, const char* arg);

// srun and sbatch (local, allocator): a typo is refused before anything is
// allocated, and a repeated --tally-attr is put in the environment the step
// inherits. 0, or -1 with the reason in the log.
int submitOptions(const StepOptions& o);

// slurmstepd: every --tally-attr the user gave, when there were several
// (SPANK forwards only an option's last value), in place of that one.
void attrsFromSubmit(spank_t sp, StepOptions& o);

}  // namespace tally::slurm::plugin
