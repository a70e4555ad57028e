#include "lease/outcome.h"

#include <fmt/format.h>
#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cerrno>

#include "cgroup/cgroup.h"
#include "util/units.h"

namespace tally::lease {
namespace {

std::string limitText(const std::optional<probes::MemoryLimit>& max) {
  if (!max) return "MemoryMax unknown";
  if (max->unlimited) return "no MemoryMax (max)";
  return fmt::format("MemoryMax={}", units::humanBytes(max->bytes));
}

}  // namespace

const char* outcomeClassName(OutcomeClass c) {
  switch (c) {
    case OutcomeClass::Exited:
      return "exited";
    case OutcomeClass::KilledBySignal:
      return "killed-by-signal";
    case OutcomeClass::OomKilled:
      return "oom-killed";
    case OutcomeClass::Stopped:
      return "stopped";
    case OutcomeClass::ExecFailed:
      return "exec-failed";
    case OutcomeClass::ContainmentRefused:
      return "containment-refused";
    case OutcomeClass::Unknown:
      return "unknown";
    case OutcomeClass::Ended:
      return "ended";
    case OutcomeClass::Released:
      return "released";
    case OutcomeClass::Lost:
      return "lost";
    case OutcomeClass::KilledByTally:
      return "killed-by-tally";
  }
  return "?";
}

std::optional<OutcomeClass> parseOutcomeClass(std::string_view name) {
  for (OutcomeClass c : kAllOutcomeClasses) {
    if (name == outcomeClassName(c)) return c;
  }
  return std::nullopt;
}

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev) return fmt::format("SIG{}", abbrev);
  return fmt::format("signal {}", sig);
}

Outcome classify(const OutcomeFacts& f) {
  Outcome o;
  std::optional<std::uint64_t> oomKills;
  // A memory.events without the key (before Linux 4.13) leaves it unknown, not 0.
  if (f.memoryEvents) oomKills = f.memoryEvents->get("oom_kill");
  o.oomKills = oomKills;

  switch (f.ending.kind) {
    case Ending::Kind::NeverRan:
      o.cls = OutcomeClass::ContainmentRefused;
      o.exitStatus = kRunExitRefused;
      o.summary = "the workload never ran: " + f.refusal.value_or("unknown reason");
      return o;
    case Ending::Kind::ExecFailed:
      o.cls = OutcomeClass::ExecFailed;
      o.exitStatus = f.ending.execErrno == ENOENT ? kRunExitNotFound : kRunExitNotExecutable;
      o.summary =
          fmt::format("the command could not be executed: {}", strerror(f.ending.execErrno));
      return o;
    case Ending::Kind::Exited:
      o.exitCode = f.ending.exitCode;
      o.exitStatus = f.ending.exitCode;
      if (f.stopSignal) {
        o.cls = OutcomeClass::Stopped;
        o.summary = fmt::format("stopped by tally on {}: the workload exited with code {}",
                                signalName(*f.stopSignal), f.ending.exitCode);
      } else {
        o.cls = OutcomeClass::Exited;
        o.summary = fmt::format("exited with code {}", f.ending.exitCode);
      }
      if (oomKills && *oomKills > 0) {
        // OOMPolicy=continue: a process of the lease was killed, the main one lived on.
        o.summary +=
            fmt::format("; the OOM killer killed {} process(es) of the lease ({} oom_kill={}, {})",
                        *oomKills, cgroup::file::kMemoryEvents, *oomKills, limitText(f.memoryMax));
      }
      return o;
    case Ending::Kind::Unknown:
      o.cls = OutcomeClass::Unknown;
      o.exitStatus = kRunExitRefused;
      o.summary =
          "how the workload ended is unknown: " + f.endingUnknown.value_or("no wait status");
      return o;
    case Ending::Kind::Signaled:
      break;
  }

  int sig = f.ending.signal;
  o.signal = sig;
  o.exitStatus = 128 + sig;
  if (f.tallyKill && sig == SIGKILL) {
    o.cls = OutcomeClass::KilledByTally;
    o.summary = *f.tallyKill;
    if (oomKills && *oomKills > 0)
      o.summary += fmt::format("; the kernel OOM killer also acted ({} oom_kill={})",
                               cgroup::file::kMemoryEvents, *oomKills);
    return o;
  }
  bool oomEnded = oomKills && *oomKills > 0 && (sig == SIGKILL || f.policy == OomPolicy::Stop);
  if (oomEnded) {
    o.cls = OutcomeClass::OomKilled;
    o.summary = fmt::format("killed by the kernel OOM killer: cgroup {} oom_kill={}, {}",
                            cgroup::file::kMemoryEvents, *oomKills, limitText(f.memoryMax));
    if (sig != SIGKILL)
      o.summary += fmt::format(" (lease stopped by systemd, OOMPolicy=stop; main process got {})",
                               signalName(sig));
    return o;
  }
  if (f.stopSignal) {
    o.cls = OutcomeClass::Stopped;
    o.summary = fmt::format("stopped by tally on {}: the workload ended by {}",
                            signalName(*f.stopSignal), signalName(sig));
    return o;
  }
  o.cls = OutcomeClass::KilledBySignal;
  o.summary = fmt::format("killed by {}", signalName(sig));
  if (sig == SIGKILL) {
    if (oomKills)
      o.summary += fmt::format(" (not the OOM killer: {} oom_kill=0)", cgroup::file::kMemoryEvents);
    else if (f.memoryEvents)
      o.summary += fmt::format(" (whether the OOM killer did it is unknown: {} has no oom_kill)",
                               cgroup::file::kMemoryEvents);
    else
      o.summary += " (whether the OOM killer did it is unknown: " +
                   f.memoryEventsUnknown.value_or(
                       fmt::format("{} unreadable", cgroup::file::kMemoryEvents)) +
                   ")";
  }
  return o;
}

