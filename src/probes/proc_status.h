// Parser for /proc/<pid>/status: the fields tally needs (Name, Uid, NSpid).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tally::probes {

struct ProcStatus {
  std::optional<std::string> name;  // comm, as the kernel escapes it
  // Real, effective, saved, filesystem uid; absent unless all four parsed.
  std::optional<std::uint32_t> uidReal, uidEffective, uidSaved, uidFs;
  // PID in each PID namespace the process is a member of, outermost (the
  // reader's) first; the last is the PID inside the innermost container.
  std::vector<std::uint64_t> nspid;
};

ProcStatus parseProcStatus(std::string_view text);

}  // namespace tally::probes
