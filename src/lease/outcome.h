// How a lease ended, named from evidence (doctrine 4): the main process's wait
// status, the lease cgroup's memory.events and what tally itself did. Pure:
// the runner gathers the facts, this decides what they mean.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lease/spec.h"
#include "probes/cgroup_memory.h"

namespace tally::lease {

// tally's own exit statuses for `tally run` (docs/run.md); every other status
// mirrors the workload: its exit code, or 128 + the signal that ended it.
inline constexpr int kRunExitUsage = 2;  // bad option (nothing ran)
inline constexpr int kRunExitRefused =
    125;  // containment refused or tally failed before the workload ran
inline constexpr int kRunExitNotExecutable = 126;
inline constexpr int kRunExitNotFound = 127;

enum class OutcomeClass {
  Exited,          // the main process exited with a code
  KilledBySignal,  // ... was killed by a signal nobody in the lease's cgroup accounts for
  OomKilled,       // ... was killed by the kernel OOM killer (or stopped after one, OOMPolicy=stop)
  Stopped,         // tally was told to stop (SIGINT/SIGTERM/SIGHUP) and stopped the lease
  ExecFailed,      // contained, but the command could not be executed
  ContainmentRefused,  // the workload never ran
  Unknown,             // it ran, but its wait status could not be read (never guessed)
  // Leases on workloads tally did not start (tally attach): no wait status exists.
  Ended,     // the attached workload's cgroup emptied
  Released,  // the lease was released; the attached workload goes on outside any lease
  // Any lease: tally itself killed it over its gpu_memory_max (enforce/).
  KilledByTally,
  // Any lease: it ended while nobody watched (daemon down, client gone); the
  // facts still readable are recorded, the ending is not guessed.
  Lost,
};
const char* outcomeClassName(OutcomeClass c);  // "exited", "killed-by-signal", "oom-killed", ...
std::optional<OutcomeClass> parseOutcomeClass(std::string_view name);
// "class: summary", unless the summary already says the class in words
// ("killed by tally: ..." for killed-by-tally): said once, not twice.
std::string outcomeWords(std::string_view cls, std::string_view summary);
inline constexpr OutcomeClass kAllOutcomeClasses[] = {
    OutcomeClass::Exited,     OutcomeClass::KilledBySignal,
    OutcomeClass::OomKilled,  OutcomeClass::Stopped,
    OutcomeClass::ExecFailed, OutcomeClass::ContainmentRefused,
    OutcomeClass::Unknown,    OutcomeClass::Ended,
    OutcomeClass::Released,   OutcomeClass::KilledByTally,
    OutcomeClass::Lost};

struct Ending {
  enum class Kind { NeverRan, ExecFailed, Exited, Signaled, Unknown } kind = Kind::NeverRan;
  int exitCode = 0;   // Exited
  int signal = 0;     // Signaled
  int execErrno = 0;  // ExecFailed
};

struct OutcomeFacts {
  Ending ending;
  std::optional<std::string> refusal;        // why containment was refused
  std::optional<std::string> endingUnknown;  // why the wait status is missing (Kind::Unknown)
  OomPolicy policy = OomPolicy::Kill;
  std::optional<probes::FlatKeyed> memoryEvents;   // final, hierarchical, of the lease
  std::optional<std::string> memoryEventsUnknown;  // why they are absent
  std::optional<probes::MemoryLimit> memoryMax;    // effective memory.max, read back
  std::optional<int> stopSignal;                   // the signal tally received and acted on
  std::optional<std::string> tallyKill;            // tally killed the lease: the enforcer's summary
};

struct Outcome {
  OutcomeClass cls = OutcomeClass::ContainmentRefused;
  int exitStatus = kRunExitRefused;  // what `tally run` exits with
  std::optional<int> exitCode;
  std::optional<int> signal;
  std::optional<std::uint64_t> oomKills;
  std::string summary;  // one line an operator can act on
  // False for a workload tally did not start or did not see end (attached,
  // lost): it has no wait status, so the record carries no exit status.
  bool hasExitStatus = true;
};

Outcome classify(const OutcomeFacts& facts);

// An attached workload's lease: how it ended, and the memory.events oom_kill
// counter at adoption (the cgroup's kills before the lease are not the lease's).
struct AttachedFacts {
  bool released = false;  // else: the cgroup emptied
  std::optional<probes::FlatKeyed> memoryEvents;
  std::optional<std::string> memoryEventsUnknown;
  // memoryEvents were read before the end (the cgroup was gone by then): when.
  std::optional<std::string> memoryEventsReadBeforeEnd;
  std::optional<std::uint64_t> oomKillsAtAdoption;
  std::optional<probes::MemoryLimit> memoryMax;
  std::optional<std::string> tallyKill;  // tally killed the lease: the enforcer's summary
  // How its systemd unit's run ended, when the lease held one ("unit
  // llama.service restarted (...); its next run is ..."): said instead of
  // the bare "cgroup emptied".
  std::optional<std::string> unitEnding;
  // How its own processes ended, as its attacher reported (the Slurm
  // plugin: the step's tasks); recorded as exit_code or signal, said as
  // the attacher's word.
  std::optional<Ending> reported;
  // Released because its parent lease ended while it ran ("<id> (<name>)").
  std::optional<std::string> parentEnded;
};
Outcome classifyAttached(const AttachedFacts& facts);

// "SIGKILL" for 9; "signal 63" for one without a name.
std::string signalName(int sig);

}  // namespace tally::lease
