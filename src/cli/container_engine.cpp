#include "cli/container_engine.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cerrno>
#include <vector>

#include "cli/capture.h"
#include "util/text.h"

namespace tally::cli {
namespace {

// The first line of what the engine said on stderr, for the error.
std::string firstLine(const std::string& s) {
  auto t = text::trim(s);
  auto nl = t.find('\n');
  return text::truncateUtf8(t.substr(0, nl), 300);
}

}  // namespace

Result<attribution::InspectedContainer> inspectContainer(const std::string& nameOrId,
                                                         const std::string& engine) {
  if (nameOrId.empty() || nameOrId.front() == '-')
    return Error{EINVAL, fmt::format("'{}' is not a container name or id", nameOrId)};
  std::vector<std::string> engines = engine.empty() ? std::vector<std::string>{"podman", "docker"}
                                                    : std::vector<std::string>{engine};
  std::vector<std::string> answers;
  for (const auto& e : engines) {
    auto r = capture({e, "container", "inspect", nameOrId}, 4u << 20, 30'000);
    if (!r) {
      answers.push_back(r.error().code == ENOENT ? fmt::format("{} is not installed", e)
                                                 : fmt::format("{}: {}", e, r.error().message));
      continue;
    }
    if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0) {
      std::string said = firstLine(r->err);
      answers.push_back(fmt::format("{}: {}", e, said.empty() ? "failed" : said));
      continue;
    }
    return attribution::decodeContainerInspect(r->out, e);
  }
  std::string all;
  for (const auto& a : answers) all += (all.empty() ? "" : "; ") + a;
  return Error{ENOENT, fmt::format("no container '{}' ({}). A rootless container is seen only by "
                                   "its owner's engine: run tally as that user",
                                   nameOrId, all)};
}

}  // namespace tally::cli
