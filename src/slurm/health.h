// `tally doctor --slurm`: is this node's tally what its Slurm expects? The
// plugstack.conf line, the plugin built for the Slurm that runs here, the
// daemon answering, the pool's GPU budget equal to the node's GRES count, and
// RealMemory plus the GRES's host-RAM part (GTT) within the host's RAM. Pure:
// cli/cmd_doctor_slurm.cpp reads the files, runs slurmd -V and scontrol, reads the
// plugin's version and asks the daemon; this reads their texts and judges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "slurm/node_text.h"
#include "util/result.h"

namespace tally::slurm {

// What the doctor read; each absent figure carries why in its *Error.
struct SlurmFacts {
  std::string plugstackPath;
  // Read from slurmd's configless cache (no /etc/slurm/plugstack.conf: the
  // controller's copy, SlurmctldParameters=enable_configless).
  bool plugstackConfigless = false;
  std::optional<Plugstack> plugstack;
  std::optional<std::string> plugstackError;
  std::string pluginPath;                 // resolved against PluginDir
  std::optional<unsigned> pluginVersion;  // its plugin_version symbol
  std::optional<std::string> pluginError;
  std::optional<std::string> slurmdVersion;  // slurmd -V
  std::optional<std::string> slurmdError;
  // slurmctld's record of this node (`scontrol show node NAME -o`): its GRES
  // is what Slurm places against. Not `slurmd -G`: 26.05's sets up cgroups
  // for the caller (it enables controllers in the caller's own cgroup, and
  // fails in any cgroup with a process in it, a login shell's or NHC's).
  std::optional<std::string> nodeRecord;
  std::optional<std::string> nodeRecordError;
  bool daemonAnswered = false;
  std::optional<std::string> daemonError;
  std::optional<std::uint64_t> poolBudget;    // the plugin's pool's gpu_memory_budget
  std::optional<std::uint64_t> poolCapacity;  // ... and its capacity (leases at once)
  // The node's CPUs (scontrol's CPUTot): at most that many one-CPU jobs run at once.
  std::optional<std::uint64_t> nodeCpus;
  std::optional<std::string> nodeCpusError;
  bool poolFound = false;
  // Host memory: what Slurm hands out (scontrol's RealMemory), what the host
  // has (MemTotal), and the devices' VRAM (the GRES beyond it is GTT: host RAM).
  std::optional<std::uint64_t> realMemoryBytes, memTotalBytes, vramTotalBytes;
  std::optional<std::string> realMemoryError, memTotalError, vramError;
  // The most GTT the kernel lets the pool's clients hold (devices/gtt_ceiling.h,
  // the pool's gtt_ceiling), summed over the devices: the GRES beyond VRAM
  // past it is a count Slurm grants and the driver refuses.
  std::optional<std::uint64_t> gttCeilingBytes;
  std::string gttCeilingSource;  // which ceiling, in words
  std::optional<std::string> gttCeilingError;
  // PrologFlags=Contain (scontrol show config), and whether sshd's PAM stack
  // adopts ssh sessions into jobs (pam_slurm_adopt, which needs Contain).
  std::optional<bool> contain;
  std::optional<std::string> containError;
  bool pamSlurmAdopt = false;
};

enum class CheckState { Ok, Failed, Unknown };
struct SlurmCheck {
  std::string name;
  CheckState state = CheckState::Unknown;
  std::string said;  // the evidence, or what is wrong and what to do
};
std::vector<SlurmCheck> judgeSlurm(const SlurmFacts& f);
const char* checkStateName(CheckState s);  // "ok", "FAILED", "unknown"

}  // namespace tally::slurm
