#include "contain/verify.h"

#include <fmt/format.h>

#include "probes/proc_cgroup.h"
#include "util/text.h"

namespace tally::contain {
namespace {


std::string show(const std::optional<std::uint64_t>& v) { return v ? std::to_string(*v) : "max"; }
std::string show(const probes::MemoryLimit& l) { return l.unlimited ? "max" : std::to_string(l.bytes); }

Result<probes::MemoryLimit> readLimit(const fs::Root& root, const std::string& rel) {
  auto text = root.read(rel, 256);
  if (!text) return text.error();
  auto limit = probes::parseMemoryLimit(*text);
  if (!limit) return Error{0, fmt::format("{} reads '{}', not a limit", root.describe(rel), text::trim(*text))};
  return *limit;
}

}  // namespace

ExpectedLimits expectedLimits(const lease::LeaseSpec& spec) {
  return {spec.memoryMax, spec.memoryHigh, spec.memorySwapMax, spec.oomPolicy == lease::OomPolicy::Kill};
}

bool limitMatches(const std::optional<std::uint64_t>& declared, const probes::MemoryLimit& read, std::uint64_t pageSize) {
  if (!declared) return read.unlimited;
  if (read.unlimited) return false;
  std::uint64_t down = *declared / pageSize * pageSize;
  std::uint64_t up = down == *declared ? down : down + pageSize;
  return read.bytes == down || read.bytes == up;
}

Result<AppliedLimits> verifyLimits(const fs::Root& cgroupRoot, std::string_view cgroup, const ExpectedLimits& expected,
                                   std::uint64_t pageSize, std::string_view delegationHint) {
  AppliedLimits applied;
  auto maxRel = fs::joinPath(cgroup, "memory.max");
  auto max = readLimit(cgroupRoot, maxRel);
  if (!max) {
    if (max.error().code == ENOENT) {
      return Error{ENOENT, fmt::format("memory controller not enabled for {} (no {}){}", cgroup,
                                       cgroupRoot.describe(maxRel), delegationHint)};
    }
    return max.error();
  }
  applied.memoryMax = *max;
  auto high = readLimit(cgroupRoot, fs::joinPath(cgroup, "memory.high"));
  if (!high) return high.error();
  applied.memoryHigh = *high;

  std::vector<std::string> mismatches;
  if (!limitMatches(expected.memoryMax, *max, pageSize)) {
    mismatches.push_back(fmt::format("memory.max is {}, declared {}", show(*max), show(expected.memoryMax)));
  }
  if (!limitMatches(expected.memoryHigh, *high, pageSize)) {
    mismatches.push_back(fmt::format("memory.high is {}, declared {}", show(*high), show(expected.memoryHigh)));
  }
  auto swapRel = fs::joinPath(cgroup, "memory.swap.max");
  auto swap = readLimit(cgroupRoot, swapRel);
  if (swap) {
    applied.memorySwapMax = *swap;
    if (!limitMatches(expected.memorySwapMax, *swap, pageSize)) {
      mismatches.push_back(fmt::format("memory.swap.max is {}, declared {}", show(*swap), show(expected.memorySwapMax)));
    }
  } else if (expected.memorySwapMax) {
    mismatches.push_back(fmt::format("memory.swap.max declared {} but unreadable ({}): is swap accounting off?",
                                     *expected.memorySwapMax, swap.error().message));
  }
  auto groupRel = fs::joinPath(cgroup, "memory.oom.group");
  auto group = cgroupRoot.read(groupRel, 64);
  if (!group) {
    mismatches.push_back(fmt::format("memory.oom.group unreadable: {}", group.error().message));
  } else {
    auto v = text::parseU64(text::trim(*group));
    if (!v || *v > 1) {
      mismatches.push_back(fmt::format("{} reads '{}'", cgroupRoot.describe(groupRel), text::trim(*group)));
    } else {
      applied.oomGroup = *v == 1;
      if (applied.oomGroup != expected.oomGroup) {
        mismatches.push_back(fmt::format("memory.oom.group is {}, the OOM policy needs {}", *v, expected.oomGroup ? 1 : 0));
      }
    }
  }
  if (!mismatches.empty()) {
    return Error{0, fmt::format("{} does not hold what was declared: {}", cgroup, fmt::join(mismatches, "; "))};
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
    return Error{0, fmt::format("process {} is in {}, not in the lease's cgroup {}", pid, parsed->path, cgroup)};
  }
  return Ok{};
}

}  // namespace tally::contain
