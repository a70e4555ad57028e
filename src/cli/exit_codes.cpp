#include "cli/exit_codes.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "rpc/protocol.h"

namespace tally::cli {

namespace {

constexpr std::array kStatuses{
    ExitStatus{kExitOk, "ok"},
    ExitStatus{kExitDegraded,
               "a check ran and found a problem (doctor, config check, ledger verify)"},
    ExitStatus{kExitUsage,
               "the command line is wrong (an unknown option, a value out of range); nothing "
               "was done. doctor: also a check that could not run"},
    ExitStatus{kExitEnvironment,
               "tally cannot read /proc, /sys or cgroupfs, or cannot reach the daemon (not "
               "running, no permission on its socket, no answer, another version)"},
    ExitStatus{kExitInternal, "internal error: a bug in tally (please report it)"},
    ExitStatus{kExitRefused,
               "the daemon said no (a limit or budget, a conflict, not found, not allowed, timed "
               "out, its ledger cannot write); the message says which and what to do"},
};

}  // namespace

const std::vector<ExitStatus>& exitStatuses() {
  static const std::vector<ExitStatus> all(kStatuses.begin(), kStatuses.end());
  return all;
}

std::string exitStatusText() {
  // Wrapped at a word to 80 columns, the continuation under the meaning.
  constexpr std::size_t kWidth = 80, kIndent = 5;
  std::string out;
  for (const auto& s : kStatuses) {
    std::string line = fmt::format("  {}  ", s.code);
    std::string_view rest = s.meaning;
    while (!rest.empty()) {
      std::size_t room = kWidth - kIndent;
      std::size_t cut = rest.size() <= room ? rest.size() : rest.rfind(' ', room);
      if (cut == std::string_view::npos || cut == 0) cut = std::min(rest.size(), room);
      line += rest.substr(0, cut);
      rest.remove_prefix(cut);
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      out += line + "\n";
      line = std::string(kIndent, ' ');
    }
  }
  return out;
}

int exitForDaemonError(std::string_view rpcCode) {
  if (rpc::protocolDisagreement(rpcCode)) return kExitEnvironment;
  if (rpcCode == rpc::code::kInternal) return kExitInternal;
  return kExitRefused;
}

}  // namespace tally::cli
