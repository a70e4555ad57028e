// `tally run --pool P --detach`: the job runs as a transient service of the
// system manager (root) or the caller's user manager, whose main process is
// `tally run` itself. The client that started it may exit or lose its
// terminal: the job's lease is held by that service, its output goes to the
// journal. The service is Type=notify: the inner `tally run` says READY=1
// (STATUS=lease <id> ...) once the daemon knows its lease, or STATUS=<why>
// and exits when it cannot have one.
#pragma once

#include <string>
#include <vector>

#include "contain/systemd_lease.h"
#include "util/result.h"

namespace tally::contain {

struct DetachedJob {
  std::string unit;  // tally-job-<token>.service
  std::string description;
  std::vector<std::string> argv;  // argv[0] an absolute path
  std::string workingDirectory;
  std::vector<std::string> environment;  // KEY=VALUE
};

// What the job's `tally run` said once started: its STATUS= text.
struct DetachedStart {
  bool ready = false;  // false: the service ended before READY=1; `status` says why
  std::string status;
};

// Starts the service and waits (up to `timeoutUs`) until it is ready or has failed.
Result<DetachedStart> startDetached(SystemdBus& bus, const DetachedJob& job,
                                    std::uint64_t timeoutUs);

// "tally-job-" + 12 hex digits from getrandom.
std::string detachedUnitName();

// The environment variable the launcher sets, so the inner `tally run` knows
// it is a detached job's (and tells systemd through sd_notify).
inline constexpr const char* kDetachedEnv = "TALLY_DETACHED";

}  // namespace tally::contain
