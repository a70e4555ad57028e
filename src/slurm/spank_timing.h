// Where a step's plugin time goes, one Slurm debug line per phase as it
// ends ("tally: timing PHASE N us", shown at SlurmdDebug=debug), from
// whichever thread ran it: vm/bench-slurm-phases.sh reads them, so the
// figures in docs/PERFORMANCE.md come from the plugin itself. The phases
// (docs/slurm.md lists them) are timed where their calls are made: the
// controller's (spank_controller.cpp), the daemon's (spank_daemon.cpp), the
// prefetch's wait, the first task's attach, the end query.
#pragma once

#include <chrono>

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

class PhaseTimer {
 public:
  explicit PhaseTimer(const char* phase)
      : phase_(phase), start_(std::chrono::steady_clock::now()) {}
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  ~PhaseTimer() {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - start_)
                  .count();
    slurm_debug("tally: timing %s %lld us", phase_, static_cast<long long>(us));
  }

 private:
  const char* phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tally::slurm::plugin
