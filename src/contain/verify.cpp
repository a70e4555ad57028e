#include "contain/verify.h"

#include <fmt/format.h>

#include "probes/proc_cgroup.h"
#include "util/text.h"

namespace tally::contain {
namespace {

std::string show(const std::optional<std::uint64_t>& v) { return v ? std::to_string(*v) : "max"; }
std::string show(const probes::MemoryLimit& l) {
  return l.unlimited ? "max" : std::to_string(l.bytes);
}

}  // namespace

cgroup::ExpectedLimits expectedLimits(const lease::LeaseSpec& spec) {
  return {spec.memoryMax(), spec.memoryHigh, spec.memorySwapMax,
          spec.oomPolicy == lease::OomPolicy::Kill};
}

}  // namespace tally::contain

namespace tally::cgroup {

bool limitMatches(const std::optional<std::uint64_t>& declared, const probes::MemoryLimit& read,
                  std::uint64_t pageSize) {
  if (!declared) return read.unlimited;
  if (read.unlimited) return false;
  std::uint64_t down = *declared / pageSize * pageSize;
  std::uint64_t up = down == *declared ? down : down + pageSize;
  return read.bytes == down || read.bytes == up;
}

}  // namespace tally::cgroup

namespace tally::contain {

Result<cgroup::AppliedLimits> verifyLimits(const cgroup::Cgroup& cg,
                                           const cgroup::ExpectedLimits& expected,
                                           std::uint64_t pageSize,
                                           std::string_view delegationHint) {
  using cgroup::limitMatches;
  namespace file = cgroup::file;
  cgroup::AppliedLimits applied;
  auto max = cg.memoryMax();
  if (!max) {
    if (max.error().code == ENOENT) {
      return Error{ENOENT, fmt::format("memory controller not enabled for {} (no {}){}", cg.path(),
                                       cg.describe(file::kMemoryMax), delegationHint)};
    }
    return max.error();
  }
  applied.memoryMax = *max;
  auto high = cg.memoryHigh();
  if (!high) return high.error();
  applied.memoryHigh = *high;

  std::vector<std::string> mismatches;
  bool check = !expected.onlyDeclared;
  if ((check || expected.memoryMax) && !limitMatches(expected.memoryMax, *max, pageSize)) {
    mismatches.push_back(fmt::format("{} is {}, declared {}", file::kMemoryMax, show(*max),
                                     show(expected.memoryMax)));
  }
  if (check && !limitMatches(expected.memoryHigh, *high, pageSize)) {
    mismatches.push_back(fmt::format("{} is {}, declared {}", file::kMemoryHigh, show(*high),
                                     show(expected.memoryHigh)));
  }
  if (auto swap = cg.memorySwapMax()) {
    applied.memorySwapMax = *swap;
    if (check && !limitMatches(expected.memorySwapMax, *swap, pageSize)) {
      mismatches.push_back(fmt::format("{} is {}, declared {}", file::kMemorySwapMax, show(*swap),
                                       show(expected.memorySwapMax)));
    }
  } else if (check && expected.memorySwapMax) {
    mismatches.push_back(fmt::format("{} declared {} but unreadable ({}): is swap accounting off?",
                                     file::kMemorySwapMax, *expected.memorySwapMax,
                                     swap.error().message));
  }
  if (auto group = cg.oomGroup(); !group) {
    if (check)
      mismatches.push_back(
          fmt::format("{} unreadable: {}", file::kMemoryOomGroup, group.error().message));
  } else {
    applied.oomGroup = *group;
    if (check && applied.oomGroup != expected.oomGroup) {
      mismatches.push_back(fmt::format("{} is {}, the OOM policy needs {}", file::kMemoryOomGroup,
                                       *group ? 1 : 0, expected.oomGroup ? 1 : 0));
    }
  }
  if (!mismatches.empty()) {
    return Error{0, fmt::format("{} does not hold what was declared: {}", cg.path(),
                                fmt::join(mismatches, "; "))};
  }
  return applied;
}

Status verifyMembership(const fs::Root& proc, pid_t pid, std::string_view cgroup) {
  auto rel = fmt::format("{}/cgroup", pid);
  auto text = proc.read(rel, 64 * 1024);
  if (!text) return text.error();
  auto parsed = probes::parseProcCgroup(*text);
  if (!parsed) return Error{0, fmt::format("{} has no cgroup v2 line", proc.describe(rel))};
  if (parsed->path != cgroup) {
    return Error{0, fmt::format("process {} is in {}, not in the lease's cgroup {}", pid,
                                parsed->path, cgroup)};
  }
  return Ok{};
}

}  // namespace tally::contain
