// The workload, forked but held on a pipe until its containment has been
// established and read back. A child that is never released exits without
// exec'ing, so a refused lease provably never ran the command (doctrine 2).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "util/result.h"
#include "util/unique_fd.h"

namespace tally::contain {

// The exit status of a child that was never released (it never exec'd).
inline constexpr int kNeverReleasedStatus = 121;

class HeldChild {
 public:
  // Forks; the child waits for release() with an empty signal mask and
  // default dispositions (tally blocks the signals it reads via a signalfd).
  static Result<HeldChild> spawn(const std::vector<std::string>& argv);

  HeldChild(HeldChild&& other) noexcept;
  HeldChild& operator=(HeldChild&&) = delete;
  HeldChild(const HeldChild&) = delete;
  ~HeldChild();  // abandons a child that was never released or reaped

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }  // readable when the child exits

  // Lets the child exec. Returns once exec succeeded (0) or failed (its errno).
  int release();

  // Never released: SIGKILL and reap. Idempotent.
  void abandon();

  // Reaps an exited child (after pidfd became readable). The raw wait status.
  Result<int> reap();

 private:
  HeldChild(pid_t pid, UniqueFd pidfd, UniqueFd go, UniqueFd execErr)
      : pid_(pid), pidfd_(std::move(pidfd)), go_(std::move(go)), execErr_(std::move(execErr)) {}
  pid_t pid_ = 0;
  UniqueFd pidfd_;
  UniqueFd go_;       // write end; one byte releases the child, closing it aborts
  UniqueFd execErr_;  // read end of a CLOEXEC pipe: EOF = exec succeeded
  bool reaped_ = false;
};

}  // namespace tally::contain
