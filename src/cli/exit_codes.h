// tally's exit codes, in one table: `tally --help` prints it, the man page's
// EXIT STATUS is checked against it (tests/cli), and every command maps the
// daemon's answers through exitForDaemonError. Stable: scripts rely on them.
// `tally run` exits with its workload's status instead (docs/run.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tally::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitDegraded = 1;     // a check ran and found a problem
inline constexpr int kExitUsage = 2;        // the command line is wrong; nothing was asked
inline constexpr int kExitCheckFailed = 2;  // doctor: a check could not run (docs/coverage.md)
inline constexpr int kExitEnvironment = 3;  // a root could not be read, or no daemon to ask
inline constexpr int kExitInternal = 4;     // a bug: an exception escaped (please report)
inline constexpr int kExitRefused = 5;      // the daemon answered no, with its reason

// The exit status of a command that reads from the daemon (leases, seats, metrics).
inline constexpr const char* kReadingExitStatus =
    "Exit status: 0 ok, 3 the daemon cannot be reached or did not answer within --timeout, 5 the "
    "daemon said no\n(tally --help lists every code).";

// The table as `tally --help` shows it, one "  N  meaning" line per code.
std::string exitStatusText();
// The table itself (the man page's EXIT STATUS is written from it).
struct ExitStatus {
  int code;
  const char* meaning;
};
const std::vector<ExitStatus>& exitStatuses();

// The exit code for the daemon's "no": kExitRefused for every answer about
// the request (a limit, a budget, a conflict, not found, forbidden, a timeout,
// a ledger that cannot write), kExitEnvironment when this client and the
// daemon do not speak the same protocol, kExitInternal for the daemon's bug.
int exitForDaemonError(std::string_view rpcCode);

}  // namespace tally::cli
