#include "cli/roots.h"

#include <fmt/format.h>

namespace tally::cli {

std::optional<OpenRoots> openRoots(const fs::RootPaths& paths) {
  auto proc = fs::Root::open(paths.proc);
  if (!proc) {
    fmt::print(stderr, "tally: {} (check --proc-root)\n", proc.error().message);
    return std::nullopt;
  }
  auto sys = fs::Root::open(paths.sys);
  if (!sys) {
    fmt::print(stderr, "tally: {} (check --sys-root)\n", sys.error().message);
    return std::nullopt;
  }
  OpenRoots roots{std::move(*proc), std::move(*sys), std::nullopt, std::nullopt};
  if (auto cg = fs::Root::open(paths.cgroup))
    roots.cgroup.emplace(std::move(*cg));
  else
    roots.cgroupError = cg.error().message;
  return roots;
}

}  // namespace tally::cli