Outcome classifyAttached(const AttachedFacts& f) {
  Outcome o;
  o.exitStatus = 0;
  o.hasExitStatus = false;
  std::optional<std::uint64_t> kills;
  if (f.memoryEvents && f.oomKillsAtAdoption) {
    if (auto now = f.memoryEvents->get("oom_kill"); now && *now >= *f.oomKillsAtAdoption)
      kills = *now - *f.oomKillsAtAdoption;
  }
  o.oomKills = kills;
  std::string oomText;
  if (kills && *kills > 0) {
    oomText = fmt::format(
        "; the kernel OOM killer killed {} process(es) during the lease (cgroup {} oom_kill +{}, "
        "{}{})",
        *kills, cgroup::file::kMemoryEvents, *kills, limitText(f.memoryMax),
        f.memoryEventsReadBeforeEnd ? "; " + *f.memoryEventsReadBeforeEnd : "");
  } else if (kills && f.memoryEventsReadBeforeEnd) {
    oomText = fmt::format("; the kernel OOM killer killed none of its processes ({}: {})",
                          cgroup::file::kMemoryEvents, *f.memoryEventsReadBeforeEnd);
  } else if (!kills) {
    oomText = fmt::format(
        "; whether the OOM killer acted during the lease is unknown ({})",
        f.memoryEventsUnknown.value_or(fmt::format(
            "{} has no oom_kill, or it was not read at adoption", cgroup::file::kMemoryEvents)));
  }
  std::string reportedText;
  if (f.reported && f.reported->kind == Ending::Kind::Exited) {
    o.exitCode = f.reported->exitCode;
    reportedText = fmt::format("; its tasks exited with code {} (its attacher's report)",
                               f.reported->exitCode);
  } else if (f.reported && f.reported->kind == Ending::Kind::Signaled) {
    o.signal = f.reported->signal;
    reportedText = fmt::format("; its tasks were killed by {} (its attacher's report)",
                               signalName(f.reported->signal));
  }
  if (f.released) {
    o.cls = OutcomeClass::Released;
    o.summary = (f.parentEnded ? fmt::format("released with its parent lease {}", *f.parentEnded)
                               : std::string("released")) +
                "; the workload goes on outside the lease" + oomText;
    return o;
  }
  if (f.tallyKill) {
    o.cls = OutcomeClass::KilledByTally;
    o.summary = *f.tallyKill + reportedText + oomText;
    return o;
  }
  o.cls = kills && *kills > 0 ? OutcomeClass::OomKilled : OutcomeClass::Ended;
  o.summary = (f.unitEnding ? *f.unitEnding
                            : fmt::format("the workload's cgroup emptied ({} populated 0)",
                                          cgroup::file::kEvents)) +
              reportedText + oomText;
  return o;
}

std::string outcomeWords(std::string_view cls, std::string_view summary) {
  if (summary.empty()) return std::string(cls);
  std::string words(cls);
  std::replace(words.begin(), words.end(), '-', ' ');
  if (summary.substr(0, words.size()) == words) return std::string(summary);
  return fmt::format("{}: {}", cls, summary);
}

}  // namespace tally::lease
