// Run a program (PATH lookup) and capture what it says: `tally attach
// --container` asks podman or docker, `tally doctor --slurm` asks slurmd.
// stdin is /dev/null; each output is kept up to `maxBytes`; the program is
// killed after `timeoutMs`. ENOENT: it is not installed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "util/result.h"

namespace tally::cli {

struct Output {
  int status = 0;  // waitpid status
  std::string out, err;
};
Result<Output> capture(const std::vector<std::string>& argv, std::size_t maxBytes, int timeoutMs);

}  // namespace tally::cli
