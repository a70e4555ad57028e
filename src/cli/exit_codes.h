// tally's exit codes (tally --help, docs/gpu.md, docs/coverage.md; tally run has its own,
// docs/run.md). Stable: scripts rely on them.
#pragma once

namespace tally::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitDegraded =
    1;  // a check ran and found a problem (doctor, config check, ledger verify)
inline constexpr int kExitUsage = 2;        // bad command line or option value
inline constexpr int kExitCheckFailed = 2;  // doctor: a check could not run (docs/coverage.md)
inline constexpr int kExitEnvironment = 3;  // a root (/proc, /sys, cgroupfs) could not be read
inline constexpr int kExitInternal = 4;     // a bug: an exception escaped (please report)
inline constexpr int kExitRefused =
    5;  // the daemon answered no: refused, not found, forbidden, timed out

}  // namespace tally::cli
