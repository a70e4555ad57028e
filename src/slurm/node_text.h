// What a Slurm node says of itself, as text: its plugstack.conf, `slurmd -V`,
// slurmctld's record of it (`scontrol show node NAME -o`), its PrologFlags
// (`scontrol show config`) and sshd's PAM stack. Pure readers for `tally doctor
// --slurm` (slurm/health.h); fuzzed (fuzz_slurm_node).
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

// The count of GRES `name` in slurmctld's record of the node, what Slurm
// places jobs against: `scontrol show node NAME -o`'s "Gres=tallymem:96G"
// (slurm/gres.h reads the list; typed entries add up). Absent when the list
// does not name it ("Gres=(null)": none); a malformed count, or a record with
// no Gres= at all, is an error.
Result<std::optional<std::uint64_t>> gresOfScontrol(std::string_view text, std::string_view name);

// The memory Slurm hands out on the node, in bytes, from `scontrol show node
// NAME -o`'s "RealMemory=<MiB>". An error when it names none or a malformed one.
Result<std::uint64_t> realMemoryOfScontrol(std::string_view text);

// The node's CPUs as slurmctld counts them: `scontrol show node NAME -o`'s
// "CPUTot=<n>". An error when it names none or a malformed one.
Result<std::uint64_t> cpusOfScontrol(std::string_view text);

// Whether `scontrol show config`'s "PrologFlags = Alloc,Contain" holds
// Contain ("(null)": none). An error when no PrologFlags line is there.
Result<bool> containOfScontrolConfig(std::string_view text);

// Whether a PAM service file (/etc/pam.d/sshd) loads pam_slurm_adopt on a
// line that is not a comment.
bool pamAdoptsIntoJobs(std::string_view pamText);

}  // namespace tally::slurm
