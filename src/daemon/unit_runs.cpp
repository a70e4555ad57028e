#include "daemon/unit_runs.h"

#include <fmt/format.h>

namespace tally::daemon {

bool runLeasable(const UnitRun& r) {
  if (r.controlGroup.empty()) return false;
  if (r.activeState == "active" || r.activeState == "reloading") return r.subState != "exited";
  return r.activeState == "activating" && (r.subState == "start" || r.subState == "start-post");
}

namespace {

bool restartJob(const std::string& job) {
  // reload-or-restart and try-restart arrive as "restart"; a start queued
  // while the old run stops is a restart too.
  return job == "restart" || job == "try-restart" || job == "start";
}

}  // namespace

RunEnding runEnding(const std::string& unit, const std::string& adopted, const UnitRun& now) {
  RunEnding e;
  const bool newRun = !now.invocation.empty() && !adopted.empty() && now.invocation != adopted;
  if (newRun && now.activeState != "inactive" && now.activeState != "failed") {
    e.restart = true;
    e.words = fmt::format("unit {} restarted (a new run, invocation {})", unit,
                          now.invocation.substr(0, 12));
  } else if (now.subState == "auto-restart") {
    e.restart = true;
    e.words = fmt::format("unit {} is restarting (its Restart= policy)", unit);
  } else if (restartJob(now.jobType)) {
    e.restart = true;
    e.words = fmt::format("unit {} is restarting (a {} job)", unit, now.jobType);
  } else if (now.activeState == "failed") {
    e.words = fmt::format("unit {} failed", unit);
  } else if (now.activeState == "inactive" || now.activeState == "deactivating") {
    e.words = fmt::format("unit {} stopped", unit);
  } else {
    e.words =
        fmt::format("unit {} is {} ({}), its processes gone", unit, now.activeState, now.subState);
  }
  return e;
}

}  // namespace tally::daemon
